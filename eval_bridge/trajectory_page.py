"""A step-by-step HTML page of one scene's trajectory: what the agent said, did and saw, per step.

The page is static (works from file:// with no server): the images the agent received are
decoded once from the trajectory's data URLs into files next to the page and lazy-loaded,
python actions are highlighted with Pygments, and each step shows its tokens, cost, model
and harness time with running totals. Where ``eval_bridge steps`` has run, the step's
answers and their correctness are shown too.
"""

import base64
import binascii
import html
import json
import logging
import re
from pathlib import Path

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from bvb_addon.agent.actions import FormatError, parse_action
from bvb_addon.atomic import write_bytes_atomic, write_text_atomic

log = logging.getLogger(__name__)

FORMATTER = HtmlFormatter(cssclass="hl", nowrap=False)
LEXER = PythonLexer()
MIME_SUFFIX = {"image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp", "image/gif": ".gif"}
DATA_URL = re.compile(r"^data:(image/[a-z+.-]+);base64,(.*)$", re.S)
SECTION = re.compile(r"^(stdout|stderr|traceback):\n", re.M)


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


def _images_of(message):
    """The image parts of an observation message: [(mime, base64 payload, [w, h] or None)]."""
    if message is None or not isinstance(message.get("content"), list):
        return []
    found = []
    for part in message["content"]:
        if part.get("type") != "image_url":
            continue
        url = (part.get("image_url") or {}).get("url", "")
        match = DATA_URL.match(url)
        if match:
            found.append((match.group(1), match.group(2), part.get("_size")))
    return found


def write_images(message, dest, prefix):
    """Decode an observation's images into dest once (kept when already there); return their entries."""
    entries = []
    for index, (mime, payload, size) in enumerate(_images_of(message)):
        name = f"{prefix}_{index}{MIME_SUFFIX.get(mime, '.img')}"
        path = dest / name
        if not path.is_file():
            try:
                write_bytes_atomic(path, base64.b64decode(payload, validate=False))
            except (binascii.Error, ValueError):
                log.warning("%s: image %d of %s is not valid base64; skipped", dest, index, prefix)
                continue
        entries.append((name, size))
    return entries


def split_reply(text):
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


def split_observation(text):
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
        return f"<pre class='summary'>{html.escape(text)}</pre>"
    if not isinstance(summary, dict):
        return f"<pre class='summary'>{html.escape(text)}</pre>"
    items = []
    shown = ("object_count", "objects_by_type", "materials", "frame_range", "fps", "resolution", "camera", "bounds")
    for key in shown:
        if key in summary:
            items.append(f"<li><b>{key}</b> {html.escape(json.dumps(summary[key]))}</li>")
    changes = summary.get("changes") or {}
    counts = changes.get("counts")
    # The sandbox writes the three totals as [added, removed, modified] (names are capped at 20 each).
    if isinstance(counts, list):
        counts = dict(zip(("added", "removed", "modified"), counts, strict=False))
    for kind in ("added", "removed", "modified"):
        if changes.get(kind):
            names = ", ".join(str(n) for n in changes[kind])
            count = (counts or {}).get(kind, len(changes[kind]))
            items.append(f"<li class='change-{kind}'><b>{kind}</b> ({count}) {html.escape(names)}</li>")
    others = {k: v for k, v in summary.items() if k not in shown and k != "changes"}
    if others:
        items.append(f"<li><b>other</b> {html.escape(json.dumps(others))}</li>")
    return f"<ul class='summary'>{''.join(items)}</ul>"


def _money(value):
    return f"${value:.4f}" if value is not None else "–"


def _seconds(value):
    return f"{value:.2f} s" if value is not None else "–"


def _tokens(usage):
    return (
        int(usage.get("input_tokens", 0) or 0),
        int(usage.get("cached_input_tokens", 0) or 0),
        int(usage.get("output_tokens", 0) or 0),
    )


def _answers_html(answers):
    if not answers:
        return ""
    right = sum(1 for a in answers if a.get("correct"))
    rows = "".join(
        f"<tr class='{'right' if a.get('correct') else 'wrong'}'><td>{html.escape(str(a.get('id', '')))}</td>"
        f"<td>{html.escape(str(a.get('question_type', '')))}</td><td>{html.escape(str(a.get('answer', '')))}</td>"
        f"<td>{'✓' if a.get('correct') else '✗'}</td></tr>"
        for a in answers
    )
    return (
        f"<details class='answers'><summary>answers at this step: {right}/{len(answers)} correct</summary>"
        f"<table><tr><th>question</th><th>type</th><th>answer</th><th></th></tr>{rows}</table></details>"
    )


