"""Latent Similarity as BVB's release computes it, with a tiny remote-code encoder the test writes.

The facts checked are the release's (``eval/vjepa_sim_metric.py``, ``eval/README.md``,
``eval/merge_vision_sim_shards.py`` of callingforhelp/BVB), written here as literals: its frame
indices for given frame counts, its row and summary field names, failures as null rows counted 0
(README) with the stored code's scored-only means beside, the shard files' names and checks.
"""

import json
import shutil
import statistics

import av
import numpy as np
import pytest

from eval_bridge.cli import main
from eval_bridge.scoring.ls_video import read_every_frame, read_sampled_frames, sample_frame_indices
from tests import vjepa_support

pytestmark = pytest.mark.unit
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

NUM_FRAMES = 4
PREPROCESSOR = vjepa_support.PREPROCESSOR
SCENES = ("same", "other", "missing")
# The release's summary keys (summarize() and main() of vjepa_sim_metric.py; scored_only from its README).
RELEASE_SUMMARY = {
    "num_scenes", "num_ok", "num_error", "vision_sim", "vision_sim_std", "layout_sim", "layout_sim_std",
    "motion_sim", "motion_sim_std", "by_status", "model", "device", "num_frames", "scored_only",
}  # fmt: skip
RELEASE_ROW = {"id", "status", "vision_sim", "layout_sim", "motion_sim"}


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
def offline(tmp_path_factory):
    """transformers copies a snapshot's code into its modules cache: a temporary one here; no hub access."""
    import transformers.dynamic_module_utils as dynamic

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dynamic, "HF_MODULES_CACHE", str(tmp_path_factory.mktemp("hf_modules")))
        patch.setenv("HF_HUB_OFFLINE", "1")
        yield patch


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, offline):
    return vjepa_support.build_tiny_remote_code(tmp_path_factory.mktemp("snapshot") / "vjepa21-tiny")


