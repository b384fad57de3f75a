"""A static HTML report of one or more scored runs: no server, works offline.

    bvb report RUN [RUN ...] --out DIR [--videos ROOT]

The page holds the leaderboard table, a DV-versus-LS scatter with Overall iso-curves, DV
by question type as bars (both drawn with matplotlib), and per scene the source and the
render side by side as synchronised frame strips with the scene's scores, cost, steps and
status, and links to its trajectory and program.
"""

import hashlib
import json
import logging
import math
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bvb_addon import versions, video
from bvb_addon.errors import BadFileError
from bvb_addon.jsonfile import read_object_or_none
from bvb_addon.run_dir import RunDir, read_jsonl, run_blenders, runs_in, videos_of
from bvb_addon.scene_rules import read_scene_rules
from bvb_addon.trajectory import read_trajectory, trajectory_inputs

from ..leaderboard import released
from ..leaderboard.identity import describe, differences, ls_rule, ranking_group, run_identity
from ..leaderboard.noise import intervals, mean_of, run_noise, trial_groups
from ..scoring.overall import published_match, read_references, versus_published
from ..scoring.protocol import overall_score
from ..vgi.pages import link as vgi_link
from ..vgi.pages import split_outputs, write_pages
from .html_page import Markup, Script, csp, fragment, join, page_url, render, safe_name
from .options import ReportOptions as ReportOptions  # its home: the parser loads it alone
from .report_images import ImageStore
from .report_manifest import Manifest, data_key, stat_key, write_output
from .trajectory_page import build_scene_page, rules_html

log = logging.getLogger(__name__)

STRIP_FRAMES = 6
STRIP_SIDE = 192
RULES_SHOWN = 5
"""Findings of a scene listed on the index; its own page lists them all."""


@dataclass(frozen=True)
class ReportResult:
    """Where the report's page is (a report of VGI output folders only is their pages' index)."""

    index: Path
    """The report's index.html (a report of VGI output folders only: their pages' index)."""
    out: Path
    """The folder holding it, its assets and its scene pages."""


def report(options: ReportOptions) -> ReportResult:
    """The report of ``options.runs`` written under ``options.out``; its index page."""
    index = build_report(options.runs, options.out, options.videos, reference=options.reference)
    return ReportResult(index, Path(options.out))


@dataclass
class SceneRow:
    scene: str
    status: str = "missing"
    stop_reason: str = ""
    cost: float | None = None
    turns: int | None = None
    dv_correct_source: int = 0
    dv_retained: int = 0
    vision_sim: float | None = None
    render_status: str = ""
    source: Path | None = None
    render: Path | None = None
    trajectory: Path | None = None
    program: Path | None = None
    rules: dict | None = None
    """The scene's scene_rules.jsonl row (None: not audited)."""


@dataclass
class RunView:
    name: str
    path: Path
    dv: float | None = None
    ls: float | None = None
    overall: float | None = None
    by_type: dict = field(default_factory=dict)
    cost: float = 0.0
    scenes: list = field(default_factory=list)
    judge: str = ""
    protocol: str = ""
    encoder: str = ""  # the LS encoder (with V-JEPA 2.1 as released: ENTRY@checkpoint hash)
    steps: dict = field(default_factory=dict)  # steps_analysis.json, when the run has one
    step_answers: dict = field(default_factory=dict)  # scene -> its steps_answers.jsonl rows
    ci: dict = field(default_factory=dict)  # eval_bridge.leaderboard.noise: the bootstrap intervals and vote spread
    vsi_bench: dict = field(default_factory=dict)  # VSI-Bench's official aggregate, under vsi_official
    comparability_note: str = ""  # set when another Blender than the protocol's made or rendered it
    differs: str = ""  # where its identity differs from its group's first run's (eval_bridge.leaderboard.identity): not ranked
    effort: str = ""  # the reasoning effort config.json records
    harness: str = ""  # the agent protocol (eval_bridge.leaderboard.released.harness_label): mini-BVB, native
    group: str = ""  # agent protocol and scoring protocol: ranks restart per group (identity.ranking_group)
    published: list = field(default_factory=list)  # overall.versus_published lines against its published row


def inside(root: str | Path, path: str | Path) -> bool:
    """Whether ``path`` exists and resolves (links followed) to a place under ``root``: a run's files stay in it."""
    try:
        return Path(path).resolve(strict=True).is_relative_to(Path(root).resolve())
    except (OSError, RuntimeError):
        return False


def _read_json(path, root=None):
    """A JSON object of a run, or None: missing, unreadable, not an object, or a link out of ``root``."""
    path = Path(path)
    if root is not None and not inside(root, path):
        return None
    return read_object_or_none(path)


def _rows(root, path):
    """The JSON-object lines of a run file that stays inside the run (else none)."""
    if not inside(root, path):
        return []
    return [row for row in read_jsonl(path) if isinstance(row, dict)]


def _number(value):
    """A float of a field that should hold a number, or None (a downloaded run can put anything there)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _percent(value):
    """Summaries keep BVB's 0-1 fractions; tables use 0-100 (None for what is not a number)."""
    value = _number(value)
    return None if value is None else 100.0 * value


def _find_source(videos_root, scene, datasets):
    # Names from run files, not paths (the split's rule): a "../" must not reach a clip outside the videos folder.
    def plain(name):
        return bool(name) and "/" not in name and "\0" not in name and not name.startswith(".")

    if not videos_root or not plain(scene):
        return None
    datasets = [d for d in datasets if plain(d)]
    root = Path(videos_root)
    for dataset in datasets:
        candidate = root / dataset / f"{scene}.mp4"
        if candidate.is_file():
            return candidate
    found = sorted(root.glob(f"*/{scene}.mp4"))
    return found[0] if found else None


