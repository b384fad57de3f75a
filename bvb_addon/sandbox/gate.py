"""Where the sandbox level is decided: probe the ladder, hold it against the minimum, refuse in one line.

Every place that starts sandboxed workers goes through ``require_level``: the runner (before
its first scene, and on each Ray node), the render stage, and every ``Worker`` (so
``headless.exec``, the VGI timelines and the bridge's step scoring too).
"""

from .config import SandboxConfig, SandboxUnavailable
from .layers import SandboxLevel, probe_layers

FIX = "install bubblewrap (apt-get install bubblewrap), lower the minimum level, or pass --allow-weak-sandbox to run anyway"
# bubblewrap is there but failed: installing it is no fix, the failure (in the line) is.
FIX_FAILED = (
    "fix the bubblewrap failure named above, lower the minimum level, or pass --allow-weak-sandbox to run anyway"
)


def below_minimum(level: SandboxLevel, min_level: str) -> str:
    """The one-line refusal: what this machine has, the minimum it misses, and the fixes."""
    failed = level.missing.get("bwrap", "").startswith("bubblewrap failed")
    return f"{level.line()}; that is below the required level {min_level!r}: {FIX_FAILED if failed else FIX}"


def require_level(config: SandboxConfig | None = None) -> SandboxLevel:
    """The SandboxLevel workers get here; SandboxUnavailable when it is below ``config.min_level``
    and the config does not opt in to running weaker (``allow_below_minimum``)."""
    config = config or SandboxConfig()
    level = probe_layers(config)
    if not level.at_least(config.min_level) and not config.allow_below_minimum:
        raise SandboxUnavailable(below_minimum(level, config.min_level))
    return level
