"""The documented path's small manners (issue 42): a bad flag names its own subcommand and the closest
option, ./bvb keeps the caller's folder, Ctrl-C ends every long-running command with one true line, the
encoder's messages say what to pass, the render preset counts in comparability, and the smaller points
(campaign keys, --help's list, human pack's --count, serve's token line)."""

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bvb_addon.errors import BVBError
from eval_bridge.api import EncoderOptions
from eval_bridge.human.key import BVB_INSTRUMENT, new_key
from eval_bridge.leaderboard import board, identity
from eval_bridge.scoring import ls
from headless import campaign, cli

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent


def _refused(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "usage", "line"),
    [
        (["score", "dv", "--run", "R", "--judge-url", "x"], "usage: bvb score dv ",
         "bvb score dv: error: unrecognized arguments: --judge-url x; did you mean '--judge-base-url'?"),
        (["view", "R", "--resume"], "usage: bvb view ",
         "bvb view: error: unrecognized arguments: --resume; bvb view --help lists its options"),
        (["score", "overall", "--run", "R", "--ouput", "x"], "usage: bvb score overall ",
         "bvb score overall: error: unrecognized arguments: --ouput x; bvb score overall --help lists its options"),
        (["human", "serve", "P", "--answer", "a"], "usage: bvb human serve ",
         "bvb human serve: error: unrecognized arguments: --answer a; did you mean '--answers'?"),
        (["run", "--limt", "1"], "usage: bvb run ",
         "bvb run: error: unrecognized arguments: --limt 1; did you mean '--limit'?"),
    ],
)  # fmt: skip
def test_an_unknown_flag_is_refused_by_its_own_subcommand_with_the_closest_option(capsys, argv, usage, line):
    err = _refused(capsys, argv)
    assert err.startswith(usage), err  # was: usage: bvb score [-h] COMMAND ...
    assert err.strip().splitlines()[-1] == line


