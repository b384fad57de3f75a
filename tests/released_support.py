"""A run directory in the layout of BVB's release, made by a test from facts read off the release.

Facts, from callingforhelp/BVB (MIT): the folder name and config.json keys are ``sandbox/run_model.sh``'s
and ``sandbox/run_agent.py``'s (config.shard-<i>-of-<N>.json for a shard, ``harness`` "mini-BVB-harness",
``json.dumps(..., indent=2)``); agent_meta's keys and their order are ``bash_agent.run_bash_agent``'s
result followed by run_agent.py's ``blend_file``, ``model``, ``harness``, ``reasoning`` (a scene whose
sandbox raised has only ``scene_name``, ``error``, ``blend_file`` and those three); a failed render
leaves ``camera_renders/<scene>.error.json`` holding ``render_blend_to_frames``' meta
(``eval/batch_render_camera.py``); the score files carry the fields of ``dual_vqa_scoring.make_dual_vqa_row``
/ ``summarize_dual_vqa_rows`` and ``eval/vjepa_sim_metric.py``'s rows and ``summarize`` (with ``model``,
``device``, ``num_frames``); the shared source-answer bank's rows are ``make_answer_row``'s. The values
are this fixture's own, written as literals (the summaries agree with the rows by the release's rules).
"""

import json
from pathlib import Path

import av
import numpy as np

MODEL = "gpt-5.4-mini"
JUDGE = "gpt-5.4-mini"
ENCODER = "apiantonio/vjepa2.1-vit-gigantic-384"
HARNESS = "mini-BVB-harness"
DONE_SCENE = "scene0011_00"  # scannet: said DONE with result.blend, rendered, scored
COST_SCENE = "41069025"  # arkitscenes: stopped by the cost limit with a blend; its render failed
ERROR_SCENE = "0d2ee665be"  # scannetpp: the sandbox raised; no blend
SCENES = {DONE_SCENE: "scannet", COST_SCENE: "arkitscenes", ERROR_SCENE: "scannetpp"}


def run_name(model: str = MODEL, reasoning: str = "none") -> str:
    """run_model.sh's default folder: mini-harness-<slug>[-reasoning-<effort>]-run01."""
    slug = "".join(c if c.isalnum() or c in ".-" else "-" for c in model.rsplit("/", 1)[-1])
    if reasoning != "none":
        return f"mini-harness-{slug}-reasoning-{reasoning}-run01"
    return f"mini-harness-{slug}-run01"


def clip(path: Path, colour: tuple[int, int, int], frames: int = 8, size: tuple[int, int] = (64, 48)) -> Path:
    """A tiny H.264 clip (a bar that grows each frame over a flat colour)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=4)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        for index in range(frames):
            image = np.full((size[1], size[0], 3), colour, np.uint8)
            image[:, : 4 + index * 4] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def _json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")


def config(reasoning: str = "none", shard: str | None = None, num_tasks: int = 3, model: str = MODEL) -> dict:
    """run_agent.py's config.json, its keys in its order."""
    return {
        "model": model,
        "reasoning": reasoning,
        "harness": HARNESS,
        "image": "bvb-sandbox:latest",
        "cost_limit": 3.0,
        "model_timeout": 600.0,
        "max_turns": 0,
        "scene_timeout": 0.0,
        "timestamp": "2026-05-04T10:11:12",
        "num_tasks": num_tasks,
        "shard": shard,
        "skip_scenes": [],
    }


def agent_meta(scene: str, run: Path, model: str = MODEL, reasoning: str = "none") -> dict:
    """agent_meta/<scene>.json as the release writes it for this fixture's three scenes."""
    blend = str(run / "blends" / f"{scene}.blend")
    tail = {"model": model, "harness": HARNESS, "reasoning": reasoning}
    if scene == ERROR_SCENE:
        return {"scene_name": scene, "error": "RuntimeError: docker: image not found", "blend_file": None, **tail}
    done = scene == DONE_SCENE
    return {
        "scene_name": scene,
        "turns": 9 if done else 31,
        "commands_run": 7 if done else 40,
        "frames_seen": 12 if done else 36,
        "frames_extracted": 12 if done else 36,
        "done": done,
        "stop_reason": "done" if done else "cost",
        "produced_blend": True,
        "error": None,
        "cost_usd": 0.0421 if done else 3.0107,
        "input_tokens": 51234 if done else 912345,
        "output_tokens": 4321 if done else 65432,
        "duration_s": 95.4 if done else 1204.6,
        "blend_file": blend,
        **tail,
    }


