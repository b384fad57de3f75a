"""bvb render's options as data (RenderOptions): the generated parser, a campaign's table, the JSON."""

from pathlib import Path

import pytest

from bvb_addon.errors import ArgumentError
from bvb_addon.options import from_mapping, to_mapping
from bvb_addon.render_stage import RenderOptions
from bvb_addon.sandbox import SandboxConfig
from headless import render

pytestmark = pytest.mark.unit


def parse(*argv: str) -> RenderOptions:
    return render.options_from(render.build_parser().parse_args(list(argv)))


def test_the_flags_users_know_give_the_options_they_gave_before():
    options = parse(
        "--run", "results/r", "--num-frames", "8", "--preset", "fast", "--resolution", "256", "--workers", "2",
        "--resume", "--scenes", "a", "b", "--min-meshes", "1", "--timeout", "30", "--sandbox-min", "uid",
        "--allow-weak-sandbox", "--blender-bin", "/opt/blender", "--backend", "ray", "--ray-address", "auto", "-q",
    )  # fmt: skip
    sandbox = SandboxConfig(
        min_level="uid", allow_below_minimum=True, render_timeout_s=30.0, blender_bin="/opt/blender"
    )
    assert options == RenderOptions(
        run=Path("results/r"), num_frames=8, preset="fast", resolution=256, workers=2, resume=True, scenes=("a", "b"),
        min_meshes=1, sandbox=sandbox, backend="ray", ray_address="auto", progress=False,
    )  # fmt: skip


def test_defaults_are_the_fields_and_the_sandboxs():
    assert parse("--run", "r") == RenderOptions(run=Path("r"), sandbox=SandboxConfig())
    assert parse("--run", "r").sandbox.render_timeout_s == 1800.0  # --timeout is the render's limit, not a step's


def test_a_campaign_table_is_checked_by_field_name_and_type():
    table = {"preset": "fast", "num_frames": 16, "sandbox": {"render_timeout_s": 60.0}}
    options = from_mapping(RenderOptions, table, "c.toml [render]", run=Path("r"))
    assert options.num_frames == 16 and options.sandbox == SandboxConfig(render_timeout_s=60.0)
    with pytest.raises(
        ArgumentError, match=r"^c.toml \[render\]: preset = 'eevee': choose from 'bvb', 'fast', 'cycles'$"
    ):
        from_mapping(RenderOptions, {"preset": "eevee"}, "c.toml [render]", run=Path("r"))
    with pytest.raises(ArgumentError, match=r"^c.toml \[render\]: unknown key 'frames'"):
        from_mapping(RenderOptions, {"frames": 8}, "c.toml [render]", run=Path("r"))
    with pytest.raises(ArgumentError, match=r"^c.toml \[render\]: num_frames = '8' is not a integer"):
        from_mapping(RenderOptions, {"num_frames": "8"}, "c.toml [render]", run=Path("r"))


def test_the_json_round_trips_without_the_callback():
    options = RenderOptions(run=Path("r"), scenes=("a",), on_level=print, sandbox=SandboxConfig())
    data = to_mapping(options)
    assert "on_level" not in data and data["scenes"] == ["a"] and data["sandbox"]["render_timeout_s"] == 1800.0
    assert from_mapping(RenderOptions, data, "json") == RenderOptions(
        run=Path("r"), scenes=("a",), sandbox=SandboxConfig()
    )