def load_run(run_dir: str | Path, videos_root: str | Path | None = None) -> RunView:
    """Collect what the report shows of one run directory."""
    run_dir = Path(run_dir)
    rd = RunDir(run_dir)
    config = _read_json(rd.config, run_dir) or {}
    if not rd.config.is_file():
        try:
            config = released.run_config(run_dir)  # the release's config.shard-<i>-of-<N>.json
        except released.ReleasedRunError as exc:
            log.warning("%s", exc)
    name = config.get("name") or config.get("model") or run_dir.name
    if config.get("reasoning") and config.get("reasoning") != "none" and "name" not in config:
        name = f"{name} ({config['reasoning']})"
    view = RunView(name=str(name), path=run_dir)
    view.effort = str(config.get("reasoning") or config.get("effort") or "")
    view.harness = released.harness_label(config)
    videos_root = videos_root or videos_of(config)

    dv_summary = _read_json(rd.dv_summary, run_dir) or {}
    ls_summary = _read_json(rd.ls_summary, run_dir) or {}
    overall = _read_json(rd.overall, run_dir) or {}
    view.dv = _number(overall["dual_vqa"]) if "dual_vqa" in overall else _percent(dv_summary.get("retention_rate"))
    view.ls = _number(overall["latent_sim"]) if "latent_sim" in overall else _percent(ls_summary.get("vision_sim"))
    view.encoder = str(ls_summary.get("model") or "")
    if _number(overall.get("overall")) is not None:
        view.overall = _number(overall["overall"])
    elif view.dv is not None and view.ls is not None:
        view.overall = overall_score(view.dv, view.ls)
    view.steps = _read_json(rd.steps_analysis, run_dir) or {}
    try:
        view.ci = run_noise(run_dir)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # a row with the wrong types: no intervals
        log.warning("%s: no confidence intervals (%s: %s)", run_dir, type(exc).__name__, str(exc)[:200])
    for answer in _rows(run_dir, rd.steps_answers):
        view.step_answers.setdefault(str(answer.get("scene")), []).append(answer)
    version_files = [rd.config, rd.render_status, *sorted(rd.scene_graphs.glob("*.json"))]
    try:
        if any(p.exists() and not inside(run_dir, p) for p in version_files):
            view.comparability_note = (
                "its Blender versions were not read: a file that records them is a link out of the run"
            )
        else:
            _, view.comparability_note = versions.comparability(run_blenders(run_dir))
    except (TypeError, AttributeError):  # a version field that is not text
        view.comparability_note = "the Blender versions it records are not readable"
    view.judge = str(dv_summary.get("judge_model") or dv_summary.get("judge") or "")
    view.protocol = str(dv_summary.get("protocol") or "")
    view.group = ranking_group(config, view.protocol or None, ls_rule(ls_summary))
    vsi_bench = dv_summary.get("vsi_bench")
    view.vsi_bench = vsi_bench if isinstance(vsi_bench, dict) else {}
    by_type = dv_summary.get("by_question_type")
    for qtype, entry in (by_type if isinstance(by_type, dict) else {}).items():
        rate = entry.get("retention_rate") if isinstance(entry, dict) else entry
        if _percent(rate) is not None:
            view.by_type[str(qtype)] = _percent(rate)

    rows = {}
    for meta_path in rd.meta_files():
        # Ours or the release's keys (eval_bridge.leaderboard.released maps its done / blend_file / error to a status).
        end = released.scene_end(_read_json(meta_path, run_dir) or {}, meta_path.stem)
        rows[end.scene] = SceneRow(
            scene=end.scene, status=end.status, stop_reason=end.stop_reason, cost=end.cost, turns=end.turns
        )
    # A scene still running has a trajectory but no agent_meta yet (bvb view shows it live).
    for scene, _ in rd.trajectory_files():
        rows.setdefault(scene, SceneRow(scene=scene, status="running"))
    datasets = []
    for row in _rows(run_dir, rd.dv_rows):
        asked = released.row_scene(row)  # ours: scene; the release's: scene_name
        if not asked:
            continue
        entry = rows.setdefault(asked, SceneRow(scene=asked))
        if isinstance(row.get("dataset"), str) and row["dataset"] not in datasets:
            datasets.append(row["dataset"])
        if row.get("source_correct", row.get("original_correct")):
            entry.dv_correct_source += 1
            entry.dv_retained += 1 if row.get("retained") else 0
    for row in _rows(run_dir, rd.ls_rows):
        scored = released.row_scene(row)  # the release's LS rows name it id
        if scored:
            rows.setdefault(scored, SceneRow(scene=scored)).vision_sim = row.get("vision_sim")
    for row in _rows(run_dir, rd.render_status):
        scene = row.get("scene")
        if scene:
            scene = str(scene)
            rows.setdefault(scene, SceneRow(scene=scene)).render_status = str(row.get("status", ""))
    try:
        rules = read_scene_rules(rd) if inside(run_dir, rd.scene_rules) else {}
    except BadFileError as exc:  # shown without rules, the fix named
        log.warning("%s", exc)
        rules = {}
    for scene, rules_row in rules.items():
        rows.setdefault(scene, SceneRow(scene=scene)).rules = dict(rules_row)
    # The release's render stage leaves camera_renders/<scene>.error.json, not status rows.
    for scene in released.render_errors(run_dir):
        entry = rows.setdefault(scene, SceneRow(scene=scene))
        entry.render_status = entry.render_status or "render_error"

    for scene, entry in sorted(rows.items()):
        # A run's own files only: a link out of the run folder is neither read nor copied.
        render = rd.render(scene)
        entry.render = render if render.is_file() and inside(run_dir, render) else None
        entry.source = _find_source(videos_root, scene, datasets or ["synthetic"])
        trajectory = rd.trajectory(scene)
        entry.trajectory = trajectory if trajectory.is_file() and inside(run_dir, trajectory) else None
        entry.program = rd.program(scene) if rd.program(scene).is_file() else None
        view.cost += _number(entry.cost) or 0.0
        view.scenes.append(entry)
    return view


