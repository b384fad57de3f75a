"""Make a headless entry point work both under ``python -m`` and inside a Blender binary.

Inside ``blender -b --python headless/run.py -- ARGS`` the script runs with Blender's own
Python: the repository root is not on sys.path, the project's dependencies (openai, av,
tqdm) live in the project's virtual environment, and the script's arguments follow
``--``. This module fixes up all three. It imports only the standard library (and
``bvb_addon.errors`` and ``bvb_addon.versions``, which do too).
"""

import os
import site
import sys
from pathlib import Path

from bvb_addon.errors import BVBError, report
from bvb_addon.versions import inside_blender_binary

REPO_ROOT = Path(__file__).resolve().parent.parent


class BootstrapError(BVBError, RuntimeError):
    """No virtual environment for Blender's Python; the message names the flag that points at one."""


def script_args(argv: list[str] | None = None) -> list[str]:
    """The entry point's own arguments: those after ``--`` in Blender, else argv[1:]."""
    argv = list(sys.argv if argv is None else argv)
    if "--" in argv:
        return argv[argv.index("--") + 1 :]
    if inside_blender_binary():
        return []
    return argv[1:]


def venv_site_packages(venv: str | Path) -> Path:
    """The site-packages folder of a virtual environment for this Python's version."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return Path(venv) / "lib" / version / "site-packages"


def add_venv(argv: list[str] | None = None) -> Path | None:
    """Inside Blender, put the project's venv on sys.path (after Blender's own packages).

    The venv is named by ``--venv PATH`` among the script's arguments, or ``BVB_VENV``,
    or defaults to ``.venv`` in the repository root. Returns the path used, or None when
    not inside a Blender binary.
    """
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    if not inside_blender_binary():
        return None
    args = script_args(argv)
    venv = os.environ.get("BVB_VENV") or str(REPO_ROOT / ".venv")
    if "--venv" in args and args.index("--venv") + 1 < len(args):
        venv = args[args.index("--venv") + 1]
    packages = venv_site_packages(venv)
    if not packages.is_dir():
        raise BootstrapError(
            f"no Python {sys.version_info.major}.{sys.version_info.minor} virtual environment at {venv} "
            f"(looked for {packages}); create it with the README's set-up command, "
            "or pass --venv PATH / set BVB_VENV"
        )
    # Appended, so Blender's bundled packages (numpy among them) keep precedence.
    site.addsitedir(str(packages))
    return packages


def prepare() -> None:
    """Make the checkout and (inside a Blender binary) the venv importable, before an entry point's own imports.

    An entry point calls it at its top, so its module-level imports of our modules (which reach venv packages:
    pydantic, through the sandbox's replies) work inside ``blender -b --python headless/X.py -- ARGS``; outside
    a Blender binary it does nothing but put the checkout on sys.path. A missing venv exits with one line.
    """
    try:
        add_venv()
    except BootstrapError as exc:
        raise SystemExit(report(exc)) from None


def entry_args(argv: list[str] | None, prog: str) -> list[str]:
    """An entry point's own arguments, once the checkout and (inside Blender) the venv are importable.

    argv None reads sys.argv (after ``--`` inside a Blender binary); a list is taken as the
    entry point's arguments, as ``bvb`` and the demo pass them. A missing venv exits with
    one line naming the fix.
    """
    try:
        add_venv(None if argv is None else [prog, *argv])
    except BootstrapError as exc:
        raise SystemExit(report(exc)) from None
    return script_args() if argv is None else list(argv)
