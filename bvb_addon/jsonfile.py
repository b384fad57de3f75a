"""The JSON readers: one for a JSON file, one for JSON lines (bpy-free, stdlib only).

``bvb_addon.run_dir`` exposes them beside the run's paths; the typed records read through them.
"""

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import BadFileError, MissingFileError

log = logging.getLogger(__name__)


NOT_JSON = object()
"""What ``json_lines`` yields for a line that does not parse."""


def json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of a JSON-lines file, ``NOT_JSON`` for a line that does
    not parse (the caller skips a torn line or refuses the file); a missing file has no lines."""
    path = Path(path)
    if not path.exists():
        return
    # Bytes that are not UTF-8 become U+FFFD, so such a line is one that is not JSON.
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                yield number, NOT_JSON


def read_jsonl(path: str | Path) -> list:
    """Rows of a JSON-lines file; a missing file is empty and a torn line (a killed writer) is skipped."""
    rows = []
    for number, value in json_lines(path):
        if value is NOT_JSON:
            log.warning("%s line %d is not JSON (an interrupted write?); skipped", path, number)
        else:
            rows.append(value)
    return rows


def read_json(path: str | Path, what: str = "file", fix: str = "fix or delete it") -> Any:
    """A JSON file's content: the one JSON reader. A missing or unparsable file is a one-line user error
    naming it (``what`` says what the file is, ``fix`` what to do)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MissingFileError(f"{what} {path} does not exist; {fix}") from None
    except UnicodeDecodeError:
        raise BadFileError(f"{what} {path} is not UTF-8 text; {fix}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadFileError(f"{what} {path} is not valid JSON ({exc.msg} at line {exc.lineno}); {fix}") from None
    except RecursionError:
        raise BadFileError(f"{what} {path} is nested too deeply to be a harness file; {fix}") from None


def read_json_or_none(path: str | Path) -> Any:
    """A JSON file's content, or None when it is missing or unreadable (pages that show what there is)."""
    try:
        return read_json(path)
    except (BadFileError, OSError):
        return None


def read_object_or_none(path: str | Path) -> dict | None:
    """A JSON object, or None when the file is missing, unreadable or holds something else."""
    value = read_json_or_none(path)
    return value if isinstance(value, dict) else None
