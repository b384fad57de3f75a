"""A step-by-step HTML page of one scene's trajectory: what the agent said, did and saw, per step.

The page is static (works from file:// with no server): the images the agent received are
decoded once from the trajectory's data URLs into files next to the page and lazy-loaded,
python actions are highlighted with Pygments, and each step shows its tokens, cost, model
and harness time with running totals. Where ``eval_bridge steps`` has run, the step's
answers and their correctness are shown too.
"""

import base64
import binascii
import json
import logging
import os
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from bvb_addon.agent.actions import FormatError, parse_action
from bvb_addon.errors import BadFileError
from bvb_addon.run_dir import TRAJECTORY_IMAGES_SUFFIX
from bvb_addon.run_view import finding_line, replay_line, rules_headline
from bvb_addon.trajectory import read_trajectory

from .highlight_cache import HighlightCache, default_folder
from .html_page import Markup, Script, csp, fragment, join, page_url, render
from .report_images import ImageStore
from .report_manifest import write_output

log = logging.getLogger(__name__)

STYLE = "default"
FORMATTER = HtmlFormatter(cssclass="hl", nowrap=False, style=STYLE)
LEXER = PythonLexer()
MIME_SUFFIX = {"image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp", "image/gif": ".gif"}
DATA_URL = re.compile(r"^data:(image/[a-z+.-]+);base64,(.*)$", re.S)
SECTION = re.compile(r"^(stdout|stderr|traceback):\n", re.M)
IMAGE_FILE = re.compile(r"^[^/\\]+" + re.escape(TRAJECTORY_IMAGES_SUFFIX) + r"/\d{5}-\d+\.(jpg|png|webp|gif|img)$")


def _step_messages(messages):
    """[(assistant text, observation message or None)] in order, one per model reply."""
    pairs = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        observation = following if following is not None and following.get("role") == "user" else None
        content = message.get("content")
        pairs.append((content if isinstance(content, str) else json.dumps(content), observation))
    return pairs


def _image_file(base, url):
    """The trajectory's image file a step-log URL names (``<scene>.images/NNNNN-K.jpg``), or None.

    Only a plain file inside its ``*.images`` folder of the trajectories folder: a hostile URL
    (``..``, an absolute path, a link) names nothing.
    """
    if base is None or not isinstance(url, str) or not IMAGE_FILE.match(url):
        return None
    folder, name = url.split("/")
    if folder.startswith(".") or name.startswith("."):  # no hidden folder, no "..images" trick
        return None
    return Path(base) / folder / name


def _images_of(message, base=None):
    """The image parts of an observation message: [(mime, base64 payload or None, [w, h] or None, file or None)].

    A data URL carries the image; a path (the step log's, read with ``inline=False``) names its
    file under ``base``, the trajectories folder.
    """
    if message is None or not isinstance(message.get("content"), list):
        return []
    found = []
    for part in message["content"]:
        if not isinstance(part, dict) or part.get("type") != "image_url" or not isinstance(part.get("image_url"), dict):
            continue
        url = part["image_url"].get("url", "")
        match = DATA_URL.match(url) if isinstance(url, str) else None
        if match:
            found.append((match.group(1), match.group(2), part.get("_size"), None))
            continue
        source = _image_file(base, url)
        if source is not None:
            mime = next((m for m, suffix in MIME_SUFFIX.items() if source.suffix == suffix), "image/jpeg")
            found.append((mime, None, part.get("_size"), source))
    return found


def write_images(
    message: dict[str, Any] | None, store: ImageStore, base: str | Path | None = None
) -> list[tuple[str, str, Any]]:
    """Each of an observation's images into the store (once per content); return [(full, thumbnail, size)].

    A data URL is decoded; an image file of the step log is linked or copied (no base64 round trip).
    """
    entries = []
    for index, (mime, payload, size, source) in enumerate(_images_of(message, base)):
        suffix = MIME_SUFFIX.get(mime, ".img")
        if source is not None:
            names = store.add_file(source, suffix)
            if names is None:
                log.warning("%s: image %d (%s) is missing or a link; skipped", store.folder, index, source)
                continue
        else:
            try:
                data = base64.b64decode(payload, validate=False)
            except (binascii.Error, ValueError):
                log.warning("%s: image %d is not valid base64; skipped", store.folder, index)
                continue
            names = store.add_bytes(data, suffix)
        entries.append((*names, size))
    return entries