DV_ROWS = [
    {"qa_id": "101", "scene_name": DONE_SCENE, "question_type": "object_counting", "status": "ok",
     "rendered_answer": "3", "rendered_correct": True, "original_correct": True, "retained": True,
     "judge_model": JUDGE, "n_frames": 16, "protocol": "dual_vqa_v1"},
    {"qa_id": "102", "scene_name": DONE_SCENE, "question_type": "object_rel_direction_easy", "status": "ok",
     "rendered_answer": "B", "rendered_correct": False, "original_correct": True, "retained": False,
     "judge_model": JUDGE, "n_frames": 16, "protocol": "dual_vqa_v1"},
    {"qa_id": "103", "scene_name": DONE_SCENE, "question_type": "route_planning", "status": "error",
     "error": "ask_vlm failed after retries: timed out", "judge_model": JUDGE, "n_frames": 16,
     "protocol": "dual_vqa_v1"},
]  # fmt: skip
DV_SUMMARY = {
    "protocol": "dual_vqa_v1", "num_qa": 3, "num_ok": 2, "num_error": 1, "num_joinable": 2,
    "num_original_correct": 2, "num_retained": 1, "num_rendered_correct": 1, "retention_rate": 0.5,
    "rendered_accuracy": 0.5, "original_accuracy": 1.0,
    "by_question_type": {
        "object_counting": {"n": 1, "n_joinable": 1, "n_original_correct": 1, "n_retained": 1,
                            "retention_rate": 1.0, "rendered_accuracy": 1.0},
        "object_rel_direction_easy": {"n": 1, "n_joinable": 1, "n_original_correct": 1, "n_retained": 0,
                                      "retention_rate": 0.0, "rendered_accuracy": 0.0},
    },
    "judge_model": JUDGE, "n_frames": 16, "num_scenes": 1, "source": "dual_vqa_metric",
}  # fmt: skip
LS_SUMMARY = {
    "num_scenes": 2, "num_ok": 1, "num_error": 1, "vision_sim": 0.71, "vision_sim_std": 0.0, "layout_sim": 0.69,
    "layout_sim_std": 0.0, "motion_sim": 0.73, "motion_sim_std": 0.0, "by_status": {"ok": 1, "render_error": 1},
    "model": ENCODER, "device": "cuda", "num_frames": 64,
}  # fmt: skip
ORIGINAL_ANSWERS = [
    {"qa_id": "101", "scene_name": DONE_SCENE, "question_type": "object_counting", "view": "original",
     "answer": "3", "correct": True, "model": JUDGE, "n_frames": 16, "protocol": "dual_vqa_v1",
     "usage": {"prompt_tokens": 1402, "completion_tokens": 2, "total_tokens": 1404},
     "video": f"VSI-Bench/scannet/{DONE_SCENE}.mp4"},
    {"qa_id": "102", "scene_name": DONE_SCENE, "question_type": "object_rel_direction_easy", "view": "original",
     "answer": "A", "correct": True, "model": JUDGE, "n_frames": 16, "protocol": "dual_vqa_v1",
     "usage": {"prompt_tokens": 1422, "completion_tokens": 1, "total_tokens": 1423},
     "video": f"VSI-Bench/scannet/{DONE_SCENE}.mp4"},
]  # fmt: skip


def make_released_run(
    results: Path, reasoning: str = "none", shards: int = 0, renders: bool = True, scores: bool = True,
    model: str = MODEL,
) -> Path:  # fmt: skip
    """results/mini-harness-...-run01 as the release leaves it (``shards``: that many shard configs, no config.json).

    Three scenes (DONE_SCENE, COST_SCENE, ERROR_SCENE); ``renders`` adds camera_renders/ (an mp4 for
    DONE_SCENE, an error.json for COST_SCENE); ``scores`` adds the release's DV and LS files and the
    shared source-answer bank beside the run.
    """
    run = results / run_name(model, reasoning)
    if shards:
        for index in range(1, shards + 1):
            tasks = len(list(SCENES)[index - 1 :: shards])
            _json(run / f"config.shard-{index}-of-{shards}.json", config(reasoning, f"{index}/{shards}", tasks, model))
    else:
        _json(run / "config.json", config(reasoning, model=model))
    for scene in SCENES:
        meta = agent_meta(scene, run, model, reasoning)
        if meta["blend_file"]:
            # The bytes of a .blend's header: nothing here opens it in Blender.
            (run / "blends").mkdir(parents=True, exist_ok=True)
            (run / "blends" / f"{scene}.blend").write_bytes(b"BLENDER-v402" + bytes(64))
        _json(run / "agent_meta" / f"{scene}.json", meta)
    if renders:
        clip(run / "camera_renders" / f"{DONE_SCENE}.mp4", (30, 90, 160))
        error = {
            "blend_path": str(run / "blends" / f"{COST_SCENE}.blend"),
            "frames_dir": f"/tmp/bvb_render_{COST_SCENE}_x1/frames",
            "num_frames": 0,
            "returncode": 1,
            "ok": False,
            "stdout_tail": "Blender 4.2.3 LTS\n",
            "stderr_tail": "RuntimeError: scene has no camera\n",
        }
        (run / "camera_renders" / f"{COST_SCENE}.error.json").write_text(json.dumps(error, indent=2)[:8000] + "\n")
    if scores:
        _jsonl(run / "dual_vqa.jsonl", DV_ROWS)
        (run / "dual_vqa_summary.json").write_text(json.dumps(DV_SUMMARY, indent=2) + "\n")
        ls_rows = [
            {"id": DONE_SCENE, "submission_path": str(run / "blends" / f"{DONE_SCENE}.blend"),
             "original_video": f"VSI-Bench/scannet/{DONE_SCENE}.mp4", "status": "ok", "vision_sim": 0.71,
             "layout_sim": 0.69, "motion_sim": 0.73, "render_cached": True, "render_source": "video.mp4"},
            {"id": COST_SCENE, "submission_path": str(run / "blends" / f"{COST_SCENE}.blend"),
             "original_video": f"VSI-Bench/arkitscenes/{COST_SCENE}.mp4", "status": "render_error",
             "vision_sim": None, "layout_sim": None, "motion_sim": None, "error": "RuntimeError: scene has no camera"},
        ]  # fmt: skip
        _jsonl(run / "vision_sim.jsonl", ls_rows)
        (run / "vision_sim_summary.json").write_text(json.dumps(LS_SUMMARY, indent=2) + "\n")
        _jsonl(results / "_dual_vqa_shared" / "original_answers.jsonl", ORIGINAL_ANSWERS)
    return run


