"""Reading one action per reply, frames and render requests, truncation, pricing estimates."""

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bvb_addon.agent.actions import FENCE, FormatError, fenced, parse_action, parse_frames, parse_render
from bvb_addon.agent.environment import image_size
from bvb_addon.agent.loop import truncate
from bvb_addon.agent.program import join_program
from bvb_addon.pricing import image_tokens

pytestmark = pytest.mark.unit


def test_one_python_block_is_the_action():
    action = parse_action("I add a floor.\n```python\nimport bpy\nprint(1)\n```\n")
    assert (action.kind, action.body) == ("python", "import bpy\nprint(1)")


def test_done_as_last_line_submits():
    assert parse_action("The scene is complete.\nDONE").kind == "done"
    assert parse_action("**DONE**").kind == "done"


@pytest.mark.parametrize(
    "reply, message",
    [
        ("I think the room is 4 m wide.", "no action"),
        ("```python\na=1\n```\n```frames\n1.0\n```", "2 actions"),
        ("```python\na=1\n```\nDONE", "2 actions"),
        ("```bash\nls\n```", "tagged bash"),
        ("```\nprint(1)\n```", r"tagged \(no language\)"),
        ("DONE is what I will say later", "no action"),
    ],
)
def test_format_errors(reply, message):
    with pytest.raises(FormatError, match=message):
        parse_action(reply)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["```", "``", "`", "python", "frames", "c++", "a-b_9", "\n", " ", "\t", "\u2028",
                                 "\x0b", "x", "é", "DONE"]), max_size=40))  # fmt: skip
def test_blocks_are_the_fence_patterns_matches(tokens):
    reply = "".join(tokens)
    assert fenced(reply) == FENCE.findall(reply)


def test_a_megabyte_of_unclosed_fences_is_parsed_at_once():
    """FENCE scans to the end for every fence line without a close after it (a 40 KB reply took 11 s, a megabyte
    would take hours): parsed in a child process, so that a regression fails at the timeout instead of hanging."""
    code = """
from bvb_addon.agent.actions import FormatError, parse_action
for reply in ("```python" + "x" * 1_000_000, "```python\\n" * 100_000, "```py+" + "a" * 500_000 + "\\n" * 500_000):
    try:
        parse_action(reply)
    except FormatError as exc:
        print(exc)
print(parse_action("```python a\\n" * 100_000 + "```").body.count("python"))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                          cwd=Path(__file__).parents[1])  # fmt: skip
    assert done.stdout.splitlines() == ["the reply has no action"] * 3 + ["99999"]


def test_frames_by_timestamps_and_by_count():
    assert parse_frames("1.5 3.0, 7.25", duration=8.0, limit=8).times == (1.5, 3.0, 7.25)
    request = parse_frames("count=4 start=2 end=6", duration=8.0, limit=8)
    assert (request.count, request.start, request.end) == (4, 2.0, 6.0)
    assert parse_frames("count=2", duration=8.0, limit=8).end == 8.0


@pytest.mark.parametrize(
    "body, message",
    [
        ("", "empty"),
        ("9.5", "outside the clip"),
        ("count=9", "at most 8"),
        ("1 2 3 4 5 6 7 8 9", "at most 8"),
        ("count=0", "at least 1"),
        ("count=2 start=5 end=3", "start < end"),
        ("fps=3", "unknown field"),
        ("abc", "not a number"),
        ("nan", "not a finite number"),
    ],
)
def test_bad_frames_requests(body, message):
    with pytest.raises(FormatError, match=message):
        parse_frames(body, duration=8.0, limit=8)


def test_render_frames_by_number_or_spread_over_the_range():
    assert parse_render("1 32 64", (1, 64), 8) == [1, 32, 64]
    assert parse_render("count=3", (1, 65), 8) == [1, 33, 65]
    with pytest.raises(FormatError, match="whole frame"):
        parse_render("1.5", (1, 64), 8)
    with pytest.raises(FormatError, match="at most 4"):
        parse_render("count=5", (1, 64), 4)


def test_truncation_keeps_head_and_tail_with_a_note():
    text = "a" * 100 + "b" * 100
    out = truncate(text, 60)
    assert out.startswith("a" * 40) and out.endswith("b" * 20)
    assert "[... 140 characters truncated ...]" in out
    assert truncate("short", 60) == "short"


def test_image_size_reads_jpeg_and_png_headers():
    import av
    import numpy as np

    frame = av.VideoFrame.from_ndarray(np.zeros((48, 80, 3), dtype=np.uint8), format="rgb24")
    for codec, name in (("mjpeg", "jpeg"), ("png", "png")):
        context = av.CodecContext.create(codec, "w")
        context.width, context.height = 80, 48
        context.pix_fmt = "yuvj420p" if codec == "mjpeg" else "rgb24"
        data = b"".join(bytes(p) for p in context.encode(frame.reformat(format=context.pix_fmt)))
        assert image_size(data) == (80, 48), name
    assert image_tokens(512, 384, "low") == 85
    assert image_tokens(2048, 2048) >= 765


def test_joined_program_keeps_ok_and_error_steps_up_to_the_last_snapshot():
    steps = [
        {"step": 1, "action": "frames", "status": "ok"},
        {
            "step": 2,
            "action": "python",
            "status": "ok",
            "code": "import sys\nbpy['a'] = 1\nsys.exit(0)",
            "snapshot": "s",
        },
        {"step": 3, "action": "python", "status": "error", "code": "bpy['b'] = 2\nraise ValueError"},
        {"step": 4, "action": "python", "status": "timeout", "code": "while True: pass"},
        {
            "step": 5,
            "action": "python",
            "status": "ok",
            "code": "bpy['c'] = bpy['a'] + bpy['b']\nprint('\\\\')",
            "snapshot": "steps/s/005.blend",
        },
        {"step": 6, "action": "python", "status": "error", "code": "bpy['d'] = 4\nraise KeyError"},
        {"step": 7, "action": "python", "status": "ok", "code": "x = 1"},
    ]
    program = join_program("s", steps)
    namespace = {}
    exec(compile(program.replace("import bpy", "bpy = {}"), "program", "exec"), namespace)
    assert namespace["bpy"] == {"a": 1, "b": 2, "c": 3}
    assert "while True" not in program and "bpy['d'] = 4" not in program
    # Each step runs in its own namespace, as in the worker: a name from an earlier step is unknown.
    steps = [{"step": 1, "action": "python", "status": "ok", "code": "y = 1"},
             {"step": 2, "action": "python", "status": "ok", "code": "print(y)", "snapshot": "x"}]  # fmt: skip
    with pytest.raises(NameError):
        exec(join_program("s", steps).replace("import bpy", "bpy = {}"), {})