def _stale(output, source):
    """Whether ``output`` is missing or older than ``source``."""
    try:
        return output.stat().st_mtime_ns < source.stat().st_mtime_ns
    except OSError:
        return True


def _strip(clip, dest_dir, prefix):
    """Save STRIP_FRAMES uniformly sampled JPEGs of a clip; return their names (or an error)."""
    if clip is None:
        return [], "no video"
    names = [f"{prefix}_{index}.jpg" for index in range(STRIP_FRAMES)]
    if not any(_stale(dest_dir / name, clip) for name in names):
        return names, ""  # kept from an earlier build of this folder (bvb view rebuilds often)
    try:
        frames = video.sample_uniform(clip, STRIP_FRAMES, longest_side=STRIP_SIDE, quality=80)
    except video.VideoError as exc:
        return [], str(exc)
    names = []
    for index, jpeg in enumerate(frames):
        name = f"{prefix}_{index}.jpg"
        write_output(dest_dir / name, jpeg)  # replaces whatever is there, a link included, never through it
        names.append(name)
    return names, ""


SHARED = "shared"  # assets/shared/: the source clips' strips, one set per clip whatever the number of runs
SHARED_STRIP = re.compile(r"^[0-9a-f]{24}_\d+\.jpg$")


def _shared_strip(clip, assets, used=None):
    """The strip of a source clip, drawn once into assets/shared/ for every run that shows the clip.

    Its name is a hash of the clip's path, size and mtime: a changed clip gets a new strip, and
    ``used`` (a set) collects the names so that the build can remove strips no scene shows any more.
    """
    if clip is None:
        return [], "no video"
    try:
        st = Path(clip).stat()
    except OSError as exc:
        return [], f"{clip}: {exc.strerror}"
    # abspath, not resolve(): a warm build keys every scene's clip, and resolve() is a syscall per component.
    key = hashlib.sha256(f"{os.path.abspath(clip)}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:24]
    dest = assets / SHARED
    dest.mkdir(parents=True, exist_ok=True)
    names, error = _strip(clip, dest, key)
    if used is not None:
        used.update(names)
    return names, error


def _prune_shared(assets, used):
    """Remove the shared strips that no scene of this build shows (only files named as this module names them)."""
    folder = assets / SHARED
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        if SHARED_STRIP.match(entry.name) and entry.name not in used:
            try:
                entry.unlink()
            except OSError:
                pass


def _error_bar(value, ci, key):
    """[[below], [above]] for matplotlib from a 0-100 interval around ``value``, or None without one."""
    low, high = ci.get(f"{key}_ci_low"), ci.get(f"{key}_ci_high")
    if low is None or high is None:
        return None
    return [[max(0.0, value - low)], [max(0.0, high - value)]]


def _plots(runs, assets):
    """Draw the scatter and the by-type bars with matplotlib; return file names."""
    # deferred: matplotlib (and numpy under it) takes a second to import; only a report with runs draws
    import matplotlib

    matplotlib.use("Agg")
    # deferred: matplotlib (and numpy with it) loads only when a report draws a chart
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(5.2, 4.4), dpi=100)
    dv_axis = np.linspace(0, 100, 400)
    for level in (10, 20, 30, 40, 50, 60, 70, 80, 90):
        ls_curve = (2 * math.sqrt(level) - np.sqrt(dv_axis)) ** 2
        valid = (2 * math.sqrt(level) - np.sqrt(dv_axis)) >= 0
        ax.plot(dv_axis[valid], ls_curve[valid], color="#c8c8c8", linewidth=0.8, zorder=1)
        ax.annotate(f"{level}", (level, level), fontsize=7, color="#999999")
    for view in runs:
        dv = view.dv or 0.0
        ls = view.ls or 0.0
        marker = "o" if view.ls is not None else "x"
        points = ax.scatter([dv], [ls], s=60, marker=marker, zorder=3, label=view.name)
        xerr, yerr = _error_bar(dv, view.ci, "dualVqa"), _error_bar(ls, view.ci, "latentSim")
        if xerr is not None or yerr is not None:
            # The 95% bootstrap interval over scenes (eval_bridge.leaderboard.noise), in the point's colour.
            ax.errorbar([dv], [ls], xerr=xerr, yerr=yerr, fmt="none", ecolor=points.get_facecolor()[0],
                        elinewidth=1, capsize=3, zorder=2)  # fmt: skip
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.set_xlabel("Dual VQA (DV)")
    ax.set_ylabel("Latent Similarity (LS)")
    ax.set_title("DV vs LS (grey: Overall iso-curves; bars: 95% CI)")
    if any(view.ls is None for view in runs):
        ax.text(2, 96, "x: LS not scored (plotted at 0)", fontsize=8, color="#666666", va="top")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(assets / "scatter.svg")
    plt.close(fig)

    types = sorted({qtype for view in runs for qtype in view.by_type})
    fig, ax = plt.subplots(figsize=(max(5.2, 1.1 * len(types) + 2), 4.0), dpi=100)
    width = 0.8 / max(1, len(runs))
    for index, view in enumerate(runs):
        xs = np.arange(len(types)) + index * width
        ax.bar(xs, [view.by_type.get(t, 0.0) for t in types], width=width, label=view.name)
    ax.set_xticks(np.arange(len(types)) + width * (len(runs) - 1) / 2)
    ax.set_xticklabels([t.replace("_", "\n", 1) for t in types], fontsize=7)
    ax.set_ylim(0, 100)
    ax.set_ylabel("DV (retention, %)")
    ax.set_title("DV by question type")
    if runs:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(assets / "dv_by_type.svg")
    plt.close(fig)
    return "scatter.svg", "dv_by_type.svg"


