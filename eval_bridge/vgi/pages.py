"""VGI's pages in the report: the leaderboard over generators, and per instance what the judge saw and said.

    bvb report results/vgi --out report/      (a VGI output folder: eval_bridge.vgi.leaderboard's)

writes report/vgi/index.html (overall, per domain, skill tag and level with bootstrap intervals,
the half-versus-full stability, the protocol, every generator's instances, its missing videos)
and report/vgi/<generator>/<instance>.html: the frames the judge saw (extracted again from the
video at the times its row records), its verdict per rule, and the focus windows where it found
violations. Every value is escaped by eval_bridge.pages.html_page; the pages carry no script.
"""

import logging
from pathlib import Path

from bvb_addon import video
from bvb_addon.atomic import copy_atomic, write_bytes_atomic, write_text_atomic
from bvb_addon.errors import BVBError
from bvb_addon.records import read_vgi_rows
from bvb_addon.vgi.suite import start_image

from ..pages.html_page import Markup, csp, fragment, join, page_url, render, safe_name
from .leaderboard import build, is_vgi_output
from .score import ROWS, read_tasks

log = logging.getLogger(__name__)

THUMB_SIDE = 224
FOLDER = "vgi"

STYLE = Markup("""body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; margin: 8px 0 24px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: right; vertical-align: top; }
th:first-child, td:first-child { text-align: left; }
.ci { color: #777; font-size: 11px; } .note { font-size: 12px; color: #666; }
.status-ok { color: #2a2; } .status-bad { color: #a33; } .not-comparable { color: #a60; }
.frames { display: flex; flex-wrap: wrap; gap: 6px; }
.frame { font-size: 11px; color: #555; border: 3px solid transparent; }
.frame.flagged { border-color: #d22; } .frame.overview { outline: 1px dashed #27c; }
.frame img { display: block; height: 120px; }
#rules td:nth-child(2) { text-align: left; }
""")

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{ policy }}">
<title>{{ title }}</title>
<style>
{{ style }}</style></head>
<body data-report="{{ kind }}">
{{ body }}
</body></html>
"""


def split_outputs(paths: list[str | Path]) -> tuple[list[str | Path], list[Path]]:
    """(the paths that are BVB runs or results folders, the VGI output folders among them)."""
    outputs = [Path(path) for path in paths if is_vgi_output(path)]
    return [path for path in paths if not is_vgi_output(path)], outputs


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _cell(block: dict | None) -> Markup:
    if not block or not block["instances"]:
        return fragment("<td>n/a</td>")
    return fragment(
        "<td>{} <span class='ci'>[{}, {}]</span></td>",
        _fmt(block["score"]),
        _fmt(block["ci_low"]),
        _fmt(block["ci_high"]),
    )


def _group_table(board: dict, name: str, title: str) -> Markup:
    keys = sorted({k for e in board["generators"] for k in e[name]})
    head = join([fragment("<th>{}</th>", key) for key in keys])
    rows = [
        fragment("<tr><td>{}</td>{}</tr>", e["generator"], join([_cell(e[name].get(k)) for k in keys]))
        for e in board["generators"]
    ]
    return fragment(
        "<h3>{}</h3><table class='vgi-{}'><tr><th>generator</th>{}</tr>{}</table>", title, name, head, join(rows)
    )


def _leaderboard(board: dict) -> Markup:
    rows = []
    for e in board["generators"]:
        c = e["counts"]
        note = (
            fragment(" <span class='not-comparable'>* {}</span>", e["comparability_note"])
            if not e["comparable"]
            else ""
        )
        rows.append(fragment(
            "<tr><td>{}</td><td><a href='#gen-{}'>{}</a>{}</td>{}<td>{}</td><td>{} of {}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            e["rank"], safe_name(e["generator"]), e["generator"], note, _cell(e["overall"]), _fmt(e["overall"]["success"]),
            c.get("scored"), c.get("instances"), c.get("missing"), c.get("video_errors"), c.get("judge_errors"),
        ))  # fmt: skip
    return fragment(
        "<table id='vgi-leaderboard'><tr><th>rank</th><th>generator</th><th>score [95% CI]</th><th>success</th>"
        "<th>scored</th><th>missing</th><th>unreadable</th><th>judge errors (not scored)</th></tr>{}</table>",
        join(rows),
    )


def _stability(board: dict) -> Markup:
    s = board.get("half_vs_full")
    if not s:
        return fragment(
            "<p class='note'>Half versus full: needs two or more generators scored on the same full instance set.</p>"
        )
    return fragment(
        "<p id='half-vs-full'>Half-instance protocol versus the full set, over {} draws: Kendall's tau mean {} (min {}), "
        "Spearman's rho mean {}, the same ranking in {}% of draws, the same leader in {}%, largest score change {}.</p>",
        s["seeds"], _fmt(s["kendall_tau_mean"], 2), _fmt(s["kendall_tau_min"], 2), _fmt(s["spearman_rho_mean"], 2),
        _fmt(100 * s["same_ranking"], 0), _fmt(100 * s["same_leader"], 0), _fmt(s["max_abs_diff"]),
    )  # fmt: skip


def _settings(board: dict) -> Markup:
    if not board["generators"]:
        return Markup("")
    settings = board["generators"][0]["settings"] or {}
    return fragment(
        "<h3>Protocol</h3><table id='vgi-protocol'>{}</table>",
        join(fragment("<tr><td>{}</td><td>{}</td></tr>", k, v) for k, v in sorted(settings.items())),
    )


def _tasks_of(settings: dict) -> dict[str, dict]:
    """The tasks file's rows by id when the summary names a readable one (texts of rules and constraints)."""
    path = (settings or {}).get("tasks")
    if not path or not Path(path).is_file():
        return {}
    try:
        return {row["id"]: row for row in read_tasks(path)}
    except BVBError as exc:
        log.warning("VGI report: the tasks file %s: %s", path, exc)
        return {}