def split_reply(text: str) -> tuple[str, str | None, str]:
    """(reasoning prose, action kind, action body) of a model reply; kind None when it has no valid action."""
    try:
        action = parse_action(text)
    except FormatError:
        return text.strip(), None, ""
    if action.kind == "done":
        lines = text.strip().splitlines()
        return "\n".join(lines[:-1]).strip(), "done", ""
    # The prose around the one fenced block is the model's reasoning.
    prose = re.sub(r"^```[^\n]*\n.*?^```[ \t]*$", "", text, count=1, flags=re.S | re.M)
    return prose.strip(), action.kind, action.body


def split_observation(text: str) -> dict[str, str]:
    """{head, stdout, stderr, traceback, summary} of a python observation's text (missing parts absent)."""
    parts = {}
    body, _, summary = text.partition("\nScene summary:\n")
    if summary:
        parts["summary"] = summary.strip()
    head, *rest = SECTION.split(body)
    parts["head"] = head.strip()
    for name, content in zip(rest[0::2], rest[1::2], strict=True):
        parts[name] = content.rstrip("\n")
    return parts


def _summary_html(text):
    """The scene summary as a short list (counts, camera, what changed), or the raw text when it is cut."""
    try:
        summary = json.loads(text)
    except json.JSONDecodeError:
        summary = None
    if not isinstance(summary, dict):
        return fragment("<pre class='summary'>{}</pre>", text)
    items = []
    shown = ("object_count", "objects_by_type", "materials", "frame_range", "fps", "resolution", "camera", "bounds")
    for key in shown:
        if key in summary:
            items.append(fragment("<li><b>{}</b> {}</li>", key, json.dumps(summary[key])))
    changes = summary.get("changes") if isinstance(summary.get("changes"), dict) else {}
    counts = changes.get("counts")
    # The sandbox writes the three totals as [added, removed, modified] (names are capped at 20 each).
    if isinstance(counts, list):
        counts = dict(zip(("added", "removed", "modified"), counts, strict=False))
    for kind in ("added", "removed", "modified"):
        names = changes.get(kind)
        if names:
            names = names if isinstance(names, list) else [names]
            count = counts.get(kind, len(names)) if isinstance(counts, dict) else len(names)
            items.append(
                fragment("<li class='change-{}'><b>{}</b> ({}) {}</li>", kind, kind, count, ", ".join(map(str, names)))
            )
    others = {k: v for k, v in summary.items() if k not in shown and k != "changes"}
    if others:
        items.append(fragment("<li><b>other</b> {}</li>", json.dumps(others)))
    return fragment("<ul class='summary'>{}</ul>", join(items))


def _list(value):
    return value if isinstance(value, list) else []


