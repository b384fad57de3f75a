"""``--rules report|enforce``: whether a submission that breaks the release prompt's scene rules scores as a
failure (bpy-free).

``report`` (the default) scores every scene as the release does and only shows the audit's findings, so the
release's numbers stay the release's. ``enforce`` scores a scene whose ``scene_rules.jsonl`` row breaks a rule
(a source replay included) as a failure: kept in the pool, 0 on both axes, as the paper counts a missing render.
A scene with a render but no audit row is refused (``bvb audit`` first): scoring it as clean would trust exactly
the submission the switch is there to check. An audit that could not read the blend counts as a break, since a
blend Blender cannot open in the audit is not known to follow the rules.
"""

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from bvb_addon.errors import ArgumentError
from bvb_addon.run_dir import RunDir
from bvb_addon.scene_rules import ERROR, RULES_VERSION, breaks_rules, read_scene_rules

RulesMode = Literal["report", "enforce"]
REPORT: RulesMode = "report"
ENFORCE: RulesMode = "enforce"
RULES_HELP = (
    "report: score as the release does and show the scene-rules audit; enforce: a scene that breaks a rule of the "
    "release's prompt (bvb audit) scores as a failure, 0 on both axes"
)
RULE_BREAK = "rule_break"
"""The row status of a scene scored as a failure under ``--rules enforce``."""


def check_mode(mode: str) -> RulesMode:
    if mode not in (REPORT, ENFORCE):
        raise ArgumentError(f"--rules {mode!r}: use report or enforce")
    return ENFORCE if mode == ENFORCE else REPORT


def rule_breaks(mode: str, run_dir: str | Path, rendered: Iterable[str]) -> dict[str, str]:
    """{scene: why} of the ``rendered`` scenes that score as failures: none under report.

    Under enforce, every rendered scene needs an audit row of this harness's rules version; else one line naming
    the scenes and ``bvb audit``. (A scene without a render is a failure already and needs none.)"""
    if check_mode(mode) == REPORT:
        return {}
    rendered = sorted(set(rendered))
    rows = read_scene_rules(run_dir)
    command = f"bvb audit --run {run_dir}"
    unaudited = [scene for scene in rendered if scene not in rows]
    if unaudited:
        shown = ", ".join(unaudited[:5]) + (f" and {len(unaudited) - 5} more" if len(unaudited) > 5 else "")
        raise ArgumentError(f"--rules enforce: {shown} not audited ({RunDir(run_dir).scene_rules.name}); run {command}")
    stale = [scene for scene in rendered if rows[scene].get("rules_version") != RULES_VERSION]
    if stale:
        raise ArgumentError(
            f"--rules enforce: {', '.join(stale[:5])} audited under rules "
            f"{rows[stale[0]].get('rules_version')!r}, not {RULES_VERSION!r}; run {command} again"
        )
    return {scene: why for scene in rendered if (why := _why(rows[scene]))}


def _why(row: Mapping[str, Any]) -> str:
    """The failure reason of an audit row that breaks the rules under enforce, '' for a clean one."""
    if row.get("status") == ERROR:
        return f"scene rules not checked (audit error: {row.get('error') or 'unknown'}): scored as a rule break"
    if not breaks_rules(dict(row)):
        return ""
    found = [f"{v.get('rule')} ({v.get('datablock')})" for v in row.get("violations", [])]
    shown = ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
    return f"breaks the scene rules: {shown or 'source_replay'}"


def summary_fields(mode: str) -> dict[str, str]:
    """What a DV or LS summary records of the rule set it was scored under."""
    return {"rules": check_mode(mode), "rules_version": RULES_VERSION}


def rule_break_counts(run_dir: str | Path) -> str:
    """The leaderboard's ruleBreaks: scenes breaking the rules / scenes audited ("3/12"); "" for a run never
    audited."""
    rows = read_scene_rules(run_dir)
    if not rows:
        return ""
    return f"{sum(1 for row in rows.values() if breaks_rules(row))}/{len(rows)}"