def _thumbnails(row: dict, dest: Path) -> dict[int, str]:
    """{frame index: file name} of the judge's frames, extracted again from the video (none when it cannot be)."""
    frames, times, clip = row.get("frames") or [], row.get("frame_times") or [], row.get("video")
    if not frames or not clip or not Path(clip).is_file():
        return {}
    names = {index: f"{safe_name(row['id'])}_{index}.jpg" for index in frames}
    if all(
        (dest / name).is_file() and (dest / name).stat().st_mtime >= Path(clip).stat().st_mtime
        for name in names.values()
    ):
        return names
    try:
        jpegs = video.sample_frames(clip, times, longest_side=THUMB_SIDE, quality=80)
    except (OSError, ValueError) as exc:
        log.warning("VGI report: frames of %s: %s", clip, exc)
        return {}
    dest.mkdir(parents=True, exist_ok=True)
    for index, jpeg in zip(frames, jpegs, strict=True):
        write_bytes_atomic(dest / names[index], jpeg)
    return names


def _start_image(task: dict | None, tasks_file: str | None, dest: Path) -> str | None:
    """The instance's start image copied beside the frames (its file name), or None when there is none."""
    if not task or not tasks_file:
        return None
    source = start_image(tasks_file, task)
    if source.suffix.lower() not in (".png", ".jpg", ".jpeg", ".webp") or not source.is_file():
        return None
    name = f"{safe_name(task['id'])}_start{source.suffix.lower()}"
    if not (dest / name).is_file() or (dest / name).stat().st_mtime < source.stat().st_mtime:
        dest.mkdir(parents=True, exist_ok=True)
        copy_atomic(source, dest / name)
    return name


def _instance_page(row: dict, task: dict | None, generator: str, dest: Path, tasks_file: str | None = None) -> str:
    thumbs = _thumbnails(row, dest / "frames")
    start = _start_image(task, tasks_file, dest / "frames")
    rules = (task or {}).get("rubric") or [{"id": rule_id, "rule": ""} for rule_id in row["violations"]]
    flagged_by_frame: dict[int, list[str]] = {}
    for window in row.get("windows") or []:
        for rule_id, indices in window["flagged"].items():
            for index in indices:
                flagged_by_frame.setdefault(index, [])
                if rule_id not in flagged_by_frame[index]:
                    flagged_by_frame[index].append(rule_id)
    overview = set(row.get("completeness_frames") or [])
    rule_rows = join(
        fragment("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", rule["id"], rule["rule"],
                 row["violations"].get(rule["id"], 0),
                 ", ".join(str(i) for i in sorted(i for i, ids in flagged_by_frame.items() if rule["id"] in ids)) or "-")
        for rule in rules
    )  # fmt: skip
    frames = join(
        fragment(
            "<div class='frame{}{}'><img src='{}' alt='frame {}' loading='lazy'>frame {} · {} s{}</div>",
            " flagged" if index in flagged_by_frame else "",
            " overview" if index in overview else "",
            page_url("frames", thumbs[index]) if index in thumbs else "",
            index,
            index,
            _fmt(time, 2),
            fragment(" · <b>{}</b>", ", ".join(flagged_by_frame[index])) if index in flagged_by_frame else "",
        )  # fmt: skip
        for index, time in zip(row.get("frames") or [], row.get("frame_times") or [], strict=False)
    )
    windows = join(
        fragment("<li>frames {} to {} ({} frames): {}</li>", w["frames"][0], w["frames"][-1], len(w["frames"]),
                 "; ".join(f"{rule} at {', '.join(map(str, idx))}" for rule, idx in sorted(w["flagged"].items())))
        for w in row.get("windows") or []
    )  # fmt: skip
    status_class = "status-ok" if row["status"] == "ok" else "status-bad"
    body = fragment(
        "<p><a href='../index.html'>← VGI report</a></p><h1>{} · {}</h1>"
        "<p>{} · {} · level {} · skills {}</p><p>{}</p>{}"
        "<p>status <span class='{}' id='status'>{}</span> {}</p>"
        "<p id='verdict'>completeness <b>{}</b> ({}) × rubric score {} = score <b>{}</b>{}</p>"
        "<h2>Verdict per rule</h2><table id='rules'><tr><th>rule</th><th>text</th><th>violation events</th>"
        "<th>flagged frames</th></tr>{}</table>"
        "<h2>Frames the judge saw</h2><p class='note'>{} frames; red: flagged by a focus window; dashed: asked for "
        "completeness.</p><div class='frames' id='frames'>{}</div>"
        "<h2>Focus windows with violations</h2><ul id='windows'>{}</ul>",
        generator, row["id"], row["family"], row["domain"], row["level"], ", ".join(row["skills"]),
        (task or {}).get("constraint", ""),
        fragment("<p><img id='start-image' src='{}' alt='start image' height='160'></p>", page_url("frames", start))
        if start
        else "",
        status_class, row["status"], row.get("reason", ""),
        row.get("completeness_label") or "-", _fmt(row["completeness"], 2), _fmt(row["rubric_score"], 3),
        _fmt(row["score"], 3), " (success)" if row["success"] else "", rule_rows, len(row.get("frames") or []),
        frames, windows or fragment("<li>none</li>"),
    )  # fmt: skip
    return render(
        PAGE, policy=csp(()), style=STYLE, title=f"{generator} {row['id']}: VGI", kind="vgi-instance", body=body
    )


