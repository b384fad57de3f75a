"""mini-bvb's pure rules against facts of BVB's Stage-1 agent and runner (callingforhelp/BVB:
bvb_sandbox/agents/bash_agent.py, sandbox/run_agent.py, sandbox/run_model.sh), written as literal
expectations; and its one-pass frames against the reference's per-frame ffmpeg command, byte for byte."""

import filecmp
import json
import re
import subprocess
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bvb_addon import ffmpeg_frames
from bvb_addon.agent import mini_bvb_protocol as protocol
from bvb_addon.agent.harness import config_name
from bvb_addon.agent.harness import select_mini as select
from bvb_addon.records import read_agent_meta

pytestmark = pytest.mark.unit


def test_frame_requests_resolve_clamp_round_and_cap_as_the_reference():
    # count spreads over [start, end] with both ends; one frame is the middle; clamped to duration - 0.05.
    assert protocol.request("count=5", 10.0) == [0.0, 2.5, 5.0, 7.5, 9.95]
    assert protocol.request("count=1", 10.0) == [5.0]
    assert protocol.request("count=3 start=2 end=4", 10.0) == [2.0, 3.0, 4.0]
    assert protocol.request("COUNT = 2 end=1", 10.0) == [0.0, 1.0]
    assert protocol.request("count=0", 10.0) == [] and protocol.request("count=4.9", 9.0) == [0.0, 3.0, 6.0, 8.95]
    # Timestamps: any numbers, negative ones to 0, rounded to the millisecond; text around them ignored.
    assert protocol.request("0, 4.5, 12, 30", 20.0) == [0.0, 4.5, 12.0, 19.95]
    assert protocol.request("t=-3 and 1.23456s", 20.0) == [0.0, 1.235]
    assert protocol.request("no numbers", 20.0) == []
    # Without a duration (ffprobe found none) count spreads over [start, count] seconds and nothing clamps above.
    assert protocol.request("count=3", 0.0) == [0.0, 1.5, 3.0]
    # At most 60 a block: the first 60 of those asked.
    times = protocol.request("count=100", 99.0)
    assert len(times) == 60 and times[:2] == [0.0, 1.0] and times[-1] == 59.0


def _release_times(content: str, duration: float) -> list[float]:
    """The oracle: BVB's resolve_frame_request, transcribed as its rule reads (every time of the block, each
    built from its index; a count is int() of the float of its digits), then its cap of 60."""
    found = re.findall(r"(count|start|end)\s*=\s*([0-9]*\.?[0-9]+)", content, re.IGNORECASE)
    fields = {name.lower(): float(digits) for name, digits in found}

    def clamped(t: float) -> float:
        t = max(0.0, t)
        return round(min(t, max(0.0, duration - 0.05)) if duration > 0 else t, 3)

    if "count" not in fields:
        return [clamped(float(n)) for n in re.findall(r"-?[0-9]*\.?[0-9]+", content)][:60]
    count = int(fields["count"])
    start, end = fields.get("start", 0.0), fields.get("end", duration if duration > 0 else float(count))
    if count < 1:
        return []
    if count == 1:
        return [clamped((start + end) / 2)]
    every = [clamped(start + (end - start) / (count - 1) * i) for i in range(count)]
    return every[:60]


_DIGITS = st.one_of(
    st.integers(0, 3000).map(str),
    st.sampled_from(["0", "1", "2", "59", "60", "61", "0.5", ".5", "1.", "007", "1e999", "-5", "3.9999"]),
    st.from_regex(r"\A[0-9]{0,2}\.?[0-9]{1,3}\Z"),
)
_FIELD = st.tuples(st.sampled_from(["count", "start", "end", "COUNT", "Start", "t"]), st.sampled_from(["=", " = ", ":"]),
                   _DIGITS).map("".join)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    fields=st.lists(st.one_of(_FIELD, _DIGITS, st.sampled_from([" ", ",", "s", "-", "\n", "x"])), max_size=8),
    duration=st.one_of(st.just(0.0), st.floats(0.0, 1000.0), st.sampled_from([0.04, 0.05, 10.0])),
)
def test_a_frames_request_is_the_releases_first_60_times(fields, duration):
    """Every block (counts from 0 up, fractions, negative and repeated fields, text around) gets the release's
    times, to the bit, with the cap applied to its whole list."""
    content = " ".join(fields)
    expected = _release_times(content, duration)
    assert protocol.request(content, duration) == expected
    assert len(expected) <= 60


