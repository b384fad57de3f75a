"""One ``bvb`` command line: every stage's parser follows the same rules.

usage says ``bvb STAGE``; every option shows its default; no prefix matching; --quiet and
--verbose everywhere; one name per idea; unknown commands get a did-you-mean; a bare ``bvb``
prints the help.
"""

import argparse

import pytest

from bvb_addon.options import from_namespace
from eval_bridge.api import LSOptions
from headless import cli
from headless.exec import ExecOptions

pytestmark = pytest.mark.unit

STAGES = cli.stage_parsers()
# One name per idea: the old names may stay as hidden aliases, never as shown options.
RETIRED = {"--min-level": "--sandbox-min"}


def options(parser):
    return [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS]


def test_every_stage_of_the_command_line_is_walked():
    assert {"synth", "run", "render", "exec", "leaderboard", "report", "serve", "view", "export", "demo"} <= set(STAGES)
    assert {f"score {axis}" for axis in cli.SCORE_AXES} <= set(STAGES)


@pytest.mark.parametrize("name", sorted(STAGES))
def test_a_stage_parser_follows_the_rules(name):
    parser = STAGES[name]
    assert parser.prog == f"bvb {name}"
    assert parser.format_usage().startswith(f"usage: bvb {name} ")
    assert parser.allow_abbrev is False
    flags = {s for a in options(parser) for s in a.option_strings}
    assert {"--quiet", "--verbose"} <= flags
    assert not flags & set(RETIRED), f"bvb {name}: use {[RETIRED[f] for f in flags & set(RETIRED)]}"
    epilog = parser.epilog or ""
    assert "example" in epilog and "python -m" not in epilog and "bvb " in epilog
    formatter = parser._get_formatter()
    for action in options(parser):
        if action.nargs == 0:
            continue  # a flag: off unless given
        shown = formatter._get_help_string(action)
        assert "default" in shown or "required" in shown, f"bvb {name} {action.option_strings[0]}: no default shown"
    for action in options(parser):
        if "V-JEPA" in (action.help or "") and action.nargs != 0 and action.type is None:
            assert "--encoder" in action.option_strings, f"bvb {name}: LS weights are --encoder"


def test_no_prefix_matching_and_a_wrong_choice_gets_a_did_you_mean(capsys):
    with pytest.raises(SystemExit) as exit_:
        STAGES["render"].parse_args(["--run", "r", "--num-frame", "8"])
    assert exit_.value.code == 2 and "unrecognized arguments: --num-frame" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        STAGES["render"].parse_args(["--run", "r", "--preset", "fats"])
    assert "did you mean 'fast'?" in capsys.readouterr().err


def test_defaults_are_in_the_help_text():
    text = STAGES["run"].format_help()
    assert "--model MODEL" in text and "(default: gpt-4o-mini)" in text.replace("\n", " ").replace("  ", " ")
    assert "--budget USD" in text
    render = " ".join(STAGES["render"].format_help().split())
    assert "(default: fast)" in render or "(default: bvb)" in render


def test_unknown_commands_get_a_did_you_mean_and_bare_bvb_prints_the_help(capsys):
    assert cli.main(["rnu"]) == 2
    assert "did you mean 'run'?" in capsys.readouterr().err
    assert cli.main(["score", "dvv"]) == 2
    assert "did you mean 'dv'?" in capsys.readouterr().err
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: bvb") and "demo" in out


def test_an_old_option_name_still_works_and_says_the_new_one(capsys):
    args = STAGES["score ls"].parse_args(["--run", "r", "--split", "s", "--videos", "v", "--model", "w"])
    assert from_namespace(LSOptions, args).encoder.model == "w"  # the parser is LSOptions' (generated)
    assert "--model is now --encoder" in capsys.readouterr().err
    args = STAGES["exec"].parse_args(["--workspace", "w", "--min-level", "uid", "p.py"])
    assert from_namespace(ExecOptions, args).sandbox.min_level == "uid"  # the parser is ExecOptions' (generated)


def test_shell_completion_covers_every_stage_and_option(capsys):
    pytest.importorskip("shtab")
    assert cli.main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert "--budget" in script and "--encoder" in script and "overall" in script and "vgi-tasks" in script
