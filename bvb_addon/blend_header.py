"""Which Blender saved a .blend, read from its header bytes (no bpy).

An older Blender cannot open a file that a newer one saved with a newer header (5.0's
format, for instance): it only says "not a blend file". The render stage and every other
loader use this to name the version that saved the file and the fix instead.

Headers (after gzip or zstd, when the file is compressed):
- up to 4.x: ``BLENDER`` + pointer size (``_`` or ``-``) + endianness (``v``/``V``) + 3 digits,
  e.g. ``BLENDER-v402``;
- 5.0 on: ``BLENDER`` + 2-digit header size + ``-`` + 2-digit format version + endianness
  + 4 digits, e.g. ``BLENDER17-01v0500``.
"""

import gzip
import re
from pathlib import Path
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LEGACY = re.compile(rb"^BLENDER[_-][vV](\d)(\d\d)")
_LARGE = re.compile(rb"^BLENDER\d\d-\d\d[vV](\d\d)(\d\d)")


def _head(handle, size=32):
    raw = handle.read(size)
    if raw.startswith(GZIP_MAGIC):
        handle.seek(0)
        with gzip.GzipFile(fileobj=handle) as unpacked:
            return unpacked.read(size)
    if raw.startswith(ZSTD_MAGIC):
        handle.seek(0)
        return _zstd_head(handle, size)
    return raw


def _zstd_head(handle, size):
    """The first bytes of a zstd stream: through zstandard (bpy's wheel ships it) or, where it is absent, the
    standard library's compression.zstd (Python 3.14: Debian's Blender 5.2 has only that, and saves compressed)."""
    try:
        import zstandard  # deferred: only a zstd-compressed .blend needs a decompressor
    except ImportError:
        try:
            from compression import zstd  # deferred: the standard library's only from Python 3.14
        except ImportError:
            return b""
        try:
            with zstd.ZstdFile(handle) as unpacked:
                return unpacked.read(size)
        except zstd.ZstdError:  # a file that only starts like one (an agent's bytes): no header
            return b""
    try:
        with zstandard.ZstdDecompressor().stream_reader(handle, closefd=False) as unpacked:
            return unpacked.read(size)
    except zstandard.ZstdError:
        return b""


def saved_by(path: str | Path | BinaryIO) -> tuple[int, int] | None:
    """(major, minor) of the Blender that saved the .blend at path (or in an open binary file, read from its
    start), or None when the header is not one."""
    try:
        if isinstance(path, (str, Path)):
            with open(path, "rb") as handle:
                head = _head(handle)
        else:
            path.seek(0)
            head = _head(path)
    except (OSError, EOFError, ValueError):
        return None
    match = _LEGACY.match(head) or _LARGE.match(head)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _version(text):
    match = re.match(r"\s*(\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def newer_file_reason(path: str | Path, running: str) -> str | None:
    """One line naming the file, the Blender that saved it and the fix, when a newer Blender than ``running``
    (a version string such as "4.2.23 LTS") saved it; else None."""
    saved, current = saved_by(path), _version(running)
    if saved is None or current is None or saved <= current:
        return None
    version = f"{saved[0]}.{saved[1]}"
    return (
        f"{Path(path).name} was saved by Blender {version}, which this Blender "
        f"{running} cannot read; render it with a matching Blender (BLENDER_BIN=/path/to/blender-{version}) "
        f"or with the add-on's Render Camera inside Blender {version}"
    )