def _number(value):
    """A float of a field that should hold a number, or None (a hostile file can put anything there)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or abs(value) == float("inf"):
        return None
    return float(value)


def _count(value):
    number = _number(value)
    return int(number) if number is not None else 0


def _money(value):
    value = _number(value)
    return f"${value:.4f}" if value is not None else "–"


def _seconds(value):
    value = _number(value)
    return f"{value:.2f} s" if value is not None else "–"


def _tokens(usage):
    usage = usage if isinstance(usage, dict) else {}
    return (
        _count(usage.get("input_tokens")),
        _count(usage.get("cached_input_tokens")),
        _count(usage.get("output_tokens")),
    )


def _answers_html(answers):
    if not answers:
        return ""
    right = sum(1 for a in answers if a.get("correct"))
    rows = join(
        fragment(
            "<tr class='{}'><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            "right" if a.get("correct") else "wrong", a.get("id", ""), a.get("question_type", ""), a.get("answer", ""),
            "✓" if a.get("correct") else "✗",
        )
        for a in answers
    )  # fmt: skip
    return fragment(
        "<details class='answers'><summary>answers at this step: {}/{} correct</summary>"
        "<table><tr><th>question</th><th>type</th><th>answer</th><th></th></tr>{}</table></details>",
        right, len(answers), rows,
    )  # fmt: skip


def _end_step(steps, status):
    """The index of the step where the scene ended: its accepted DONE, else the last step."""
    if not steps:
        return None
    if status == "submitted":
        for index in range(len(steps) - 1, -1, -1):
            if steps[index].get("action") == "done" and steps[index].get("status") == "ok":
                return index
    return len(steps) - 1


LOAD_SCRIPT = Script("""
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var ok = images.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  var broken = images.filter(function (i) { return i.complete && i.naturalWidth === 0 && i.loading !== "lazy"; }).length;
  var nav = performance.getEntriesByType("navigation")[0];
  document.body.setAttribute("data-images-loaded", ok + "/" + images.length);
  document.body.setAttribute("data-images-broken", String(broken));
  document.body.setAttribute("data-load-ms", String(Math.round(nav ? nav.loadEventStart : performance.now())));
  document.body.setAttribute("data-ready-ms", String(Math.round(nav ? nav.domContentLoadedEventEnd : 0)));
});
""")

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{ policy }}">
<title>{{ scene }}: trajectory</title>
<style>
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
.step { border-top: 1px solid #ccc; padding: 8px 0; content-visibility: auto; contain-intrinsic-size: auto 400px; }
.step.end { background: #f3f8ff; }
.meta { font-size: 12px; color: #555; }
.status-ok { color: #2a2; } .status-bad { color: #a33; }
pre { background: #f6f6f6; padding: 6px; overflow-x: auto; font-size: 12px; white-space: pre-wrap; }
.images img { margin: 2px; border: 1px solid #ddd; height: 128px; width: auto; }
ul.summary { font-size: 12px; margin: 4px 0; padding-left: 0; } ul.summary li { display: inline-block; margin-right: 14px; } .change-added { color: #2a2; } .change-removed { color: #a33; }
.ended { font-weight: bold; color: #036; }
.rules ul { font-size: 12px; margin: 2px 0 8px; } .rules-broken li { color: #a33; } .rules-info li { color: #555; }
table { border-collapse: collapse; font-size: 12px; } td, th { border: 1px solid #ddd; padding: 2px 6px; }
tr.right td { color: #2a2; } tr.wrong td { color: #a33; }
{{ pygments }}
</style></head>
<body data-page="bvb-trajectory">
<p><a href="{{ back }}">← report</a></p>
<h1>{{ scene }}</h1>
<p>{{ headline }}</p>
<p class="meta">{{ totals }}</p>
{{ rules }}
{{ steps }}
{% for script in scripts %}{{ script }}
{% endfor %}</body></html>
"""


def _pygments(code):
    return highlight(code, LEXER, FORMATTER)


_CACHES: dict[Path, HighlightCache] = {}


def highlight_cache() -> HighlightCache:
    """The on-disk cache of highlighted blocks in its folder now (BVB_HIGHLIGHT_CACHE may move it)."""
    folder = default_folder()
    if folder not in _CACHES:
        _CACHES[folder] = HighlightCache(_pygments, STYLE, f"{type(LEXER).__name__} cssclass=hl nowrap=0", folder)
    return _CACHES[folder]


@lru_cache(maxsize=8192)
def highlighted(code: str) -> str:
    """Pygments' HTML of a code block: once per distinct block in a process, and once ever on this machine
    while the disk cache keeps it (75% of a cold build was highlighting; bvb view redraws a growing page)."""
    return highlight_cache().get(code)


def rules_html(row: dict | None, limit: int | None = None) -> Markup:
    """A scene's rules row (scene_rules.jsonl) as HTML: the headline, the replay figures, each violation (which
    rule, which datablock, what), then the information the prompt does not forbid; ``limit`` caps the lists."""
    if row is None:
        return Markup("")
    lines = [fragment("<p class='rules-head'><b>{}</b></p>", rules_headline(row))]
    if replay_line(row):
        lines.append(fragment("<p class='rules-replay'>{}</p>", replay_line(row)))
    for kind, label in (("violations", "rules-broken"), ("info", "rules-info")):
        found = [f for f in row.get(kind) or [] if isinstance(f, dict)]
        shown = found if limit is None else found[:limit]
        items = [fragment("<li>{}</li>", finding_line(f)) for f in shown]
        if len(found) > len(shown):
            items.append(fragment("<li>{} more on the scene's page</li>", len(found) - len(shown)))
        if items:
            title = "violations" if kind == "violations" else "information (not forbidden)"
            lines.append(fragment("<ul class='{}' title='{}'>{}</ul>", label, title, join(items)))
    return fragment("<div class='rules'>{}</div>", join(lines, "\n"))


