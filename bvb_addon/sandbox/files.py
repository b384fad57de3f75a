"""Moving files across the sandbox boundary without trusting the workspace.

Everything inside a workspace may have been arranged by hostile code: a name can be a
symlink to a host file, a hardlink, a FIFO, or huge. Files are opened relative to a
directory descriptor held by the supervisor, never following symlinks, checked with
fstat, size-capped, and copied to their destination atomically.
"""

import os
import re
import secrets
import stat
from pathlib import Path

from ..atomic import replacing

SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
CHUNK = 1 << 20


class UnsafeFile(RuntimeError):
    """A workspace file that must not be collected (symlink, hardlink, not regular, too big)."""


def open_dir(path: str | Path) -> int:
    """A descriptor of the workspace directory itself (not a symlink to elsewhere)."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not SAFE_NAME.match(name) or ".." in name:
        raise UnsafeFile(f"refused workspace file name {name!r} (plain file names only)")


def collect(dir_fd: int, name: str, dest: str | Path, max_bytes: int) -> Path:
    """Copy workspace file ``name`` to ``dest`` atomically, then remove it from the workspace."""
    _check_name(name)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        # ELOOP is what O_NOFOLLOW gives for a symlink.
        raise UnsafeFile(f"cannot open workspace file {name!r} without following links: {exc.strerror}") from exc
    dest = Path(dest)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(f"workspace file {name!r} is not a regular file")
        if info.st_nlink != 1:
            raise UnsafeFile(f"workspace file {name!r} has {info.st_nlink} hard links; refused")
        if info.st_size > max_bytes:
            raise UnsafeFile(f"workspace file {name!r} is {info.st_size} bytes, over the {max_bytes}-byte limit")
        # Renders and snapshots are results: the umask's mode, not mkstemp's 0600.
        with replacing(dest) as tmp, open(tmp, "wb") as handle:
            total = 0
            while True:
                chunk = os.read(fd, CHUNK)
                if not chunk:
                    break
                total += len(chunk)
                if total > max_bytes:
                    raise UnsafeFile(f"workspace file {name!r} grew past the {max_bytes}-byte limit")
                handle.write(chunk)
    finally:
        os.close(fd)
    remove(dir_fd, name)
    return dest


def remove(dir_fd: int, name: str) -> None:
    """Unlink a workspace entry by name (unlink never follows a symlink)."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def put(dir_fd: int, src: str | Path, max_bytes: int, suffix: str = ".blend") -> str:
    """Copy a host file into the workspace under a fresh random name; return the name."""
    src = Path(src)
    size = src.stat().st_size
    if size > max_bytes:
        raise UnsafeFile(f"{src} is {size} bytes, over the {max_bytes}-byte limit")
    name = f"_bvb_in_{secrets.token_hex(8)}{suffix}"
    # O_EXCL with a fresh name: nothing the sandbox prepared can redirect this write.
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "wb") as handle, open(src, "rb") as source:
        while chunk := source.read(CHUNK):
            handle.write(chunk)
    return name


MAX_LINKS = 40
"""Symlinks one look follows at most (the kernel's own bound before ELOOP)."""


def is_file(root: str | Path, path: str, mount: str = "/workspace") -> bool:
    """``test -f path`` as the sandbox answers it, looked at from the host (``root`` is shown at ``mount``):
    a regular file, or a symlink chain resolving to one inside ``mount``. A link or ``..`` leading out of
    ``mount`` counts as missing and is not followed. Each component is opened O_PATH|O_NOFOLLOW relative to
    the last one's descriptor, so nothing arranged (or swapped meanwhile) in the workspace leads outside
    ``root``, nothing is read or run (a FIFO does not block), and at most MAX_LINKS links are followed."""
    target = tuple(part for part in mount.split("/") if part)
    outside: list[str] = []  # where the walk is while outside the mount (a lexical path, nothing looked at)
    dirs: list[int] = []  # the descriptors from root down while inside it
    pending = path.split("/")
    links = 0
    if not path.startswith("/"):
        return False
    try:
        while pending:
            part = pending.pop(0)
            if part in ("", "."):
                continue
            if not dirs:
                if part == "..":
                    outside = outside[:-1]
                else:
                    outside.append(part)
                if tuple(outside) == target:
                    try:
                        dirs.append(open_dir(root))
                    except OSError:
                        return False
                elif tuple(outside) != target[: len(outside)]:
                    return False  # outside the shared folder: the host cannot see what the sandbox would
                continue
            if part == "..":
                os.close(dirs.pop())
                if not dirs:
                    outside = list(target[:-1])
                continue
            try:
                fd = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirs[-1])
            except OSError:
                return False
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                os.close(fd)
                links += 1
                if links > MAX_LINKS:
                    return False
                try:
                    link = os.readlink(part, dir_fd=dirs[-1])
                except OSError:
                    return False
                if link.startswith("/"):
                    while dirs:
                        os.close(dirs.pop())
                    outside = []
                pending[:0] = link.split("/")
            elif any(p not in ("", ".") for p in pending):
                dirs.append(fd)  # a folder on the way (os.open below fails with ENOTDIR for anything else)
            else:
                os.close(fd)
                return stat.S_ISREG(mode) and not any(p == "" for p in pending)
        return False  # the path named a folder (or the mount itself)
    finally:
        for fd in dirs:
            os.close(fd)
