"""Debian roots with a real Blender binary or a newer bpy, built once and cached (docs/reference.md, "Test tiers").

    python -m tools.roots build sid|trixie      build (or reuse) a root; prints its path
    python -m tools.roots enter ROOT [--bind P]... [--cwd DIR] [--env N=V]... -- COMMAND...
    python -m tools.roots path sid|trixie       the cached root's path ('' when not built)
    python -m tools.roots prune                 remove the roots of older recipes

A root lives in ``~/.cache/bvb/roots/<name>-<recipe hash>/`` (BVB_ROOTS_DIR overrides the
folder): a changed recipe (suite, packages, the project's dependencies) gets a new folder,
an unchanged one is reused. Roots are made with ``debootstrap`` from the archive this
machine's own apt sources name (read at run time, never written down here).

``sid`` has Debian's Blender 5.2 LTS binary, Xvfb and xwd for a real window, bubblewrap for
the sandbox, and a venv (``VENV``, on the binary's Python) with the project's
dependencies. ``trixie`` has Python 3.13, ffmpeg, procps and a venv with bpy 5.2.3 (pip serves 5.1+ for 3.13
only), the project's dependencies and pytest.

A root is entered in a private mount namespace (``unshare -m --propagation private``): the
root is bind-mounted onto itself (bubblewrap needs ``/`` to be a mount point), the host's
``/proc``, ``/dev`` and ``/sys`` and the caller's folders are bound in at the same paths,
then ``chroot``. Every mount lives in that namespace and goes when its last process exits,
so nothing is left mounted on the host and a root on disk never has live binds into it.
"""

import argparse
import configparser
import glob
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bvb_addon import outcomes
from bvb_addon.errors import BVBError, report
from bvb_addon.sandbox.layers import UID_LOCK_DIR

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
APT_SOURCES = ("/etc/apt/sources.list", "/etc/apt/sources.list.d")
# Under /usr, which the sandbox binds anyway: no extra top-level folder for workers to see.
VENV = "/usr/local/lib/bvb-venv"
# The host's CA bundle, copied in so pip inside the root trusts what the host trusts.
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"
ROOT_CA = "/etc/bvb/host-ca.crt"
APT_OPTS = ["-o", "Acquire::Check-Valid-Until=false", "-o", "APT::Install-Recommends=false"]
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
READY = ".bvb-root.json"


class RootError(BVBError, RuntimeError):
    """A root could not be built or entered; the message names the step and the fix."""

    exit_code = outcomes.FAILED_EXIT


@dataclass(frozen=True)
class Recipe:
    """What a root is made of; its hash names the cached folder."""

    name: str
    suite: str
    packages: tuple[str, ...]
    # pip requirements installed into VENV (empty: no venv).
    pip: tuple[str, ...] = ()
    # The venv sees the system's packages (the binary's own numpy stays the one it imports).
    system_site_packages: bool = False
    venv: str = VENV

    def digest(self) -> str:
        """The recipe's hash (12 hex digits): the cached root's folder name ends in it."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


def project_dependencies(pyproject: str | Path = REPO_ROOT / "pyproject.toml") -> tuple[str, ...]:
    """The project's runtime dependencies, as pyproject.toml lists them."""
    return tuple(tomllib.loads(Path(pyproject).read_text())["project"]["dependencies"])


# The dev extra's Blender (each root brings its own), typing stubs and tools no test imports.
NOT_FOR_TESTS = ("bpy", "fake-bpy-module", "pytest-blender", "ruff")


def requirements_for_tests(pyproject: str | Path = REPO_ROOT / "pyproject.toml") -> tuple[str, ...]:
    """What the tests need beyond the dependencies: the dev extra without its Blender and tools."""
    dev = tomllib.loads(Path(pyproject).read_text())["project"]["optional-dependencies"]["dev"]
    skip = re.compile(r"(" + "|".join(map(re.escape, NOT_FOR_TESTS)) + r")\b")
    return tuple(r for r in dev if not skip.match(r))


SANDBOX_PACKAGES = ("bubblewrap", "libseccomp2", "util-linux", "ca-certificates")
# Libraries the bpy wheel loads even in background mode (X11 client libraries, GL, EGL).
BPY_LIBS = ("libx11-6", "libxrender1", "libxxf86vm1", "libxfixes3", "libxi6", "libxkbcommon0", "libsm6",
            "libice6", "libgl1", "libegl1", "libglx-mesa0", "libgomp1")  # fmt: skip


