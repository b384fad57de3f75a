"""Options as data (bvb_addon.options): one class gives the command line, the file's checks and the JSON."""

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from bvb_addon.command_line import Parser
from bvb_addon.errors import ArgumentError
from bvb_addon.options import add_options, describe, from_mapping, from_namespace, markdown_table, option, to_mapping

pytestmark = pytest.mark.unit


def _shard(text: str) -> tuple[int, int]:
    i, n = text.split("/")
    return int(i), int(n)


@dataclass(frozen=True)
class Judge:
    kind: Literal["vlm", "geometry"] = option("vlm", "who answers", flag="--judge")
    base_url: str | None = option(None, "the judge's endpoint", flag="--judge-base-url")
    retries: int = option(6, "retries on 429/5xx")


@dataclass(frozen=True)
class Score:
    run: Path = option(help="the run directory")
    judge: Judge = option(help="the judge", default_factory=Judge)
    workers: int = option(8, "questions at once", short="-j", old=("--threads",))
    price_in: float | None = option(None, "USD per million input tokens")
    scenes: tuple[str, ...] | None = option(None, "only these scenes")
    shard: tuple[int, int] | None = option(None, "the i-th of N", metavar="i/N", parse=_shard)
    resume: bool = option(False, "keep what is scored")
    probe: bool = option(True, "probe the endpoint first")
    budget: object | None = option(None, "a campaign's budget holder", cli=False, record=False)


def parser() -> Parser:
    p = Parser(prog="bvb score dv")
    add_options(p, Score)
    return p


def test_the_command_line_is_generated_with_the_names_users_know():
    p = parser()
    flags = {s for a in p._actions for s in a.option_strings}
    assert {"--run", "--judge", "--judge-base-url", "--retries", "--workers", "-j", "--price-in", "--scenes"} <= flags
    assert {"--shard", "--resume", "--probe", "--no-probe"} <= flags
    assert "--budget" not in flags and "--kind" not in flags and "--base-url" not in flags
    text = p.format_help()
    assert "questions at once (default: 8)" in text and "--threads" not in text


def test_parsed_values_are_typed_and_nested():
    opts = from_namespace(
        Score,
        parser().parse_args(
            "--run r1 --judge geometry --retries 2 -j 3 --price-in 2.5 --scenes a b --shard 1/4 --resume --no-probe".split()
        ),
    )
    assert opts == Score(
        run=Path("r1"),
        judge=Judge(kind="geometry", retries=2),
        workers=3,
        price_in=2.5,
        scenes=("a", "b"),
        shard=(1, 4),
        resume=True,
        probe=False,
    )
    assert from_namespace(Score, parser().parse_args(["--run", "r"])) == Score(run=Path("r"))


def test_a_retired_name_still_works_and_says_the_new_one(capsys):
    opts = from_namespace(Score, parser().parse_args(["--run", "r", "--threads", "5"]))
    assert opts.workers == 5
    assert "--threads is now --workers" in capsys.readouterr().err


def test_a_required_option_and_a_wrong_choice_are_refused(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args([])
    assert "--run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser().parse_args(["--run", "r", "--judge", "geometri"])
    assert "did you mean 'geometry'" in capsys.readouterr().err


def test_a_file_table_uses_field_names_and_is_checked_by_type():
    opts = from_mapping(
        Score, {"run": "r1", "workers": 3, "judge": {"base_url": "http://x/v1"}, "scenes": ["a"]}, "c.toml [dv]"
    )
    assert opts == Score(run=Path("r1"), workers=3, judge=Judge(base_url="http://x/v1"), scenes=("a",))
    assert from_mapping(Score, {"run": "r", "price_in": 3}, "t").price_in == 3.0


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"run": "r", "worker": 3}, "c.toml [dv]: unknown key 'worker'; did you mean 'workers'?"),
        ({"run": "r", "workers": "3"}, "c.toml [dv]: workers = '3' is not a integer; fix the value"),
        ({"run": "r", "workers": True}, "workers = True is not a integer"),
        ({"run": "r", "judge": {"kind": "geometri"}}, "c.toml [dv] judge: kind = 'geometri' (did you mean 'geometry'?)"),
        ({"run": "r", "scenes": "a"}, "scenes = 'a' is not a list of string or none"),
        ({"workers": 3}, "c.toml [dv]: run missing; add run = ..."),
        ({"run": "r", "budget": 1}, "unknown key 'budget'"),
        ({"run": "r", "judge": "vlm"}, "judge must be a table of Judge's fields"),
    ],
)
def test_a_bad_table_is_one_line_naming_the_key(table, message):
    with pytest.raises(ArgumentError) as caught:
        from_mapping(Score, table, "c.toml [dv]")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_json_round_trips_and_leaves_out_what_is_not_recorded():
    opts = Score(run=Path("r"), judge=Judge(base_url="u"), scenes=("a",), shard=(0, 2), budget=object())
    data = to_mapping(opts)
    assert data["run"] == "r" and data["judge"] == {"kind": "vlm", "base_url": "u", "retries": 6}
    assert data["scenes"] == ["a"] and "budget" not in data
    assert from_mapping(Score, {k: v for k, v in data.items() if k != "shard"}, "json") == Score(
        run=Path("r"), judge=Judge(base_url="u"), scenes=("a",)
    )


