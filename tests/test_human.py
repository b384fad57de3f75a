"""Judges checked against people: a study page filled in by headless Chromium, scored, checked by hand.

The expected numbers are literal and were worked out by hand from the labels below (the working is in
the comments): mean ranks and win rates by counting, Spearman's rho from average ranks, AUC from the
(success, not) pairs, pairwise accuracy from the pairs people told apart.
"""

import json
import math
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bvb_addon.mp4 import write_mp4
from bvb_addon.records import write_dv_rows, write_ls_rows, write_vgi_rows
from eval_bridge.human.stats import auc, average_ranks, pairwise_accuracy, spearman
from eval_bridge.vgi.score import instance_score
from headless import cli
from tests import chromium_support

pytestmark = pytest.mark.unit
CHROMIUM = chromium_support.CHROMIUM
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (.ci/run installs Debian's chromium)"
)

# Labels with '-' and '.', which base64 never holds: finding one in the page would be a leak, not chance.
MODELS = {"a": "gpt-5.4", "b": "claude-4.8", "c": "qwen-3.5"}
SCENES = ("s1", "s2", "s3")
# Best first, per rater and scene.
RANKINGS = {
    "r01": {"s1": "abc", "s2": "bac", "s3": "acb"},
    "r02": {"s1": "acb", "s2": "bca", "s3": "cab"},
}
# Per scene and model: (source-correct questions, of them retained) and vision_sim; None: no source-correct one.
DV = {
    "s1": {"a": (4, 3), "b": (4, 2), "c": (4, 1)},
    "s2": {"a": (2, 1), "b": (4, 4), "c": (4, 1)},
    "s3": {"a": (4, 3), "b": (4, 0), "c": None},
}
LS = {"s1": {"a": 0.80, "b": 0.50, "c": 0.60}, "s2": {"a": 0.55, "b": 0.90, "c": 0.40}, "s3": {"a": 0.70, "c": 0.75}}
# s3/b's LS row failed: it scores 0, as the run's LS counts it.


def test_ranks_with_ties_and_the_three_statistics_on_small_hand_cases():
    assert average_ranks([10, 20, 20, 30]) == [1.0, 2.5, 2.5, 4.0]
    # x ranks 1..4, y ranks 1, 2.5, 2.5, 4: sxy = 1.5*1.5 + .5*0 + .5*0 + 1.5*1.5 = 4.5, sxx = 5, syy = 4.5.
    assert spearman([1, 2, 3, 4], [1, 5, 5, 9]) == pytest.approx(4.5 / math.sqrt(5 * 4.5))
    assert spearman([1, 2], [2, 1]) is None and spearman([1, 1, 1], [1, 2, 3]) is None
    # Positives 0.9, 0.4; negatives 0.4, 0.1: (1 + 1 + 0.5 + 1) / 4.
    assert auc([0.9, 0.4, 0.4, 0.1], [True, True, False, False]) == 0.875
    assert auc([0.5, 0.6], [True, True]) is None
    # People: 3 > 2 > 1 (pair 1-2 tied for people: left out); judge: 0.9, 0.9, 0.1 -> tie, right, right.
    assert pairwise_accuracy([0.9, 0.9, 0.1, 0.2], [3, 2, 1, 1]) == (pytest.approx(4.5 / 5), 5, 1)


# --- fixtures: runs, source clips, a VGI suite --------------------------------------------------------


def clip(path: Path, colour, shift: int = 0, size=(48, 64), frames: int = 6) -> Path:
    images = []
    for i in range(frames):
        image = np.full((*size, 3), colour, np.uint8)
        image[:, (i * 6 + shift) % size[1] :][:, :8] = 255
        images.append(image)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_mp4(path, images, fps=6)


def dv_rows(scene: str, cell):
    """Four questions of a scene: the cell's source-correct ones (some retained), one judge fault, the rest wrong."""
    source, retained = cell or (0, 0)
    rows = []
    for i in range(4):
        right = i < source
        rows.append({"id": f"{scene}-q{i}", "scene": scene, "question_type": "object_counting", "dataset": "synth",
                     "source_correct": right, "render_correct": right and i < retained, "retained": right and i < retained})  # fmt: skip
    # A judge fault on a source-correct question: out of DV's pool (counted, s2/a's DV would be 1/3, not 1/2).
    rows.append({"id": f"{scene}-q9", "scene": scene, "question_type": "object_counting", "status": "judge_error",
                 "source_correct": True, "retained": False})  # fmt: skip
    return rows