def test_a_huge_frames_count_costs_60_times_not_count():
    """count=10**12 (the release builds all of them, filling the memory) is answered at once with the release's
    first 60; a count too large for a float (where the release raises) takes the largest float's."""
    started = time.perf_counter()
    assert protocol.request("count=10000000 end=10", 20.0)[:2] == [0.0, 0.0]
    assert time.perf_counter() - started < 0.05  # first: building them all would fail here, not fill the memory
    assert protocol.request("count=1000000000000 end=10", 20.0) == [0.0] * 60
    assert protocol.request("count=1000000000000", 0.0) == [float(i) for i in range(60)]
    assert time.perf_counter() - started < 0.05
    # The field pattern reads 1e999 as 1 (then 999 is text): one frame, the middle.
    assert (
        protocol.request("count=1e999 start=2 end=4", 10.0)
        == [3.0]
        == _release_times("count=1e999 start=2 end=4", 10.0)
    )
    infinite = "count=" + "9" * 400  # float() of it is inf: the release's int() raises OverflowError
    with pytest.raises(OverflowError):
        _release_times(infinite, 10.0)
    assert protocol.request(infinite, 10.0) == [0.0] * 60
    assert protocol.request(infinite, 0.0) == [float(i) for i in range(60)]
    # Timestamps: a block of a million numbers takes its first 60.
    assert protocol.request(" ".join(["7"] * 1_000_000), 20.0) == [7.0] * 60


def test_texts_truncation_and_the_budget_note_are_the_references():
    assert protocol.truncate("x" * 4000) == "x" * 4000
    cut = protocol.truncate("a" * 2000 + "b" * 2001)
    assert cut == "a" * 2000 + "\n...[truncated]...\n" + "b" * 2000
    assert protocol.budget_note(0.0, 3.0) == "[budget] spent $0.000 of $3.00 ($3.000 left)."
    assert protocol.budget_note(2.25, 3.0) == (
        "[budget] spent $2.250 of $3.00 ($0.750 left). You are LOW on budget: save result.blend now and say DONE."
    )
    assert protocol.bash_result("ls", 2, "", "no such file\n") == "$ ls\n[exit 2]\n\nno such file\n"
    assert protocol.bash_observation(["a" * 5000, "b" * 5000]) == "a" * 4000 + "\n...[truncated]...\n" + "b" * 4000
    assert protocol.frame_label(12.345) == "[frame t=12.35s]" and protocol.frame_label(0.004) == "[frame t=0.00s]"
    assert protocol.task_message("scene0011_00", None, 61.06, 3.0).startswith(
        "Scene: scene0011_00 (None). Video duration 61.1s. No frames shown yet \u2014 request frames"
    )
    assert protocol.system_prompt().startswith("You are a video-understanding agent evaluated on reconstructing\n")
    assert protocol.system_prompt().endswith(
        "  and set bpy.context.scene.frame_start / frame_end to span the motion.\n"
    )


def test_blocks_are_found_as_the_reference_finds_them():
    reply = (
        "```bash\n  \n```\n```bash \necho 1\n```\ntext ```frames\ncount=2\n``` ```bash\necho 2```\n```python\nx\n```"
    )
    assert protocol.blocks(reply) == (["echo 1", "echo 2"], ["count=2"])
    assert protocol.blocks("```bash echo inline```") == ([], [])  # the fence word must end its line
    assert protocol.says_done("I am DONE.") and not protocol.says_done("done")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["```", "``", "`", "bash", "frames", "\n", " ", "\t", "\u2028", "\x0b", "x", "DONE"]),
                max_size=40))  # fmt: skip
