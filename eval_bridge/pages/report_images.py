"""The images of a report's step pages: each stored once by its content, with a thumbnail sized for the page.

A step page shows every image the agent received at ``THUMB_BOX`` or smaller (its CSS draws
them 128 px tall; the box is 1.5 times that, for high-density screens) and links each thumbnail
to the full image, so a page of a 150-step scene loads a few MB, not its observations' whole
weight. Images are named by a hash of their bytes in one folder for the whole report
(``assets/shared/images/``): the same image in several steps, scenes or runs (the source frames
the agent asked for) is one file, and its thumbnail one more. A full image read from a run's
step log is hard-linked from the run where the file system allows (it is the same file; the
report then takes no bytes for it), else copied; a data URL is decoded. Files are written
atomically and never through a link.
"""

import hashlib
import io
import logging
import os
import re
import stat
from pathlib import Path

from .report_manifest import write_output

log = logging.getLogger(__name__)

THUMB_BOX = (256, 192)
THUMB_QUALITY = 80
THUMB_SUFFIX = "_t.jpg"
SUFFIXES = (".jpg", ".png", ".webp", ".gif", ".img")
NAME = re.compile(r"^[0-9a-f]{32}(\.(jpg|png|webp|gif|img)|_t\.jpg)$")
"""The names this module gives: the only files a prune may remove from the folder."""


def read_plain(path: str | Path) -> tuple[bytes, int] | None:
    """(bytes, open descriptor) of a regular file opened without following a link; None when it is not one.

    The caller closes the descriptor (it is what a hard link is made from: the very file checked).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError:
        os.close(fd)
        return None
    return b"".join(chunks), fd


def thumbnail(data: bytes, box: tuple[int, int] = THUMB_BOX) -> bytes | None:
    """A JPEG of the image fitted inside ``box``; None when it already fits or is not an image Pillow reads."""
    from PIL import Image  # deferred: Pillow loads only when a step page has images

    try:
        with Image.open(io.BytesIO(data)) as opened:
            if opened.width <= box[0] and opened.height <= box[1]:
                return None
            opened.draft("RGB", box)  # a JPEG decodes at 1/2, 1/4 or 1/8 scale: most of the saving
            image = opened.convert("RGBA") if opened.mode in ("RGBA", "LA", "P") else opened.convert("RGB")
            if image.mode == "RGBA":  # JPEG has no alpha: drawn over white, as the page's background
                flat = Image.new("RGB", image.size, "white")
                flat.paste(image, mask=image.getchannel("A"))
                image = flat
            image.thumbnail(box, Image.Resampling.BICUBIC, reducing_gap=2.0)
            out = io.BytesIO()
            image.save(out, "JPEG", quality=THUMB_QUALITY)
            return out.getvalue()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        log.warning("no thumbnail (%s: %s)", type(exc).__name__, str(exc)[:200])
        return None


class ImageStore:
    """One folder of content-named images and thumbnails, shared by every step page of a report."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.used: set[str] = set()  # names any page of this build shows
        self.page: set[str] = set()  # names the page being built shows (start_page resets it)
        self.linked = 0  # full images hard-linked from a run rather than copied
        self._known: dict[tuple, tuple[str, str]] = {}  # (path, size, mtime, inode) -> names: no re-read

    def start_page(self) -> set[str]:
        """A new, empty set of the names the next page shows (the manifest keeps it with the page)."""
        self.page = set()
        return self.page

    def _present(self, *names: str) -> bool:
        return all(os.path.isfile(os.path.join(self.folder, name)) for name in names)

    def _take(self, full: str, thumb: str) -> tuple[str, str]:
        self.used.update((full, thumb))
        self.page.update((full, thumb))
        return full, thumb

    def add_file(self, source: str | Path, suffix: str) -> tuple[str, str] | None:
        """(full image, thumbnail) names of a run's image file; None when it is missing, a link or not a file."""
        try:
            st = os.lstat(source)
        except OSError:
            return None
        mark = (os.fspath(source), st.st_size, st.st_mtime_ns, st.st_ino)
        names = self._known.get(mark)
        if names is not None and self._present(*names):
            return self._take(*names)
        opened = read_plain(source)
        if opened is None:
            return None
        data, fd = opened
        try:
            names = self._store(data, suffix, fd, source)
        finally:
            os.close(fd)
        if len(self._known) > 200_000:  # bvb view's memo stays bounded over a long campaign
            self._known.clear()
        self._known[mark] = names
        return self._take(*names)

    def add_bytes(self, data: bytes, suffix: str) -> tuple[str, str]:
        """(full image, thumbnail) names of an image's bytes (a decoded data URL)."""
        return self._take(*self._store(data, suffix, None, None))

    def _store(self, data: bytes, suffix: str, fd: int | None, source: str | Path | None) -> tuple[str, str]:
        digest = hashlib.sha256(data).hexdigest()[:32]
        full = digest + (suffix if suffix in SUFFIXES else ".img")
        thumb = digest + THUMB_SUFFIX
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self._present(full):
            self._write_full(self.folder / full, data, fd, source)
        if not self._present(thumb):
            small = thumbnail(data)
            if small is None:  # it fits the box already (or cannot be read): the page shows it as it is
                return full, full
            write_output(self.folder / thumb, small)
        return full, thumb

    def _write_full(self, path: Path, data: bytes, fd: int | None, source: str | Path | None) -> None:
        if fd is not None and source is not None and self._link(path, fd, source):
            self.linked += 1
            return
        write_output(path, data)

    @staticmethod
    def _link(path: Path, fd: int, source: str | Path) -> bool:
        """Hard-link the opened file at ``path``; False (nothing left there) where it cannot be the same file."""
        opened = os.fstat(fd)
        try:
            # The opened file itself, where /proc allows; else its path, then checked to be that very file
            # (a path may have become a link or another file since it was read).
            os.link(f"/proc/self/fd/{fd}", path, follow_symlinks=True)
            return True
        except FileExistsError:
            return True  # another build put the same bytes there
        except OSError:
            pass
        try:
            os.link(source, path, follow_symlinks=False)
        except FileExistsError:
            return True
        except OSError:
            return False  # another file system, protected links: a copy
        try:
            made = os.lstat(path)
            if stat.S_ISREG(made.st_mode) and (made.st_dev, made.st_ino) == (opened.st_dev, opened.st_ino):
                return True
            os.unlink(path)
        except OSError:
            pass
        return False

    def prune(self, keep: set[str]) -> int:
        """Remove the images no page shows any more (only names this module gives); return how many."""
        removed = 0
        try:
            listing = list(os.scandir(self.folder))
        except OSError:
            return 0
        for entry in listing:
            if NAME.match(entry.name) and entry.name not in keep:
                try:
                    os.unlink(entry.path)
                    removed += 1
                except OSError:
                    pass
        return removed
