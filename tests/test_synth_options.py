"""bvb synth's options as data (SynthOptions) and its stage function synth(SynthOptions) -> SynthResult."""

import json
from pathlib import Path

import pytest

from bvb_addon.errors import ArgumentError
from bvb_addon.options import from_mapping
from headless import synth as synth_cli


def parse(*argv: str) -> synth_cli.SynthOptions:
    return synth_cli.from_namespace(synth_cli.SynthOptions, synth_cli.build_parser().parse_args(list(argv)))


@pytest.mark.unit
def test_the_flags_users_know_give_the_options_they_gave_before():
    options = parse("--out", "s", "--scenes", "2", "--difficulty", "all", "--seed", "3", "--width", "64",
                    "--height", "48", "--fps", "4", "--duration", "2.5")  # fmt: skip
    assert options == synth_cli.SynthOptions(out=Path("s"), scenes=2, difficulty="easy,medium,hard", seed=3,
                                             width=64, height=48, fps=4, duration=2.5)  # fmt: skip
    assert options.check() == ["easy", "medium", "hard"]
    assert parse("--out", "s") == synth_cli.SynthOptions(out=Path("s"))


@pytest.mark.unit
def test_a_table_is_checked_by_type_and_the_stage_checks_ranges_before_writing(tmp_path):
    with pytest.raises(ArgumentError, match=r"^demo \[synth\]: scenes = '2' is not a integer"):
        from_mapping(synth_cli.SynthOptions, {"scenes": "2"}, "demo [synth]", out=tmp_path)
    for changes, message in (({"width": 161}, "size 161 must be an even number"), ({"difficulty": "extreme"},
                             "unknown difficulty 'extreme'"), ({"fps": 2, "duration": 0.5}, "at least 2 frames")):  # fmt: skip
        options = from_mapping(synth_cli.SynthOptions, changes, "t", out=tmp_path / "suite")
        with pytest.raises(synth_cli.SynthError, match=message):
            synth_cli.synth(options)
    assert not (tmp_path / "suite").exists()


@pytest.mark.blender
def test_the_stage_function_generates_a_suite_and_returns_a_typed_result(tmp_path):
    pytest.importorskip("bpy")
    options = synth_cli.SynthOptions(out=tmp_path / "suite", width=64, height=48, fps=4, duration=1.0, progress=False)
    result = synth_cli.synth(options)
    assert result.out == tmp_path / "suite" and [s["scene"] for s in result.scenes] == ["synth_easy_000"]
    rows = [json.loads(line) for line in result.split.read_text().splitlines()]
    assert rows and {r["scene_name"] for r in rows} == {"synth_easy_000"}