@pytest.fixture(scope="session")
def bvb_world(tmp_path_factory):
    root = tmp_path_factory.mktemp("bvb-human")
    videos = root / "VSI"
    split = root / "split.jsonl"
    split.write_text(
        "".join(
            json.dumps({"id": f"{s}-q0", "dataset": "synth", "scene_name": s, "question_type": "object_counting",
                        "question": "How many chairs?", "options": None, "ground_truth": "2"}) + "\n"
            for s in SCENES
        )
    )  # fmt: skip
    for n, scene in enumerate(SCENES):
        clip(videos / "synth" / f"{scene}.mp4", (120, 90, 60), shift=n, size=(72, 96), frames=8)
    runs = {}
    for n, (short, label) in enumerate(MODELS.items()):
        run = root / f"run-{label}"
        (run / "config.json").parent.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"videos": str(videos), "split": str(split)}))
        for scene in SCENES:
            clip(run / "camera_renders" / f"{scene}.mp4", [(200, 40, 40), (40, 200, 40), (40, 40, 200)][n], shift=n)
        write_dv_rows(run / "dual_vqa.jsonl", [row for s in SCENES for row in dv_rows(s, DV[s][short])])
        ls_rows = []
        for scene in SCENES:
            value = LS[scene].get(short)
            ls_rows.append(
                {"id": scene, "status": "ok", "vision_sim": value}
                if value is not None
                else {"id": scene, "status": "render_failed", "vision_sim": None, "error": "no camera"}
            )
        write_ls_rows(run / "vision_sim.jsonl", ls_rows)
        runs[short] = run
    return root, runs


def human(argv, capsys=None):
    code = cli.main(["human", *argv])
    return code


def pack_bvb(runs, out, *extra):
    argv = ["pack", "bvb", "--runs", *(f"{MODELS[k]}={runs[k]}" for k in "abc"), "--out", str(out), "-q", *extra]
    assert human(argv) == 0
    return json.loads((out / "key.json").read_text())


def fill_ranking(page, key, rater):
    page.type("#rater", rater)
    for scene, order in RANKINGS[rater].items():
        code_of = {label: code for code, label in key["scenes"][scene]["codes"].items()}
        for position, short in enumerate(order, 1):
            page.choose(f'section[data-item="{scene}"] select[data-code="{code_of[MODELS[short]]}"]', str(position))


# --- BVB --------------------------------------------------------------------------------------------


