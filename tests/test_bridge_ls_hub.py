"""V-JEPA 2.1 through its release's loader: a torch-hub entry point of a local vjepa2 checkout and a .pt.

The checkout is a tiny stand-in the test writes (tests/vjepa_hub_support.py), so the real loading
code (torch.hub.load(source="local", pretrained=False), the checkpoint key, the prefixes) runs offline.
"""

import hashlib
import json
import shutil

import pytest

# Before the imports below: tests.test_bridge_ls skips itself without torch, which would make
# its import here an ImportError (a collection error where torch is absent, as in ./bvb test-blender).
torch = pytest.importorskip("torch")

from eval_bridge.cli import main  # noqa: E402
from eval_bridge.scoring.ls import EncoderSpec, HubEncoder, LSError  # noqa: E402
from tests.test_bridge_ls import _clip  # noqa: E402
from tests.vjepa_hub_support import write_hub_repo  # noqa: E402

pytestmark = pytest.mark.unit
ENTRY = "vjepa2_1_vit_large_384"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    return write_hub_repo(tmp_path_factory.mktemp("vjepa2_checkout"))


def test_the_release_entry_point_loads_with_the_checkpoints_encoder_weights(hub):
    repo, checkpoint, state = hub
    encoder = EncoderSpec(ENTRY, "cpu", "float32", num_frames=4, encoder_repo=str(repo),
                          checkpoint=str(checkpoint)).build()  # fmt: skip
    assert isinstance(encoder, HubEncoder)
    loaded = encoder.model.state_dict()
    assert set(loaded) == set(state) and all(torch.equal(loaded[k], state[k]) for k in state)
    # The release's preprocessing: 384 px crop from a 438 px short side, ImageNet normalisation.
    assert encoder.prep.crop_hw == (384, 384) and encoder.prep.shortest_edge == 438
    assert encoder.prep.mean == (0.485, 0.456, 0.406) and encoder.grid == (2, 24, 24)
    sha = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    info = encoder.info()
    assert (info["encoder"], info["checkpoint_key"], info["checkpoint_sha256"]) == (ENTRY, "ema_encoder", sha)
    assert encoder.model_id == f"{ENTRY}@{sha[:12]}"


def test_target_encoder_checkpoints_and_wrong_ones(hub, tmp_path):
    repo, _, _ = hub
    other, checkpoint, _ = write_hub_repo(tmp_path / "giant", checkpoint_key="target_encoder", seed=1)
    assert HubEncoder(ENTRY, repo, checkpoint, "cpu", "float32", 4).checkpoint_key == "target_encoder"
    torch.save({"optimizer": {}}, tmp_path / "bad.pt")
    with pytest.raises(LSError, match="has none of ema_encoder, target_encoder, encoder"):
        HubEncoder(ENTRY, repo, tmp_path / "bad.pt", "cpu", "float32", 4)
    torch.save({"ema_encoder": {"blocks.0.weight": torch.zeros(1)}}, tmp_path / "other.pt")
    with pytest.raises(LSError, match="does not fit vjepa2_1_vit_large_384"):
        HubEncoder(ENTRY, repo, tmp_path / "other.pt", "cpu", "float32", 4)
    with pytest.raises(LSError, match="holds no hubconf.py"):
        HubEncoder(ENTRY, tmp_path, checkpoint, "cpu", "float32", 4)
    with pytest.raises(LSError, match="cannot build 'vjepa2_1_vit_nope_384'"):
        HubEncoder("vjepa2_1_vit_nope_384", repo, checkpoint, "cpu", "float32", 4)