def test_blocks_are_the_release_patterns_matches(tokens):
    reply = "".join(tokens)
    assert protocol.fenced(reply, "bash") == protocol.BASH_BLOCK.findall(reply)
    assert protocol.fenced(reply, "frames") == protocol.FRAMES_BLOCK.findall(reply)


def test_an_unclosed_fence_over_a_megabyte_of_blank_lines_is_read_at_once():
    """The release's pattern backtracks over every split of the blanks (100,000 newlines took 112 s here)."""
    started = time.perf_counter()
    assert protocol.blocks("```frames\n" + "\n" * 30_000) == ([], [])
    assert time.perf_counter() - started < 1  # first: the pattern would take about 10 s here, not hours
    for reply in ("```frames\n" + "\n" * 1_000_000, "```bash" + " \n" * 500_000 + "x", "```bash\n" * 100_000):
        assert protocol.blocks(reply) == ([], [])
    assert protocol.blocks("```bash" + "\n" * 1_000_000 + "echo hi```") == (["echo hi"], [])
    assert time.perf_counter() - started < 2


def test_run_names_reasoning_labels_shards_and_scene_order_are_bvbs():
    assert protocol.run_name("gpt-5.5", None) == "mini-harness-gpt-5.5-reasoning-medium-run01"
    assert protocol.run_name("anthropic/claude-sonnet-4.6", None) == "mini-harness-claude-sonnet-4.6-run01"
    assert protocol.run_name("openrouter/qwen/qwen3:vl", "high") == "mini-harness-qwen3-vl-reasoning-high-run01"
    assert protocol.run_name("gemini/gemini-3.1-pro", "none") == "mini-harness-gemini-3.1-pro-run01"
    assert protocol.recorded_reasoning("openai/GPT-6-Astra", None) == "medium"
    assert protocol.recorded_reasoning("gpt-4o", None) == "none" and protocol.recorded_reasoning("x", "low") == "low"
    scenes = [("scannet", "scene2"), ("arkitscenes", "41069025"), ("scannet", "scene1"), ("scannetpp", "a0")]
    # Sorted by name, then --limit, then --skip-scenes, then every N-th from i (1-based).
    assert select(scenes) == [scenes[1], scenes[3], scenes[2], scenes[0]]
    assert select(scenes, limit=3, skip=["a0"]) == [scenes[1], scenes[2]]
    assert select(scenes, shard=(1, 2)) == [scenes[3], scenes[0]]  # --shard 2/2, 0-based inside
    assert select(scenes, names=["scene2", "a0"]) == [scenes[0], scenes[3]]
    assert config_name((2, 4)) == "config.shard-3-of-4.json" and config_name(None) == "config.json"
    # A run's protocol: ours names it, BVB's own config.json says mini-BVB-harness, an older run is native.
    assert protocol.protocol_of({"harness": "mini-BVB-harness", "model": "gpt-5.5"}) == "mini-bvb"
    assert protocol.protocol_of({"harness_protocol": "mini-bvb"}) == "mini-bvb"
    assert protocol.protocol_of({"agent": "model"}) == "native"


def test_an_agent_meta_with_only_the_releases_keys_reads(tmp_path):
    base = {
        "scene_name": "41069025", "turns": 9, "commands_run": 14, "frames_seen": 24, "frames_extracted": 24,
        "done": False, "stop_reason": "cost", "produced_blend": True, "error": None, "cost_usd": 3.0123,
        "input_tokens": 912345, "output_tokens": 23456, "duration_s": 812.4,
        "blend_file": "results/mini-harness-gpt-5.5-reasoning-medium-run01/blends/41069025.blend",
        "model": "gpt-5.5", "harness": "mini-BVB-harness", "reasoning": "medium",
    }  # fmt: skip
    path = tmp_path / "41069025.json"
    path.write_text(json.dumps(base))
    meta = read_agent_meta(path)
    assert (meta.scene, meta.status, meta.stop_reason, meta.cost, meta.turns) == (
        "41069025",
        "limit",
        "cost",
        3.0123,
        9,
    )
    assert meta.submission == "blends/41069025.blend" and meta.tokens["input"] == 912345
    assert {k: meta.as_dict()[k] for k in base} == base  # every key of theirs kept, as it was
    for changes, status in (({"done": True, "stop_reason": "done"}, "submitted"),
                            ({"stop_reason": "error", "error": "RateLimitError: x", "blend_file": None}, "error"),
                            ({"blend_file": None, "produced_blend": False}, "failed")):  # fmt: skip
        path.write_text(json.dumps({**base, **changes}))
        assert read_agent_meta(path).status == status


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    """A 4 s clip with B-frames and a keyframe every 24 frames (at 25 fps), 320x240."""
    path = tmp_path_factory.mktemp("clip") / "clip.mp4"
    subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", "4", "-c:v", "libx264",
         "-g", "24", "-bf", "2", "-pix_fmt", "yuv420p", str(path)],
        check=True,
    )  # fmt: skip
    return path