def recipes() -> dict[str, Recipe]:
    """The roots the test tiers use, by name."""
    deps = (*project_dependencies(), *requirements_for_tests())
    return {
        # libegl1: Workbench aborts without it; python3-cattr and python3-requests: Blender's
        # extension add-on raises at start without them; python3-numpy: what official builds
        # bundle (Debian's package depends on none of the three); xvfb/xauth/xdotool/x11-apps:
        # a real window, driven and screenshot.
        "sid": Recipe(
            name="sid",
            suite="sid",
            packages=(
                "blender",
                "xvfb",
                "xauth",
                "xdotool",
                "x11-apps",
                "libegl1",
                "python3-cattr",
                "python3-requests",
                "python3-numpy",
                "python3-venv",
                "python3-pip",
                # ffmpeg: Run Agent's default harness, mini-bvb, runs ffmpeg and ffprobe (the clip, frames blocks).
                "ffmpeg",
                *SANDBOX_PACKAGES,
            ),
            pip=deps,
            system_site_packages=True,
        ),  # fmt: skip
        "trixie": Recipe(
            name="trixie",
            suite="trixie",
            # ffmpeg: mini-bvb's frame tool and its tests run ffmpeg and ffprobe (bvb_addon/ffmpeg_frames.py);
            # procps: the scene workspace's blocks see this root's /usr, and its tests run ps there.
            packages=("python3", "python3-venv", "ffmpeg", "procps", *BPY_LIBS, *SANDBOX_PACKAGES),
            pip=("bpy==5.2.3", *deps),
        ),  # fmt: skip
    }


def roots_dir() -> Path:
    """The folder of the cached roots: $BVB_ROOTS_DIR, else ~/.cache/bvb/roots."""
    return Path(os.environ.get("BVB_ROOTS_DIR") or Path.home() / ".cache" / "bvb" / "roots")


def root_path(recipe: Recipe) -> Path:
    """The cached root's folder of a recipe: <name>-<recipe hash>."""
    return roots_dir() / f"{recipe.name}-{recipe.digest()}"


def archive_uri(paths: Iterable[str] = APT_SOURCES) -> str:
    """The Debian archive the machine's apt sources name (the first non-security ``debian`` URI)."""
    files: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            files += sorted(glob.glob(os.path.join(path, "*.sources")) + glob.glob(os.path.join(path, "*.list")))
        elif os.path.isfile(path):
            files.append(path)
    uris: list[str] = []
    for path in files:
        for line in Path(path).read_text(errors="replace").splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("URIs:"):
                uris += line.split()[1:]
            elif line.startswith("deb "):
                words = [w for w in line.split()[1:] if not w.startswith("[")]
                # "deb [opts] URI suite ..." : an option list may span words ending in "]".
                words = [w for w in words if not w.endswith("]")]
                uris += words[:1]
    for uri in uris:
        if re.search(r"/debian/?$", uri):
            return uri.rstrip("/")
    raise RootError(
        "no Debian archive in this machine's apt sources (/etc/apt/sources.list*); "
        "add one, or build the roots on a Debian machine"
    )


ENTER_SH = r"""
set -eu
root=$1; cwd=$2; n=$3; shift 3
mount --rbind "$root" "$root"
for d in proc dev sys; do mount --rbind "/$d" "$root/$d"; done
while [ "$n" -gt 0 ]; do
  mkdir -p "$root$1"
  mount --rbind "$1" "$root$1"
  shift; n=$((n - 1))
done
exec chroot "$root" /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$cwd" "$@"
"""


def enter_argv(
    root: str | Path,
    argv: Sequence[str],
    binds: Iterable[str | Path] = (),
    cwd: str | Path = "/",
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """The command line that runs argv inside root, with binds visible at the same paths.

    env: the environment inside (default: a clean one with PATH, HOME, LANG); mounts are made in
    a private mount namespace and vanish with it.
    """
    # Never anything but a Debian root: /proc, /dev and /sys get bound below it.
    if not str(root) or not os.path.isfile(os.path.join(root, "etc", "debian_version")):
        raise RootError(f"{str(root) or '(empty)'} is not a Debian root (no etc/debian_version); "
                        "build one with: python -m tools.roots build sid")  # fmt: skip
    root = os.path.realpath(root)
    # The sandbox's uid leases are machine-wide (a worker uid's processes are this lease's alone):
    # the root shares this machine's lock folder, or a harness inside and one outside would hand
    # out the same uid and kill each other's workers.
    UID_LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
    bound = sorted({os.path.realpath(b) for b in [*binds, UID_LOCK_DIR]})
    for bind in bound:
        if not os.path.isdir(bind):
            raise RootError(f"cannot bind {bind} into the root: not a folder")
    environment = {"PATH": ROOT_PATH, "HOME": "/root", "LANG": "C.UTF-8"}
    environment.update(env or {})
    env_args = ["env", "-i", *(f"{k}={v}" for k, v in sorted(environment.items()))]
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", ENTER_SH, "enter",
            root, str(cwd), str(len(bound)), *bound, *env_args, *argv]  # fmt: skip


