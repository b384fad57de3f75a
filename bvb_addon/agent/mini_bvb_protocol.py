"""What the Mini-BVB agent sees, as BVB's Stage-1 agent shows it (docs/protocol.md section 1): the texts
(prompts/mini_bvb/, byte for byte), the reply's blocks, a bash block's result, truncation and the budget
note, the times a ```frames block asks for. Pure functions, stdlib only; the loop is agent.mini_bvb, the frames
themselves bvb_addon.ffmpeg_frames.
"""

import itertools
import re
import sys
from functools import cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts" / "mini_bvb"

HARNESS = "mini-bvb"
"""The harness protocol's name in config.json and agent_meta (ours)."""
RELEASE_HARNESS = "mini-BVB-harness"
"""What BVB's own harness writes as agent_meta's and config.json's ``harness``."""

# The reference's block and key patterns (behaviour: a fence word, optional blanks, a newline, then the
# shortest body up to the next fence; keys and numbers as it reads them).
BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)```", re.DOTALL)
FRAMES_BLOCK = re.compile(r"```frames\s*\n(.*?)```", re.DOTALL)

MAX_FEEDBACK_CHARS = 4000
"""Each stream of a bash block is cut to this many characters (half head, half tail)."""
MAX_OBSERVATION_CHARS = 8000
"""The joined results of one reply's bash blocks are cut to this many."""
LOW_BUDGET_SHARE = 0.25
"""The budget note warns once what is left is at most this share of the limit."""
DONE_WORD = "DONE"
"""Anywhere in the reply (a substring test, as the reference's)."""


@cache
def text(name: str) -> str:
    """The protocol text ``prompts/mini_bvb/<name>.txt`` exactly as stored (nothing stripped)."""
    return (PROMPTS_DIR / f"{name}.txt").read_bytes().decode("utf-8")


def protocol_of(config: dict) -> str:
    """A run's harness protocol from its config.json: ours names it; BVB's own run says mini-BVB-harness; a run
    that names none is native (every run made before mini-bvb)."""
    named = config.get("harness_protocol")
    if named:
        return str(named)
    return HARNESS if config.get("harness") == RELEASE_HARNESS else "native"


def system_prompt() -> str:
    return text("system")


def task_message(scene_name: str, dataset: str | None, duration: float, cost_limit: float) -> str:
    """The first user message; ``dataset`` None reads "None", as the reference's f-string writes it."""
    return text("task").format(scene_name=scene_name, dataset=dataset, duration=duration, cost_limit=cost_limit)


def nudge(frames_seen: int) -> str:
    """The reply to a reply with no block (or DONE before result.blend existed)."""
    return text("nudge_no_frames" if frames_seen == 0 else "nudge_no_blocks")


def budget_note(cost: float, cost_limit: float) -> str:
    remaining = cost_limit - cost
    warn = text("budget_low") if remaining <= LOW_BUDGET_SHARE * cost_limit else ""
    return text("budget").format(cost=cost, cost_limit=cost_limit, remaining=remaining, warn=warn)


def truncate(value: str, limit: int = MAX_FEEDBACK_CHARS) -> str:
    """``value`` cut to its first and last ``limit // 2`` characters around the reference's marker."""
    if len(value) <= limit:
        return value
    half = limit // 2
    return value[:half] + text("truncated") + value[-half:]


def bash_result(block: str, returncode: int, stdout: str, stderr: str) -> str:
    return text("bash_result").format(
        block=block, returncode=returncode, stdout=truncate(stdout), stderr=truncate(stderr)
    )


def bash_observation(results: list[str]) -> str:
    """One text for all of a reply's bash results."""
    return truncate("\n\n".join(results), MAX_OBSERVATION_CHARS)


def frames_cap_note(unserved: int, cap: int) -> str:
    """Ours, not the release's: the line after a reply's frames when its blocks asked for more than ``cap``."""
    return (
        f"[frames: this reply's blocks asked for {unserved} frames past the first {cap}; at most {cap} frames are "
        "extracted per reply, so those were not]\n"
    )


def frame_label(t: float) -> str:
    return text("frame_label").format(t=t)


_BLANKS = re.compile(r"\s*")


def fenced(reply: str, word: str) -> list[str]:
    """``re.compile(rf"```{word}\\s*\\n(.*?)```", re.DOTALL).findall(reply)`` (BASH_BLOCK's, FRAMES_BLOCK's), in
    linear time. The pattern backtracks over every split of the blanks after an unclosed fence word (100,000
    newlines take two minutes); its first match is known: the blanks up to their last newline, then the body up
    to the next fence, and where no fence follows that newline, none follows any."""
    opener = "```" + word
    bodies = []
    at = 0
    while (start := reply.find(opener, at)) >= 0:
        blanks = start + len(opener)
        run = _BLANKS.match(reply, blanks)
        assert run is not None  # \s* matches the empty string too
        newline = reply.rfind("\n", blanks, run.end())
        close = reply.find("```", newline + 1) if newline >= 0 else -1
        if close < 0:
            at = start + 1  # no match here: the pattern goes on from the next character
            continue
        bodies.append(reply[newline + 1 : close])
        at = close + 3
    return bodies


