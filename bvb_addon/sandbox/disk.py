"""A sandbox's own sized disk: a sparse ext4 image, loop-mounted, that the kernel fills to its size and no further.

A Mini-BVB scene's /workspace, /tmp, $HOME and /dev/shm (and a native worker's workspace) are folders of one
such filesystem, so whatever the agent writes anywhere it may write stops with ENOSPC at the size given
(``--disk``, or ``SandboxConfig.workspace_bytes``), inside the sandbox, and the harness goes on. Why this
mechanism and not a sized tmpfs (its pages are memory, charged to the scene's ``--memory``) or a project quota
(the host's filesystem must be made with the quota feature): docs/sandbox.md, "Disk". The image is sparse, so
it takes only what was written, and is deleted when the disk closes.

Mounting needs root (a loop device); elsewhere ``available`` names why, and the sandbox records the layer as
missing. Needs util-linux's ``mount`` and e2fsprogs' ``mkfs.ext4``. bpy-free, stdlib only.
"""

import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "bvb-disk-"
BLOCK = 4096
# No journal (the filesystem is thrown away with its scene), no reserved blocks and no room kept for
# growing: what the agent may write is the whole size. One inode per 16 KiB: 500k files on 8 GiB.
MKFS = ["-q", "-F", "-t", "ext4", "-b", str(BLOCK), "-m", "0", "-i", "16384", "-I", "256",
        "-O", "^has_journal,^resize_inode", "-E", "lazy_itable_init=1,nodiscard"]  # fmt: skip
# noinit_itable: the image's holes read as zeros already, so the kernel need not write the inode tables.
MOUNT_OPTIONS = "loop,nosuid,nodev,noatime,noinit_itable"
_OVERHEAD: dict[int, int] = {}
"""Bytes of metadata found per size: the image is made that much larger, so that the data room is the size."""
_AVAILABLE: list[str | None] = []


def _run(argv: list[str]) -> None:
    proc = subprocess.run(argv, capture_output=True, timeout=60)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).decode(errors="replace").strip().splitlines()
        raise OSError(f"{' '.join(argv[:2])} failed: {tail[-1] if tail else f'exit code {proc.returncode}'}")


def _tools() -> str | None:
    """None when the programs a disk needs are here, else which package to install."""
    if shutil.which("mkfs.ext4") is None:
        return "mkfs.ext4 is not installed (apt-get install e2fsprogs)"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "mount is not installed (apt-get install mount)"
    return None


class SizedDisk:
    """An ext4 filesystem of ``size`` bytes of data room, mounted at ``mount``; ``folder(name)`` makes a folder
    on it, ``bind(name, target)`` shows one at a host path too (the caller's workspace). ``close`` unmounts and
    deletes everything, or, for an ``image`` the caller named, keeps that image to be mounted again."""

    def __init__(self, size: int, image: Path | None = None) -> None:
        if size < (1 << 20):
            raise ValueError(f"a sandbox disk of {size} bytes is too small; give at least 1m")
        self.size = int(size)
        self.dir = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        self.kept = image is not None
        self.image = Path(image) if image is not None else self.dir / "disk.img"
        self.mount = self.dir / "mnt"
        self._binds: list[Path] = []
        self._mounted = False
        try:
            self.mount.mkdir()
            if self.kept and self.image.is_file():
                _run(["mount", "-o", MOUNT_OPTIONS, str(self.image), str(self.mount)])
                self._mounted = True
                return
            self._make(self.size + _OVERHEAD.get(self.size, 0))
            room = self.room()
            if room < self.size - BLOCK * 8 and self.size not in _OVERHEAD:
                # ext4's metadata (inode tables, bitmaps) comes out of the image: made again that much larger.
                _OVERHEAD[self.size] = -(-(self.size - room) // BLOCK) * BLOCK
                self._unmount(self.mount)
                self._make(self.size + _OVERHEAD[self.size])
            os.chmod(self.mount, 0o755)
        except BaseException:
            self.close()
            raise

    def _make(self, image_bytes: int) -> None:
        with open(self.image, "wb") as handle:
            handle.truncate(image_bytes)  # sparse: the host's disk holds only what is written
        _run(["mkfs.ext4", *MKFS, str(self.image)])
        _run(["mount", "-o", MOUNT_OPTIONS, str(self.image), str(self.mount)])
        self._mounted = True
        lost = self.mount / "lost+found"
        if lost.is_dir():
            lost.rmdir()  # nothing checks this filesystem: the agent's folders hold what it wrote, and only that

    def room(self) -> int:
        """Bytes that can still be written."""
        info = os.statvfs(self.mount)
        return info.f_bavail * info.f_frsize

    def folder(self, name: str, mode: int = 0o755) -> Path:
        path = self.mount / name
        path.mkdir(exist_ok=True)
        os.chmod(path, mode)
        return path

    def bind(self, name: str, target: Path) -> Path:
        """Show the disk's folder ``name`` at the host path ``target`` (made if missing; what it held is hidden)."""
        target.mkdir(parents=True, exist_ok=True)
        _run(["mount", "--bind", str(self.folder(name)), str(target)])
        self._binds.append(target)
        return target

    def close(self) -> None:
        for target in reversed(self._binds):
            self._unmount(target)
        self._binds = []
        if self._mounted and not self.kept:
            # Emptied first: a deleted file's dirty pages are dropped, where an unmount would write them all
            # to the image (seconds for gigabytes) just before the image is deleted.
            for entry in os.scandir(self.mount):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
        if self._mounted:
            self._unmount(self.mount)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _unmount(self, path: Path) -> None:
        """Unmount; lazily when something still holds it (the loop device is freed once it lets go)."""
        for argv in (["umount", str(path)], ["umount", "--lazy", str(path)]):
            try:
                _run(argv)
                break
            except OSError as exc:
                log.debug("%s", exc)
        else:
            log.warning("could not unmount %s", path)
        if path == self.mount:
            self._mounted = False

    def __enter__(self) -> "SizedDisk":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def available() -> str | None:
    """None when a sized disk can be made here (a real one is made and closed, once per process), else why not."""
    if _AVAILABLE:
        return _AVAILABLE[0]
    reason = _tools()
    if reason is None and os.geteuid() != 0:
        reason = "mounting a disk image needs root (a loop device)"
    if reason is None:
        try:
            SizedDisk(4 << 20).close()
        except (OSError, subprocess.TimeoutExpired) as exc:
            reason = f"cannot mount a disk image here ({exc})"
    _AVAILABLE.append(reason)
    return reason


def _mounts() -> list[tuple[str, str]]:
    """(device major:minor, mount point) of every mount of this mount namespace, innermost last."""
    found = []
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            found.append((fields[2], fields[4].replace("\\040", " ")))
    except (OSError, IndexError):
        pass
    return found


def sweep_stale() -> None:
    """Unmount and delete the disks of harness processes that are gone (killed before they closed them): the
    mount, every bind of it elsewhere (found by its device), then the image."""
    for folder in Path(tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        try:
            owner = int(folder.name[len(PREFIX) :].split("-")[0])
        except ValueError:
            continue
        if owner == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        mount = folder / "mnt"
        devices = {device for device, point in _mounts() if point == str(mount)}
        for device, point in reversed(_mounts()):
            if device in devices:
                subprocess.run(["umount", "--lazy", point], capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