STEP_RATES = (
    ("wrong_to_correct_rate", "wrong → correct"),
    ("wrong_to_other_wrong_rate", "wrong → other wrong"),
    ("correct_to_wrong_rate", "correct → wrong"),
    ("stability_second_half", "stable, 2nd half"),
)


def _steps_plot(runs, assets):
    """Self-correction across agent steps (eval_bridge steps), drawn with matplotlib; None without data."""
    analysed = [view for view in runs if view.steps]
    if not analysed:
        return None
    # deferred: matplotlib, as in _plots
    import matplotlib

    matplotlib.use("Agg")
    # deferred: matplotlib (and numpy with it) loads only when a report draws a chart
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (rates, lock) = plt.subplots(1, 2, figsize=(9.5, 3.6), dpi=100)
    width = 0.8 / len(analysed)
    for index, view in enumerate(analysed):
        xs = np.arange(len(STEP_RATES)) + index * width
        rates.bar(xs, [100 * view.steps.get(key, 0.0) for key, _ in STEP_RATES], width=width, label=view.name)
        steps = [q["lock_in_step"] for q in view.steps.get("per_question", {}).values()]
        if steps:
            lock.hist(steps, bins=range(0, max(steps) + 2), alpha=0.6, label=view.name, align="left")
    rates.set_xticks(np.arange(len(STEP_RATES)) + width * (len(analysed) - 1) / 2)
    rates.set_xticklabels([label for _, label in STEP_RATES], fontsize=7)
    rates.set_ylim(0, 100)
    rates.set_ylabel("% of transitions / questions")
    rates.set_title("Self-correction across agent steps")
    rates.legend(fontsize=7)
    lock.set_xlabel("step index where the answer locks in")
    lock.set_ylabel("questions")
    lock.set_title("Lock-in step")
    fig.tight_layout()
    fig.savefig(assets / "steps.svg")
    plt.close(fig)
    return "steps.svg"


def _cached_plots(runs, assets):
    """The three plots, redrawn only when what they show changed (bvb view rebuilds on every step)."""

    shown = [[v.name, v.dv, v.ls, v.by_type, v.ci, v.steps] for v in runs]
    key = hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()
    stamp = assets / "plots.key"
    names = ("scatter.svg", "dv_by_type.svg")
    if stamp.is_file() and stamp.read_text() == key and all((assets / n).is_file() for n in names):
        return (*names, "steps.svg" if (assets / "steps.svg").is_file() and any(v.steps for v in runs) else None)
    scatter, bars = _plots(runs, assets)
    steps_plot = _steps_plot(runs, assets)
    write_output(stamp, key)
    return scatter, bars, steps_plot


def _fmt(value, digits=1):
    """A number with ``digits`` decimals; "–" for none; anything else as (escaped) text, cut short."""
    if value is None:
        return "–"
    number = _number(value)
    return f"{number:.{digits}f}" if number is not None else str(value)[:40]


LOAD_SCRIPT = Script("""
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var ok = images.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.setAttribute("data-images-loaded", ok + "/" + images.length);
});
""")

STYLE = Markup("""body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; margin: 8px 0 24px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.plots img { margin-right: 16px; border: 1px solid #eee; max-width: 100%; }
.scene { border-top: 1px solid #ccc; padding: 8px 0; content-visibility: auto; contain-intrinsic-size: auto 160px; }
.strip { display: flex; gap: 4px; align-items: center; }
.strip span { width: 60px; font-size: 12px; color: #666; }
.strip img { height: 96px; }
.missing { color: #a33; font-size: 12px; }
.ci { color: #777; font-size: 11px; } .overlap { color: #c60; font-weight: bold; } .note { font-size: 12px; color: #666; }
.status-ok { color: #2a2; } .status-bad { color: #a33; } .not-comparable { color: #a60; }
""")

# More scenes than this in all, and each run's scene blocks go on a page of their own beside the
# index (run<i>_<name>.html): one page of 51 x 288 blocks is 28 MB that a browser cannot open.
INDEX_SCENES = 2000
RUN_PAGE_NAME = re.compile(r"^run\d+_[^/]*\.html$")

RUN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{ policy }}">
<title>{{ title }}: BVB report</title>
<style>
{{ style }}</style></head>
<body data-report="bvb-run">
<p><a href="index.html">← report</a></p>
{{ section }}
{% for script in scripts %}{{ script }}
{% endfor %}</body></html>
"""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{ policy }}">
<title>BVB report</title>
<style>
{{ style }}</style></head>
<body data-report="bvb">
<h1>BVB report</h1>
<p>{{ subtitle }}</p>
{{ live }}
<h2>Leaderboard</h2>
{{ table }}
<h2>Scores</h2>
<div class="plots"><img id="scatter" src="assets/{{ scatter }}" loading="lazy" alt="DV versus LS scatter">
<img id="by-type" src="assets/{{ bars }}" loading="lazy" alt="DV by question type"></div>
{{ steps }}
{{ runs }}
{% for script in scripts %}{{ script }}
{% endfor %}</body></html>
"""


def _with_ci(value, ci, key):
    low, high = ci.get(f"{key}_ci_low"), ci.get(f"{key}_ci_high")
    if value is None or low is None or high is None:
        return _fmt(value)
    return fragment("{} <span class='ci'>[{}, {}]</span>", _fmt(value), _fmt(low), _fmt(high))


