"""The data layer's video half: probe, sampling by time and by count, JPEG output, errors."""

import io

import av
import numpy as np
import pytest

from bvb_addon import video

pytestmark = pytest.mark.unit

FPS = 8


def _write_clip(path, frames, fps=FPS, options=None, gop=None):
    """An H.264 clip whose frame i is a flat grey of level 5*i, so a decoded frame names its index."""
    with av.open(str(path), "w", options=options or {}) as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.codec_context.options = {"crf": "0"} if frames < 100 else {}
        if gop:
            stream.codec_context.gop_size = gop
        for i in range(frames):
            rgb = np.full((48, 64, 3), (5 * i) % 256, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def _jpeg_level(data):
    assert data[:2] == b"\xff\xd8", "not JPEG bytes"
    frame = av.CodecContext.create("mjpeg", "r").decode(av.Packet(data))[0]
    return frame.to_ndarray(format="rgb24")


def _index_of(level):
    return round(level / 5)


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return _write_clip(tmp_path_factory.mktemp("video") / "clip.mp4", 40)


def test_probe_reads_rate_count_duration_size(clip):
    info = video.probe(clip)
    assert (info.fps, info.frame_count, info.width, info.height) == (8.0, 40, 64, 48)
    assert info.duration == pytest.approx(5.0)


def test_uniform_times_are_bin_centres():
    assert video.uniform_times(8.0, 4) == [1.0, 3.0, 5.0, 7.0]
    assert video.uniform_times(8.0, 2, start=2.0, end=4.0) == [2.5, 3.5]
    with pytest.raises(ValueError, match="bad interval"):
        video.uniform_times(8.0, 2, start=5.0, end=4.0)


def test_sample_frames_maps_each_time_to_the_frame_shown(clip):
    times = [0.0, 0.13, 2.5, 1.0, 4.99, 60.0]
    jpegs = video.sample_frames(clip, times)
    got = [_index_of(_jpeg_level(j).mean()) for j in jpegs]
    # frame shown at t is floor(t * fps); past the end, the last frame
    assert got == [0, 1, 20, 8, 39, 39]


def test_longest_side_and_quality(clip):
    small = video.sample_frames(clip, [1.0], longest_side=32)[0]
    assert _jpeg_level(small).shape == (24, 32, 3)
    full = video.sample_frames(clip, [1.0])[0]
    assert _jpeg_level(full).shape == (48, 64, 3)
    noisy = (np.random.default_rng(0).random((96, 128, 3)) * 255).astype(np.uint8)
    assert len(video.encode_jpeg(noisy, quality=95)) > len(video.encode_jpeg(noisy, quality=30))


def test_sample_uniform_over_an_interval(clip):
    jpegs = video.sample_uniform(clip, 4, start=1.0, end=3.0)
    # centres 1.25, 1.75, 2.25, 2.75 -> frames 10, 14, 18, 22
    assert [_index_of(_jpeg_level(j).mean()) for j in jpegs] == [10, 14, 18, 22]


def test_read_rgb_frames_uniform(clip):
    frames = video.read_rgb_frames(clip, 5)
    assert frames.shape == (5, 48, 64, 3) and frames.dtype == np.uint8
    # centres 0.5, 1.5, ... -> frames 4, 12, 20, 28, 36
    assert [_index_of(f.mean()) for f in frames] == [4, 12, 20, 28, 36]


def test_long_gaps_seek_and_still_land_on_the_right_frame(tmp_path):
    long_clip = _write_clip(tmp_path / "long.mp4", 8 * 40, gop=12)
    times = [39.0, 0.5, 20.0, 33.3]
    frames = [_jpeg_level(j) for j in video.sample_frames(long_clip, times)]
    expected = [(int(t * FPS) * 5) % 256 for t in times]
    assert [abs(f.mean() - e) < 4 for f, e in zip(frames, expected, strict=True)] == [True] * 4


def test_missing_video_names_the_path(tmp_path):
    with pytest.raises(video.VideoError, match=r"video not found: .*nope\.mp4; check the videos root"):
        video.probe(tmp_path / "nope.mp4")


def test_corrupt_file_is_a_clear_error(tmp_path):
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video at all" * 50)
    with pytest.raises(video.VideoError, match=r"cannot read video .*junk\.mp4.*re-download or re-encode"):
        video.probe(junk)
    with pytest.raises(video.VideoError, match="junk.mp4"):
        video.sample_frames(junk, [0.0])


@pytest.mark.parametrize("faststart", [True, False])
def test_truncated_file_is_a_clear_error(tmp_path, faststart):
    full = _write_clip(tmp_path / "full.mp4", 40, options={"movflags": "faststart"} if faststart else None)
    data = full.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    message = r"truncated: its header declares 40 frames" if faststart else r"corrupt, truncated or not a video"
    with pytest.raises(video.VideoError, match=message) as info:
        video.probe(cut)
    assert "cut.mp4" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(video.VideoError):
        video.sample_uniform(cut, 4)


def test_frame_strip_and_png(clip):
    strip = video.frame_strip(clip, 4, height=24)
    assert strip.shape == (24, 4 * 32, 3)
    # frames at 0.625, 1.875, 3.125, 4.375 s -> indices 5, 15, 25, 35, left to right
    levels = [_index_of(strip[:, i * 32 : (i + 1) * 32].mean()) for i in range(4)]
    assert levels == [5, 15, 25, 35]
    png = video.encode_png(strip)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    with av.open(io.BytesIO(png)) as container:
        decoded = next(container.decode(video=0)).to_ndarray(format="rgb24")
    assert np.array_equal(decoded, strip)