def _step_html(record, reply, observation, images, totals, answers, end_note):
    """One step's block; ``images`` are [(URL, thumbnail URL, size)], ``end_note`` is None but where the scene ended."""
    number = record.get("step")
    status = str(record.get("status") or "")
    reasoning, kind, body = split_reply(reply)
    kind = record.get("action") or kind
    good = status in ("ok", "")
    parts = [
        fragment("<div class='step{}' id='step-{}'>", "" if end_note is None else " end", number),
        fragment(
            "<h3>step {} · {} · <span class='{}'>{}</span></h3>",
            number, kind or "no action", "status-ok" if good else "status-bad", status or "–",
        ),
    ]  # fmt: skip
    usage = record.get("usage") or {}
    tokens_in, cached, tokens_out = _tokens(usage)
    sandbox = record.get("sandbox_seconds")
    parts.append(
        fragment(
            "<p class='meta'>tokens in {} (cached {}) out {} · cost {} · model {} · harness {}{}"
            " — so far: tokens in {} out {} · cost {} · model {} · harness {}</p>",
            tokens_in, cached, tokens_out, _money(record.get("cost")), _seconds(record.get("model_seconds")),
            _seconds(record.get("harness_seconds")), " · sandbox " + _seconds(sandbox) if sandbox is not None else "",
            totals["in"], totals["out"], _money(totals["cost"]), _seconds(totals["model"]), _seconds(totals["harness"]),
        )
    )  # fmt: skip
    if reasoning:
        parts.append(
            fragment(
                "<details class='reasoning'><summary>model text ({} characters)</summary><pre>{}</pre></details>",
                len(reasoning), reasoning,
            )
        )  # fmt: skip
    if kind == "python":
        code = record.get("code") if isinstance(record.get("code"), str) else body
        # Pygments escapes the code it highlights: its output is the one markup made from run data.
        parts.append(fragment("<div class='code'>{}</div>", Markup(highlighted(code))))
    elif kind in ("frames", "render"):
        parts.append(fragment("<pre class='request'>{}: {}</pre>", kind, body))
    if observation is not None:
        content = observation.get("content")
        if isinstance(content, list):
            content = " ".join(
                str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
            )
        text = content if isinstance(content, str) else ""
        if kind == "python":
            sections = split_observation(text)
            parts.append(fragment("<p class='observation'>{}</p>", sections.get("head", "")))
            for name in ("stdout", "stderr", "traceback"):
                if sections.get(name):
                    parts.append(fragment("<div class='{}'><b>{}</b><pre>{}</pre></div>", name, name, sections[name]))
            if sections.get("summary"):
                parts.append(_summary_html(sections["summary"]))
        else:
            parts.append(fragment("<pre class='observation'>{}</pre>", text))
    if images:
        tags = []
        for full, thumb, size in images:
            dims = ""
            if isinstance(size, list | tuple) and len(size) == 2 and all(_number(v) is not None for v in size):
                dims = fragment(" width='{}' height='{}'", int(size[0]), int(size[1]))
            # The thumbnail on the page; the full image one click away.
            tags.append(
                fragment(
                    "<a href='{}'><img src='{}' loading='lazy' decoding='async'{} alt='step {} image'></a>",
                    full, thumb, dims, number,
                )
            )  # fmt: skip
        parts.append(fragment("<div class='images'>{}</div>", join(tags)))
    parts.append(_answers_html(answers))
    if end_note is not None:
        parts.append(fragment("<p class='ended'>{}</p>", end_note))
    parts.append(Markup("</div>"))
    return join(parts, "\n")