def run_in(
    root: str | Path,
    argv: Sequence[str],
    binds: Iterable[str | Path] = (),
    cwd: str | Path = "/",
    env: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """Run argv inside root (subprocess.run keyword arguments pass through)."""
    return subprocess.run(enter_argv(root, argv, binds, cwd, env), **kwargs)


def pip_environment() -> dict[str, str]:
    """This machine's pip settings for use inside a root: PIP_* variables, CA bundle at ROOT_CA."""
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") and k != "PIP_CERT"}
    env["PIP_CERT"] = ROOT_CA
    env["SSL_CERT_FILE"] = ROOT_CA
    env["REQUESTS_CA_BUNDLE"] = ROOT_CA
    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


PIP_CONFIGS = ("/etc/pip.conf", "/etc/xdg/pip/pip.conf", "~/.config/pip/pip.conf", "~/.pip/pip.conf")


def pip_setup(
    environ: Mapping[str, str] | None = None, configs: Iterable[str] = PIP_CONFIGS
) -> tuple[list[str], list[str]]:
    """This machine's pip set-up for use inside a root: (files to copy in, folders to bind in).

    The files are pip's config files and the files they or PIP_* variables name (a constraints
    file); the folders are local indexes and find-links folders they name (an index's
    ``.../simple`` with its parent, whose ``files/`` its pages link to). The CA bundle is not
    among them: PIP_CERT points at the copy in ROOT_CA.
    """
    environ = os.environ if environ is None else environ
    paths = [os.path.expanduser(c) for c in configs]
    if environ.get("PIP_CONFIG_FILE"):
        paths.append(environ["PIP_CONFIG_FILE"])
    files: list[str] = []
    folders: list[str] = []
    values: list[str] = []
    for path in paths:
        if not os.path.isfile(path):
            continue
        files.append(path)
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(path)
        for section in parser.sections():
            values += [v for k, v in parser.items(section) if k != "cert"]
    values += [v for k, v in environ.items() if k.startswith("PIP_") and k not in ("PIP_CERT", "PIP_CONFIG_FILE")]
    for value in values:
        for word in value.split():
            word = word.removeprefix("file://")
            if not word.startswith("/") or not os.path.exists(word):
                continue
            if os.path.isdir(word):
                folders.append(os.path.dirname(word) if os.path.basename(word.rstrip("/")) == "simple" else word)
            else:
                files.append(word)
    return sorted(set(files)), sorted(set(folders))


def _step(label: str, argv: list[str], timings: dict[str, float], **kwargs: Any) -> None:
    started = time.monotonic()
    log.info("root: %s", label)
    proc = subprocess.run(argv, **kwargs)
    timings[label] = round(time.monotonic() - started, 1)
    if proc.returncode != 0:
        raise RootError(f"building the root failed at '{label}' (exit {proc.returncode}); see the output above")


def _mounts_under(path: str | Path) -> list[str]:
    """Mount points at or below path in this mount namespace (a root must have none before removal)."""
    path = os.path.realpath(path)
    out = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            point = line.split()[4].replace("\\040", " ")
            if point == path or point.startswith(path + "/"):
                out.append(point)
    return out


def _processes_in(path: str | Path) -> list[int]:
    """Pids of processes whose root directory is at or below path (something still runs in that root)."""
    path = os.path.realpath(path)
    pids = []
    for entry in glob.glob("/proc/[0-9]*/root"):
        try:
            target = os.readlink(entry)
        except OSError:
            continue
        if target == path or target.startswith(path + "/"):
            pids.append(int(entry.split("/")[2]))
    return pids


def remove_root_dir(path: str | Path) -> None:
    """Delete a root folder we built, refusing when anything is mounted inside it or runs in it."""
    mounts = _mounts_under(path)
    if mounts:
        raise RootError(f"{path} has live mounts ({mounts[0]}, ...); unmount them first, it is not removed")
    running = _processes_in(path)
    if running:
        raise RootError(f"processes still run in {path} (pid {running[0]}, ...); it is not removed")
    # --one-file-system: never cross into a mount, even one that appeared after the check.
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], check=True)