def _split(path, scenes):
    rows = [
        {"id": f"q{i}", "dataset": "scannet", "scene_name": scene, "question_type": "object_counting",
         "question": "How many chairs?", "options": None, "ground_truth": "2"}
        for i, scene in enumerate(scenes)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run_tree(root):
    """Three scenes: an exact render, an unrelated render (other size, 6 frames), and no render."""
    videos = root / "videos" / "scannet"
    for seed, scene in enumerate(SCENES, 1):
        _clip(videos / f"{scene}.mp4", seed=seed)
    run = root / "results" / "run"
    (run / "camera_renders").mkdir(parents=True)
    shutil.copy(videos / "same.mp4", run / "camera_renders" / "same.mp4")
    _clip(run / "camera_renders" / "other.mp4", seed=4, size=(80, 48), frames=6)
    return run, _split(root / "split.jsonl", SCENES)


def _argv(root, run, split, model_dir, *extra):
    return ["ls", "--run", str(run), "--split", str(split), "--videos", str(root / "videos"),
            "--encoder", str(model_dir), "--num-frames", str(NUM_FRAMES), "--device", "cpu", *extra]  # fmt: skip


def _rows(path):
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


@pytest.fixture(scope="module")
def scored(model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("ls_run")
    run, split = _run_tree(root)
    assert main(_argv(root, run, split, model_dir)) == 0
    return root, run, split, _rows(run / "vision_sim.jsonl"), json.loads((run / "vision_sim_summary.json").read_text())


def test_frame_indices_are_the_releases():
    # round(i * (N - 1) / (T - 1)) over the decoded count, Python's round (ties to even: 4.5 -> 4).
    assert sample_frame_indices(100, 64) == [
        0, 2, 3, 5, 6, 8, 9, 11, 13, 14, 16, 17, 19, 20, 22, 24, 25, 27, 28, 30, 31, 33, 35, 36, 38, 39, 41, 42,
        44, 46, 47, 49, 50, 52, 53, 55, 57, 58, 60, 61, 63, 64, 66, 68, 69, 71, 72, 74, 75, 77, 79, 80, 82, 83,
        85, 86, 88, 90, 91, 93, 94, 96, 97, 99,
    ]  # fmt: skip
    assert sample_frame_indices(4500, 64)[:8] == [0, 71, 143, 214, 286, 357, 428, 500]
    assert sample_frame_indices(4500, 64)[-2:] == [4428, 4499]
    assert sample_frame_indices(7, 5) == [0, 2, 3, 4, 6]
    assert sample_frame_indices(8, 4) == [0, 2, 5, 7]
    # 64 frames or fewer: each once, then the last repeated; one frame: that frame every time.
    assert sample_frame_indices(64, 64) == list(range(64))
    assert sample_frame_indices(50, 64) == list(range(50)) + [49] * 14
    assert sample_frame_indices(3, 6) == [0, 1, 2, 2, 2, 2]
    assert sample_frame_indices(1, 64) == [0] * 64
    assert sample_frame_indices(65, 64) == list(range(32)) + list(range(33, 65))  # 32 * 64 / 63 = 32.51 -> 33


def test_only_the_sampled_frames_are_kept_and_they_are_the_decoded_ones(tmp_path):
    path = tmp_path / "clip.mp4"
    _clip(path, seed=3, frames=11)
    every = read_every_frame(path)
    sampled = read_sampled_frames(path, NUM_FRAMES)
    assert (sampled.total, sampled.indices) == (11, (0, 3, 7, 10))
    assert all(np.array_equal(sampled.frames[k], every[i]) for k, i in enumerate(sampled.indices))
    cv2 = pytest.importorskip("cv2")  # the release decodes with OpenCV: the same pixels
    capture = cv2.VideoCapture(str(path))
    decoded = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        decoded.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    capture.release()
    assert len(decoded) == 11 and all(np.array_equal(a, b) for a, b in zip(decoded, every, strict=True))


def test_rows_carry_the_releases_fields_and_the_frames_each_clip_gave(scored):
    _, _, _, rows, _ = scored
    assert list(rows) == list(SCENES)
    for scene in ("same", "other"):
        assert RELEASE_ROW <= set(rows[scene]) and rows[scene]["status"] == "ok"
    assert rows["same"]["vision_sim"] == pytest.approx(1.0, abs=1e-6)
    assert rows["same"]["layout_sim"] == pytest.approx(1.0, abs=1e-6)
    assert rows["same"]["motion_sim"] == pytest.approx(1.0, abs=1e-6)
    assert rows["other"]["vision_sim"] < rows["same"]["vision_sim"] - 1e-3
    # Source: 8 frames -> round(i * 7 / 3); the 6-frame render -> round(i * 5 / 3).
    assert (rows["other"]["source_frames"], rows["other"]["source_frame_count"]) == ([0, 2, 5, 7], 8)
    assert (rows["other"]["render_frames"], rows["other"]["render_frame_count"]) == ([0, 2, 3, 5], 6)
    missing = rows["missing"]
    assert missing["status"] == "no_render" and missing["error"].startswith("no submission")
    assert (missing["vision_sim"], missing["layout_sim"], missing["motion_sim"]) == (None, None, None)
    assert rows["same"]["model"].startswith("vjepa21-tiny@") and rows["same"]["num_frames"] == NUM_FRAMES


def test_summary_counts_failures_as_zero_and_keeps_the_scored_only_means(scored):
    _, _, _, rows, summary = scored
    assert RELEASE_SUMMARY <= set(summary)
    ok = [rows["same"]["vision_sim"], rows["other"]["vision_sim"]]
    assert (summary["num_scenes"], summary["num_ok"], summary["num_error"]) == (3, 2, 1)
    assert summary["by_status"] == {"no_render": 1, "ok": 2}
    assert summary["mean_rule"] == "failures_as_zero"
    assert summary["vision_sim"] == pytest.approx(statistics.fmean([*ok, 0.0]))
    assert summary["vision_sim_std"] == pytest.approx(statistics.pstdev([*ok, 0.0]))
    assert summary["layout_sim"] == pytest.approx((rows["same"]["layout_sim"] + rows["other"]["layout_sim"]) / 3)
    scored_only = summary["scored_only"]
    assert scored_only["vision_sim"] == pytest.approx(statistics.fmean(ok))
    assert scored_only["vision_sim_std"] == pytest.approx(statistics.pstdev(ok))
    assert scored_only["num_ok"] == 2 and set(scored_only) >= {"layout_sim", "motion_sim", "motion_sim_std"}
    assert summary["failures"] == {"missing": {"status": "no_render", "error": rows["missing"]["error"]}}
    assert summary["num_frames"] == NUM_FRAMES and summary["device"] == "cpu" and summary["dtype"] == "float32"


def test_the_snapshot_loads_with_its_own_code_and_names_its_weights(scored, model_dir):
    import hashlib

    from eval_bridge.scoring.ls import Encoder, device_and_dtype

    _, _, _, _, summary = scored
    weights = hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()
    expected = hashlib.sha256(f"model.safetensors {weights}\n".encode()).hexdigest()
    assert summary["checkpoint_sha256"] == expected and summary["encoder"] == "vjepa21-tiny"
    encoder = Encoder(model_dir, "cpu", "auto", num_frames=NUM_FRAMES)
    assert type(encoder.model).__name__ == "TinyVJEPA21Model" and encoder.model_id == f"vjepa21-tiny@{expected[:12]}"
    assert device_and_dtype(torch, "cpu", "auto") == ("cpu", "float32")
    assert device_and_dtype(torch, "cuda:0", "auto") == ("cuda:0", "bfloat16")


def test_similarities_match_an_independent_recomputation(scored, model_dir):
    from eval_bridge.scoring.ls import Encoder, preprocess, preprocessing_from

    root, run, _, rows, _ = scored
    source = read_sampled_frames(root / "videos" / "scannet" / "other.mp4", NUM_FRAMES).frames
    render = read_sampled_frames(run / "camera_renders" / "other.mp4", NUM_FRAMES).frames
    encoder = Encoder(model_dir, "cpu", "float32", num_frames=NUM_FRAMES)
    prep = preprocessing_from({**PREPROCESSOR, "video_processor_type": "VJEPA21VideoProcessor"})
    pixels = torch.from_numpy(np.stack([preprocess(source, prep), preprocess(render, prep)]))
    with torch.no_grad():
        out = encoder.model(pixel_values_videos=pixels, skip_predictor=True).last_hidden_state
    tokens = out.numpy().astype(np.float64)
    # T/2 x h x w x D: 2 tubelets, a 2 x 2 patch grid on the 32 px crop.
    a, b = tokens[0].reshape(2, 2, 2, -1), tokens[1].reshape(2, 2, 2, -1)
    ma, mb = a.reshape(-1, a.shape[-1]).mean(axis=0), b.reshape(-1, b.shape[-1]).mean(axis=0)
    motion = ma @ mb / (np.linalg.norm(ma) * np.linalg.norm(mb))
    pa, pb = a.mean(axis=0), b.mean(axis=0)
    layout = float(np.mean([pa[i, j] @ pb[i, j] / (np.linalg.norm(pa[i, j]) * np.linalg.norm(pb[i, j]))
                            for i in range(2) for j in range(2)]))  # fmt: skip
    assert rows["other"]["motion_sim"] == pytest.approx(motion, abs=1e-5)
    assert rows["other"]["layout_sim"] == pytest.approx(layout, abs=1e-5)
    assert rows["other"]["vision_sim"] == pytest.approx((layout + motion) / 2, abs=1e-5)


def test_preprocessing_matches_torch_antialiased_resize_crop_and_normalise():
    from eval_bridge.scoring.ls import preprocess, preprocessing_from

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


def test_foreign_rows_are_kept_byte_for_byte_and_unknown_keys_carried(scored, model_dir, tmp_path):
    root, scored_run, split, rows, _ = scored
    run = tmp_path / "run"
    shutil.copytree(scored_run, run)
    # A release row of a scene outside the split (its own spacing), and unknown keys on a split scene's row.
    foreign = '{"id": "elsewhere",  "status": "ok", "vision_sim": 0.50, "render_cached": true}'
    other = {**rows["other"], "render_source": "video.mp4", "node": "gpu-3"}
    lines = [json.dumps(rows["same"]), foreign, json.dumps(other), json.dumps(rows["missing"])]
    (run / "vision_sim.jsonl").write_text("\n".join(lines) + "\n")
    assert main(_argv(root, run, split, model_dir)) == 0
    text = (run / "vision_sim.jsonl").read_text().splitlines()
    assert text[-1] == foreign and len(text) == 4
    again = _rows(run / "vision_sim.jsonl")
    assert (again["other"]["render_source"], again["other"]["node"]) == ("video.mp4", "gpu-3")
    summary = json.loads((run / "vision_sim_summary.json").read_text())
    assert summary["num_scenes"] == 3 and summary["foreign_rows"] == 1


def test_a_torn_or_newer_rows_file_is_refused_before_anything_is_written(scored, model_dir, tmp_path, capsys):
    root, scored_run, split, rows, _ = scored
    run = tmp_path / "run"
    shutil.copytree(scored_run, run)
    for bad, says in (
        (json.dumps(rows["same"]) + '\n{"id": "other", "sta', "line 2 is not JSON"),
        (json.dumps({**rows["same"], "format": 99}) + "\n", "is format 99, newer than this harness's"),
    ):
        (run / "vision_sim.jsonl").write_text(bad)
        before = (run / "vision_sim_summary.json").read_bytes()
        assert main(_argv(root, run, split, model_dir)) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0] and "vision_sim.jsonl" in err[0]
        assert (run / "vision_sim.jsonl").read_text() == bad and (
            run / "vision_sim_summary.json"
        ).read_bytes() == before


def test_resume_keeps_scored_scenes_and_rescores_an_older_format(scored, model_dir, tmp_path):
    from bvb_addon.dataset import read_split
    from eval_bridge.scoring.ls import Encoder, run_ls
    from eval_bridge.scoring.options import LSOptions

    root, scored_run, split, rows, _ = scored
    run = tmp_path / "run"
    shutil.copytree(scored_run, run)
    before = (run / "vision_sim.jsonl").read_text()
    encoder = Encoder(model_dir, "cpu", "float32", num_frames=NUM_FRAMES)
    calls = []
    original = encoder.score
    encoder.score = lambda a, b: calls.append(1) or original(a, b)
    run_ls(LSOptions(run, split, root / "videos", resume=True), read_split(split), encoder)
    assert calls == [] and (run / "vision_sim.jsonl").read_text() == before
    # This harness's first format (scene, layout, motion, reason; bin-centre frames): read, then scored again.
    old = {"scene": "same", "status": "ok", "dataset": "scannet", "model": rows["same"]["model"], "num_frames": 4,
           "reason": "", "vision_sim": 0.9, "layout": 0.9, "motion": 0.9, "format": 1}  # fmt: skip
    (run / "vision_sim.jsonl").write_text(json.dumps(old) + "\n")
    run_ls(LSOptions(run, split, root / "videos", resume=True), read_split(split), encoder)
    assert len(calls) == 2  # same and other; missing has no render
    assert _rows(run / "vision_sim.jsonl")["same"]["vision_sim"] == pytest.approx(1.0, abs=1e-6)


def test_a_run_that_selected_some_scenes_is_scored_over_those_only(scored, model_dir, tmp_path):
    """Issue 42 point 5: config.json's selection (bvb run --limit/--scenes/--shard) is LS's pool, failures included;
    a run without it (older, the release's) is scored over the whole split, as the fixture's run is."""
    root, scored_run, split, _, summary = scored
    assert summary["num_scenes"] == len(SCENES)
    run = tmp_path / "run"
    (run / "camera_renders").mkdir(parents=True)
    shutil.copy(scored_run / "camera_renders" / "other.mp4", run / "camera_renders" / "other.mp4")
    (run / "config.json").write_text(json.dumps({"selection": {"scenes": ["other", "missing"]}}))
    assert main(_argv(root, run, split, model_dir)) == 0
    assert sorted(_rows(run / "vision_sim.jsonl")) == ["missing", "other"]  # "missing" has no render: a failure
    selected = json.loads((run / "vision_sim_summary.json").read_text())
    assert selected["num_scenes"] == 2 and selected["num_error"] == 1


def test_enforce_scores_a_scene_breaking_the_rules_0_without_the_encoder_and_refuses_an_unaudited_one(
    scored, model_dir, tmp_path
):
    """Issue 40: --rules enforce. "same" is a pixel replay of its source (LS 1.0 as released): flagged by the
    audit, it scores 0; "other" is clean and keeps its score; "missing" has no render and needs no row."""
    from bvb_addon.dataset import read_split
    from bvb_addon.scene_rules import RULES_VERSION, make_row
    from eval_bridge.scoring.ls import Encoder, run_ls
    from eval_bridge.scoring.options import LSOptions

    root, scored_run, split, rows, summary = scored
    run = tmp_path / "run"
    shutil.copytree(scored_run, run)
    replay = make_row("same", [], [], "4.2", source_replay={"psnr": 60.0, "ssim": 1.0, "threshold_db": 30.0})
    (run / "scene_rules.jsonl").write_text(json.dumps(replay) + "\n")
    encoder = Encoder(model_dir, "cpu", "float32", num_frames=NUM_FRAMES)
    calls = []
    original = encoder.score
    encoder.score = lambda a, b: calls.append(1) or original(a, b)
    enforce = LSOptions(run, split, root / "videos", resume=True, rules="enforce")
    with pytest.raises(Exception, match=f"other not audited .*bvb audit --run {run}"):
        run_ls(enforce, read_split(split), encoder)
    clean = make_row("other", [], [], "4.2")
    (run / "scene_rules.jsonl").write_text(json.dumps(replay) + "\n" + json.dumps(clean) + "\n")
    written = run_ls(enforce, read_split(split), encoder)
    assert calls == []  # "other" resumed as scored; "same" never reaches the encoder
    after = _rows(run / "vision_sim.jsonl")
    assert after["same"]["status"] == "rule_break" and after["same"]["vision_sim"] is None
    assert "source_replay" in after["same"]["error"] and after["other"] == rows["other"]
    assert written["vision_sim"] == pytest.approx(rows["other"]["vision_sim"] / 3)
    assert (written["rules"], written["rules_version"]) == ("enforce", RULES_VERSION)
    assert written["by_status"]["rule_break"] == 1
    # Back to report: the scene is embedded again and scores as released.
    written = run_ls(LSOptions(run, split, root / "videos", resume=True), read_split(split), encoder)
    assert len(calls) == 1 and written["vision_sim"] == pytest.approx(summary["vision_sim"])
    assert written["rules"] == "report"


def test_shards_score_apart_and_merge_with_the_releases_checks(scored, model_dir, tmp_path):
    from eval_bridge.scoring.ls import LSError, merge_ls_shards

    root, scored_run, split, rows, summary = scored
    run = tmp_path / "run"
    shutil.copytree(scored_run, run, ignore=shutil.ignore_patterns("vision_sim*"))
    # Scenes in name order (missing, other, same): shard 1 of 2 takes missing and same, 2 of 2 takes other.
    assert main(_argv(root, run, split, model_dir, "--shard", "1/2")) == 0
    assert set(_rows(run / "vision_sim.shard-1-of-2.jsonl")) == {"missing", "same"}
    assert not (run / "vision_sim.jsonl").exists()
    # What the merge rewrites keeps what it does not know: a foreign row's line, a summary's unknown key.
    foreign = '{"id": "elsewhere", "status": "error", "vision_sim": null}'
    (run / "vision_sim.jsonl").write_text(foreign + "\n")
    (run / "vision_sim_summary.json").write_text('{"vision_sim": 0.1, "added_by_hand": true}')
    assert main(_argv(root, run, split, model_dir, "--shard", "2/2")) == 0
    merged = _rows(run / "vision_sim.jsonl")
    assert list(merged) == ["missing", "other", "same", "elsewhere"]  # the release's merge: by scene id
    assert (run / "vision_sim.jsonl").read_text().splitlines()[-1] == foreign
    assert json.loads((run / "vision_sim_summary.json").read_text())["added_by_hand"] is True
    assert merged["other"]["vision_sim"] == pytest.approx(rows["other"]["vision_sim"], abs=1e-6)
    again = json.loads((run / "vision_sim_summary.json").read_text())
    assert again["vision_sim"] == pytest.approx(summary["vision_sim"], abs=1e-6)
    assert again["encoder"] == summary["encoder"] and (run / "vision_sim.shard-2-of-2.jsonl").is_file()
    (run / "vision_sim.shard-1-of-3.jsonl").write_text("")
    with pytest.raises(LSError, match=r"mixed shard counts .*\[2, 3\]"):
        merge_ls_shards(run)
    with pytest.raises(LSError, match=r"missing shards of 3 .*\[2, 3\]"):
        merge_ls_shards(run, 3)
    shutil.copy(run / "vision_sim.shard-1-of-2.jsonl", run / "vision_sim.shard-2-of-2.jsonl")
    with pytest.raises(LSError, match="scene 'same' is in two shards"):
        merge_ls_shards(run, 2)


def test_without_a_snapshot_the_message_says_what_to_pass(tmp_path, capsys, monkeypatch, offline):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty_hub_cache"))
    monkeypatch.delenv("BVB_VJEPA_MODEL", raising=False)
    _clip(tmp_path / "videos" / "d" / "s.mp4", seed=1)
    split = tmp_path / "split.jsonl"
    split.write_text(json.dumps({"id": "q", "dataset": "d", "scene_name": "s", "question_type": "object_counting",
                                 "question": "How many?", "ground_truth": "1"}) + "\n")  # fmt: skip
    argv = ["ls", "--run", str(tmp_path), "--split", str(split), "--videos", str(tmp_path / "videos")]
    for extra in ((), ("--encoder", str(tmp_path / "no_such_weights"))):
        assert main([*argv, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--encoder" in err
        assert "huggingface-cli download apiantonio/vjepa2.1-vit-gigantic-384 --local-dir" in err


def test_the_default_id_is_found_in_the_local_hub_cache_only(model_dir, tmp_path, monkeypatch, offline):
    import hashlib

    import huggingface_hub.constants

    from eval_bridge.scoring.ls import DEFAULT_ENCODER, EncoderSpec

    # The hub cache's layout: snapshots/<rev>/<file> links to blobs/<sha256> (what a download leaves).
    cache = tmp_path / "hub"
    repo = cache / f"models--{DEFAULT_ENCODER.replace('/', '--')}"
    snapshot = repo / "snapshots" / ("a" * 40)
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    for item in model_dir.iterdir():
        if item.is_file():
            data = item.read_bytes()
            blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
            blob.write_bytes(data)
            (snapshot / item.name).symlink_to(blob)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    encoder = EncoderSpec(device="cpu", num_frames=NUM_FRAMES).build()
    digest = hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()
    assert encoder.info()["model"] == DEFAULT_ENCODER and encoder.encoder == DEFAULT_ENCODER
    expected = hashlib.sha256(f"model.safetensors {digest}\n".encode()).hexdigest()
    assert encoder.checkpoint_sha256 == expected and encoder.model_id == f"{DEFAULT_ENCODER}@{expected[:12]}"


def test_a_clip_whose_packets_miscount_its_frames_is_decoded_again_at_the_true_count(tmp_path, monkeypatch):
    import eval_bridge.scoring.ls_video as ls_video

    path = tmp_path / "clip.mp4"
    _clip(path, seed=5, frames=11)
    every = read_every_frame(path)
    monkeypatch.setattr(ls_video, "count_packets", lambda _path: 5)  # a header-level guess that is wrong
    sampled = read_sampled_frames(path, NUM_FRAMES)
    assert (sampled.total, sampled.indices) == (11, (0, 3, 7, 10))
    assert all(np.array_equal(sampled.frames[k], every[i]) for k, i in enumerate(sampled.indices))


def test_means_are_taken_in_the_encoders_dtype_and_cosines_in_float32():
    from eval_bridge.scoring.ls import similarities, token_grid

    # The release's grid: T/2 tubelets, a square of patches; no square -> layout is motion.
    assert token_grid(32 * 24 * 24, 64) == (32, 24, 24) and token_grid(32 * 6, 64) == (32, 192, 1)
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(2 * 2 * 2, 16, generator=generator).to(torch.bfloat16)
    b = (a.float() + 0.3 * torch.randn(8, 16, generator=generator)).to(torch.bfloat16)
    layout, motion, vision = similarities(a, b, 4)
    # By hand: the mean of the bfloat16 tokens rounded to bfloat16 (a bfloat16 mean's result), then float64 cosines.
    ma, mb = a.double().mean(0).to(torch.bfloat16).double(), b.double().mean(0).to(torch.bfloat16).double()
    assert motion == pytest.approx(float(ma @ mb / (ma.norm() * mb.norm())), abs=1e-6)
    pa = a.double().reshape(2, 2, 2, 16).mean(0).to(torch.bfloat16).double().reshape(4, 16)
    pb = b.double().reshape(2, 2, 2, 16).mean(0).to(torch.bfloat16).double().reshape(4, 16)
    expected = float(((pa * pb).sum(1) / (pa.norm(dim=1) * pb.norm(dim=1))).mean())
    assert layout == pytest.approx(expected, abs=1e-6) and vision == pytest.approx((layout + motion) / 2)
    assert similarities(a[:6], b[:6], 4)[0] == similarities(a[:6], b[:6], 4)[1]  # 6 tokens: no square grid


def test_a_remote_code_processor_named_only_in_auto_map_derives_its_resize_from_the_crop():
    from eval_bridge.scoring.ls import preprocessing_from

    config = {"auto_map": {"AutoVideoProcessor": "video_processing_vjepa21.VJEPA21VideoProcessor"},
              "crop_size": 384, "size": {"shortest_edge": 999}}  # fmt: skip
    prep = preprocessing_from(config)
    # VJEPA2's and VJEPA21's processors set the resize to int(crop * 256 / 224), whatever "size" says.
    assert (prep.shortest_edge, prep.crop_hw) == (438, (384, 384))
