"""bvb vgi-tasks' options as data (VGITasksOptions) and its stage function vgi_tasks(options) -> VGITasksResult."""

import json
from pathlib import Path

import pytest

from bvb_addon.errors import ArgumentError
from bvb_addon.options import from_mapping
from headless import vgi_tasks as cli


def parse(*argv: str) -> cli.VGITasksOptions:
    return cli.from_namespace(cli.VGITasksOptions, cli.build_parser().parse_args(list(argv)))


@pytest.mark.unit
def test_the_flags_users_know_give_the_options_they_gave_before(capsys):
    options = parse("--out", "o", "--seed", "1", "--levels", "1", "3", "--families", "stack_by_size", "maze",
                    "--oracle-videos", "--samples", "4", "--scale", "50")  # fmt: skip
    assert options == cli.VGITasksOptions(out=Path("o"), seed=1, families=("stack_by_size", "maze"), levels=(1, 3),
                                          oracle_videos=True, samples=4, scale=50)  # fmt: skip
    assert parse("--out", "o") == cli.VGITasksOptions(out=Path("o"))
    assert len(cli.VGITasksOptions(out=Path("o")).families) == 7
    with pytest.raises(SystemExit):
        parse("--out", "o", "--families", "chess")
    assert "invalid choice: 'chess'" in capsys.readouterr().err


@pytest.mark.unit
def test_a_table_is_checked_and_the_stage_refuses_bad_options_before_writing(tmp_path):
    with pytest.raises(ArgumentError, match=r"^t: levels = 4: choose from 1, 2, 3$"):
        from_mapping(cli.VGITasksOptions, {"levels": [1, 4]}, "t", out=tmp_path)
    options = from_mapping(cli.VGITasksOptions, {"families": ["chess"]}, "t", out=tmp_path / "suite")
    with pytest.raises(cli.VGITasksError, match=r"^--families 'chess': choose from hanoi"):
        cli.vgi_tasks(options)
    assert not (tmp_path / "suite").exists()


@pytest.mark.blender
def test_the_stage_function_writes_a_suite_and_returns_a_typed_result(tmp_path):
    pytest.importorskip("bpy")
    options = cli.VGITasksOptions(out=tmp_path / "vgi", families=("light_sequence",), levels=(1,), samples=1, scale=10)
    result = cli.vgi_tasks(options)
    assert [r["family"] for r in result.rows] == ["light_sequence"] and result.tasks == tmp_path / "vgi" / "tasks.jsonl"
    assert [json.loads(line)["id"] for line in result.tasks.read_text().splitlines()] == [result.rows[0]["id"]]
    assert (tmp_path / "vgi" / result.rows[0]["start_image"]).is_file()
    assert result.line.startswith(f"wrote 1 tasks to {result.tasks} in ")
