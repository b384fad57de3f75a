"""bvb score vgi / vgi-filter / steps --generator-steps and bvb human as typed stages (issue 34).

Their options classes generate the parsers (the flags users know give the values they gave before), a file's
table is checked by field, the stage functions run on options built in code and return typed results, and
local input is checked before any endpoint is touched.
"""

import dataclasses
import json
import socket
import time
from pathlib import Path

import pytest

from bvb_addon.errors import ArgumentError, BVBError
from bvb_addon.options import from_mapping, from_namespace, to_mapping
from bvb_addon.vgi import families
from eval_bridge import api
from eval_bridge import cli as score_cli
from eval_bridge.human import cli as human_cli
from eval_bridge.human.media import ClipOptions
from eval_bridge.human.pack import BVBPackOptions, VGIPackOptions, pack
from eval_bridge.human.score import HumanScoreOptions
from eval_bridge.human.serve import HumanServeOptions
from eval_bridge.vgi.filter import VGIFilterOptions, VGIFilterResult, vgi_filter
from eval_bridge.vgi.options import VGIOptions, VGIResult

pytestmark = pytest.mark.unit


def _parse(*argv):
    return score_cli.build_parser().parse_args(list(argv))


def _dead_url():
    """An endpoint nobody listens on: a port bound and closed again."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# --- options as data ------------------------------------------------------------------------------


def test_score_vgi_flags_users_know_give_the_options_they_gave_before(tmp_path):
    args = _parse(
        "vgi", "--tasks", "t.jsonl", "--videos", "genA=out/a", str(tmp_path / "b"), "--out", "o",
        "--judge-base-url", "http://h/v1", "--judge-model", "m", "--judge-api-key-env", "KEY", "--cache", "c.sqlite",
        "--retries", "2", "--retry-base-delay", "0.5", "--price-in", "1", "--price-out", "2", "--frame-budget", "16",
        "--sampling", "uniform", "--window", "6", "--stride", "3", "--max-frames", "100", "--half", "--half-seed",
        "7", "--resume", "--workers", "2", "--bootstrap", "50", "--timelines", "tl",
    )  # fmt: skip
    options = from_namespace(VGIOptions, args)
    assert options.tasks == Path("t.jsonl") and options.out == Path("o") and options.timelines == Path("tl")
    assert options.generators == (("genA", Path("out/a")), ("b", tmp_path / "b"))
    vlm = options.vlm
    assert (vlm.base_url, vlm.model, vlm.api_key_env, vlm.cache) == ("http://h/v1", "m", "KEY", "c.sqlite")
    assert (vlm.retries, vlm.retry_base_delay, vlm.price_in, vlm.price_out) == (2, 0.5, 1.0, 2.0)
    assert (options.frame_budget, options.sampling, options.window, options.stride, options.max_frames) == (
        16, "uniform", 6, 3, 100,
    )  # fmt: skip
    assert options.half and options.half_seed == 7 and options.resume and options.workers == 2
    assert options.resamples == 50 and options.judge == "vlm"
    # DV's judge flags that VGI never had stay off its command line (its --judge is vlm|checker).
    with pytest.raises(SystemExit):
        _parse("vgi", "--tasks", "t", "--videos", "a", "--out", "o", "--protocol", "vsi_official")
    with pytest.raises(SystemExit):
        _parse("vgi", "--tasks", "t", "--videos", "a", "--out", "o", "--judge", "geometry")


def test_a_vgi_table_with_a_wrong_key_or_type_is_one_line_naming_it():
    table = {"tasks": "t.jsonl", "out": "o", "generators": [["a", "videos/a"]], "vlm": {"model": "m"}}
    options = from_mapping(VGIOptions, table, "campaign.toml [vgi]")
    assert options.vlm.model == "m" and options.resamples == 2000
    assert options.generators == (("a", Path("videos/a")),)
    # As on the command line: NAME=DIR, or DIR named by its folder.
    spelled = from_mapping(VGIOptions, {**table, "generators": ["a=videos/a", "videos/b"]}, "campaign.toml [vgi]")
    assert spelled.generators == (("a", Path("videos/a")), ("b", Path("videos/b")))
    with pytest.raises(
        ArgumentError, match=r"campaign.toml \[vgi\]: unknown key 'frame_budgt'; did you mean 'frame_budget'"
    ):
        from_mapping(VGIOptions, {**table, "frame_budgt": 8}, "campaign.toml [vgi]")
    with pytest.raises(ArgumentError, match=r"campaign.toml \[vgi\]: sampling = 'dense'.*choose from"):
        from_mapping(VGIOptions, {**table, "sampling": "dense"}, "campaign.toml [vgi]")
    with pytest.raises(ArgumentError, match=r"workers = 'four' is not a integer"):
        from_mapping(VGIOptions, {**table, "workers": "four"}, "campaign.toml [vgi]")
    with pytest.raises(ArgumentError, match=r"level = 1.5 is not a integer or none"):
        from_mapping(VGIFilterOptions, {"results": "r", "level": 1.5}, "[vgi-filter]")


def test_human_flags_users_know_give_the_options_they_gave_before():
    parser = human_cli.build_parser()
    args = parser.parse_args(["pack", "bvb", "--runs", "a=r1", "r2", "--out", "s", "--scenes", "x", "y", "--count", "3",
                              "--seed", "4", "--split", "sp.jsonl", "--videos", "v", "--forms", "2", "--per-form", "1",
                              "--language", "zh", "--max-side", "240", "--max-frames", "8", "--force"])  # fmt: skip
    assert from_namespace(args.options, args) == BVBPackOptions(
        runs=("a=r1", "r2"), out=Path("s"), scenes=("x", "y"), count=3, seed=4, split=Path("sp.jsonl"),
        videos=Path("v"), clips=ClipOptions(240, 8), language="zh", forms=2, per_form=1, force=True,
    )  # fmt: skip
    args = parser.parse_args(["pack", "vgi", "--tasks", "t.jsonl", "--videos", "g=v", "--out", "s", "--scores", "sc",
                              "--rows", "g=r.jsonl", "--instances", "i1", "--count", "1"])  # fmt: skip
    assert from_namespace(args.options, args) == VGIPackOptions(
        tasks=Path("t.jsonl"), generators=("g=v",), out=Path("s"), scores=Path("sc"), rows=("g=r.jsonl",),
        instances=("i1",), count=1,
    )  # fmt: skip
    args = parser.parse_args(["score", "p", "a1", "a2", "--out", "o", "--scores", "sc"])
    assert from_namespace(HumanScoreOptions, args) == HumanScoreOptions(
        Path("p"), (Path("a1"), Path("a2")), Path("o"), Path("sc")
    )
    args = parser.parse_args(["serve", "p", "--answers", "a", "--port", "0"])
    assert from_namespace(HumanServeOptions, args) == HumanServeOptions(Path("p"), Path("a"), "127.0.0.1", 0)
    with pytest.raises(ArgumentError, match=r"\[human\] clips: unknown key 'max_size'; did you mean 'max_side'"):
        from_mapping(BVBPackOptions, {"runs": ["a", "b"], "out": "s", "clips": {"max_size": 3}}, "[human]")


# --- the stage functions, called with options built in code ---------------------------------------


@pytest.fixture(scope="module")
def checker_lab(tmp_path_factory):
    """A tasks file of two tasks, and two generators' timelines: one solving both, one breaking the second."""
    root = tmp_path_factory.mktemp("vgi_stages")
    plans = [families.plan_task("maze", 1, seed=1), families.plan_task(sorted(families.FAMILIES)[0], 1, seed=2)]
    rows = [{**p.row(), "start_image": f"images/{p.id}.png"} for p in plans]  # read, never opened, by the checker
    (root / "tasks.jsonl").write_text("".join(json.dumps(row, default=float) + "\n" for row in rows))
    for generator in ("good", "bad"):
        (root / generator).mkdir()
        (root / f"{generator}_timelines").mkdir()
        for number, plan in enumerate(plans):
            wrong = generator == "bad" and number == 1
            solved = next(iter(families.FAMILIES[plan.family].bad_solutions(plan).values())) if wrong else plan
            line = families.plan_timeline(solved).to_json()
            (root / f"{generator}_timelines" / f"{plan.id}.json").write_text(json.dumps(line, default=float))
    return root, [p.row()["id"] for p in plans], [p.family for p in plans]