@pytest.mark.parametrize(
    "block", ["count=12", "0 0.04 0.039 0.041 1 1 2.5 3.95 99 -1", "count=7 start=1 end=1.2", "count=1", "0.2 3.9 3.91"]
)
def test_one_pass_frames_are_the_per_frame_commands_bytes(clip, tmp_path, block):
    times = protocol.request(block, ffmpeg_frames.probe_duration(clip))
    fast = ffmpeg_frames.extract(clip, tmp_path / "fast", times, start_index=7)
    slow = ffmpeg_frames.extract_per_frame(clip, tmp_path / "slow", times, start_index=7)
    assert [(f.t, f.path.name) for f in fast] == [(f.t, f.path.name) for f in slow]
    assert all(filecmp.cmp(a.path, b.path, shallow=False) for a, b in zip(fast, slow, strict=True))
    assert len(fast) == len(times)  # 3.95 (99 clamped) still has a frame: the last is at 3.96 s


def test_a_replys_blocks_are_extracted_as_each_block_in_turn(clip, tmp_path):
    duration = ffmpeg_frames.probe_duration(clip)
    contents = ["count=5", "1 1 3.95 99 -1", "0.5", "count=0", "count=3 start=1 end=2", "2.5 0.5"]
    blocks, unserved = protocol.reply_times(contents, duration)
    assert (blocks, unserved) == ([protocol.request(c, duration) for c in contents], 0)
    served = ffmpeg_frames.extract_reply(clip, tmp_path / "reply", blocks, start_index=4)
    index, in_turn = 4, []
    for times in blocks:  # the release's way: one extraction per block, the scene's count running on
        got = ffmpeg_frames.extract(clip, tmp_path / "blocks", times, start_index=index) if times else []
        index += len(got)
        in_turn.append(got)
    assert [[(f.t, f.path.name) for f in got] for got in served] == [
        [(f.t, f.path.name) for f in got] for got in in_turn
    ]
    pairs = [(a.path, b.path) for x, y in zip(served, in_turn, strict=True) for a, b in zip(x, y, strict=True)]
    assert len(pairs) == 16 and all(filecmp.cmp(a, b, shallow=False) for a, b in pairs)
    assert sorted(p.name for p in (tmp_path / "reply").iterdir()) == sorted(
        p.name for p in (tmp_path / "blocks").iterdir()
    )


def test_a_reply_of_100000_frames_blocks_extracts_the_cap_once(clip, tmp_path):
    """A 1.6 MB reply: 100,000 one-frame blocks were 100,000 ffmpeg runs and as many images in the next request;
    the first MAX_FRAMES_PER_REPLY are served (one decoding: the same time), the rest named in a line."""
    import tracemalloc

    bash, frames = protocol.blocks("```frames\n1.5\n```\n" * 100_000)
    assert (bash, len(frames)) == ([], 100_000)
    started = time.perf_counter()
    tracemalloc.start()
    try:
        blocks, unserved = protocol.reply_times(frames, ffmpeg_frames.probe_duration(clip))
        served = ffmpeg_frames.extract_reply(clip, tmp_path, blocks)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    cap = protocol.MAX_FRAMES_PER_REPLY
    assert (sum(len(b) for b in blocks), unserved, sum(len(g) for g in served)) == (cap, 100_000 - cap, cap)
    assert peak < 64 << 20  # the blocks' times and the frames' names, not their images
    assert time.perf_counter() - started < 60  # about 6 s here under tracemalloc; one extraction a block: 5 hours
    names = sorted(tmp_path.iterdir())
    assert len(names) == cap and len({p.stat().st_ino for p in names}) == 1  # one JPEG, linked
    assert {p.name for p in names} == {f"frame_{i:03d}_1.500.jpg" for i in range(cap)}
    assert protocol.frames_cap_note(unserved, cap) == (
        "[frames: this reply's blocks asked for 97000 frames past the first 3000; at most 3000 frames are extracted "
        "per reply, so those were not]\n"
    )


