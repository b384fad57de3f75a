"""Latent Similarity with a tiny randomly initialised V-JEPA 2, saved to a folder and loaded by path."""

import json
import shutil

import av
import numpy as np
import pytest

from eval_bridge.cli import main
from eval_bridge.ls import Encoder, preprocess, preprocessing_from
from tests import vjepa_support

pytestmark = pytest.mark.unit
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

NUM_FRAMES = 4
PREPROCESSOR = vjepa_support.PREPROCESSOR


def _clip(path, seed, size=(64, 48), frames=8):
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=4)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": "10"}
        base = rng.integers(0, 256, (size[1] // 8, size[0] // 8, 3), dtype=np.uint8)
        for index in range(frames):
            image = np.kron(np.roll(base, index, axis=1), np.ones((8, 8, 1), np.uint8))
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return vjepa_support.build_tiny_vjepa2(tmp_path_factory.mktemp("vjepa2_tiny"), NUM_FRAMES)


@pytest.fixture(scope="module")
def scored(model_dir, tmp_path_factory):
    """A run of three scenes: an exact render, an unrelated render, and no render; scored through the CLI."""
    root = tmp_path_factory.mktemp("ls_run")
    videos = root / "videos" / "scannet"
    _clip(videos / "same.mp4", seed=1)
    _clip(videos / "other.mp4", seed=2)
    _clip(videos / "missing.mp4", seed=3)
    run = root / "results" / "run"
    (run / "camera_renders").mkdir(parents=True)
    shutil.copy(videos / "same.mp4", run / "camera_renders" / "same.mp4")
    _clip(run / "camera_renders" / "other.mp4", seed=4, size=(80, 48))
    split = root / "split.jsonl"
    split.write_text(
        "".join(
            json.dumps(
                {"id": f"q{i}", "dataset": "scannet", "scene_name": scene, "question_type": "object_counting",
                 "question": "How many chairs?", "options": None, "ground_truth": "2"}
            ) + "\n"
            for i, scene in enumerate(("same", "other", "missing"))
        )
    )  # fmt: skip
    argv = ["ls", "--run", str(run), "--split", str(split), "--videos", str(root / "videos")]
    assert main([*argv, "--encoder", str(model_dir), "--num-frames", str(NUM_FRAMES), "--device", "cpu"]) == 0
    rows = {r["scene"]: r for r in map(json.loads, (run / "vision_sim.jsonl").read_text().splitlines())}
    summary = json.loads((run / "vision_sim_summary.json").read_text())
    return root, run, rows, summary


def test_identical_clips_score_one_on_all_three(scored):
    _, _, rows, _ = scored
    row = rows["same"]
    assert row["status"] == "ok"
    assert row["vision_sim"] == pytest.approx(1.0, abs=1e-6)
    assert row["layout"] == pytest.approx(1.0, abs=1e-6)
    assert row["motion"] == pytest.approx(1.0, abs=1e-6)


def test_an_unrelated_clip_scores_lower(scored):
    _, _, rows, _ = scored
    assert rows["other"]["status"] == "ok"
    assert rows["other"]["vision_sim"] < rows["same"]["vision_sim"] - 1e-3
    assert rows["other"]["layout"] < 1.0 - 1e-3


def test_similarities_match_an_independent_numpy_recomputation(scored, model_dir):
    from bvb_addon.video import read_rgb_frames

    root, run, rows, _ = scored
    source = read_rgb_frames(root / "videos" / "scannet" / "other.mp4", NUM_FRAMES)
    render = read_rgb_frames(run / "camera_renders" / "other.mp4", NUM_FRAMES)
    prep = preprocessing_from(PREPROCESSOR)
    model = transformers.VJEPA2Model.from_pretrained(model_dir).eval()
    pixels = torch.from_numpy(np.stack([preprocess(source, prep), preprocess(render, prep)]))
    with torch.no_grad():
        tokens = model(pixel_values_videos=pixels, skip_predictor=True).last_hidden_state.numpy().astype(np.float64)
    # T/2 x h x w x D with tubelet 2 and 16 px patches on a 32 px crop.
    a, b = tokens[0].reshape(2, 2, 2, -1), tokens[1].reshape(2, 2, 2, -1)
    ma, mb = a.reshape(-1, a.shape[-1]).mean(axis=0), b.reshape(-1, b.shape[-1]).mean(axis=0)
    motion = ma @ mb / (np.linalg.norm(ma) * np.linalg.norm(mb))
    pa, pb = a.mean(axis=0), b.mean(axis=0)
    cosines = [
        pa[i, j] @ pb[i, j] / (np.linalg.norm(pa[i, j]) * np.linalg.norm(pb[i, j])) for i in range(2) for j in range(2)
    ]
    layout = float(np.mean(cosines))
    assert rows["other"]["motion"] == pytest.approx(motion, abs=1e-5)
    assert rows["other"]["layout"] == pytest.approx(layout, abs=1e-5)
    assert rows["other"]["vision_sim"] == pytest.approx((layout + motion) / 2, abs=1e-5)


def test_failures_count_as_zero_with_a_scored_only_mean_beside(scored):
    _, _, rows, summary = scored
    assert rows["missing"]["status"] == "no_render" and rows["missing"]["vision_sim"] == 0.0
    ok = [rows["same"]["vision_sim"], rows["other"]["vision_sim"]]
    assert summary["vision_sim"] == pytest.approx(sum(ok) / 3)
    assert summary["vision_sim_std"] == pytest.approx(float(np.std([*ok, 0.0])))
    assert summary["vision_sim_scored"] == pytest.approx(sum(ok) / 2)
    assert summary["layout"] == pytest.approx((rows["same"]["layout"] + rows["other"]["layout"]) / 3)
    assert summary["counts"] == {"scenes": 3, "scored": 2, "failed": 1, "by_status": {"ok": 2, "no_render": 1}}
    assert summary["grid"] == [2, 2, 2] and summary["num_frames"] == NUM_FRAMES


def test_preprocessing_matches_torch_antialiased_resize_crop_and_normalise():
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (2, 48, 80, 3), dtype=np.uint8)
    prep = preprocessing_from(PREPROCESSOR)
    # The processor derives the resize from the crop: int(32 * 256 / 224) = 36 on the short side.
    assert prep.shortest_edge == 36
    ours = preprocess(frames, prep)
    x = torch.from_numpy(frames).permute(0, 3, 1, 2).float()
    x = torch.nn.functional.interpolate(x, size=(36, 60), mode="bilinear", antialias=True, align_corners=False)
    x = x.round().clamp(0, 255)[:, :, 2:34, 14:46] / 255
    mean, std = torch.tensor(PREPROCESSOR["image_mean"]), torch.tensor(PREPROCESSOR["image_std"])
    x = (x - mean[:, None, None]) / std[:, None, None]
    assert ours.shape == (2, 3, 32, 32)
    # One grey level of rounding at most, divided by the smallest std.
    assert np.abs(ours - x.numpy()).max() <= 1 / 255 / 0.224 + 1e-5


def test_resume_keeps_scored_scenes(scored, model_dir):
    root, run, rows, _ = scored
    before = (run / "vision_sim.jsonl").read_text()
    encoder = Encoder(str(model_dir), "cpu", "float32", num_frames=NUM_FRAMES)
    calls = []
    original = encoder.score
    encoder.score = lambda a, b: calls.append(1) or original(a, b)
    from bvb_addon.dataset import read_split
    from eval_bridge.ls import run_ls

    run_ls(run, read_split(root / "split.jsonl"), root / "videos", encoder, resume=True)
    assert calls == []  # both ok scenes kept; the failed one has no render to score
    assert (run / "vision_sim.jsonl").read_text() == before


def test_without_weights_the_message_says_what_to_pass(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("BVB_VJEPA_MODEL", raising=False)
    split = tmp_path / "split.jsonl"
    row = {
        "id": "q",
        "dataset": "d",
        "scene_name": "s",
        "question_type": "object_counting",
        "question": "How many?",
        "ground_truth": "1",
    }
    split.write_text(json.dumps(row) + "\n")
    argv = ["ls", "--run", str(tmp_path), "--split", str(split), "--videos", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--encoder" in err and "vjepa2" in err
    assert main([*argv, "--encoder", str(tmp_path / "no_such_weights")]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot load V-JEPA 2 weights" in err and "--encoder" in err and len(err.splitlines()) == 1


def test_resume_reads_an_older_harness_s_rows_and_names_a_corrupt_rows_file(scored, model_dir, tmp_path):
    # The rows go through records.LSRow: a file without format fields resumes; a line that is not a row is named.
    from bvb_addon.dataset import read_split
    from bvb_addon.errors import BadFileError
    from eval_bridge.ls import run_ls

    root, scored_run, _, _ = scored
    run = tmp_path / "run"
    shutil.copytree(scored_run, run)
    lines = (run / "vision_sim.jsonl").read_text().splitlines()
    old = [{k: v for k, v in json.loads(line).items() if k != "format"} for line in lines]
    (run / "vision_sim.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    encoder = Encoder(str(model_dir), "cpu", "float32", num_frames=NUM_FRAMES)
    calls = []
    original = encoder.score
    encoder.score = lambda a, b: calls.append(1) or original(a, b)
    questions = read_split(root / "split.jsonl")
    run_ls(run, questions, root / "videos", encoder, resume=True)
    assert calls == [] and (run / "vision_sim.jsonl").read_text().splitlines() == lines
    (run / "vision_sim.jsonl").write_text(lines[0] + '\n{"scene": "other", "status": 7}\n')
    with pytest.raises(BadFileError, match=f"LS row {run / 'vision_sim.jsonl'} line 2: 'status' is int"):
        run_ls(run, questions, root / "videos", encoder, resume=True)
    assert calls == []