def blocks(reply: str) -> tuple[list[str], list[str]]:
    """(bash blocks, frames blocks) of a reply, each stripped, empty ones dropped."""
    bash = [b.strip() for b in fenced(reply, "bash") if b.strip()]
    frames = [b.strip() for b in fenced(reply, "frames") if b.strip()]
    return bash, frames


def says_done(reply: str) -> bool:
    return DONE_WORD in reply


def run_name(model: str, reasoning: str | None) -> str:
    """BVB's default run folder name: ``mini-harness-<slug>[-reasoning-<effort>]-run01`` (run_model.sh).

    The slug is the model without its provider prefix, every character but ``A-Za-z0-9.-`` a dash;
    ``reasoning`` None takes run_model.sh's per-model default, and "none" adds no suffix.
    """
    base = model.rsplit("/", 1)[-1]
    effort = reasoning if reasoning else default_reasoning(base)
    name = f"mini-harness-{_slug(base)}"
    if effort != "none":
        name += f"-reasoning-{_slug(effort)}"
    return name + "-run01"


def _slug(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "-", value)


def default_reasoning(base_model: str) -> str:
    """run_model.sh's reasoning label for a model without --reasoning (its run name's)."""
    if base_model == "gpt-5.5":
        return "medium"
    if base_model in ("gemini-3.1-pro-preview", "gemini-3.1-pro"):
        return "high"
    return "none"


RECORDED_REASONING = {
    "gpt-6-astra": "medium",
    "gpt-5.5": "medium",
    "gpt-5.4": "none",
    "gpt-5.4-mini": "none",
    "claude-opus-4-8": "none",
    "claude-opus-4-7": "none",
    "claude-opus-4-6": "none",
    "claude-sonnet-4-6": "none",
    "gemini-3.1-pro-preview": "high",
    "gemini-3.1-pro": "high",
}
"""run_agent.py's reasoning label recorded for a model run without --reasoning (agent_meta, config.json)."""


def recorded_reasoning(model: str, explicit: str | None) -> str:
    """agent_meta's ``reasoning``: the effort given, else run_agent.py's per-model default, else "none"."""
    if explicit:
        return explicit
    return RECORDED_REASONING.get(model.rsplit("/", 1)[-1].lower(), "none")


# -- a ```frames block's times (the release's resolve_frame_request); agent.mini_bvb serves them with
# bvb_addon.ffmpeg_frames, the release's ffmpeg command's bytes.

MAX_FRAMES_PER_REQUEST = 60
"""The reference's guard against one pathological request (not an effort budget)."""
MAX_FRAMES_PER_REPLY = 3000
"""Ours (the release has none): the frames one reply's blocks extract in all. It is the most images a provider
documents taking in one request (Gemini's 3,000 a prompt; Anthropic's API takes 600, OpenAI's 500), so every reply
a provider could take the next request of is served as the release serves it, and only a hostile reply (50 full
blocks) reaches it. It bounds a reply's extraction, its JPEGs on disk and its images in the next request (a 1 MB
reply holds about 70,000 one-frame blocks)."""
END_MARGIN_S = 0.05
"""Times are clamped to at most duration - this."""
_KV = re.compile(r"(count|start|end)\s*=\s*([0-9]*\.?[0-9]+)", re.IGNORECASE)
_NUMBER = re.compile(r"-?[0-9]*\.?[0-9]+")


def clamp(t: float, duration: float) -> float:
    t = max(0.0, t)
    if duration > 0:
        t = min(t, max(0.0, duration - END_MARGIN_S))
    return round(t, 3)


def request(content: str, duration: float) -> list[float]:
    """The times a block gets: the reference's ``resolve_frame_request(content, duration)[:60]``, with only
    those 60 computed (the reference builds all ``count`` of them first: 10**12 would fill the memory).

    Each time is the reference's expression for its index, so the values are its own to the bit. Where the
    reference raises (a count of 309 digits or more is an infinite float, and ``int()`` of it OverflowError),
    the count is the largest finite float: the limit those counts approach."""
    keys = {key.lower(): float(value) for key, value in _KV.findall(content)}
    if "count" in keys:
        count = int(min(keys["count"], sys.float_info.max))
        start = keys.get("start", 0.0)
        # Without a duration the reference spreads over [start, count] seconds.
        end = keys.get("end", duration if duration > 0 else float(count))
        if count <= 0:
            return []
        if count == 1:
            return [clamp((start + end) / 2, duration)]
        step = (end - start) / (count - 1)
        return [clamp(start + step * i, duration) for i in range(min(count, MAX_FRAMES_PER_REQUEST))]
    numbers = itertools.islice(_NUMBER.finditer(content), MAX_FRAMES_PER_REQUEST)
    return [clamp(float(match.group()), duration) for match in numbers]


def reply_times(blocks: list[str], duration: float, cap: int | None = None) -> tuple[list[list[float]], int]:
    """Each frames block's times (``request``) in order, up to ``cap`` (MAX_FRAMES_PER_REPLY) in all, and how many
    times past the cap go unserved (0 for every reply under it)."""
    room = MAX_FRAMES_PER_REPLY if cap is None else cap
    served, unserved = [], 0
    for content in blocks:
        times = request(content, duration)
        unserved += max(0, len(times) - room)
        served.append(times[:room])
        room -= len(served[-1])
    return served, unserved