@needs_chromium
def test_a_bvb_ranking_study_filled_in_chromium_scores_as_computed_by_hand(bvb_world, tmp_path):
    from eval_bridge.human.serve import StudyServer
    from tests.cdp_support import Browser

    _, runs = bvb_world
    pack = tmp_path / "study"
    key = pack_bvb(runs, pack)
    page_html = (pack / "study.html").read_text()
    for label in MODELS.values():  # blinded: no model and no run path in what raters get
        assert label not in page_html
    assert set(key["scenes"]) == set(SCENES) and all(len(s["codes"]) == 3 for s in key["scenes"].values())

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    # Rater r01 opens the file, fills the form, reloads (the answers come back from localStorage), saves a file.
    with Browser(tmp_path / "chrome1", downloads) as browser:
        page = browser.open((pack / "study.html").as_uri())
        assert page.wait_attribute("body", "data-videos-loaded", "12/12") == "12/12"  # 3 scenes x (source + 3)
        assert page.evaluate("document.getElementById('submit').hidden") is True  # no server behind a file
        page.click('section[data-item="s1"] .play-all')  # the scene's four clips play together, from the start
        assert page.wait_attribute("body", "data-videos-loaded", "12/12") == "12/12"
        assert (
            page.evaluate("""Array.from(document.querySelectorAll('section[data-item="s1"] video'))
            .filter(v => !v.paused).length""")
            == 4
        )
        fill_ranking(page, key, "r01")
        assert page.attribute("body", "data-answered") == "3/3"
        page.evaluate("location.reload()")
        browser.wait_for("Page.loadEventFired")
        assert page.wait_attribute("body", "data-answered", "3/3") == "3/3"
        assert page.evaluate("document.getElementById('rater').value") == "r01"
        page.click("#save")
        done = browser.wait_for("Browser.downloadProgress", lambda p: p.get("state") == "completed")
        assert page.errors() == []
    saved = Path(done["filePath"])
    answers = json.loads(saved.read_text())
    assert answers["instrument_id"] == "bvb-human-rank-v1" and answers["rater_id"] == "r01" and answers["complete"]

    # Rater r02 gets the page from bvb human serve and sends the answers to it.
    with StudyServer(pack, pack / "answers") as server, Browser(tmp_path / "chrome2") as browser:
        page = browser.open(server.url)
        assert page.wait_attribute("body", "data-videos-loaded", "12/12") == "12/12"
        fill_ranking(page, key, "r02")
        page.click("#submit")
        assert page.wait_attribute("body", "data-saved", lambda v: v is not None) == "server"
        assert page.errors() == []
    sent = list((pack / "answers").glob("r02-*.json"))
    assert len(sent) == 1

    # r01 saved twice (an earlier, half-done save left in the folder): the latest save counts, once.
    stale = {**answers, "saved_at": "2020-01-01T00:00:00.000Z", "rankings": answers["rankings"][:1], "complete": False}
    (pack / "answers" / "r01-early.json").write_text(json.dumps(stale))
    assert human(["score", str(pack), str(saved), str(pack / "answers")]) == 0
    result = json.loads((pack / "scored" / "human_scores.json").read_text())
    assert result["raters"] == 2 and result["scenes"] == 3
    models = {row["model"]: row for row in result["models"]}
    # Ranks over six orders: a 1,2,1,1,3,2 = 10; b 2,1,3,3,1,3 = 13; c 3,3,2,2,2,1 = 13.
    assert models["gpt-5.4"]["mean_rank"] == pytest.approx(10 / 6)
    assert models["claude-4.8"]["mean_rank"] == pytest.approx(13 / 6)
    assert models["qwen-3.5"]["mean_rank"] == pytest.approx(13 / 6)
    assert [models[MODELS[k]]["first_share"] for k in "abc"] == pytest.approx([3 / 6, 2 / 6, 1 / 6])
    # a before b in 4 of 6 orders, a before c in 4, b before c in 3.
    wins = result["pairwise_wins"]
    assert wins["gpt-5.4"]["claude-4.8"] == pytest.approx(4 / 6)
    assert wins["claude-4.8"]["gpt-5.4"] == pytest.approx(2 / 6)
    assert wins["gpt-5.4"]["qwen-3.5"] == pytest.approx(4 / 6)
    assert wins["claude-4.8"]["qwen-3.5"] == pytest.approx(0.5)
    assert models["claude-4.8"]["mean_win"] == pytest.approx((2 / 6 + 0.5) / 2)
    # Scene-model preference (minus the mean rank): s1 a -1, b -2.5, c -2.5; s2 a -2.5, b -1, c -2.5;
    # s3 a -1.5, b -3, c -1.5. Its average ranks: 8.5 3.5 3.5 | 3.5 8.5 3.5 | 6.5 1 6.5.
    # LS x100: 80 50 60 | 55 90 40 | 70 0 75 -> ranks 8 3 5 | 4 9 2 | 6 1 7: sxy 54, sxx 54, syy 60.
    rho = result["spearman"]
    assert rho["latent_sim"]["pairs"] == 9
    assert rho["latent_sim"]["spearman_rho"] == pytest.approx(0.9486833, abs=1e-6)
    # DV x100 (s3/c has no source-correct question: left out): 75 50 25 | 50 100 25 | 75 0;
    # preference ranks over those 8: 7.5 3.5 3.5 | 3.5 7.5 3.5 | 6 1, DV's 6.5 4.5 2.5 | 4.5 8 2.5 | 6.5 1:
    # sxy 35.75, sxx 36.5, syy 40.5.
    assert rho["dual_vqa"]["pairs"] == 8
    assert rho["dual_vqa"]["spearman_rho"] == pytest.approx(0.9298269, abs=1e-6)
    # Overall ((sqrt DV + sqrt LS) / 2)^2: 77.48 50 40.61 | 52.47 94.93 32.06 | 72.48 0 -> ranks 7 4 3 | 5 8 2 | 6 1:
    # sxy 36.5, sxx 36.5, syy 42.
    assert rho["overall"]["pairs"] == 8
    assert rho["overall"]["spearman_rho"] == pytest.approx(0.9322272, abs=1e-6)
    cells = {(row["scene_id"], row["model"]): row for row in result["by_scene_model"]}
    assert cells[("s2", "gpt-5.4")]["dual_vqa"] == 50.0  # the judge fault stays out of the pool
    assert cells[("s3", "claude-4.8")]["latent_sim"] == 0.0
    assert cells[("s1", "gpt-5.4")]["overall"] == pytest.approx(77.4798, abs=1e-4)
    assert (pack / "scored" / "human_items.csv").read_text().startswith("scene_id,model,raters,mean_rank,")