def _end_step(steps, status):
    """The index of the step where the scene ended: its accepted DONE, else the last step."""
    if not steps:
        return None
    if status == "submitted":
        for index in range(len(steps) - 1, -1, -1):
            if steps[index].get("action") == "done" and steps[index].get("status") == "ok":
                return index
    return len(steps) - 1


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }}
.step {{ border-top: 1px solid #ccc; padding: 8px 0; content-visibility: auto; contain-intrinsic-size: auto 400px; }}
.step.end {{ background: #f3f8ff; }}
.meta {{ font-size: 12px; color: #555; }}
.status-ok {{ color: #2a2; }} .status-bad {{ color: #a33; }}
pre {{ background: #f6f6f6; padding: 6px; overflow-x: auto; font-size: 12px; white-space: pre-wrap; }}
.images img {{ margin: 2px; border: 1px solid #ddd; height: 128px; width: auto; }}
ul.summary {{ font-size: 12px; margin: 4px 0; padding-left: 0; }} ul.summary li {{ display: inline-block; margin-right: 14px; }} .change-added {{ color: #2a2; }} .change-removed {{ color: #a33; }}
.ended {{ font-weight: bold; color: #036; }}
table {{ border-collapse: collapse; font-size: 12px; }} td, th {{ border: 1px solid #ddd; padding: 2px 6px; }}
tr.right td {{ color: #2a2; }} tr.wrong td {{ color: #a33; }}
{pygments}
</style></head>
<body data-page="bvb-trajectory">
<p><a href="{back}">← report</a></p>
<h1>{scene}</h1>
<p>{headline}</p>
<p class="meta">{totals}</p>
{steps}
<script>
window.addEventListener("load", function () {{
  var images = Array.prototype.slice.call(document.images);
  var ok = images.filter(function (i) {{ return i.complete && i.naturalWidth > 0; }}).length;
  var broken = images.filter(function (i) {{ return i.complete && i.naturalWidth === 0 && i.loading !== "lazy"; }}).length;
  var nav = performance.getEntriesByType("navigation")[0];
  document.body.setAttribute("data-images-loaded", ok + "/" + images.length);
  document.body.setAttribute("data-images-broken", String(broken));
  document.body.setAttribute("data-load-ms", String(Math.round(nav ? nav.loadEventStart : performance.now())));
  document.body.setAttribute("data-ready-ms", String(Math.round(nav ? nav.domContentLoadedEventEnd : 0)));
}});
</script>
{script}
</body></html>
"""


def _step_html(record, reply, observation, images, img_dir, totals, answers, ended, end_note):
    number = record.get("step")
    status = str(record.get("status") or "")
    reasoning, kind, body = split_reply(reply)
    kind = record.get("action") or kind
    good = status in ("ok", "")
    parts = [
        f"<div class='step{' end' if ended else ''}' id='step-{number}'>",
        f"<h3>step {number} · {html.escape(kind or 'no action')} · "
        f"<span class='{'status-ok' if good else 'status-bad'}'>{html.escape(status or '–')}</span></h3>",
    ]
    usage = record.get("usage") or {}
    tokens_in, cached, tokens_out = _tokens(usage)
    parts.append(
        f"<p class='meta'>tokens in {tokens_in} (cached {cached}) out {tokens_out} · cost {_money(record.get('cost'))} · "
        f"model {_seconds(record.get('model_seconds'))} · harness {_seconds(record.get('harness_seconds'))}"
        f"{' · sandbox ' + _seconds(record.get('sandbox_seconds')) if record.get('sandbox_seconds') is not None else ''}"
        f" — so far: tokens in {totals['in']} out {totals['out']} · cost {_money(totals['cost'])} · "
        f"model {_seconds(totals['model'])} · harness {_seconds(totals['harness'])}</p>"
    )
    if reasoning:
        parts.append(
            f"<details class='reasoning'><summary>model text ({len(reasoning)} characters)</summary>"
            f"<pre>{html.escape(reasoning)}</pre></details>"
        )
    if kind == "python":
        parts.append(f"<div class='code'>{highlight(record.get('code') or body, LEXER, FORMATTER)}</div>")
    elif kind in ("frames", "render"):
        parts.append(f"<pre class='request'>{html.escape(kind)}: {html.escape(body)}</pre>")
    if observation is not None:
        content = observation.get("content")
        text = (
            content
            if isinstance(content, str)
            else " ".join(p.get("text", "") for p in content if p.get("type") == "text")
        )
        if kind == "python":
            sections = split_observation(text)
            parts.append(f"<p class='observation'>{html.escape(sections.get('head', ''))}</p>")
            for name in ("stdout", "stderr", "traceback"):
                if sections.get(name):
                    parts.append(f"<div class='{name}'><b>{name}</b><pre>{html.escape(sections[name])}</pre></div>")
            if sections.get("summary"):
                parts.append(_summary_html(sections["summary"]))
        else:
            parts.append(f"<pre class='observation'>{html.escape(text)}</pre>")
    if images:
        tags = []
        for name, size in images:
            dims = f" width='{int(size[0])}' height='{int(size[1])}'" if size and len(size) == 2 else ""
            tags.append(
                f"<a href='{img_dir}/{html.escape(name)}'><img src='{img_dir}/{html.escape(name)}' loading='lazy'"
                f" decoding='async'{dims} alt='step {number} image'></a>"
            )
        parts.append(f"<div class='images'>{''.join(tags)}</div>")
    parts.append(_answers_html(answers))
    if ended:
        parts.append(f"<p class='ended'>{html.escape(end_note)}</p>")
    parts.append("</div>")
    return "\n".join(parts)


def build_scene_page(trajectory, page, back="index.html", answers=None, script=""):
    """Write the step-by-step page of a trajectory (a path or its dict) at ``page``; return the page's path.

    Images go to ``<page stem>_files/`` next to the page; ``answers`` are the scene's rows of
    steps_answers.jsonl, if any.
    """
    page = Path(page)
    if not isinstance(trajectory, dict):
        trajectory = json.loads(Path(trajectory).read_text())
    img_dir = page.parent / f"{page.stem}_files"
    img_dir.mkdir(parents=True, exist_ok=True)
    steps = trajectory.get("steps") or []
    pairs = _step_messages(trajectory.get("messages") or [])
    by_step = {}
    for row in answers or []:
        by_step.setdefault(int(row.get("step", -1)), []).append(row)
    status = str(trajectory.get("status") or "unknown")
    end = _end_step(steps, status) if status != "running" else None
    end_note = f"scene {status} here: {trajectory.get('stop_reason') or ''} — {trajectory.get('reason') or ''}"
    totals = {"in": 0, "out": 0, "cost": 0.0, "model": 0.0, "harness": 0.0}
    blocks = []
    for index, record in enumerate(steps):
        reply, observation = pairs[index] if index < len(pairs) else ("", None)
        tokens_in, _, tokens_out = _tokens(record.get("usage") or {})
        totals["in"] += tokens_in
        totals["out"] += tokens_out
        totals["cost"] += float(record.get("cost") or 0.0)
        totals["model"] += float(record.get("model_seconds") or 0.0)
        totals["harness"] += float(record.get("harness_seconds") or 0.0)
        number = record.get("step", index + 1)
        images = write_images(observation, img_dir, f"{int(number):03d}") if observation else []
        blocks.append(
            _step_html(
                record, reply, observation, images, html.escape(img_dir.name), dict(totals),
                by_step.get(int(number), []), index == end, end_note,
            )
        )  # fmt: skip
    scene = str(trajectory.get("scene") or page.stem)
    tokens = trajectory.get("tokens") or {}
    headline = (
        f"status <b>{html.escape(status)}</b> {html.escape(str(trajectory.get('stop_reason') or ''))} · "
        f"{html.escape(str(trajectory.get('reason') or ''))}"
    )
    summary = (
        f"{len(steps)} steps · frames seen {trajectory.get('frames_seen', 0)} · format errors "
        f"{trajectory.get('format_errors', 0)} · cost {_money(trajectory.get('cost'))} · tokens in "
        f"{tokens.get('input', 0)} out {tokens.get('output', 0)} · runtime {_seconds(trajectory.get('runtime'))} · "
        f"model {_seconds(trajectory.get('model_seconds'))} · updated {html.escape(str(trajectory.get('updated', '')))}"
    )
    text = PAGE.format(
        title=f"{html.escape(scene)}: trajectory",
        pygments=FORMATTER.get_style_defs(".hl"),
        back=html.escape(back),
        scene=html.escape(scene),
        headline=headline,
        totals=summary,
        steps="\n".join(blocks) or "<p>no steps yet</p>",
        script=script,
    )
    write_text_atomic(page, text)
    return page
