"""Whether this platform has a sandbox backend, and what a user's opt-in to a weaker level means.

The ladder (docs/sandbox.md) is built on Linux: bubblewrap, a dedicated
uid, rlimits, pids cgroups and seccomp. Elsewhere (Windows, macOS) no backend exists yet, so
the add-on's Run Agent and Render Camera are greyed out with one line saying why, unless the
user opts in, in the preferences, to run agent code without that isolation.
"""

import sys

from .config import SandboxConfig

NO_BACKEND = (
    "No sandbox backend on this platform ({platform}): run the headless runner on a Linux machine, "
    "or opt in to a weaker level in the add-on's preferences"
)


def has_backend(platform: str | None = None) -> bool:
    """True where the sandbox ladder exists (Linux)."""
    return (platform or sys.platform).startswith("linux")


def unavailable(allow_weak: bool, platform: str | None = None) -> str | None:
    """Why agent code cannot run here at the platform's level, or None (one line, for a poll message)."""
    platform = platform or sys.platform
    if has_backend(platform) or allow_weak:
        return None
    return NO_BACKEND.format(platform=platform)


def level_label(allow_weak: bool, platform: str | None = None) -> str:
    """The panel's line: the level agent code gets here."""
    if has_backend(platform):
        return "Sandbox: Linux ladder (below bwrap allowed)" if allow_weak else "Sandbox: Linux ladder (bwrap required)"
    return "Sandbox: none, opted in (agent code runs unisolated)" if allow_weak else "Sandbox: none on this platform"


def sandbox_config(allow_weak: bool) -> SandboxConfig:
    """The SandboxConfig for the add-on's workers: the default, or the user's opt-in below the minimum."""

    return SandboxConfig(allow_below_minimum=True) if allow_weak else SandboxConfig()


def config_record(allow_weak: bool, platform: str | None = None) -> dict:
    """What config.json records about the add-on's choice (the probed level is recorded beside it)."""
    platform = platform or sys.platform
    return {"platform": platform, "backend": has_backend(platform), "weak_level_opt_in": bool(allow_weak)}
