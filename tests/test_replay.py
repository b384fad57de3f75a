"""The source-replay check (eval_bridge/scoring/replay.py) on small clips the tests encode.

A replay is a render that shows the source's own frames: encoded again, resized, it stays within the
encode's error; a reconstruction that moves like the source but is drawn differently does not.
"""

import json
import math

import numpy as np
import pytest

from bvb_addon.audit_stage import with_replay
from bvb_addon.errors import VideoError
from bvb_addon.scene_rules import make_row
from eval_bridge.scoring import replay
from headless.audit import replay_check
from tests.clip_support import write_clip

pytestmark = pytest.mark.unit
W, H, FPS, SECONDS = 96, 72, 8, 3  # 24 frames


def _texture(i, width=W, height=H):
    """A textured frame that pans with i (smooth shading, as a camera sees a room, not noise), at any size."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    x = x * W / width + 2 * i
    y = y * H / height
    image = np.stack([128 + 100 * np.sin(x / 15), 128 + 100 * np.cos(y / 12), 60 + x + y], axis=-1)
    return image.clip(0, 255).astype(np.uint8)


def _flat(i):
    return np.full((H, W, 3), _texture(i).mean((0, 1)), np.uint8)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("replay")
    made = {
        "source": write_clip(folder / "source.mp4", W, H, FPS, SECONDS, 8, _texture)[0],
        # The replay: the same frames rendered at the protocol's square size (stretched), encoded again.
        "replay": write_clip(folder / "replay.mp4", 128, 128, FPS, SECONDS, 8, lambda i: _texture(i, 128, 128))[0],
        # A rebuild that follows the motion but not the pixels: the texture flat-shaded in its mean colours.
        "rebuild": write_clip(folder / "rebuild.mp4", W, H, FPS, SECONDS, 8, _flat)[0],
    }
    (folder / "broken.mp4").write_bytes(b"not a video")
    made["broken"] = folder / "broken.mp4"
    return made


def test_a_replay_is_flagged_and_a_rebuild_is_not(clips):
    replayed = replay.replay_figures(clips["replay"], clips["source"])
    rebuilt = replay.replay_figures(clips["rebuild"], clips["source"])
    assert replayed.frames == rebuilt.frames == replay.LS_FRAMES
    assert replayed.psnr > replay.REPLAY_PSNR_DB > rebuilt.psnr
    assert replayed.ssim > 0.9 > rebuilt.ssim
    assert replay.is_source_replay(replayed) and not replay.is_source_replay(rebuilt)


def test_identical_clips_hit_the_cap():
    frames = np.stack([_texture(i) for i in range(3)])
    same = replay.compare_frames(frames, frames.copy())
    assert same.psnr == replay.PSNR_CAP_DB and same.ssim == pytest.approx(1.0) and same.frames == 3
    assert same.as_dict() == {"psnr": 100.0, "ssim": 1.0, "frames": 3}


def test_psnr_pools_the_squared_errors():
    a = np.zeros((2, 4, 4, 3), np.uint8)
    b = a.copy()
    b[0] = 10  # frame 0 off by 10 everywhere, frame 1 identical: pooled MSE 50
    assert replay.psnr(a, b) == pytest.approx(10 * math.log10(255**2 / 50))


def test_ssim_of_a_constant_shift_matches_the_formula():
    # Flat images: variance 0, so SSIM is the luminance term (2 mu_a mu_b + C1) / (mu_a^2 + mu_b^2 + C1).
    a, b = np.full((32, 32), 100.0), np.full((32, 32), 120.0)
    c1 = (0.01 * 255) ** 2
    assert replay.ssim(a, b) == pytest.approx((2 * 100 * 120 + c1) / (100**2 + 120**2 + c1))


def test_luma_is_bt601():
    assert replay.luma(np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255]], np.uint8)) == pytest.approx(
        [0.299 * 255, 0.587 * 255, 0.114 * 255]
    )


def test_mismatched_stacks_and_broken_clips_are_one_line(clips):
    with pytest.raises(ValueError, match="differ in shape"):
        replay.compare_frames(np.zeros((2, 4, 4, 3), np.uint8), np.zeros((3, 4, 4, 3), np.uint8))
    with pytest.raises(VideoError, match="broken.mp4") as raised:
        replay.replay_figures(clips["broken"], clips["source"])
    assert "\n" not in str(raised.value)


def _run_with_render(tmp_path, clip, row):
    run = tmp_path / "run"
    (run / "camera_renders").mkdir(parents=True)
    render = run / "camera_renders" / "s.mp4"
    render.write_bytes(clip.read_bytes())
    if row is not None:
        (run / "render_status.jsonl").write_text(json.dumps({"scene": "s", "status": "ok", **row}) + "\n")
    return render


def test_only_the_protocols_render_is_flagged(clips, tmp_path):
    # A synthetic suite's oracle rendered by Workbench (the suite's own renderer) reproduces its source as well
    # as a replay does: figures for every preset, a flag only at the protocol's render or an unknown one.
    fast = replay.replay_figures(_run_with_render(tmp_path / "a", clips["replay"], {"preset": "fast"}), clips["source"])
    bvb = replay.replay_figures(_run_with_render(tmp_path / "b", clips["replay"], {"preset": "bvb"}), clips["source"])
    bare = replay.replay_figures(_run_with_render(tmp_path / "c", clips["replay"], None), clips["source"])
    assert fast.psnr == bvb.psnr == bare.psnr > replay.REPLAY_PSNR_DB
    assert (fast.preset, bvb.preset, bare.preset) == ("fast", "bvb", None)
    assert not replay.is_source_replay(fast) and replay.is_source_replay(bvb) and replay.is_source_replay(bare)


def test_the_sample_follows_the_renders_own_frame_count(clips, tmp_path):
    render = _run_with_render(tmp_path, clips["replay"], {"preset": "bvb", "num_samples": 8})
    assert replay.replay_figures(render, clips["source"]).frames == 8
    assert replay.replay_figures(render, clips["source"], count=5).frames == 5


def test_a_caller_names_the_preset_and_sample_before_the_row_exists(clips, tmp_path):
    # The render stage audits a scene before it writes the scene's row: what it passes wins over a stale row.
    render = _run_with_render(tmp_path, clips["replay"], {"preset": "bvb", "num_samples": 64})
    named = replay.replay_figures(render, clips["source"], count=8, preset="fast")
    assert (named.preset, named.frames) == ("fast", 8) and not replay.is_source_replay(named)


def test_the_render_stages_audit_names_its_preset_before_its_row_exists(clips, tmp_path):
    # bvb render audits a scene before writing the scene's render row: told "fast", a Workbench render as close
    # to its source as a synthetic oracle's is not flagged; with no row and no word it counts as the protocol's.
    render = _run_with_render(tmp_path, clips["replay"], None)
    clean = make_row("s", [], [], "4.2")
    told = with_replay(clean, render, clips["source"], replay_check, preset="fast", count=8)
    assert told["status"] == "clean" and told["replay"]["frames"] == 8 and "source_replay" not in told
    untold = with_replay(clean, render, clips["source"], replay_check)
    assert untold["status"] == "violations" and untold["source_replay"]["threshold_db"] == replay.REPLAY_PSNR_DB
