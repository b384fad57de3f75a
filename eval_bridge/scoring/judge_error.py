"""A judge's failure for good, apart from the judge (``judge.py``, which re-exports it): the command line catches it
around every stage without loading the judge, its client and numpy for a ``--help``."""

from bvb_addon.errors import BVBError
from bvb_addon.outcomes import FAULT_EXIT


class JudgeError(BVBError, RuntimeError):
    """A judge call that failed for good (after retries, or a non-retryable error)."""

    exit_code = FAULT_EXIT
    """A judge fault: rerunning with --resume redoes it."""