def _trial_views(runs):
    """One row per group of NAME.trialK runs: the mean over trials and the interval of that mean."""
    by_path = {str(Path(v.path)): v for v in runs}
    rows = []
    for name, paths in trial_groups([v.path for v in runs]).items():
        views = [by_path[str(p)] for p in paths]
        overall = [v.overall for v in views if v.overall is not None]
        spread = f" ±{_fmt(max(overall) - min(overall))} range" if len(overall) > 1 else ""
        row = RunView(name=f"{name} (mean of {len(views)} trials{spread})", path=Path(paths[0]).parent / name)
        row.dv, row.ls, row.overall = mean_of([v.dv for v in views]), mean_of([v.ls for v in views]), mean_of(overall)
        row.cost = sum(v.cost for v in views) / len(views)
        row.scenes = views[0].scenes
        row.group, row.harness, row.effort = views[0].group, views[0].harness, views[0].effort
        row.ci = intervals(paths)
        rows.append(row)
    return rows


def _by_group(views: list[RunView]) -> list[tuple[int | None, RunView]]:
    """Views in rank order within their group (groups in order of first appearance), each with its rank or None:
    ranks restart per group; a view that differs from its group's first run follows its group, unranked."""
    groups: dict[str, list] = {}
    for view in views:
        groups.setdefault(view.group, []).append(view)
    ordered: list[tuple[int | None, RunView]] = []
    for members in groups.values():
        members = sorted(members, key=lambda v: (-(v.overall or 0.0), -(v.dv or 0.0)))
        ranked = [v for v in members if not v.differs]
        ordered += [(rank, v) for rank, v in enumerate(ranked, 1)] + [(None, v) for v in members if v.differs]
    return ordered


def _leaderboard_table(runs):
    # Overall when every run has it; DV alone otherwise (a run without LS has no Overall).
    ordered = _by_group(runs + _trial_views(runs))
    any_differs = any(v.differs for _, v in ordered)
    many_groups = len({v.group for _, v in ordered}) > 1
    head = Markup(
        "<tr><th>rank</th><th>run</th>" + ("<th>group</th>" if many_groups else "") +
        ("<th>differs from its group's first run</th>" if any_differs else "") +
        "<th>Overall [95% CI]</th><th>DV [95% CI]</th><th>LS [95% CI]</th>"
        "<th>cost $</th><th>scenes</th><th>failures</th><th>judge votes: DV spread</th></tr>"
    )  # fmt: skip
    body = []
    above = None
    for rank, view in ordered:
        if rank == 1:
            above = None  # a new group: its first row overlaps nothing above it
        failures = sum(1 for s in view.scenes if s.status not in ("submitted", "ok", "done"))
        key = "overall" if view.overall is not None else "dualVqa"
        interval = (view.ci.get(f"{key}_ci_low"), view.ci.get(f"{key}_ci_high"))
        overlap = None not in interval and above is not None and interval[0] <= above[1] and above[0] <= interval[1]
        mark = (
            Markup(" <span class='overlap' title='its 95% interval overlaps the row above'>≈</span>") if overlap else ""
        )
        above = interval if None not in interval else None
        votes = view.ci.get("votes")
        spread = f"{votes}: {_fmt(view.ci.get('dualVqa_vote_spread'))}" if votes else "–"
        body.append(
            fragment(
                "<tr><td>{}{}</td><td>{}{}{}</td>{}{}<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                "<td>{}</td></tr>",
                "–" if rank is None else rank, mark, view.name, _folder(view), _not_comparable_mark(view),
                fragment("<td class='group'>{}</td>", view.group) if many_groups else "",
                fragment("<td class='not-comparable'>{}</td>", view.differs) if any_differs else "",
                _with_ci(view.overall, view.ci, "overall"),
                _with_ci(view.dv, view.ci, "dualVqa"), _with_ci(view.ls, view.ci, "latentSim"), _fmt(view.cost, 3),
                len(view.scenes), failures, spread,
            )
        )  # fmt: skip
    notes = join(
        fragment("<p class='not-comparable'>* {}: {}</p>", v.name, v.comparability_note)
        for _, v in ordered
        if v.comparability_note
    )
    groups_note = (
        Markup("<p class='note'>Ranks restart in each group (agent protocol · scoring protocol): runs of two "
               "groups are never ranked together.</p>")
        if many_groups else ""
    )  # fmt: skip
    return fragment("<table id='leaderboard'>{}{}</table>{}{}", head, join(body), groups_note, notes)


def _versus_table(runs):
    """Each run that reproduces a published configuration beside that row: the difference and its interval."""
    shown = [v for v in runs if v.published]
    if not shown:
        return ""
    body = []
    for view in shown:
        match, lines = view.published
        scored = "" if match.get("group") == view.group else f"; scored {view.group}, published {match.get('group')}"
        for item in lines:
            ci = item["difference_ci"]
            body.append(fragment(
                "<tr><td>{}{}</td><td>{} ({}, {}{})</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                view.name, _folder(view), match.get("name"), match.get("effort") or "none", match.get("published"),
                scored, item["metric"], _fmt(item["published"], 2), _fmt(item["reproduced"], 2),
                f"{item['difference']:+.2f}", f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "–",
            ))  # fmt: skip
    return fragment(
        "<h2>Beside the published table</h2><table id='versus-published'><tr><th>run</th><th>published row</th>"
        "<th>metric</th><th>published</th><th>reproduced</th><th>difference</th><th>95% CI of the difference</th>"
        "</tr>{}</table><p class='note'>The published table has no interval: the difference's is the run's "
        "bootstrap interval less the published value.</p>",
        join(body),
    )