def test_score_vgi_and_the_filter_as_functions_return_typed_results(checker_lab, tmp_path):
    root, ids, names = checker_lab
    out = tmp_path / "scores"
    results = {}
    for generator in ("good", "bad"):
        options = VGIOptions(
            tasks=root / "tasks.jsonl", out=out, generators=((generator, root / generator),), judge="checker",
            timelines=root / f"{generator}_timelines", resamples=10,
        )  # fmt: skip
        results[generator] = api.score_vgi(options)
    good, bad = results["good"], results["bad"]
    assert isinstance(good, VGIResult) and good.out == out
    assert good.generators["good"]["overall"]["success"] == 100.0 and good.by_status == {"ok": 2}
    assert bad.generators["bad"]["overall"]["success"] == 50.0
    assert [entry["generator"] for entry in bad.leaderboard["generators"]] == ["good", "bad"]
    # The JSON a service returns, and the summary the exit code counts faults from.
    assert to_mapping(bad)["by_status"] == {"ok": 2}
    assert bad.to_summary()["counts"] == {"by_status": {"ok": 2}}
    assert json.loads((out / "bad" / "vgi_summary.json").read_text()) == bad.generators["bad"]

    kept_rows = tmp_path / "kept.jsonl"
    found = vgi_filter(VGIFilterOptions(results=out, tasks=root / "tasks.jsonl", kept_tasks=kept_rows))
    assert isinstance(found, VGIFilterResult) and found.level == 1 and found.generators == ["bad", "good"]
    # The second task is solved by one generator and failed by the other: it tells them apart.
    assert found.kept == [names[1]] and list(found.dropped) == [names[0]]
    assert "too easy" in found.dropped[names[0]] and found.kept_rows == 1
    assert [json.loads(line)["id"] for line in kept_rows.read_text().splitlines()] == [ids[1]]
    assert json.loads((out / "vgi_filter.json").read_text()) == found.to_summary()