# --- VGI --------------------------------------------------------------------------------------------

RULES = [{"id": "r1", "rule": "the cup never leaves the table"}, {"id": "r2", "rule": "one hand at a time"}]
# (instance, generator) -> the rater's (completeness, violations) and the judge's row (None: the judge failed).
VGI = {
    ("t1", "A"): (("complete", {"r1": 0, "r2": 0}), ("complete", {"r1": 0, "r2": 0})),
    ("t1", "B"): (("partial", {"r1": 1, "r2": 0}), ("complete", {"r1": 1, "r2": 0})),
    ("t2", "A"): (("complete", {"r1": 0, "r2": 1}), ("partial", {"r1": 0, "r2": 0})),
    ("t2", "B"): (("failed", {"r1": 0, "r2": 0}), None),
    ("t3", "A"): (("complete", {"r1": 0, "r2": 0}), ("partial", {"r1": 0, "r2": 0})),
    ("t3", "B"): (("partial", {"r1": 0, "r2": 2}), ("partial", {"r1": 0, "r2": 0})),
}
LEVEL = {"complete": 1.0, "partial": 0.5, "failed": 0.0}
HOSTILE = " </script><b id=x>bold</b><script>document.title='owned'</script>"  # a lab's text, shown as text


@pytest.fixture(scope="session")
def vgi_world(tmp_path_factory):
    root = tmp_path_factory.mktemp("vgi-human")
    (root / "images").mkdir()
    tasks = []
    for n, instance in enumerate(("t1", "t2", "t3")):
        Image.new("RGB", (64, 36), (40 * n, 120, 200)).save(root / "images" / f"{instance}.png")
        tasks.append({"id": instance, "family": "stack", "domain": "household", "skills": ["order"], "level": 1,
                      "constraint": f"put cup {n} on the shelf{HOSTILE if n == 1 else ''}", "rubric": RULES,
                      "completeness": ["the cup is on the shelf"], "start_image": f"images/{instance}.png"})  # fmt: skip
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    for generator in ("A", "B"):
        rows = []
        for n, instance in enumerate(("t1", "t2", "t3")):
            clip(root / generator / f"{instance}.mp4", (30, 60 + 50 * n, 90), shift=3 * n)
            judged = VGI[(instance, generator)][1]
            row = {"id": instance, "family": "stack", "domain": "household", "skills": ["order"], "level": 1}
            if judged is None:
                row.update(status="error", reason="judge answered HTTP 500", **instance_score(0.0, {}, RULES))
            else:
                row.update(status="ok", violations=judged[1], **instance_score(LEVEL[judged[0]], judged[1], RULES))
            rows.append(row)
        write_vgi_rows(root / "scores" / generator / "vgi.jsonl", rows)  # where bvb score vgi --out puts them
    return root