# The published tables' headers, exactly (results.csv, assets/bvb-results.csv), and rows copied from them.
RESULTS_CSV_HEADER = (
    "rank,name,effort,harness,vendor,openWeight,overall,dualVqa,latentSim,layout,motion,costUsd,runtimeMin,"
    "object_counting,object_abs_distance,object_size_estimation,room_size_estimation,object_rel_distance,"
    "object_rel_direction,route_planning,obj_appearance_order"
)
PAPER_CSV_HEADER = RESULTS_CSV_HEADER.replace("effort,harness,", "effort,")
RESULTS_CSV_ROWS = (
    "1,GPT-6 Astra,high,mini-BVB,OpenAI,False,70.06952588909638,53.69458128078818,88.62056715620888,"
    "87.26660832762718,89.97452598479059,1.2581534722222223,14.000063657407408,48.5,33.52601156069364,"
    "73.68421052631578,33.07692307692307,48.96265560165975,50.0,54.83870967741935,36.0",
    "4,Qwen3.8-Max,high,mini-BVB,Alibaba,False,66.24332537644972,52.70935960591133,81.32214803869525,"
    "79.85160919941134,82.79268687797916,0.5994690972222222,12.88896412037037,42.5,37.57225433526011,"
    "65.78947368421053,45.38461538461539,38.589211618257266,56.127450980392155,72.04301075268818,30.0",
    "40,GPT-5.4 Mini,none,mini-BVB,OpenAI,False,56.50937943914135,46.4696223316913,67.53028204871548,"
    "65.6522539547748,69.40831014265618,0.03377118055555556,0.5323032407407408,19.5,45.08670520231214,"
    "60.902255639097746,23.846153846153847,40.66390041493776,52.20588235294118,63.44086021505376,14.000000000000002",
)
PAPER_CSV_ROWS = (
    "1,GPT-6 Astra,high,OpenAI,False,70.06952588909638,53.69458128078818,88.62056715620888,"
    "87.26660832762718,89.97452598479059,1.2581534722222223,14.000063657407408,48.5,33.52601156069364,"
    "73.68421052631578,33.07692307692307,48.96265560165975,50.0,54.83870967741935,36.0",
    "36,GPT-5.4 Mini,none,OpenAI,False,56.50937943914135,46.4696223316913,67.53028204871548,"
    "65.6522539547748,69.40831014265618,0.03377118055555556,0.5323032407407408,19.5,45.08670520231214,"
    "60.902255639097746,23.846153846153847,40.66390041493776,52.20588235294118,63.44086021505376,14.000000000000002",
)


def published_csvs(folder: Path) -> tuple[Path, Path]:
    """results.csv and bvb-results.csv with the published headers and some of their rows, verbatim."""
    folder.mkdir(parents=True, exist_ok=True)
    results = folder / "results.csv"
    results.write_text("\n".join((RESULTS_CSV_HEADER, *RESULTS_CSV_ROWS)) + "\n", encoding="utf-8")
    paper = folder / "bvb-results.csv"
    paper.write_text("\n".join((PAPER_CSV_HEADER, *PAPER_CSV_ROWS)) + "\n", encoding="utf-8")
    return results, paper
