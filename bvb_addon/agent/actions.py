"""Reading one action out of a model reply (docs/protocol.md section 1)."""

import re
from dataclasses import dataclass

TOOLS = ("python", "frames", "render")
FENCE = re.compile(r"^```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
"""The rule of a fenced block; ``fenced`` finds its matches."""
_LANG = re.compile(r"[ \t]*([A-Za-z0-9_+-]*)")
_CLOSE = re.compile(r"```[ \t]*")


def _fence_line(text: str, at: int) -> int:
    """The first line at or after ``at`` that starts with ```, or -1."""
    if at == 0 and text.startswith("```"):
        return 0
    found = text.find("\n```", max(at - 1, 0))
    return found + 1 if found >= 0 else -1


def fenced(text: str) -> list[tuple[str, str]]:
    """``FENCE.findall(text)`` in linear time. The pattern scans to the end for every fence line without a close
    after it, and again for each split of the word after the fence (a 40 KB reply of unclosed fences took 11 s).
    Its first match is known: the language is the longest run after the blanks, the body runs from the opening
    line's end to the first line that is only a fence, and where no such line follows one fence, none follows
    any later one."""
    blocks = []
    at = 0
    while (start := _fence_line(text, at)) >= 0:
        lang = _LANG.match(text, start + 3)
        assert lang is not None  # both runs may be empty
        newline = text.find("\n", lang.end())
        if newline < 0:
            break  # the opening line is the last: no body, and no later fence line
        close = _fence_line(text, newline + 1)
        while close >= 0:
            fence = _CLOSE.match(text, close)
            assert fence is not None  # a fence line starts with the fence
            at = fence.end()
            if at == len(text) or text[at] == "\n":
                break
            close = _fence_line(text, close + 1)
        if close < 0:
            break
        blocks.append((lang.group(1), text[newline + 1 : close]))
    return blocks


class FormatError(ValueError):
    """The reply holds no valid action, or several; the message goes back to the agent."""

    status = "format_error"
    """The step's status in the trajectory; the agent reads the message and replies again."""


@dataclass(frozen=True)
class Action:
    kind: str  # python | frames | render | done
    body: str = ""


@dataclass(frozen=True)
class FrameRequest:
    times: tuple = ()
    count: int = 0
    start: float | None = None
    end: float | None = None


def parse_action(reply: str) -> Action:
    """The single action of a reply: one fenced python/frames/render block, or DONE as the last line."""
    text = (reply or "").replace("\r\n", "\n")
    blocks = fenced(text)
    lines = [line.strip() for line in text.strip().splitlines()]
    done = bool(lines) and lines[-1].strip("*_` ") == "DONE"
    unknown = [lang or "(no language)" for lang, _ in blocks if lang.lower() not in TOOLS]
    if unknown:
        raise FormatError(
            f"the reply has a fenced block tagged {unknown[0]}; the only actions are ```python, "
            "```frames and ```render blocks, or DONE alone as the last line"
        )
    actions = len(blocks) + int(done)
    if actions == 0:
        raise FormatError("the reply has no action")
    if actions > 1:
        raise FormatError(f"the reply has {actions} actions; send exactly one per reply")
    if done:
        return Action("done")
    lang, body = blocks[0]
    return Action(lang.lower(), body.rstrip("\n"))


def _number(text, what):
    try:
        value = float(text)
    except ValueError:
        raise FormatError(f"{what} {text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise FormatError(f"{what} {text!r} is not a finite number")
    return value


def parse_frames(body: str, duration: float, limit: int) -> FrameRequest:
    """A frames request: timestamps in seconds, or ``count=N [start=S] [end=E]``."""
    tokens = body.replace(",", " ").split()
    if not tokens:
        raise FormatError("the frames block is empty; give timestamps like `1.5 3.0` or `count=4`")
    if any("=" in token for token in tokens):
        fields = {}
        for token in tokens:
            key, _, value = token.partition("=")
            if key not in ("count", "start", "end") or not value:
                raise FormatError(f"frames: unknown field {token!r}; use count=N [start=S] [end=E]")
            fields[key] = value
        if "count" not in fields:
            raise FormatError("frames: count=N is required with start= or end=")
        count = _number(fields["count"], "frames count")
        if count != int(count) or count < 1:
            raise FormatError(f"frames count must be a whole number of at least 1, got {fields['count']}")
        if count > limit:
            raise FormatError(f"frames: asked for {int(count)} frames; at most {limit} per call")
        start = _number(fields.get("start", "0"), "frames start")
        end = _number(fields["end"], "frames end") if "end" in fields else duration
        if not 0 <= start < end <= duration + 1e-6:
            raise FormatError(f"frames: need 0 <= start < end <= {duration:g} (the clip's duration in seconds)")
        return FrameRequest(count=int(count), start=start, end=min(end, duration))
    times = tuple(_number(token, "frames timestamp") for token in tokens)
    if len(times) > limit:
        raise FormatError(f"frames: asked for {len(times)} frames; at most {limit} per call")
    for t in times:
        if not 0 <= t <= duration + 1e-6:
            raise FormatError(f"frames: timestamp {t:g} is outside the clip (0 to {duration:g} seconds)")
    return FrameRequest(times=tuple(min(t, duration) for t in times))


def parse_render(body: str, frame_range: tuple[int, int], limit: int) -> list[int]:
    """Render frames: scene frame numbers, or ``count=N`` spread over the scene's frame range."""
    tokens = body.replace(",", " ").split()
    if not tokens:
        raise FormatError("the render block is empty; give frame numbers like `1 32 64` or `count=4`")
    first, last = frame_range
    if len(tokens) == 1 and tokens[0].startswith("count="):
        count = _number(tokens[0][6:], "render count")
        if count != int(count) or count < 1:
            raise FormatError("render count must be a whole number of at least 1")
        if count > limit:
            raise FormatError(f"render: asked for {int(count)} frames; at most {limit} per call")
        count = int(count)
        if count == 1:
            return [first]
        step = (last - first) / (count - 1)
        return sorted({round(first + i * step) for i in range(count)})
    frames = []
    for token in tokens:
        value = _number(token, "render frame")
        if value != int(value):
            raise FormatError(f"render frame {token!r} is not a whole frame number")
        frames.append(int(value))
    if len(frames) > limit:
        raise FormatError(f"render: asked for {len(frames)} frames; at most {limit} per call")
    return frames