@needs_chromium
def test_a_vgi_rating_study_filled_in_chromium_gives_the_judges_auc_and_pairwise_accuracy(vgi_world, tmp_path, capsys):
    from tests.cdp_support import Browser

    pack = tmp_path / "study"
    argv = ["pack", "vgi", "--tasks", str(vgi_world / "tasks.jsonl"), "--out", str(pack), "-q",
            "--videos", f"A={vgi_world / 'A'}", f"B={vgi_world / 'B'}"]  # fmt: skip
    assert human(argv) == 0
    key = json.loads((pack / "key.json").read_text())
    assert len(key["items"]) == 6
    page_html = (pack / "study.html").read_text()
    assert '"instance": "t1"' not in page_html and str(vgi_world) not in page_html

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with Browser(tmp_path / "chrome", downloads) as browser:
        page = browser.open((pack / "study.html").as_uri())
        assert page.wait_attribute("body", "data-videos-loaded", "6/6") == "6/6"
        assert page.evaluate("document.images.length") == 6 and page.evaluate(
            "Array.from(document.images).every(i => i.naturalWidth > 0)"
        )
        assert (
            page.evaluate("document.querySelectorAll('b').length") == 0 and page.evaluate("document.title") != "owned"
        )
        assert page.evaluate("document.body.textContent").count("<b id=x>bold</b>") == 2  # t2 by both generators
        page.type("#rater", "v01")
        for code, item in key["items"].items():
            completeness, violations = VGI[(item["instance"], item["generator"])][0]
            page.click(f'input[name="completeness-{code}"][value="{completeness}"]')
            for rule, count in violations.items():
                if count:
                    page.type(f'section[data-item="{code}"] input[data-rule="{rule}"]', str(count))
        assert page.attribute("body", "data-answered") == "6/6"
        page.click("#save")
        done = browser.wait_for("Browser.downloadProgress", lambda p: p.get("state") == "completed")
        assert page.errors() == []
    answers = json.loads(Path(done["filePath"]).read_text())
    assert answers["instrument_id"] == "vgi-human-rate-v1" and len(answers["ratings"]) == 6

    scored = ["score", str(pack), done["filePath"], "--out", str(tmp_path / "scored")]
    assert human(scored) == 2  # the pack was built before the judge scored: where are its rows?
    assert "--scores DIR" in capsys.readouterr().err
    assert human([*scored, "--scores", str(vgi_world / "scores")]) == 0
    result = json.loads((tmp_path / "scored" / "human_scores.json").read_text())
    # Judged videos (t2/B's judge failed: left out): people's scores t1A 1, t1B .5*.75, t2A .75, t3A 1, t3B .5*(2/3);
    # the judge's 1, .75, .5, .5, .5. Successes for people: t1A, t3A.
    assert result["items"] == 5 and [(u["instance"], u["generator"]) for u in result["unjudged"]] == [("t2", "B")]
    assert (result["human_successes"], result["human_failures"]) == (2, 3)
    # AUC: t1A (1) beats .75 .5 .5; t3A (.5) loses to .75, ties .5 .5: (3 + 0 + .5 + .5) / 6.
    assert result["auc"] == pytest.approx(4 / 6)
    # 9 pairs people told apart (t1A-t3A tied): right t1A-t1B t1A-t2A t1A-t3B t1B-t3B; wrong t1B-t2A t1B-t3A;
    # judge ties t2A-t3A t2A-t3B t3A-t3B: (4 + 1.5) / 9.
    assert result["pairwise_accuracy"] == pytest.approx(5.5 / 9)
    assert (result["pairs"], result["judge_ties"]) == (9, 3)
    # Completeness: same on t1A and t3B of the five.
    assert result["completeness_agreement"] == pytest.approx(0.4)


# --- bad input: one line, exit 2 --------------------------------------------------------------------


def one_error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_a_missing_run_is_one_line(bvb_world, tmp_path, capsys):
    _, runs = bvb_world
    gone = tmp_path / "results" / "nope"
    assert human(["pack", "bvb", "--runs", str(runs["a"]), str(gone), "--out", str(tmp_path / "p")]) == 2
    line = one_error_line(capsys)
    assert str(gone) in line and "not found" in line
    assert not (tmp_path / "p").exists()
    assert (
        human(["pack", "bvb", "--runs", str(runs["a"]), str(runs["b"]), "--scenes", "s9", "--out", str(tmp_path / "p")])
        == 2
    )
    line = one_error_line(capsys)
    assert "s9" in line and "--scenes" in line