def _attach_published(runs, reference):
    """Match each run to its configuration's published row (overall.published_match) and keep the comparison."""
    published = read_references(reference)
    for view in runs:
        row = {"name": view.name if not view.effort else view.name.removesuffix(f" ({view.effort})"),
               "effort": view.effort, "harness": view.harness, "group": view.group, "overall": view.overall,
               "dualVqa": view.dv, "latentSim": view.ls, "costUsd": view.cost, **view.ci}  # fmt: skip
        match = published_match(row, published)
        view.published = (match, versus_published(row, match)) if match is not None else []


def _folder(view):
    """The run's folder beside its name when they differ: two runs of one model are told apart."""
    folder = Path(view.path).name
    if folder == view.name:
        return ""
    return fragment(" <small title='{}'>({})</small>", str(view.path), folder)


def _mark_differences(runs):
    """Set each run's differs (and its note) against its group's first run's identity, as the leaderboard does."""
    identities = [run_identity(view.path) for view in runs]
    first = {}
    for view, record in zip(runs, identities, strict=True):
        first.setdefault(view.group, record)
        view.differs = describe(differences(record, first[view.group]))
        if view.differs:
            note = f"differs from the first run in {view.differs}: not comparable, not ranked with it"
            view.comparability_note = "; ".join(n for n in (view.comparability_note, note) if n)


def _not_comparable_mark(view):
    if not view.comparability_note:
        return ""
    return fragment(" <span class='not-comparable' title='{}'>*</span>", view.comparability_note)


CI_NOTE = Markup(
    "<p class='note'>Brackets and bars: 95% bootstrap intervals over scenes (2000 resamples, seed 0); "
    "≈ marks a row whose interval overlaps the row above, so their order may be noise.</p>"
)


def _vsi_table(view, slug):
    """VSI-Bench's official aggregate on the sources and the renders, with its key names (0-100)."""
    if not view.vsi_bench:
        return ""
    source, render = view.vsi_bench.get("source") or {}, view.vsi_bench.get("render") or {}
    if not isinstance(source, dict) or not isinstance(render, dict):
        return ""
    keys = ["overall", *sorted(str(k) for k in {*source, *render} if k != "overall")]
    rows = join(
        fragment("<tr><td>{}</td><td>{}</td><td>{}</td></tr>", k, _fmt(source.get(k)), _fmt(render.get(k)))
        for k in keys
    )
    return fragment(
        "<h3>VSI-Bench (official scoring)</h3><table id='vsi-bench-{}'>"
        "<tr><th>metric</th><th>source</th><th>render</th></tr>{}</table>",
        slug, rows,
    )  # fmt: skip


def _copy_run_file(source, dest):
    """Copy a run's file into the report, never through a link (a link is reported, not followed); whether it did."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return False
            data = handle.read()
    except OSError:
        return False
    write_output(dest, data)
    return True


def _linked(run_root, path):
    """Whether ``path`` or a folder between it and the run's root is a symlink."""
    path, root = Path(path), Path(run_root)
    while path != root and path != path.parent:
        if path.is_symlink():
            return True
        path = path.parent
    return False


def _scene_key(view, row, live_scripts):
    """What a scene's page and assets are made from: its files' sizes and mtimes, its answers, the pages' scripts."""
    paths = [row.source, row.render, row.program, *(trajectory_inputs(row.trajectory) if row.trajectory else [])]
    return [
        stat_key(p for p in paths if p is not None),
        data_key([view.step_answers.get(row.scene), [s.hash for s in live_scripts], row.rules]),
    ]


@dataclass(frozen=True)
class _Output:
    """Where every scene block of a report writes, and what they share: the report's folder, the scene pages'
    scripts, the manifest of the files written and the image store the scene pages share by content."""

    out_dir: Path
    scripts: tuple[Script, ...]
    manifest: Manifest
    images: ImageStore

    @property
    def assets(self) -> Path:
        return self.out_dir / "assets"