def test_an_image_is_one_string_shared_by_the_conversation_and_every_request():
    from bvb_addon.agent.litellm_model import chat_messages, image_part, text_part

    part = image_part(b"\xff\xd8 a JPEG")
    assert part["url"] == "data:image/jpeg;base64,/9ggYSBKUEVH"
    messages = [{"role": "user", "parts": [text_part("t"), part]}]
    first, second = chat_messages("s", messages), chat_messages("s", messages)
    assert first == second and first[1]["content"][1] == {"type": "image_url", "image_url": {"url": part["url"]}}
    assert first[1]["content"][1]["image_url"]["url"] is second[1]["content"][1]["image_url"]["url"] is part["url"]


def test_frames_far_apart_are_taken_in_runs_each_with_its_own_seek():
    # 1920x1440 at 30 fps: a seek is worth 1 s of decoding; keyframes every 2 s.
    frames = [i / 30 for i in range(300)]
    clip = ffmpeg_frames._Clip(frames, [0.0, 2.0, 4.0, 6.0, 8.0], 0.0, 1920 * 1440, 30.0)
    wanted = [0.5, 1.0, 2.1, 5.5, 5.6]
    frame_of = {t: min(f for f in frames if f >= t - 1e-9) for t in wanted}
    assert ffmpeg_frames._runs(wanted, frame_of, clip) == [[0.5, 1.0, 2.1], [5.5, 5.6]]


def test_runs_in_several_processes_write_the_per_frame_commands_bytes(clip, tmp_path, monkeypatch):
    # Every keyframe crossed starts a run, three runs to a process: inputs of their own, each seeking
    # (the ffmpeg runs, as for a clip PyAV's way does not take).
    monkeypatch.setattr(ffmpeg_frames, "_decode_block", lambda *args: None)
    monkeypatch.setattr(ffmpeg_frames, "SEEK_COST_S", 0.0)
    monkeypatch.setattr(ffmpeg_frames, "RUNS_PER_PROCESS", 3)
    times = protocol.request("0.1 0.5 1.2 1.3 2.0 2.9 3.5 3.9", ffmpeg_frames.probe_duration(clip))
    fast = ffmpeg_frames.extract(clip, tmp_path / "fast", times)
    slow = ffmpeg_frames.extract_per_frame(clip, tmp_path / "slow", times)
    assert len(fast) == len(slow) == 8
    assert all(filecmp.cmp(a.path, b.path, shallow=False) for a, b in zip(fast, slow, strict=True))


@pytest.mark.parametrize(
    "kind, options, pyav",
    [
        ("sar 4:3, bt709 limited", ["-vf", "setsar=4/3", "-color_range", "tv", "-colorspace", "bt709"], True),
        ("full range", ["-pix_fmt", "yuvj420p"], False),
        ("MPEG-4 part 2", ["-c:v", "mpeg4"], False),
    ],
)
def test_pyav_decoded_blocks_are_the_per_frame_commands_bytes_and_other_clips_take_the_runs(
    tmp_path, monkeypatch, kind, options, pyav
):
    path = tmp_path / "clip.mp4"
    subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-t", "3", "-c:v", "libx264",
         "-g", "20", "-bf", "2", "-pix_fmt", "yuv420p", *options, str(path)],
        check=True,
    )  # fmt: skip
    taken, decode_block = [], ffmpeg_frames._decode_block
    monkeypatch.setattr(ffmpeg_frames, "_decode_block", lambda *args: taken.append(decode_block(*args)) or taken[-1])
    monkeypatch.setattr(ffmpeg_frames, "DECODE_THREADS", 2)
    # Frames sharing keyframe intervals, B-frames, the last frame (99 is clamped to 2.95 s: the frame at 2.96 s).
    times = protocol.request("0 0.04 0.5 0.81 0.84 1.3 2.1 2.96 99", ffmpeg_frames.probe_duration(path))
    fast = ffmpeg_frames.extract(path, tmp_path / "fast", times)
    slow = ffmpeg_frames.extract_per_frame(path, tmp_path / "slow", times)
    assert [t is not None for t in taken] == [pyav], kind
    assert [(f.t, f.path.name) for f in fast] == [(f.t, f.path.name) for f in slow] and len(fast) == 9
    assert all(filecmp.cmp(a.path, b.path, shallow=False) for a, b in zip(fast, slow, strict=True))


