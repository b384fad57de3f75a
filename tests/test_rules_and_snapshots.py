"""Issue 40: ``--rules report|enforce`` on Dual VQA, the campaign and the leaderboard (LS's in test_bridge_ls), and
the snapshot that answered on every DV and VGI verdict and in agent_meta, against the real scripted OpenAI server
on 127.0.0.1 answering as a dated model with a fingerprint."""

import hashlib
import json
import shutil

import pytest

from bvb_addon.agent.config import AgentConfig, MiniBVBSettings
from bvb_addon.agent.litellm_model import LiteLLMModel, release_request, text_part
from bvb_addon.openai_client import snapshot
from bvb_addon.scene_rules import RULES_VERSION, error_row, finding, make_row
from eval_bridge.cli import main
from eval_bridge.leaderboard import identity
from eval_bridge.scoring.cache import JudgeCache
from eval_bridge.scoring.judge import JudgeSettings, VLMJudge
from eval_bridge.scoring.options import JudgeOptions
from eval_bridge.scoring.overall import mark_comparability, overall_record, run_row
from eval_bridge.vgi import score as vgi
from eval_bridge.vgi.options import VGIOptions
from headless.campaign import CampaignError, load
from tests import test_bridge_dv
from tests.test_agent_loop import FRAMES, make_loop, py
from tests.test_bridge_dv import Judge, _dv, _parts, _rows
from tests.test_vgi import FLASH_TASK, _flash_video, _scripted_judge
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit

SNAPSHOT = {"model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_7e1c"}
LATER = {"model": "gpt-4o-2024-11-20", "system_fingerprint": "fp_9b02"}


class Dated(Judge):
    """The DV test judge, answering as a dated snapshot of the alias asked for."""

    def __init__(self, labels, answered_by):
        super().__init__(labels)
        self.answered_by = answered_by

    def __call__(self, body):
        return {**super().__call__(body), **self.answered_by}


@pytest.fixture(scope="module")
def dv_assets(tmp_path_factory):
    """The DV tests' source clips, render clips and split (their questions and scripted answers)."""
    return test_bridge_dv.assets.__wrapped__(tmp_path_factory)


def _make_run(dv_assets, results, name="run1"):
    """The DV tests' run, its agent-less scene recorded in full (the leaderboard reads every scene record)."""
    run = test_bridge_dv._make_run(dv_assets, results, name)
    meta = {"scene": "s3", "dataset": "arkitscenes", "agent": "model", "model": "m", "status": "error",
            "stop_reason": "model_error", "reason": "model_error"}  # fmt: skip
    (run / "agent_meta" / "s3.json").write_text(json.dumps(meta))
    return run