def _scene_block(view, row, run_slug, shared, output):
    dest = output.assets / run_slug
    dest.mkdir(parents=True, exist_ok=True)
    scene_file = safe_name(row.scene)
    scene_id = f"{run_slug}/{row.scene}"
    key = _scene_key(view, row, output.scripts)
    fresh = output.manifest.fresh(scene_id, key)
    src_names, src_error = _shared_strip(row.source, output.assets, shared)
    ren_names, ren_error = _strip(row.render, dest, f"{scene_file}_ren")
    written = [dest / n for n in ren_names]  # the shared source strips are kept while any scene shows them
    links = []
    page_images = output.images.start_page() if not fresh else set()
    if row.trajectory is not None:
        page = _scene_page(view, row, run_slug, output, rebuild=not fresh)
        if page is not None:
            links.append(fragment("<a class='steps-link' href='{}'>steps</a>", page))
            written.append(output.out_dir / "scenes" / _page_name(run_slug, row.scene))
    for label, path in (("trajectory", row.trajectory), ("program", row.program)):
        if path is None:
            continue
        name = f"{scene_file}{''.join(path.suffixes[-2:]) if label == 'trajectory' else path.suffix}"
        if label == "trajectory":
            # The snapshot and its step log as one file (images as the paths the step page has copies of).
            inputs = [p for p in trajectory_inputs(path) if p.is_file()]
            copied = not any(_linked(view.path, p) for p in inputs)
            if copied and any(_stale(dest / name, p) for p in inputs):
                try:
                    write_output(dest / name, json.dumps(read_trajectory(path, inline=False)))
                except (OSError, ValueError):
                    copied = False
        else:
            copied = not _linked(view.path, path) and (
                not _stale(dest / name, path) or _copy_run_file(path, dest / name)
            )
        if copied:
            written.append(dest / name)
            links.append(fragment("<a href='{}'>{}</a>", page_url("assets", run_slug, name), label))
        else:
            links.append(fragment("<span class='missing'>{} (a link, not copied)</span>", label))
    dv = f"{row.dv_retained}/{row.dv_correct_source}" if row.dv_correct_source else "–"
    ok = row.status in ("submitted", "ok", "done")
    lines = [
        fragment("<div class='scene' id='{}-{}'>", run_slug, row.scene),
        fragment(
            "<h4>{} <span class='{}'>{}</span> {}</h4>",
            row.scene, "status-ok" if ok else "status-bad", row.status, row.stop_reason,
        ),
        fragment(
            "<p>DV retained {} · vision_sim {} · cost ${} · steps {} · render {} · {}</p>",
            dv, _fmt(row.vision_sim, 3), _fmt(row.cost, 3), row.turns if row.turns is not None else "–",
            row.render_status or "–", join(links, " · ") or "no trajectory",
        ),
        rules_html(row.rules, limit=RULES_SHOWN),
    ]  # fmt: skip
    strips = (("source", src_names, src_error, SHARED), ("render", ren_names, ren_error, run_slug))
    for label, names, error, folder in strips:
        # Lazy: an index of many runs holds tens of thousands of strip frames.
        images = join(
            fragment("<img src='{}' loading='lazy' decoding='async' alt='{}'>", page_url("assets", folder, n), label)
            for n in names
        )
        missing = fragment("<em class='missing'>{}</em>", error) if error else ""
        lines.append(fragment("<div class='strip strip-{}'><span>{}</span>{}{}</div>", label, label, images, missing))
    lines.append(Markup("</div>"))
    if not fresh:
        # The page's images are the report's (shared by content): kept while any page shows them.
        output.manifest.record(scene_id, key, written, [output.images.folder / n for n in page_images])
    return join(lines, "\n")


def _run_table(view, run_slug):
    """One row per scene of a run, each linking to its step page (written by _scene_block)."""
    rows = []
    for row in view.scenes:
        name = row.scene
        if row.trajectory is not None:
            href = page_url("scenes", _page_name(run_slug, row.scene))
            name = fragment("<a class='steps-link' href='{}'>{}</a>", href, row.scene)
        dv = f"{row.dv_retained}/{row.dv_correct_source}" if row.dv_correct_source else "–"
        rows.append(
            fragment(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                name, row.status, row.stop_reason or "–", row.turns if row.turns is not None else "–",
                _fmt(row.cost, 4), dv, _fmt(row.vision_sim, 3), row.render_status or "–",
            )
        )  # fmt: skip
    head = Markup(
        "<tr><th>scene (step page)</th><th>status</th><th>stopped by</th><th>steps</th><th>cost $</th>"
        "<th>DV retained</th><th>vision_sim</th><th>render</th></tr>"
    )
    return fragment("<table class='scenes' id='scenes-{}'>{}{}</table>", run_slug, head, join(rows))


def _page_name(run_slug, scene):
    return f"{run_slug}_{safe_name(scene)}.html"


def _scene_page(view, row, run_slug, output, rebuild):
    """The scene's step-by-step page under out_dir/scenes/, rebuilt only when its inputs changed (the manifest)."""
    page = output.out_dir / "scenes" / _page_name(run_slug, row.scene)
    if not rebuild and page.is_file():
        return page_url("scenes", page.name)
    try:
        build_scene_page(
            row.trajectory, page, back="../index.html", answers=view.step_answers.get(row.scene),
            scripts=output.scripts, images=output.images, rules=row.rules,
        )  # fmt: skip
    except (OSError, ValueError, RecursionError) as exc:
        log.warning("%s: no step page (%s)", row.trajectory, exc)
        return None
    return page_url("scenes", page.name)