def test_ls_scores_with_v_jepa_2_1_and_records_encoder_and_checkpoint(hub, tmp_path, capsys):
    repo, checkpoint, _ = hub
    videos = tmp_path / "videos" / "scannet"
    _clip(videos / "same.mp4", seed=1)
    _clip(videos / "other.mp4", seed=2)
    run = tmp_path / "results" / "run"
    (run / "camera_renders").mkdir(parents=True)
    shutil.copy(videos / "same.mp4", run / "camera_renders" / "same.mp4")
    _clip(run / "camera_renders" / "other.mp4", seed=5)
    split = tmp_path / "split.jsonl"
    split.write_text("".join(json.dumps({"id": f"q{i}", "dataset": "scannet", "scene_name": scene,
                     "question_type": "object_counting", "question": "How many?", "options": None,
                     "ground_truth": "1"}) + "\n" for i, scene in enumerate(("same", "other"))))  # fmt: skip
    for scene in ("same", "other"):
        (run / "blends").mkdir(exist_ok=True)
        (run / "blends" / f"{scene}.blend").write_bytes(b"BLENDER")
    argv = ["ls", "--run", str(run), "--split", str(split), "--videos", str(tmp_path / "videos"), "--encoder", ENTRY,
            "--encoder-repo", str(repo), "--checkpoint", str(checkpoint), "--num-frames", "4", "--device", "cpu"]  # fmt: skip
    assert main(argv) == 0
    rows = {r["id"]: r for r in map(json.loads, (run / "vision_sim.jsonl").read_text().splitlines())}
    assert rows["same"]["status"] == "ok" and rows["same"]["vision_sim"] == pytest.approx(1.0, abs=1e-5)
    assert rows["other"]["vision_sim"] < rows["same"]["vision_sim"]
    summary = json.loads((run / "vision_sim_summary.json").read_text())
    sha = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    assert (summary["encoder"], summary["checkpoint_sha256"]) == (ENTRY, sha)
    assert summary["preprocessing"]["crop_hw"] == [384, 384] and summary["num_frames"] == 4
    assert f"encoder {ENTRY} (checkpoint {checkpoint}, sha256 {sha[:12]})" in capsys.readouterr().out
    # The leaderboard shows which encoder and checkpoint scored the run.
    assert main(["overall", "--run", str(run)]) in (0,)
    identity = json.loads((run / "overall.json").read_text())["identity"]
    assert (identity["encoder"], identity["checkpoint"]) == (ENTRY, sha[:16])
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    assert f"encoder {ENTRY}@{sha[:12]}" in (tmp_path / "report" / "index.html").read_text()
    # --resume keeps a scene only while its clips are the ones it was scored on (before: kept whatever).
    kept = (run / "vision_sim.jsonl").read_text()
    assert main([*argv, "--resume"]) == 0 and (run / "vision_sim.jsonl").read_text() == kept
    shutil.copy(videos / "other.mp4", run / "camera_renders" / "other.mp4")  # "other" re-rendered exactly
    assert main([*argv, "--resume"]) == 0
    rows = {r["id"]: r for r in map(json.loads, (run / "vision_sim.jsonl").read_text().splitlines())}
    assert rows["other"]["vision_sim"] == pytest.approx(1.0, abs=1e-5)
    assert main(["ls", *argv[1:9], "--num-frames", "4"]) == 2  # --encoder without --checkpoint
    assert "needs --checkpoint" in capsys.readouterr().err


def test_a_source_that_is_not_a_video_is_bad_input_before_any_scene(hub, tmp_path, capsys):
    # Before: a source_error row, a fault, exit 75 "rerun with --resume".
    repo, checkpoint, _ = hub
    (tmp_path / "videos" / "scannet").mkdir(parents=True)
    (tmp_path / "videos" / "scannet" / "same.mp4").write_bytes(b"")
    run = tmp_path / "run"
    (run / "camera_renders").mkdir(parents=True)
    split = tmp_path / "split.jsonl"
    split.write_text(json.dumps({"id": "q", "dataset": "scannet", "scene_name": "same", "question_type":
                     "object_counting", "question": "?", "options": None, "ground_truth": "1"}) + "\n")  # fmt: skip
    argv = ["ls", "--run", str(run), "--split", str(split), "--videos", str(tmp_path / "videos"), "--encoder", ENTRY,
            "--encoder-repo", str(repo), "--checkpoint", str(checkpoint), "--num-frames", "4", "--device", "cpu"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "same.mp4 is an empty file" in err[0]
    assert not (run / "vision_sim.jsonl").exists()
