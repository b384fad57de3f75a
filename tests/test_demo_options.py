"""bvb demo's options as data (DemoOptions): the generated parser, the encoder's variable, checks first."""

from pathlib import Path

import pytest

from bvb_addon.errors import ArgumentError, BVBError
from bvb_addon.options import from_mapping
from headless import cli, demo

pytestmark = pytest.mark.unit


def parse(*argv: str) -> demo.DemoOptions:
    args = demo.build_parser().parse_args(list(argv))
    return demo.from_namespace(demo.DemoOptions, args)


def test_the_flags_users_know_give_the_options_they_gave_before():
    options = parse("--out", "d", "--seed", "2", "--resolution", "128", "--fps", "4", "--duration", "3",
                    "--num-frames", "8", "--encoder", "/w/vjepa2")  # fmt: skip
    assert options == demo.DemoOptions(out=Path("d"), seed=2, resolution=128, fps=4, duration=3.0, num_frames=8,
                                       encoder="/w/vjepa2")  # fmt: skip
    assert parse() == demo.DemoOptions(out=Path("results/demo"))


def test_a_table_is_checked_by_field_name():
    with pytest.raises(ArgumentError, match=r"^t: unknown key 'frames'; did you mean 'num_frames'\?"):
        from_mapping(demo.DemoOptions, {"frames": 8}, "t")


def test_an_out_that_is_a_file_is_one_line_before_any_stage(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    lines: list[str] = []
    with pytest.raises(BVBError, match="is a file, not a folder; give a folder"):
        demo.demo(demo.DemoOptions(out=tmp_path / "f", on_line=lines.append))
    assert lines == []  # not even the first step's line
    assert cli.main(["demo", "--out", str(tmp_path / "f")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