def build(name: str, quiet: bool = False) -> Path:
    """Build (or reuse) the named root; returns its path."""
    table = recipes()
    if name not in table:
        raise RootError(f"unknown root {name!r}; choose one of {', '.join(sorted(table))}")
    recipe = table[name]
    final = root_path(recipe)
    if (final / READY).is_file():
        return final
    if os.geteuid() != 0:
        raise RootError("building a root needs root (debootstrap, chroot, mounts); run it as root")
    if not shutil.which("debootstrap"):
        raise RootError("debootstrap is not installed; run: apt-get install -y debootstrap")
    archive = archive_uri()
    partial = final.with_name(final.name + ".partial")
    if partial.exists():
        remove_root_dir(partial)
    partial.parent.mkdir(parents=True, exist_ok=True)
    # stdout carries only the root's path (./bvb reads it); the tools' output goes to stderr.
    out = subprocess.DEVNULL if quiet else sys.stderr
    timings: dict[str, float] = {}
    started = time.monotonic()
    # debootstrap mounts /proc and /sys in the target while it works: in a private namespace
    # those mounts die with it even when it fails half way.
    _step("debootstrap", ["unshare", "-m", "--propagation", "private", "debootstrap", "--variant=minbase",
                          recipe.suite, str(partial), archive], timings, stdout=out)  # fmt: skip
    shutil.copy2("/etc/resolv.conf", partial / "etc" / "resolv.conf")
    (partial / "etc/bvb").mkdir(parents=True, exist_ok=True)
    if os.path.isfile(HOST_CA):
        shutil.copy2(HOST_CA, partial / ROOT_CA.lstrip("/"))
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    _step("apt-get update", enter_argv(partial, ["apt-get", *APT_OPTS, "update"], env=env), timings, stdout=out)
    _step("apt-get install", enter_argv(partial, ["apt-get", *APT_OPTS, "install", "-y", *recipe.packages],
                                        env=env), timings, stdout=out)  # fmt: skip
    if recipe.pip:
        files, folders = pip_setup()
        for host in files:
            target = partial / host.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(host, target)
        venv = ["python3", "-m", "venv", *(["--system-site-packages"] if recipe.system_site_packages else []),
                recipe.venv]  # fmt: skip
        _step("venv", enter_argv(partial, venv), timings, stdout=out)
        _step("pip install", enter_argv(partial, [f"{recipe.venv}/bin/python", "-m", "pip", "install", "-q", *recipe.pip],
                                        binds=folders, env=pip_environment()), timings, stdout=out)  # fmt: skip
    leftover = _mounts_under(partial)
    if leftover:
        raise RootError(f"mounts were left under {partial} ({leftover[0]}); the root is not kept")
    record = {"recipe": asdict(recipe), "digest": recipe.digest(), "build_s": round(time.monotonic() - started, 1),
              "steps_s": timings, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
    (partial / READY).write_text(json.dumps(record, indent=1) + "\n")
    os.replace(partial, final)
    log.info("root %s built in %.0f s: %s", name, record["build_s"], final)
    return final


def prune() -> list[Path]:
    """Remove the roots of older recipes (and failed builds); returns the folders removed."""
    current = {root_path(r) for r in recipes().values()}
    removed = []
    for path in sorted(roots_dir().glob("*-*")):
        name = path.name.removesuffix(".partial")
        # A current recipe's .partial may be a build under way (5.2 and 5.2-bin built at once):
        # only that recipe's own next build removes it, never another tier's prune.
        if path.with_name(name) in current:
            continue
        if not re.fullmatch(r"[a-z]+-[0-9a-f]{12}", name) or not path.is_dir():
            continue
        remove_root_dir(path)
        removed.append(path)
    return removed


def cached(name: str) -> Path | None:
    """The named root's path when it is built for the current recipe, else None."""
    recipe = recipes().get(name)
    if recipe is None:
        return None
    path = root_path(recipe)
    return path if (path / READY).is_file() else None


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.roots``: build, path, prune or enter; the exit code (enter: the command's)."""
    parser = argparse.ArgumentParser(prog="python -m tools.roots", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build (or reuse) a root and print its path")
    b.add_argument("name", choices=sorted(recipes()))
    b.add_argument("--quiet", action="store_true", help="hide debootstrap's and apt's output")
    p = sub.add_parser("path", help="print the cached root's path ('' when not built)")
    p.add_argument("name", choices=sorted(recipes()))
    sub.add_parser("prune", help="remove the roots of older recipes and failed builds")
    e = sub.add_parser("enter", help="run a command inside a root")
    e.add_argument("root")
    e.add_argument("--bind", action="append", default=[], help="a host folder to show at the same path")
    e.add_argument("--cwd", default="/")
    e.add_argument("--env", action="append", default=[], help="NAME=VALUE inside (repeatable)")
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "build":
            print(build(args.name, quiet=args.quiet))
        elif args.command == "path":
            print(cached(args.name) or "")
        elif args.command == "prune":
            for path in prune():
                print(f"removed {path}")
        else:
            if not command:
                parser.error("enter ROOT [--bind P] -- COMMAND: give the command after --")
            env = dict(item.split("=", 1) for item in args.env)
            return run_in(args.root, command, binds=args.bind, cwd=args.cwd, env=env).returncode
    except BVBError as exc:
        return report(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