# --- check first, then the network ------------------------------------------------------------------


def _run_score(argv, capsys):
    started = time.monotonic()
    code = score_cli.main(argv)
    return code, capsys.readouterr().err.strip().splitlines(), time.monotonic() - started


def test_a_bad_tasks_file_or_videos_folder_with_a_dead_judge_is_exit_2_at_once_naming_it(checker_lab, tmp_path, capsys):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "x"\n')
    videos = tmp_path / "gen"
    videos.mkdir()
    judge = ["--judge-base-url", _dead_url(), "--judge-model", "m", "--retries", "3"]
    argv = ["vgi", "--tasks", str(tasks), "--videos", str(videos), "--out", str(tmp_path / "out"), *judge]
    code, err, seconds = _run_score(argv, capsys)
    assert code == 2 and len(err) == 1 and str(tasks) in err[0] and "line 1" in err[0], err
    assert seconds < 5
    # A good tasks file but a videos folder that is not there: the folder named, before any judge call.
    absent = tmp_path / "absent"
    argv = ["vgi", "--tasks", str(checker_lab[0] / "tasks.jsonl"), "--videos", str(absent), "--out", str(tmp_path / "o"),
            *judge]  # fmt: skip
    code, err, seconds = _run_score(argv, capsys)
    assert code == 2 and len(err) == 1 and str(absent) in err[0], err
    assert seconds < 5 and not (tmp_path / "o").exists()


def test_options_built_in_code_are_checked_by_the_stage_before_the_judge(checker_lab, tmp_path):
    root, _, _ = checker_lab
    base = VGIOptions(tasks=root / "tasks.jsonl", out=tmp_path / "o", generators=(("g", root / "good"),),
                      vlm=api.JudgeOptions(base_url=_dead_url(), model="m", retries=3))  # fmt: skip
    cases = {
        "--stride 9 is longer than --window 8": {"stride": 9},
        "--bootstrap 5: give at least 10": {"resamples": 5},
        "--judge checker reads each instance's timeline: pass --timelines DIR": {"judge": "checker"},
        "--videos: two generators named g": {"generators": (("g", root / "good"), ("g", root / "bad"))},
        "is the videos folder": {"out": root / "good"},
    }
    for message, change in cases.items():
        started = time.monotonic()
        with pytest.raises(BVBError, match=message):
            api.score_vgi(dataclasses.replace(base, **change))
        assert time.monotonic() - started < 5
    assert not (tmp_path / "o").exists()


def test_human_pack_checks_its_counts_before_reading_anything(tmp_path, capsys):
    with pytest.raises(BVBError, match=r"--max-frames 0: give a number of at least 1"):
        pack(BVBPackOptions(runs=("a", "b"), out=tmp_path / "s", clips=ClipOptions(max_frames=0)))
    code = human_cli.main(["pack", "vgi", "--tasks", str(tmp_path / "t.jsonl"), "--videos", "g=v", "--out",
                           str(tmp_path / "s"), "--count", "0"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["error: --count 0: give a number of at least 1"], err
    assert not (tmp_path / "s").exists()


def test_human_score_and_serve_check_their_folders_first(tmp_path):
    from eval_bridge.human.score import score_human
    from eval_bridge.human.serve import serve

    with pytest.raises(BVBError, match=r"--scores .*absent: no such folder"):
        score_human(HumanScoreOptions(tmp_path / "pack", (tmp_path / "a.json",), scores=tmp_path / "absent"))
    with pytest.raises(BVBError, match=r"pack .*nothing: no such folder"):
        serve(HumanServeOptions(tmp_path / "nothing"))
    (tmp_path / "pack").mkdir()
    with pytest.raises(BVBError, match=r"loopback only; 0.0.0.0 is not"):
        serve(HumanServeOptions(tmp_path / "pack", host="0.0.0.0", port=0))