def build_scene_page(
    trajectory: str | Path | dict[str, Any],
    page: str | Path,
    back: str = "index.html",
    answers: Iterable[dict[str, Any]] | None = None,
    scripts: Iterable[Script] = (),
    images: ImageStore | None = None,
    rules: dict | None = None,
) -> Path:
    """Write the step-by-step page of a trajectory (a path or its dict) at ``page``; return the page's path.

    Images (each once, with its thumbnail) go to ``images`` (a report_images.ImageStore; the
    report's is shared by all its pages), else to ``<page stem>_files/`` next to the page;
    ``answers`` are the scene's rows of steps_answers.jsonl, if any; ``scripts`` are more of the
    pages' own scripts (bvb view's reload); ``rules`` the scene's scene_rules.jsonl row, shown whole.
    """
    page = Path(page)
    base = None
    if not isinstance(trajectory, dict):
        path = trajectory
        # The snapshot and its step log; images stay files, copied to the page's folder once.
        base = Path(trajectory).parent
        trajectory = read_trajectory(trajectory, inline=False)
        if not isinstance(trajectory, dict):
            raise BadFileError(f"trajectory {path} is not a JSON object; rerun the scene or delete the file")
    store = images if images is not None else ImageStore(page.parent / f"{page.stem}_files")
    img_dir = Path(os.path.relpath(store.folder, page.parent)).parts  # the page's URL of the store
    steps = [s for s in _list(trajectory.get("steps")) if isinstance(s, dict)]
    messages = [m for m in _list(trajectory.get("messages")) if isinstance(m, dict)]
    pairs = _step_messages(messages)
    by_step: dict[int, list[dict[str, Any]]] = {}
    for row in answers or []:
        by_step.setdefault(_count(row.get("step", -1)), []).append(row)
    status = str(trajectory.get("status") or "unknown")
    end = _end_step(steps, status) if status != "running" else None
    end_note = f"scene {status} here: {trajectory.get('stop_reason') or ''} — {trajectory.get('reason') or ''}"
    totals = {"in": 0, "out": 0, "cost": 0.0, "model": 0.0, "harness": 0.0}
    blocks = []
    for index, record in enumerate(steps):
        reply, observation = pairs[index] if index < len(pairs) else ("", None)
        tokens_in, _, tokens_out = _tokens(record.get("usage"))
        totals["in"] += tokens_in
        totals["out"] += tokens_out
        for key, field in (("cost", "cost"), ("model", "model_seconds"), ("harness", "harness_seconds")):
            totals[key] += _number(record.get(field)) or 0.0
        number = _count(record.get("step", index + 1))
        shown = write_images(observation, store, base) if observation else []
        links = [(page_url(*img_dir, full), page_url(*img_dir, thumb), size) for full, thumb, size in shown]
        blocks.append(
            _step_html(
                record, reply, observation, links, dict(totals), by_step.get(number, []),
                end_note if index == end else None,
            )
        )  # fmt: skip
    scene = str(trajectory.get("scene") or page.stem)
    tokens = trajectory["tokens"] if isinstance(trajectory.get("tokens"), dict) else {}
    headline = fragment(
        "status <b>{}</b> {} · {}", status, trajectory.get("stop_reason") or "", trajectory.get("reason") or ""
    )
    summary = fragment(
        "{} steps · frames seen {} · format errors {} · cost {} · tokens in {} out {} · runtime {} · model {} · "
        "updated {}",
        len(steps), trajectory.get("frames_seen", 0), trajectory.get("format_errors", 0),
        _money(trajectory.get("cost")), tokens.get("input", 0), tokens.get("output", 0),
        _seconds(trajectory.get("runtime")), _seconds(trajectory.get("model_seconds")), trajectory.get("updated", ""),
    )  # fmt: skip
    scripts = (LOAD_SCRIPT, *scripts)
    text = render(
        PAGE,
        policy=csp(scripts),
        pygments=Markup(FORMATTER.get_style_defs(".hl")),
        back=back,
        scene=scene,
        headline=headline,
        totals=summary,
        rules=rules_html(rules),
        steps=join(blocks, "\n") or Markup("<p>no steps yet</p>"),
        scripts=scripts,
    )
    write_output(page, text)
    return page
