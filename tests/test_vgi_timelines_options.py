"""bvb vgi-timelines' options as data and its stage function vgi_timelines(options) -> VGITimelinesResult."""

from pathlib import Path

import pytest

from bvb_addon.errors import BVBError
from headless import vgi_timelines as cli

pytestmark = pytest.mark.unit


def test_the_flags_users_know_give_the_options_they_gave_before():
    args = cli.build_parser().parse_args(["--run", "r", "--scenes", "a", "b"])
    assert cli.from_namespace(cli.VGITimelinesOptions, args) == cli.VGITimelinesOptions(run=Path("r"), scenes=("a", "b"))
    assert cli.from_namespace(cli.VGITimelinesOptions, cli.build_parser().parse_args(["--run", "r"])).scenes is None


def test_a_run_without_submissions_is_one_line_before_any_worker(tmp_path, capsys):
    (tmp_path / "run" / "blends").mkdir(parents=True)
    with pytest.raises(BVBError, match=r"^no submissions in .*blends; run headless.run --mode vgi first$"):
        cli.vgi_timelines(cli.VGITimelinesOptions(run=tmp_path / "run"))
    assert cli.main(["--run", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    assert not (tmp_path / "run" / "timelines").exists()