def _bvb(cwd, *args, env=None, timeout=60):
    """The checkout's ./bvb, run from ``cwd`` (its stamps say the venv is set up: nothing is installed)."""
    stamp = REPO / ".venv" / ".bvb-setup-core"
    if not stamp.is_file() or stamp.stat().st_mtime < (REPO / "pyproject.toml").stat().st_mtime:
        pytest.skip("./bvb would set up .venv first (its core stamp is missing or older than pyproject.toml)")
    env = {**os.environ, "BVB_VENV": str(REPO / ".venv"), "PIP_NO_INDEX": "1", **(env or {})}
    return subprocess.run(["/bin/bash", str(REPO / "bvb"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def test_bvb_resolves_relative_paths_against_the_callers_folder(tmp_path):
    (tmp_path / "runs" / "mine" / "agent_meta").mkdir(parents=True)
    out = _bvb(tmp_path, "score", "overall", "--run", "runs/mine")
    # Read from tmp_path (before: from the checkout, "--run runs/mine: no such folder").
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        "error: runs/mine has neither dual_vqa_summary.json nor vision_sim_summary.json; "
        "score it first with bvb score dv and bvb score ls"
    )
    # A folder of the caller's named like one of our packages does not shadow it.
    (tmp_path / "headless").mkdir()
    (tmp_path / "headless" / "__init__.py").write_text("raise SystemExit('shadowed by the caller folder')\n")
    out = _bvb(tmp_path, "--help")
    assert out.returncode == 0 and "usage: bvb " in out.stdout, out.stderr


def test_bvb_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "headless.cli", "--help"], cwd=REPO, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 0
    for word in ("completion", "vgi-filter", "demo", "human", "score"):
        assert word in out.stdout, word


# ---- Ctrl-C ----------------------------------------------------------------------------------------


def _wait_until_answering(url, seconds=30.0):
    """Until the server answers HTTP (any status): the socket listens before the server's loop runs."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _interrupted(tmp_path, args, ready):
    """Start ``bvb ARGS`` (HOME and XDG_CONFIG_HOME in tmp_path), wait for the line holding ``ready``, send SIGINT."""
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "PYTHONUNBUFFERED": "1"}  # fmt: skip
    env.pop("BVB_BRIDGE_TOKEN", None)
    env.pop("BVB_BRIDGE_TOKEN_FILE", None)
    proc = subprocess.Popen([sys.executable, "-m", "headless.cli", *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if ready in line:
                break
        else:
            raise AssertionError(f"bvb {' '.join(args)} ended before serving: {''.join(seen)}{proc.stderr.read()}")
        _wait_until_answering(re.search(r"http://127\.0\.0\.1:\d+/?", "".join(seen)).group(0))
        proc.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(seen) + out, err


def test_ctrl_c_stops_view_with_one_true_line(tmp_path):
    (tmp_path / "results").mkdir()
    code, _out, err = _interrupted(tmp_path, ["view", str(tmp_path / "results"), "--port", "0"], "serving")
    assert code == 130
    assert err.strip().splitlines() == ["bvb view: stopped (Ctrl-C)"]  # was: rerun with --resume (it has none)


def test_ctrl_c_stops_serve_with_one_true_line_and_serve_says_where_its_token_went(tmp_path):
    (tmp_path / "results").mkdir()
    code, out, err = _interrupted(tmp_path, ["serve", "--root", str(tmp_path / "results"), "--port", "0"],
                                  "bearer token written")  # fmt: skip
    assert code == 130
    assert err.strip().splitlines()[-1] == "bvb serve: stopped (Ctrl-C)" and "--resume" not in err
    token_file = tmp_path / "xdg" / "bvb" / "bridge-token"
    assert f"bearer token written to {token_file} (mode 0600" in out
    assert token_file.is_file() and oct(token_file.stat().st_mode & 0o777) == "0o600"


def test_ctrl_c_stops_human_serve_without_a_traceback(tmp_path):
    pack = tmp_path / "study"
    pack.mkdir()
    (pack / "study.html").write_text("<!doctype html><title>study</title>")
    (pack / "key.json").write_text(json.dumps(new_key("bvb", BVB_INSTRUMENT, 0)))
    code, _out, err = _interrupted(tmp_path, ["human", "serve", str(pack), "--port", "0"], "serving the study")
    assert code == 130
    assert err.strip().splitlines() == ["bvb human serve: stopped (Ctrl-C)"]  # was: a 47-line traceback


# ---- the encoder -----------------------------------------------------------------------------------


def test_a_wrong_encoder_says_what_to_pass(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # an empty local hub cache
    monkeypatch.delenv("BVB_VJEPA_MODEL", raising=False)
    # README's old `--encoder vjepa2`: not a hub entry point needing --checkpoint, a missing folder.
    with pytest.raises(BVBError) as wrong:
        ls.EncoderSpec.of(EncoderOptions(model="vjepa2"))
    message = str(wrong.value)
    assert "--encoder vjepa2: no such folder" in message and "--checkpoint" not in message
    assert "huggingface-cli download apiantonio/vjepa2.1-vit-gigantic-384 --local-dir DIR" in message
    # Another hub id is asked for by its own name (was: a snapshot of apiantonio/..., another model).
    with pytest.raises(BVBError) as other:
        ls.resolve_snapshot("facebook/vjepa2-vitl-fpc64-256")
    assert "huggingface-cli download facebook/vjepa2-vitl-fpc64-256 --local-dir DIR" in str(other.value)
    assert "apiantonio" not in str(other.value)
    # A torch-hub entry point still asks for its checkpoint.
    with pytest.raises(BVBError, match="--encoder vjepa2_1_vit_large_384 needs --checkpoint FILE"):
        ls.EncoderSpec.of(EncoderOptions(model="vjepa2_1_vit_large_384"))


def test_the_docs_and_help_tell_one_encoder_story():
    texts = {
        path: (REPO / path).read_text()
        for path in ("README.md", "docs/guide.md", "docs/service.md", "docs/ray.md", "headless/demo.py", "eval_bridge/cli.py")
    }  # fmt: skip
    for path, text in texts.items():
        assert "--encoder vjepa2 " not in text and "--encoder vjepa2\n" not in text, path
        assert "vjepa2-vitl-fpc64-256 " not in text.replace("(V-JEPA 2,\n`facebook/vjepa2-vitl-fpc64-256`", ""), path
    for path in ("README.md", "docs/guide.md", "docs/service.md", "docs/ray.md", "eval_bridge/cli.py"):
        assert "vjepa2.1" in texts[path], path
    parsers = cli.stage_parsers()
    assert "V-JEPA 2.1 ViT-G" in parsers["score ls"].description
    assert "V-JEPA 2.1 ViT-G" in parsers["demo"].format_help().replace("\n", " ").replace("  ", " ")


# ---- comparability: the render preset --------------------------------------------------------------


def _run(folder, preset):
    """A scored mini-bvb run directory: its config, DV summary and render rows (the preset each scene used)."""
    (folder / "agent_meta").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model": "gpt-4o", "harness": "mini-bvb", "reasoning": "none"}))
    summary = {"retention_rate": 0.5, "protocol": "dual_vqa_v1", "judge_model": "gpt-5.4-mini",
               "counts": {"questions": 4, "source_correct": 2, "both_correct": 1, "scenes": 1, "scenes_failed": 0}}  # fmt: skip
    (folder / "dual_vqa_summary.json").write_text(json.dumps(summary))
    row = {"scene": "s1", "status": "ok", "preset": preset, "resolution": 512, "num_samples": 64}
    (folder / "render_status.jsonl").write_text(json.dumps(row) + "\n")
    return folder


def test_a_fast_preset_run_is_not_ranked_beside_the_published_rows(tmp_path):
    published = tmp_path / "results.csv"
    published.write_text("name,effort,harness,overall,dualVqa,latentSim\nGPT-5.4,high,mini-BVB,40.0,50.0,30.0\n")
    fast, release = _run(tmp_path / "fast", "fast"), _run(tmp_path / "release", "bvb")
    assert identity.release_differences(identity.run_identity(fast)) == ["render_preset"]
    assert identity.release_differences(identity.run_identity(release)) == []
    for run, comparable, differs in ((fast, "false", "render preset"), (release, "true", "")):
        options = board.LeaderboardOptions(runs=(run,), out=tmp_path / f"{run.name}.csv", reference=(published,))
        rows = {str(r.get("run") or r["name"]): r for r in board.leaderboard(options).rows}
        row = rows[str(run)]
        assert (row["comparable"], row["differs"]) == (comparable, differs), run.name
        assert (row["rank"] is None) == (comparable == "false")  # ranked with the published row only when alike
        assert rows["GPT-5.4"]["rank"] is not None


# ---- the smaller points ----------------------------------------------------------------------------


def test_a_campaigns_unknown_run_key_is_matched_against_every_key_it_takes(tmp_path, capsys):
    (tmp_path / "split.jsonl").write_text("")
    (tmp_path / "videos").mkdir()
    config = tmp_path / "c.toml"
    base = 'results = "r"\nbudget = 1.0\nsplit = "split.jsonl"\nvideos = "videos"\n'
    config.write_text(base + '[run]\ncost_limt = 1.0\n[[config]]\nname = "a"\nmodel = "gpt-4o"\n')
    assert campaign.main([str(config)]) == 2
    assert "unknown key 'cost_limt'; did you mean 'cost_limit'?" in capsys.readouterr().err
    config.write_text(base + '[run]\nnot_a_key = 1\n[[config]]\nname = "a"\nmodel = "gpt-4o"\n')
    assert campaign.main([str(config)]) == 2
    listed = capsys.readouterr().err.split("the keys are: ")[1].strip().split(", ")
    assert {"cost_limit", "model", "base_url", "budget", "workers", "reasoning"} <= set(listed)


@pytest.mark.parametrize(
    ("module", "attribute", "argv", "line"),
    [
        ("headless.render", "render_run", ["--run", "RUN"], "bvb render: interrupted; rerun it with --resume to continue"),
        ("headless.synth", "synth", ["--out", "OUT"], "bvb synth: interrupted; rerun it to start again"),
        ("headless.demo", "demo", None, "bvb demo: interrupted; rerun it to continue where it stopped"),
    ],
)  # fmt: skip
def test_ctrl_c_in_any_stage_is_one_line_that_says_what_continues(
    tmp_path, monkeypatch, capsys, module, attribute, argv, line
):
    """The stages' entry (errors.entry) answers Ctrl-C: no traceback, exit 130, --resume named only where it exists."""

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module(module), attribute, interrupted)
    (tmp_path / "RUN" / "blends").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    if argv is None:  # the demo is bvb's own command
        code = cli.main(["demo", "--out", str(tmp_path / "demo")])
    else:
        code = importlib.import_module(module).main(argv)
    assert code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == line
