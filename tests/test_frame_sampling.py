"""Frame sampling on 2-minute clips: the judge's 16, LS's 64 and the agent's frames are exactly the
frames a full in-order decode picks (same indices, same pixels), whether the sampler seeks or not.

The clips are low resolution (correctness only; bench/frame_sampling.py measures speed at
VSI-Bench's real sizes) and made once per session. Each frame draws its index in binary blocks.
"""

import math

import numpy as np
import pytest

from bvb_addon import video
from eval_bridge.scoring.preprocess import Preprocessing, resize, resize_frame
from tests.clip_support import index_frames, read_index, write_clip

pytestmark = pytest.mark.unit

SECONDS = 120
# (fps, keyframe interval): a phone-like 2 s GOP, and x264's default 250 frames at 24 fps.
CLIPS = {"30fps_gop60": (30, 60), "24fps_gop250": (24, 250)}


@pytest.fixture(scope="session", params=sorted(CLIPS))
def clip(request, tmp_path_factory):
    fps, gop = CLIPS[request.param]
    path = tmp_path_factory.mktemp("frame_sampling") / f"{request.param}.mp4"
    # Lossless, so the index blocks read back exactly (the stream keeps its P- and B-frames).
    write_clip(path, 64, 48, fps, SECONDS, gop, index_frames(64, 48), crf=0)
    return path, fps, gop


def naive(path, times, convert):
    out = [None] * len(times)
    for i, frame in video.frames_by_full_decode(path, times):
        out[i] = convert(frame)
    return out


def expected_indices(times, fps, count):
    return [min(count - 1, math.floor(t * fps + 1e-6)) for t in times]


def test_the_clip_is_two_minutes_with_its_keyframe_interval(clip):
    path, fps, gop = clip
    info = video.probe(path)
    assert (info.frame_count, info.fps, info.width, info.height) == (SECONDS * fps, fps, 64, 48)
    assert info.keyframes == tuple(pytest.approx(k * gop / fps) for k in range(len(info.keyframes)))
    assert len(info.keyframes) == math.ceil(SECONDS * fps / gop)


def test_judge_16_frames_equal_the_full_decode(clip):
    path, fps, _ = clip
    info = video.probe(path)
    jpegs = video.sample_uniform(path, 16, longest_side=32, quality=80)
    times = video.uniform_times(info.duration, 16)
    assert jpegs == naive(path, times, lambda f: video.encode_jpeg(video._rgb(f, 32), 80))


def test_ls_64_frames_equal_the_full_decode_at_the_right_indices(clip):
    path, fps, _ = clip
    info = video.probe(path)
    frames = video.read_rgb_frames(path, 64)
    times = video.uniform_times(info.duration, 64)
    reference = naive(path, times, lambda f: f.to_ndarray(format="rgb24"))
    assert all(np.array_equal(a, b) for a, b in zip(frames, reference, strict=True))
    assert [read_index(f) for f in frames] == expected_indices(times, fps, info.frame_count)


def test_ls_holds_its_frames_at_the_encoder_size_not_the_clips(clip):
    path, _, _ = clip
    prep = Preprocessing(shortest_edge=24, crop_hw=(24, 24))
    small = video.read_rgb_frames(path, 64, resize=lambda rgb: resize_frame(rgb, prep))
    assert small.shape == (64, 24, 32, 3)
    # The same pixels as resizing full-size frames afterwards (the processor's own filter).
    assert np.array_equal(small, resize(video.read_rgb_frames(path, 64), (24, 32)))


def test_agent_frames_dense_sparse_and_unordered_equal_the_full_decode(clip):
    path, fps, _ = clip
    info = video.probe(path)
    rng = np.random.default_rng(1)
    times = [
        *rng.uniform(0, SECONDS, 12),  # scattered, unordered
        *np.linspace(50.0, 50.5, 8),  # dense: one keyframe interval or less
        0.0,
        SECONDS - 1e-3,
        SECONDS + 30.0,  # past the end: the last frame
    ]
    times = [float(t) for t in times]
    jpegs = video.sample_frames(path, times, longest_side=48, quality=90)
    assert jpegs == naive(path, times, lambda f: video.encode_jpeg(video._rgb(f, 48), 90))
    rgb = naive(path, times, lambda f: f.to_ndarray(format="rgb24"))
    assert [read_index(f) for f in rgb] == expected_indices(times, fps, info.frame_count)


def test_seek_plan_seeks_across_sparse_gaps_and_decodes_dense_requests_in_one_pass():
    fps, keyframes = 30.0, [2.0 * k for k in range(75)]  # 150 s, a keyframe every 2 s
    sparse = video.uniform_times(150.0, 16)
    plan = video.seek_plan(sparse, keyframes, fps)
    # Each of the judge's frames is 9 s after the previous: seek to the keyframe before it.
    assert plan == [2.0 * math.floor(t / 2.0) for t in sparse]
    dense = video.uniform_times(150.0, 1000)
    assert video.seek_plan(dense, keyframes, fps) == [None] * 1000
    ls = video.seek_plan(video.uniform_times(150.0, 64), keyframes, fps)
    # Gaps of 2.3 s against 2 s keyframes: seek only where that skips more than a seek costs.
    seeks = [k for k in ls if k is not None]
    assert 0 < len(seeks) < 64 and all(b > a for a, b in zip(seeks, seeks[1:], strict=False))
    # No keyframe index: gaps longer than SEEK_GAP_S seek to the time itself (the demuxer picks the key).
    assert video.seek_plan([1.0, 2.0, 30.0], [], fps) == [None, None, 30.0]