def build_report(
    run_dirs: Iterable[str | Path],
    out_dir: str | Path,
    videos_root: str | Path | None = None,
    live: tuple[Any, dict[str, Any]] | None = None,
    memo: "ReportMemo | None" = None,
    reference: Iterable[str | Path] = (),
) -> Path:
    """Write out_dir/index.html (and its assets) for the given runs; return the page's path.

    ``live`` (from eval_bridge.pages.live): (progress section markup, {"index": scripts, "scene": scripts}),
    the scripts being html_page.Script tuples (their hashes go into the pages' policy). ``memo``
    (bvb view's): the runs whose fingerprint did not move keep their view and section. ``reference``:
    published CSVs; a run of a published configuration is shown beside its row.
    """
    live_html, scripts = live if live else ("", {})
    out_dir = Path(out_dir)
    # Read first: a manifest that is torn or of a newer format is refused before anything is written.
    manifest = memo.manifest_of(out_dir) if memo is not None else Manifest(out_dir)
    run_dirs, vgi_outputs = split_outputs(list(run_dirs))
    vgi_index = write_pages(vgi_outputs, out_dir)
    if vgi_index is not None and not run_dirs:
        return vgi_index  # only VGI output folders: their pages are the report
    assets = out_dir / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    runs = [_load(run_dir, videos_root, memo) for run_dir in runs_in(run_dirs)]
    shared: set[str] = set()
    images = ImageStore(assets / SHARED / "images")
    _mark_differences(runs)
    if reference:
        _attach_published(runs, list(reference))
    scatter, bars, steps_plot = _cached_plots(runs, assets)
    steps_html = (
        fragment(
            "<h2>Self-correction across steps</h2><div class='plots'><img id='steps' src='{}' loading='lazy' "
            "alt='self-correction across agent steps'></div>",
            page_url("assets", steps_plot),
        )
        if steps_plot
        else ""
    )
    sections = []
    scene_scripts = tuple(scripts.get("scene", ()))
    output = _Output(out_dir, scene_scripts, manifest, images)
    slugs = []
    for index, view in enumerate(runs):
        slug = f"run{index}_{safe_name(Path(view.path).name)}"
        slugs.append(slug)
        section_key = [memo.marks.get(str(view.path)) if memo else None, slug, view.name, view.comparability_note,
                       [s.hash for s in scene_scripts], str(videos_root)]  # fmt: skip
        kept = memo.sections.get(str(view.path)) if memo is not None and section_key[0] is not None else None
        if kept is not None and kept[0] == section_key:
            sections.append(kept[1])
            manifest.seen.update(kept[2])  # its scenes' files and images stay
            shared.update(kept[3])
            continue
        run_shared: set[str] = set()
        blocks = [_scene_block(view, row, slug, run_shared, output) for row in view.scenes]
        shared.update(run_shared)
        judge = fragment(" · judge {} ({})", view.judge, view.protocol) if view.judge else ""
        judge = join([judge, fragment(" · encoder {}", view.encoder) if view.encoder else ""])
        note = fragment("<p class='not-comparable'>{}</p>", view.comparability_note) if view.comparability_note else ""
        sections.append(
            join([
                fragment("<h2>{}{}</h2><p>{}{}</p>", view.name, _not_comparable_mark(view), view.path, judge),
                note, _run_table(view, slug), _vsi_table(view, slug), join(blocks, "\n"),
            ])
        )  # fmt: skip
        if memo is not None and section_key[0] is not None:
            memo.sections[str(view.path)] = (section_key, sections[-1], [f"{slug}/{r.scene}" for r in view.scenes],
                                             run_shared)  # fmt: skip
    page_scripts = (LOAD_SCRIPT, *scripts.get("index", ()))
    pages = {}
    if sum(len(view.scenes) for view in runs) > INDEX_SCENES:
        for slug, view, section in zip(slugs, runs, sections, strict=True):
            pages[f"{slug}.html"] = render(
                RUN_PAGE, policy=csp(page_scripts), style=STYLE, title=view.name, section=section, scripts=page_scripts
            )
        sections = [
            fragment(
                "<h2>Runs</h2><p>{} scenes in all: each run's scenes are on its own page.</p><ul id='run-pages'>{}</ul>",
                sum(len(view.scenes) for view in runs),
                join(
                    fragment(
                        "<li><a class='run-page' href='{}'>{}</a> · {} scenes</li>",
                        page_url(name),
                        view.name,
                        len(view.scenes),
                    )  # fmt: skip
                    for name, view in zip(pages, runs, strict=True)
                ),
            )
        ]
    _write_run_pages(out_dir, pages)
    page = render(
        PAGE,
        policy=csp(page_scripts),
        style=STYLE,
        subtitle=f"{len(runs)} run(s): {', '.join(v.name for v in runs)}",
        table=_leaderboard_table(runs) + _versus_table(runs),
        scatter=scatter,
        bars=bars,
        steps=CI_NOTE + steps_html + vgi_link(vgi_index, out_dir),
        live=live_html,
        runs=join(sections, "\n"),
        scripts=page_scripts,
    )
    manifest.prune()  # the files of scenes (and runs) no longer shown go
    _prune_shared(assets, shared)
    images.prune({Path(name).name for name in manifest.shared_in_use()})
    manifest.save()
    index_page = out_dir / "index.html"
    if not _same_text(index_page, page):
        write_output(index_page, page)
    return index_page


class ReportMemo:
    """What a builder that rebuilds one folder again and again (bvb view) keeps between builds.

    The caller sets ``marks`` (run path -> a fingerprint of the run's files, eval_bridge.pages.live's)
    before each build; a run whose mark did not move keeps its loaded view and its section of the
    index, so a new step of one scene rebuilds one run's section, not 51 (its scenes are still
    marked seen, so nothing of theirs is pruned). Only for a folder that nothing else writes.
    """

    def __init__(self) -> None:
        self.marks: dict[str, Any] = {}
        self.views: dict[str, tuple[Any, RunView]] = {}
        self.sections: dict[str, tuple[list[Any], Any, list[str], set[str]]] = {}
        self._manifest: Manifest | None = None

    def manifest_of(self, out_dir: Path) -> Manifest:
        """The folder's manifest, read once and kept (its ``seen`` emptied for the new build)."""
        if self._manifest is None or self._manifest.out_dir != out_dir:
            self._manifest = Manifest(out_dir)
        self._manifest.seen = set()
        return self._manifest


def _load(run_dir, videos_root, memo):
    """load_run, or the view a memo kept of a run whose files did not change."""
    mark = memo.marks.get(str(run_dir)) if memo is not None else None
    if mark is None:
        return load_run(run_dir, videos_root)
    kept = memo.views.get(str(run_dir))
    if kept is not None and kept[0] == (mark, str(videos_root)):
        return replace(kept[1])  # a copy: _mark_differences sets fields on the one it is given
    view = load_run(run_dir, videos_root)
    memo.views[str(run_dir)] = ((mark, str(videos_root)), replace(view))
    return view


def _write_run_pages(out_dir, pages):
    """Write the run pages whose text changed; remove the run pages (only names this module gives) not in ``pages``."""
    for name, text in pages.items():
        if not _same_text(out_dir / name, text):
            write_output(out_dir / name, text)
    for entry in os.scandir(out_dir):
        if RUN_PAGE_NAME.match(entry.name) and entry.name not in pages:
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def _same_text(path, text):
    """Whether ``path`` already holds ``text`` (a rebuild that changed nothing rewrites nothing)."""
    try:
        return path.read_text() == text
    except (OSError, UnicodeDecodeError):
        return False
