"""Version facts recorded in every run's config.json and printed by --version, and the one
test of whether this Python runs inside a Blender binary or imports the bpy module."""

import functools
import logging
import os
import platform
import re
import subprocess
import sys
from typing import TypedDict

log = logging.getLogger(__name__)


class Blenders(TypedDict):
    """The Blender versions a run was made and rendered with (run_dir.run_blenders), each sorted."""

    made: list[str]
    rendered: list[str]


# Kept equal to blender_manifest.toml's version (a test checks it).
HARNESS_VERSION = "0.1.0"


def blender_version() -> str | None:
    """Blender's version string, or None when bpy cannot be imported here."""
    try:
        import bpy  # deferred: this module imports without bpy (the bridge, the CLI)
    except ImportError:
        return None
    return bpy.app.version_string


def running_blender_binary() -> str | None:
    """The Blender executable this Python runs inside, or None (plain Python, with or without the bpy module).

    Inside a binary bpy is imported before any script runs and ``bpy.app.binary_path`` is the
    executable; the bpy module from PyPI leaves it ''. ``bpy.__file__`` is set in both, so it
    tells nothing. Never imports bpy itself.
    """
    app = getattr(sys.modules.get("bpy"), "app", None)
    return getattr(app, "binary_path", "") or None


def inside_blender_binary() -> bool:
    """True when running in a Blender executable, not under Python with the bpy module."""
    return running_blender_binary() is not None


@functools.lru_cache(maxsize=8)
def binary_version(binary: str) -> str | None:
    """The version string of a Blender executable ("5.2.2 LTS", as bpy.app.version_string), or None."""
    running = running_blender_binary()
    if running and os.path.realpath(running) == os.path.realpath(binary):
        return sys.modules["bpy"].app.version_string
    try:
        proc = subprocess.run([binary, "--factory-startup", "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("cannot ask %s its version: %s", binary, exc)
        return None
    found = re.search(r"^Blender (\d+\.\d+\.\d+(?: [A-Za-z]+)?)\s*$", proc.stdout, re.MULTILINE)
    return found.group(1) if found else None


@functools.lru_cache(maxsize=1)
def module_version() -> str | None:
    """The bpy module's version string as its workers report it ("4.2.23 LTS"), or None without one.

    Asked of a child Python, since the harness never imports bpy itself; the package's metadata
    ("4.2.23") lacks the " LTS" that bpy.app.version_string and the render rows carry.
    """
    if "bpy" in sys.modules and hasattr(sys.modules["bpy"], "app"):
        return sys.modules["bpy"].app.version_string
    return asked_module_version()


def asked_module_version() -> str | None:
    """bpy.app.version_string as a child Python with the bpy module prints it, or None."""
    # Blender may log to stdout as bpy loads (5.2: "WARNING Could not get a list of mounted file-systems"),
    # so the version is the line after a marker.
    code = "import os, bpy; print('\\nbvb-version:', bpy.app.version_string, flush=True); os._exit(0)"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("cannot ask the bpy module its version: %s", exc)
        return None
    found = re.search(r"^bvb-version: (.+?)\s*$", proc.stdout, re.MULTILINE)
    return found.group(1) if found else None


def version_line() -> str:
    blender = blender_version() or "not available"
    return f"BVB {HARNESS_VERSION} | Blender {blender} | Python {platform.python_version()}"


# BVB's published table was made and rendered with this Blender (docs/protocol.md section 10).
PROTOCOL_BLENDER = "4.2"


def is_protocol_blender(version: object) -> bool:
    """True when a version string such as "4.2.23 LTS" is the protocol's Blender."""
    return str(version).strip().split(" ")[0].split(".")[:2] == PROTOCOL_BLENDER.split(".")


def comparability(blenders: Blenders) -> tuple[bool, str]:
    """(comparable, note): False with a one-line note when a version other than the protocol's was used."""
    other = sorted({v for v in blenders["made"] + blenders["rendered"] if not is_protocol_blender(v)})
    if not other:
        return True, ""
    return False, (
        f"made or rendered with Blender {', '.join(other)}, not the protocol's {PROTOCOL_BLENDER}: "
        "not comparable with BVB's published table"
    )