def _generator_section(entry: dict, out_dir: Path, tasks: dict[str, dict], tasks_file: str | None) -> Markup:
    name = entry["generator"]
    folder = out_dir / safe_name(name)
    rows = read_vgi_rows(Path(entry["folder"]) / ROWS)
    lines = []
    for row in rows:
        page = f"{safe_name(row['id'])}.html"
        text = _instance_page(row, tasks.get(row["id"]), name, folder, tasks_file)
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(folder / page, text)
        total = sum(row["violations"].values())
        lines.append(fragment(
            "<tr><td><a class='instance' href='{}'>{}</a></td><td>{}</td><td>{}</td><td class='{}'>{}</td><td>{}</td>"
            "<td>{}</td><td>{}</td></tr>",
            page_url(safe_name(name), page), row["id"], row["family"], row["level"],
            "status-ok" if row["status"] == "ok" else "status-bad", row["status"], _fmt(row["score"], 3),
            row.get("completeness_label") or "-", total,
        ))  # fmt: skip
    missing = (
        fragment("<p class='status-bad'>Missing videos (scored 0): {}</p>", ", ".join(entry["missing"]))
        if entry["missing"]
        else ""
    )
    return fragment(
        "<h2 id='gen-{}'>{}</h2>{}<table class='instances'><tr><th>instance</th><th>task</th><th>level</th><th>status</th>"
        "<th>score</th><th>completeness</th><th>violation events</th></tr>{}</table>",
        safe_name(name), name, missing, join(lines),
    )  # fmt: skip


def write_pages(outputs: list[Path], report_dir: str | Path) -> Path | None:
    """Write REPORT/vgi/index.html and the instance pages for VGI output folders; return the index (None: none)."""
    if not outputs:
        return None
    out_dir = Path(report_dir) / FOLDER
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = []
    for output in outputs:
        board = build(output)
        settings = board["generators"][0]["settings"] if board["generators"] else {}
        tasks = _tasks_of(settings)
        parts.append(fragment(
            "<h2>{}</h2>{}{}{}{}{}{}{}", output, _leaderboard(board), _stability(board),
            _group_table(board, "by_domain", "By domain"), _group_table(board, "by_skill", "By skill tag"),
            _group_table(board, "by_level", "By level"), _settings(board),
            join(_generator_section(entry, out_dir, tasks, settings.get("tasks")) for entry in board["generators"]),
        ))  # fmt: skip
    body = fragment(
        "<h1>VGI report</h1><p class='note'>Scores are the mean instance score × 100 over each generator's pool (judge "
        "faults left out; a missing or unreadable video scores 0), with 95% bootstrap intervals over instances.</p>{}",
        join(parts),
    )
    index = out_dir / "index.html"
    write_text_atomic(index, render(PAGE, policy=csp(()), style=STYLE, title="VGI report", kind="vgi", body=body))
    return index


def link(index: Path | None, report_dir: str | Path) -> Markup:
    """The line the BVB report's index shows for the VGI pages (empty without them)."""
    if index is None:
        return Markup("")
    return fragment("<h2>VGI</h2><p><a id='vgi-link' href='{}'>VGI leaderboard and instances</a></p>",
                    page_url(*index.relative_to(Path(report_dir)).parts))  # fmt: skip