def test_docs_rows_come_from_the_fields():
    rows = {row[0]: row for row in describe(Score)}
    assert rows["run"] == ("run", "--run", "path", "required", "the run directory")
    assert rows["judge.base_url"] == ("judge.base_url", "--judge-base-url", "string or none", "None", "the judge's endpoint")
    assert rows["workers"][3] == "8" and "budget" not in rows
    assert "| `judge.kind` | `--judge` | 'vlm' \\| 'geometry' | `'vlm'` | who answers |" in markdown_table(Score)


@dataclass(frozen=True)
class Serve:
    roots: tuple[Path, ...] = option((), "a folder (repeatable; default: none)", flag="--root", repeat=True)
    judges: dict[str, Judge] = option(help="judges by name", default_factory=dict, cli=False)


def test_a_repeated_flag_collects_and_a_table_of_named_entries_is_checked():
    p = Parser(prog="bvb serve")
    add_options(p, Serve)
    assert from_namespace(Serve, p.parse_args(["--root", "a", "--root", "b"])).roots == (Path("a"), Path("b"))
    assert from_namespace(Serve, p.parse_args([])) == Serve()
    opts = from_mapping(Serve, {"roots": ["r"], "judges": {"gpt": {"base_url": "http://x/v1"}}}, "serve.toml")
    assert opts.judges == {"gpt": Judge(base_url="http://x/v1")} and opts.roots == (Path("r"),)
    assert to_mapping(opts)["judges"]["gpt"]["base_url"] == "http://x/v1"
    with pytest.raises(ArgumentError, match=r"serve.toml judges.gpt: unknown key 'modle'"):
        from_mapping(Serve, {"judges": {"gpt": {"modle": "m"}}}, "serve.toml")
    with pytest.raises(ArgumentError, match=r"judges = 'x' is not a table of Judge"):
        from_mapping(Serve, {"judges": "x"}, "serve.toml")


@dataclass(frozen=True)
class Grouped:
    judge: Judge = option(help="the judge", default_factory=Judge, group="judge")
    workers: int = option(8, "questions at once", group="run")
    votes: int = option(1, "answers per question")


def test_a_group_puts_flags_under_their_help_section_and_sub_options_take_theirs():
    p = Parser(prog="x")
    add_options(p, Grouped, group="scoring")
    sections = {g.title: {s for a in g._group_actions for s in a.option_strings} for g in p._action_groups}
    assert sections["judge"] == {"--judge", "--judge-base-url", "--retries"}
    assert sections["run"] == {"--workers"} and sections["scoring"] == {"--votes"}
    # A sub-option's metavar is its field's name, not its dest.
    assert "--judge-base-url BASE_URL" in p.format_help()


def test_a_flat_table_names_sub_options_fields_by_their_names():
    assert from_mapping(Score, {"run": "r", "base_url": "u", "retries": 2}, "t", flat=True) == from_mapping(
        Score, {"run": "r", "judge": {"base_url": "u", "retries": 2}}, "t"
    )
    with pytest.raises(ArgumentError, match="^t: unknown key 'nope'"):
        from_mapping(Score, {"run": "r", "nope": 1}, "t", flat=True)