def test_answers_that_do_not_belong_to_the_pack_are_one_line(bvb_world, tmp_path, capsys):
    _, runs = bvb_world
    pack = tmp_path / "study"
    key = pack_bvb(runs, pack, "--scenes", "s1", "--max-frames", "2")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"instrument_id": "bvb-human-rank-v1", "pack_id": "bvb-000000000000", "rankings": []}))
    assert human(["score", str(pack), str(other)]) == 2
    line = one_error_line(capsys)
    assert str(other) in line and key["pack_id"] in line and "bvb-000000000000" in line
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"instrument_id": "bvb-human-rank-v1", "pack_id": key["pack_id"],
                               "rankings": [{"scene_id": "s1", "rank": ["A", "B", "Z"]}]}))  # fmt: skip
    assert human(["score", str(pack), str(bad)]) == 2
    assert "not an order of its codes A, B, C" in one_error_line(capsys)
    # A second pack in the same folder would orphan the first one's answers.
    assert human(["pack", "bvb", "--runs", str(runs["a"]), str(runs["b"]), "--out", str(pack)]) == 2
    assert "--force" in one_error_line(capsys)


def test_the_study_server_keeps_only_its_own_pages_answers(bvb_world, tmp_path):
    from eval_bridge.human.serve import StudyServer

    _, runs = bvb_world
    pack = tmp_path / "study"
    key = pack_bvb(runs, pack, "--scenes", "s2", "--max-frames", "2")
    codes = sorted(key["scenes"]["s2"]["codes"])
    body = {"instrument_id": "bvb-human-rank-v1", "pack_id": key["pack_id"], "rater_id": "r9",
            "rankings": [{"scene_id": "s2", "rank": codes}]}  # fmt: skip

    def post(url, payload, **headers):
        request = urllib.request.Request(url + "answers", json.dumps(payload).encode(), method="POST")
        request.add_header("Content-Type", headers.pop("content_type", "application/json"))
        for name, value in headers.items():
            request.add_header(name.replace("_", "-"), value)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    with StudyServer(pack, tmp_path / "answers") as server:
        assert post(server.url, body, Origin="http://evil.example")[0] == 403
        assert post(server.url, body, content_type="text/plain")[0] == 415
        status, reply = post(server.url, {**body, "pack_id": "bvb-000000000000"})
        assert status == 422 and "not this pack" in reply["error"]
        status, reply = post(server.url, body, Origin=server.url.rstrip("/"))
        assert status == 200
    assert [p.name for p in (tmp_path / "answers").iterdir()] == [reply["saved"]]


def test_forms_give_each_rater_their_own_draw_and_take_only_their_own_scenes(bvb_world, tmp_path, capsys):
    from eval_bridge.human.serve import StudyServer

    _, runs = bvb_world
    pack = tmp_path / "study"
    key = pack_bvb(runs, pack, "--forms", "3", "--per-form", "2", "--max-frames", "2")
    forms = key["forms"]
    assert [form["page"] for form in forms.values()] == ["study-r01.html", "study-r02.html", "study-r03.html"]
    assert not (pack / "study.html").exists()
    for form_id, form in forms.items():
        assert len(form["scenes"]) == 2 and form_id.startswith(key["pack_id"] + "-r")
        data = (pack / form["page"]).read_text()
        assert form_id in data and all((f'"scene_id": "{s}"' in data) == (s in form["scenes"]) for s in SCENES)
    form_id, form = next(iter(forms.items()))
    elsewhere = next(s for s in SCENES if s not in form["scenes"])
    stray = tmp_path / "stray.json"
    stray.write_text(json.dumps({"instrument_id": "bvb-human-rank-v1", "pack_id": form_id,
                                 "rankings": [{"scene_id": elsewhere, "rank": ["A", "B", "C"]}]}))  # fmt: skip
    assert human(["score", str(pack), str(stray)]) == 2
    assert f"ranks scene '{elsewhere}', which its page ({form_id}) does not hold" in one_error_line(capsys)
    assert (
        human(
            ["pack", "bvb", "--runs", str(runs["a"]), str(runs["b"]), "--per-form", "5", "--out", str(tmp_path / "q")]
        )
        == 2
    )
    assert "--per-form 5 is more than the 3 scenes" in one_error_line(capsys)
    with StudyServer(pack, tmp_path / "answers") as server:
        with urllib.request.urlopen(server.url, timeout=10) as index:
            listed = index.read().decode()
        assert all(f'href="{f["page"]}"' in listed for f in forms.values())
        with urllib.request.urlopen(server.url + "study-r02.html", timeout=10) as page:
            assert list(forms)[1] in page.read().decode()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(server.url + "key.json", timeout=10)
        assert missing.value.code == 404  # the key is never served