def test_an_mpeg_ts_clip_takes_the_per_frame_command_itself(tmp_path):
    """MPEG-TS packet times do not say which frame ffmpeg's -ss lands on (planned from them, 1 JPEG in 9 was the
    command's): such a clip gets the reference's own command, so its frames are still the reference's."""
    path = tmp_path / "clip.ts"
    subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-t", "3", "-c:v", "libx264",
         "-g", "20", "-bf", "2", "-pix_fmt", "yuv420p", str(path)],
        check=True,
    )  # fmt: skip
    assert (
        ffmpeg_frames._probe_frames(path).planned is False and ffmpeg_frames._probe_frames(path).container == "mpegts"
    )
    times = protocol.request("0 0.5 0.84 1.3 2.1 2.9", ffmpeg_frames.probe_duration(path))
    fast = ffmpeg_frames.extract(path, tmp_path / "fast", times)
    slow = ffmpeg_frames.extract_per_frame(path, tmp_path / "slow", times)
    assert [(f.t, f.path.name) for f in fast] == [(f.t, f.path.name) for f in slow] and fast
    assert all(filecmp.cmp(a.path, b.path, shallow=False) for a, b in zip(fast, slow, strict=True))


def test_a_config_json_that_bvbs_harness_wrote_reads(tmp_path):
    from bvb_addon.records import read_run_config

    written = {
        "model": "gpt-5.5", "reasoning": "medium", "harness": "mini-BVB-harness", "image": "bvb-sandbox:latest",
        "cost_limit": 3.0, "model_timeout": 600.0, "max_turns": 0, "scene_timeout": 0.0,
        "timestamp": "2026-05-01T10:00:00", "num_tasks": 72, "shard": "1/4", "skip_scenes": [],
    }  # fmt: skip
    path = tmp_path / "config.shard-1-of-4.json"
    path.write_text(json.dumps(written))
    config = read_run_config(path).as_dict()
    assert {k: config[k] for k in written} == written
    assert protocol.protocol_of(config) == "mini-bvb"


def test_the_published_models_are_priced_by_litellms_shipped_table_and_others_are_refused():
    from bvb_addon.agent.config import AgentConfig, MiniBVBSettings
    from bvb_addon.agent.litellm_model import LiteLLMModel, PriceUnknown

    def model_client(model, **prices):
        return LiteLLMModel(AgentConfig(model=model, **prices), MiniBVBSettings())

    for model, key in (("gpt-5.5", "gpt-5.5"), ("anthropic/claude-opus-4-7", "claude-opus-4-7"),
                       ("gemini/gemini-3.1-pro-preview", "gemini/gemini-3.1-pro-preview")):  # fmt: skip
        record = model_client(model).check_price()
        assert record["source"] == "litellm" and record["table_key"] == key and record["litellm_version"]
        assert record["input_per_million"] > 0 and record["output_per_million"] > 0
    given = model_client("my-local-vlm", price_in=0.5, price_out=2.0).check_price()
    assert given == {"source": "given", "input_per_million": 0.5, "output_per_million": 2.0}
    with pytest.raises(PriceUnknown, match="--model my-local-vlm: LiteLLM .* has no price for it; give --price-in"):
        model_client("my-local-vlm").check_price()