def _audit(run, rows):
    (run / "scene_rules.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


BREAKING = make_row(
    "s1", [finding("no_image_textures", "Image:frame_001.png", "packed image on a material")], [], "4.2"
)
CLEAN = make_row("s2", [], [finding("info", "Cube", "bevel modifier")], "4.2")


def test_every_verdict_keeps_the_snapshot_that_gave_it_and_the_cache_keeps_it_too(dv_assets, tmp_path):
    results = tmp_path / "results"
    run = _make_run(dv_assets, results)
    with ScriptedOpenAI(responder=Dated(dv_assets[1], SNAPSHOT)) as server:
        assert _dv(run, dv_assets, server) == 0
        assert server.calls == 12
    rows = _rows(run)
    assert rows["q2"]["judge_snapshots"] == {"source": [SNAPSHOT], "render": [SNAPSHOT]}
    # A scene without a render was asked on its source only.
    assert rows["q6"]["judge_snapshots"] == {"source": [SNAPSHOT], "render": []}
    # The release's fields are unchanged beside ours: judge_model stays the alias that was asked.
    assert rows["q2"]["judge_model"] == "gpt-4o" and rows["q2"]["qa_id"] == "q2"
    summary = json.loads((run / "dual_vqa_summary.json").read_text())
    assert summary["judge_model"] == "gpt-4o"
    assert summary["judge_snapshots"] == [{**SNAPSHOT, "answers": 12}]
    bank = [json.loads(line) for line in (results / "_dual_vqa_shared" / "original_answers.jsonl").open()]
    assert all(row["answered_by"] == [SNAPSHOT] and row["model"] == "gpt-4o" for row in bank)

    # A second run answered from the cache and the bank, while the alias now points at a later snapshot: its
    # verdicts are the first snapshot's, and say so.
    other = _make_run(dv_assets, results, "run2")
    with ScriptedOpenAI(responder=Dated(dv_assets[1], LATER)) as server:
        assert _dv(other, dv_assets, server) == 0
        assert server.calls == 0
    assert json.loads((other / "dual_vqa_summary.json").read_text())["judge_snapshots"] == [{**SNAPSHOT, "answers": 12}]

    # A third run with its own cache and bank is judged by the later snapshot: the leaderboard's differs names it.
    third = _make_run(dv_assets, tmp_path / "elsewhere", "run3")
    with ScriptedOpenAI(responder=Dated(dv_assets[1], LATER)) as server:
        assert _dv(third, dv_assets, server) == 0
        assert server.calls == 12
    first, later = identity.run_identity(run), identity.run_identity(third)
    assert first["judge_snapshot"] == "gpt-4o-2024-08-06 fp_7e1c"
    assert identity.differences(later, first) == ["judge_snapshot"]
    rows_board = [run_row(run, resamples=10), run_row(third, resamples=10)]
    mark_comparability(rows_board, rows_board[0]["identity"])
    assert rows_board[0]["differs"] == "" and rows_board[1]["differs"] == "judge snapshot"
    assert rows_board[1]["comparable"] == "false"


class Moving(Judge):
    """The alias moves mid-run: the sources answered by one snapshot, the renders by the next."""

    def __call__(self, body):
        side = self.labels[hashlib.sha256(_parts(body)[0].encode()).hexdigest()][0]
        return {**super().__call__(body), **(LATER if side == "render" else SNAPSHOT)}


def test_a_run_judged_by_two_snapshots_says_so(dv_assets, tmp_path, capsys):
    run = _make_run(dv_assets, tmp_path / "results")
    with ScriptedOpenAI(responder=Moving(dv_assets[1])) as server:
        assert _dv(run, dv_assets, server) == 0
    out = capsys.readouterr().out
    assert "answered by: gpt-4o-2024-08-06 fp_7e1c (7), gpt-4o-2024-11-20 fp_9b02 (5)" in out
    summary = json.loads((run / "dual_vqa_summary.json").read_text())
    assert summary["judge_snapshots"] == [{**SNAPSHOT, "answers": 7}, {**LATER, "answers": 5}]
    row = run_row(run, resamples=10)
    mark_comparability([row], row["identity"])
    assert row["differs"] == "judged by 2 snapshots"


def test_enforce_scores_a_breaking_scene_as_a_failure_and_report_leaves_the_release_s_numbers(dv_assets, tmp_path):
    results = tmp_path / "results"
    run = _make_run(dv_assets, results)
    _audit(run, [BREAKING, CLEAN])
    with ScriptedOpenAI(responder=Judge(dv_assets[1])) as server:
        assert _dv(run, dv_assets, server) == 0
        report_rows = _rows(run)
        report = json.loads((run / "dual_vqa_summary.json").read_text())
        assert _dv(run, dv_assets, server, "--rules", "enforce", "--resume") == 0
        enforced_rows = _rows(run)
        enforced = json.loads((run / "dual_vqa_summary.json").read_text())
        # Back to report: the rule-break rows are scored again (from the cache: no new call), the rest kept.
        calls = server.calls
        assert _dv(run, dv_assets, server, "--resume") == 0
        assert server.calls == calls
    # report: the release's numbers (3 of 5 source-correct retained); the rows carry no rules key.
    assert report["retention_rate"] == pytest.approx(3 / 5)
    assert (report["rules"], report["rules_version"]) == ("report", RULES_VERSION)
    assert all("rules" not in row for row in report_rows.values())
    # enforce: s1's questions stay in the pool as not retained (q1 was retained under report), s2 is scored.
    assert enforced["retention_rate"] == pytest.approx(2 / 5)
    assert (enforced["rules"], enforced["rules_version"]) == ("enforce", RULES_VERSION)
    assert enforced["failures"]["s1"]["status"] == "rule_break"
    assert "no_image_textures (Image:frame_001.png)" in enforced["failures"]["s1"]["reason"]
    assert [enforced_rows[q]["status"] for q in ("q1", "q2", "q3", "q4", "q5")] == ["rule_break"] * 3 + ["ok"] * 2
    assert enforced_rows["q1"]["source_correct"] and not enforced_rows["q1"]["retained"]
    assert enforced_rows["q1"]["render_answer"] is None and enforced_rows["q4"] == report_rows["q4"]
    assert _rows(run) == report_rows
    assert json.loads((run / "dual_vqa_summary.json").read_text())["retention_rate"] == pytest.approx(3 / 5)


def test_enforce_counts_an_audit_error_and_a_source_replay_as_breaks_and_refuses_an_unaudited_scene(
    dv_assets, tmp_path, capsys
):
    run = _make_run(dv_assets, tmp_path / "results")
    replay = make_row("s1", [], [], "4.2", source_replay={"psnr": 43.4, "ssim": 0.99, "threshold_db": 30.0})
    _audit(run, [replay, error_row("s2", "Blender could not open the file", "4.2")])
    with ScriptedOpenAI(responder=Judge(dv_assets[1])) as server:
        capsys.readouterr()
        assert _dv(run, dv_assets, server, "--rules", "enforce") == 0
        assert "scene rules enforced (bvb-prompt-rules-1): 2 scenes scored as rule breaks" in capsys.readouterr().out
        calls = server.calls
        summary = json.loads((run / "dual_vqa_summary.json").read_text())
        assert summary["retention_rate"] == 0.0 and summary["counts"]["by_status"]["rule_break"] == 5
        assert "source_replay" in summary["failures"]["s1"]["reason"]
        assert "audit error: Blender could not open the file" in summary["failures"]["s2"]["reason"]
        assert calls == 7  # the sources only: no render of a breaking scene is shown to the judge

        _audit(run, [replay])  # s2 has a render and no row: refused before any call, naming the command
        capsys.readouterr()
        assert _dv(run, dv_assets, server, "--rules", "enforce") == 2
        assert server.calls == calls
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "s2 not audited" in err[0] and f"bvb audit --run {run}" in err[0]

    stale = {**replay, "scene": "s2", "rules_version": "bvb-prompt-rules-0"}
    _audit(run, [replay, stale])
    assert _dv(run, dv_assets, server, "--rules", "enforce") == 2
    assert "audited under rules 'bvb-prompt-rules-0'" in capsys.readouterr().err


def test_runs_under_other_rules_are_never_ranked_together_and_rule_breaks_show(dv_assets, tmp_path):
    results = tmp_path / "results"
    reported, enforced = _make_run(dv_assets, results, "reported"), _make_run(dv_assets, results, "enforced")
    for run in (reported, enforced):
        _audit(run, [BREAKING, CLEAN])
    with ScriptedOpenAI(responder=Judge(dv_assets[1])) as server:
        assert _dv(reported, dv_assets, server) == 0
        assert _dv(enforced, dv_assets, server, "--rules", "enforce") == 0
    never = _make_run(dv_assets, results, "never")
    shutil.copy(reported / "dual_vqa_summary.json", never / "dual_vqa_summary.json")
    rows = {run.name: run_row(run, resamples=10) for run in (reported, enforced, never)}
    assert rows["reported"]["ruleBreaks"] == "1/2" and rows["never"]["ruleBreaks"] == ""
    assert rows["reported"]["group"] != rows["enforced"]["group"] and rows["enforced"]["group"].endswith(
        "rules enforced"
    )
    assert rows["reported"]["identity"]["rules"] is None
    assert rows["enforced"]["identity"]["rules"] == f"enforce {RULES_VERSION}"
    assert overall_record(enforced).rules == "enforce"
    board = tmp_path / "board.csv"
    assert main(["leaderboard", str(reported), str(enforced), "--out", str(board), "--bootstrap", "10"]) == 0
    lines = board.read_text().splitlines()
    assert "ruleBreaks" in lines[0].split(",")
    ranks = {line.split(",")[0] for line in lines[1:]}
    assert ranks == {"1"}  # each run ranks first in its own group


def test_an_overall_of_one_axis_enforced_and_the_other_not_is_refused(dv_assets, tmp_path):
    run = _make_run(dv_assets, tmp_path / "results")
    _audit(run, [BREAKING, CLEAN])
    with ScriptedOpenAI(responder=Judge(dv_assets[1])) as server:
        assert _dv(run, dv_assets, server, "--rules", "enforce") == 0
    (run / "vision_sim_summary.json").write_text(json.dumps({"vision_sim": 0.5, "rules": "report", "format": 2}))
    with pytest.raises(Exception, match="DV was scored with --rules enforce and LS with --rules report"):
        overall_record(run)


def test_each_vgi_verdict_keeps_its_snapshot_and_a_cached_one_keeps_the_first(tmp_path):

    videos = tmp_path / "videos"
    videos.mkdir()
    _flash_video(videos / "flash_1.mp4")
    generator = ("gen", videos)
    options = VGIOptions(tmp_path / "tasks.jsonl", tmp_path, (generator,))

    def score(answered_by, name):
        with ScriptedOpenAI(responder=lambda body: {**_scripted_judge(body), **answered_by}) as server:
            vlm = VLMJudge(JudgeOptions(base_url=server.base_url, model="gpt-4o"), cache=JudgeCache(tmp_path / "c.db"),
                           settings=JudgeSettings(max_tokens=300), api_key="x")  # fmt: skip
            summary = vgi.score(options, [FLASH_TASK], (name, videos), vgi.VLMProcessJudge(vlm, budget=16))
            return summary, json.loads((tmp_path / name / "vgi.jsonl").read_text()), server.calls

    summary, row, calls = score(SNAPSHOT, "gen")
    assert calls >= 2 and row["status"] == "ok"
    assert row["judge_snapshots"] == [{**SNAPSHOT, "answers": calls}]
    assert summary["judge_snapshots"] == [{**SNAPSHOT, "answers": calls}]
    # The alias has moved on; the cached verdicts are still the first snapshot's.
    summary, row, again = score(LATER, "again")
    assert again == 0 and row["judge_snapshots"] == [{**SNAPSHOT, "answers": calls}]


def test_the_native_agent_records_the_snapshots_that_answered_in_agent_meta(tmp_path, monkeypatch):

    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    replies = [{"content": FRAMES, **SNAPSHOT}, {"content": py("bpy['a'] = 1"), **LATER}, {"content": "DONE", **LATER}]
    with ScriptedOpenAI(replies) as server:
        loop, _ = make_loop(server, tmp_path)
        meta = loop.run()
    assert meta["status"] == "submitted"
    assert meta["answered_by"] == [{**LATER, "answers": 2}, {**SNAPSHOT, "answers": 1}]
    assert meta["model"] == "scripted"  # what was asked for stays the model field
    written = json.loads((tmp_path / "run" / "agent_meta" / "room_1.json").read_text())
    assert written["answered_by"] == meta["answered_by"]


def test_mini_bvb_s_litellm_client_returns_the_snapshot_that_answered():

    with ScriptedOpenAI([{"content": "hello", **SNAPSHOT}, {"content": "again"}]) as server:
        config = AgentConfig(model="gpt-4o", base_url=server.base_url, price_in=1.0, price_out=1.0)
        model = LiteLLMModel(config, MiniBVBSettings(), api_key="k")
        request = release_request("gpt-4o", None, "system", [{"role": "user", "parts": [text_part("hi")]}])
        reply = model.complete(request)
        assert reply.content == "hello" and reply.snapshot == SNAPSHOT
        reply = model.complete(request)
    # A provider that names no fingerprint: the model alone (the scripted server echoes the model asked for).
    assert reply.snapshot == {"model": "gpt-4o", "system_fingerprint": None}


def test_a_provider_s_snapshot_is_kept_short_and_an_empty_one_is_none():

    assert snapshot("m" * 5000, "f" * 5000) == {"model": "m" * 200, "system_fingerprint": "f" * 200}
    assert snapshot("", "fp") is None and snapshot(None) is None and snapshot(3) is None


def test_the_campaign_sets_rules_for_both_scorers_and_refuses_a_table_that_disagrees(tmp_path):

    (tmp_path / "split.jsonl").write_text("")
    base = 'results = "r"\nbudget = 1.0\nsplit = "split.jsonl"\nvideos = "."\n'
    tables = '[dv]\nkind = "geometry"\n[ls]\nmodel = "/m"\n[[config]]\nname = "a"\nmodel = "gpt-4o"\n'
    (tmp_path / "c.toml").write_text(base + 'rules = "enforce"\n' + tables)
    campaign = load(tmp_path / "c.toml")
    assert campaign.dv.rules == "enforce" and campaign.ls.rules == "enforce"
    (tmp_path / "d.toml").write_text(base + tables)
    assert load(tmp_path / "d.toml").dv.rules == "report"
    (tmp_path / "e.toml").write_text(
        base + 'rules = "enforce"\n' + tables.replace("[ls]\n", '[ls]\nrules = "report"\n')
    )
    with pytest.raises(CampaignError, match=r"\[ls\] rules = 'report' but the campaign's rules is 'enforce'"):
        load(tmp_path / "e.toml")
    (tmp_path / "f.toml").write_text(base + 'rules = "strict"\n' + tables)
    with pytest.raises(CampaignError, match='use "report" or "enforce"'):
        load(tmp_path / "f.toml")