@pytest.mark.parametrize("flat_first", [True, False])
def test_a_flat_key_and_its_sub_table_together_keep_both_whatever_the_order(flat_first):
    table = {"base_url": "u"} if flat_first else {}
    table = {**table, "run": "r", "judge": {"retries": 2}}
    if not flat_first:
        table["base_url"] = "u"
    given = {k: (dict(v) if isinstance(v, dict) else v) for k, v in table.items()}
    judge = from_mapping(Score, table, "t", flat=True).judge
    assert (judge.base_url, judge.retries) == ("u", 2)
    assert table == given  # the caller's table is not filled in
    with pytest.raises(ArgumentError, match=r"^t: retries is given twice, flat and in \[judge\]; keep one$"):
        from_mapping(Score, {**table, "retries": 3}, "t", flat=True)


@dataclass(frozen=True)
class Limits:
    step_s: float = option(60.0, "wall-clock limit of one step, s", flag="--timeout", cli=False)
    render_s: float = option(1800.0, "wall-clock limit of one render, s", flag="--timeout", cli=False)
    memory: int = option(8, "memory, GiB")
    gpu: bool = option(False, "the GPU too")


@dataclass(frozen=True)
class Exec:
    limits: Limits = option(help="the limits", default_factory=Limits, include=("step_s",), exclude=("gpu",))


def test_a_stage_puts_a_sub_options_hidden_field_on_its_command_line_and_leaves_one_off():
    p = Parser(prog="bvb exec")
    add_options(p, Exec)
    flags = {s for a in p._actions for s in a.option_strings}
    assert {"--timeout", "--memory"} <= flags and "--gpu" not in flags
    opts = from_namespace(Exec, p.parse_args(["--timeout", "5"]))
    assert opts.limits == Limits(step_s=5.0)  # the render limit, not on this command line, keeps its default


@dataclass(frozen=True)
class Scorer:
    limits: Limits = option(
        help="the limits", default_factory=Limits, exclude=("gpu",), help_of={"memory": "memory of the scorer, GiB"}
    )


def test_a_stage_gives_a_sub_options_field_a_help_of_its_own():
    p = Parser(prog="bvb scorer")
    add_options(p, Scorer)
    helps = {a.option_strings[0]: a.help for a in p._actions if a.option_strings}
    assert helps["--memory"].startswith("memory of the scorer, GiB")
    assert from_namespace(Scorer, p.parse_args(["--memory", "4"])).limits == Limits(memory=4)
    q = Parser(prog="bvb exec")
    add_options(q, Exec)  # the same field keeps its own help where no stage overrides it
    assert {a.option_strings[0]: a.help for a in q._actions if a.option_strings}["--memory"].startswith("memory, GiB")


def test_a_fixed_pair_in_a_file_becomes_a_typed_tuple():
    assert from_mapping(Score, {"run": "r", "shard": [1, 4]}, "t").shard == (1, 4)
    with pytest.raises(ArgumentError, match=r"t: shard = \[1\]: give 2 values"):
        from_mapping(Score, {"run": "r", "shard": [1]}, "t")
    with pytest.raises(ArgumentError, match="shard = 'x' is not a integer"):
        from_mapping(Score, {"run": "r", "shard": ["x", 2]}, "t")


def _pair(text: str) -> tuple[str, Path]:
    name, sep, folder = text.partition("=")
    if not sep:
        raise ValueError("write NAME=DIR")
    return name, Path(folder)


@dataclass(frozen=True)
class Spelled:
    pairs: tuple[tuple[str, Path], ...] = option((), "NAME=DIR pairs", parse=_pair)
    one: tuple[str, Path] | None = option(None, "one NAME=DIR", parse=_pair)


def test_a_file_may_spell_a_value_as_the_command_line_does():
    # The field's own parser reads a word in a file, so a table and the command line accept the same words
    # (this is how a campaign's [vgi] generators = ["a=videos/a"] is read).
    spelled = from_mapping(Spelled, {"pairs": ["a=x", ["b", "y"]], "one": "c=z"}, "t")
    assert spelled.pairs == (("a", Path("x")), ("b", Path("y"))) and spelled.one == ("c", Path("z"))
    with pytest.raises(ArgumentError, match=r"^t: pairs = 'x': write NAME=DIR$"):
        from_mapping(Spelled, {"pairs": ["x"]}, "t")
