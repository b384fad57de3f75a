"""Every panel's draw against a recording layout that checks each path on the real RNA types."""

import json
import time

import pytest

from bvb_addon.scene_rules import finding, make_row
from tests.addon_support import add_camera, forget_addon, import_addon

pytestmark = pytest.mark.blender


class RecordingLayout:
    """Stands in for UILayout: records what a draw asks for and checks it against real RNA."""

    def __init__(self, bpy, log=None):
        self.bpy = bpy
        self.log = [] if log is None else log
        self.enabled = self.active = self.alert = True
        self.use_property_split = self.use_property_decorate = False
        self.scale_x = self.scale_y = 1.0

    def _child(self, *args, **kwargs):
        return RecordingLayout(self.bpy, self.log)

    row = column = box = split = column_flow = grid_flow = _child

    def label(self, *, text="", icon="NONE", **kwargs):
        assert isinstance(text, str)
        self.log.append(("label", text))

    def separator(self, **kwargs):
        pass

    def prop(self, data, property, **kwargs):
        props = data.bl_rna.properties
        assert property in props, f"{type(data).__name__} has no property {property!r}"
        self.log.append(("prop", f"{data.bl_rna.identifier}.{property}"))

    def operator(self, operator, **kwargs):
        category, name = operator.split(".")
        op = getattr(getattr(self.bpy.ops, category), name)
        rna = op.get_rna_type()  # raises KeyError for an operator that is not registered
        self.log.append(("operator", operator))
        return OperatorProperties(rna, operator, self.log)

    def template_list(self, listtype_name, list_id, dataptr, propname, active_dataptr, active_propname, **kwargs):
        assert hasattr(self.bpy.types, listtype_name), f"UIList {listtype_name} is not registered"
        assert dataptr.bl_rna.properties[propname].type == "COLLECTION"
        assert active_dataptr.bl_rna.properties[active_propname].type == "INT"
        self.log.append(("list", f"{listtype_name}:{propname}"))


class OperatorProperties:
    """What layout.operator returns: setting a property checks it exists on the operator."""

    def __init__(self, rna, idname, log):
        object.__setattr__(self, "_rna", rna)
        object.__setattr__(self, "_idname", idname)
        object.__setattr__(self, "_log", log)

    def __setattr__(self, name, value):
        assert name in self._rna.properties, f"operator {self._idname} has no property {name!r}"
        self._log.append(("operator_prop", f"{self._idname}.{name}={value}"))


class Holder:
    def __init__(self, layout):
        self.layout = layout


@pytest.fixture
def addon(factory_blender):
    module = import_addon()
    module.register()
    yield module
    module.unregister()
    forget_addon()


PANELS = ["BVB_PT_main", "BVB_PT_source", "BVB_PT_run", "BVB_PT_steps", "BVB_PT_edit", "BVB_PT_score"]


def test_every_panel_draws_only_real_properties_and_operators(addon, factory_blender, tmp_path):
    bpy = factory_blender
    scene = bpy.context.scene
    add_camera(bpy, scene)
    s = scene.bvb
    step = s.steps.add()
    step.number, step.first_line = 1, "import bpy"
    row = s.dv_by_type.add()
    row.question_type, row.value = "object_counting", 50.0
    s.has_scores, s.status, s.step_diff, s.last_action = True, "ok", "1 added", "python"
    run = tmp_path / "run"
    for name in ("s_a", "s_b"):
        (run / "steps" / name).mkdir(parents=True)
    # The open scene breaks a rule: the panel lists it with its Select Offending Objects buttons.
    broken = make_row("s_b", [finding("camera_and_light", "Object lamp", "no light object")], [], "4.2")
    (run / "scene_rules.jsonl").write_text(json.dumps(broken) + "\n")
    s.run_dir, s.scene_id = str(run), "s_b"
    # The Run panel lists the run's scenes from a background scan that its timer starts: a draw starts nothing.
    bpy.types.BVB_PT_run.draw(Holder(RecordingLayout(bpy)), bpy.context)
    assert ("scan", str(run)) not in addon.operators.background.registry
    assert addon.panels.run.rescan() > 0 and ("scan", str(run)) in addon.operators.background.registry
    deadline = time.monotonic() + 30
    while addon.operators.background.drain() and time.monotonic() < deadline:
        time.sleep(0.02)
    drawn = {}
    for mode in ("PLANE", "BACKGROUND"):
        s.reference_mode = mode
        for name in PANELS:
            panel = getattr(bpy.types, name)
            assert panel.bl_category == "BVB" and panel.bl_space_type == "VIEW_3D"
            layout = RecordingLayout(bpy)
            panel.draw(Holder(layout), bpy.context)
            drawn[name] = layout.log
    assert ("operator", "bvb.load_reference") in drawn["BVB_PT_source"]
    assert ("list", "BVB_UL_steps:steps") in drawn["BVB_PT_steps"]
    assert ("label", "1 added") in drawn["BVB_PT_steps"]
    assert [e for k, e in drawn["BVB_PT_run"] if k == "operator_prop"] == [
        "bvb.open_run.scene=s_a",
        "bvb.open_run.scene=s_b",
        "bvb.select_rule_objects.datablock=Object lamp",
    ]
    ops = {entry for log in drawn.values() for kind, entry in log if kind == "operator"}
    registered = {f"bvb.{name}" for name in dir(bpy.ops.bvb)}
    assert ops == registered, "every operator is on a panel, and every panel button is an operator"
    # The steps list's rows draw too.
    ul = bpy.types.BVB_UL_steps
    layout = RecordingLayout(bpy)
    ul.draw_item(None, bpy.context, layout, s, step, 0, s, "steps_index", 0)
    assert ("label", "import bpy") in layout.log


def test_preferences_draw_only_real_properties(addon, factory_blender):
    bpy = factory_blender
    entry = bpy.context.preferences.addons.new()
    entry.module = "bvb"
    try:
        prefs = entry.preferences
        layout = RecordingLayout(bpy)
        # The real preferences object, with the recorder standing in for its layout.
        type(prefs).draw(PrefsHolder(prefs, layout), bpy.context)
        drawn = {entry for kind, entry in layout.log if kind == "prop"}
        assert {f"BVBPreferences.{name}" for name in ("base_url", "api_key_env", "api_key", "bridge_url")} <= drawn
        assert prefs.bl_rna.properties["api_key"].subtype == "PASSWORD"
        assert addon.preferences.api_key(prefs) == ""
        prefs.api_key = "kept-in-preferences"
        prefs.api_key_env = "BVB_TEST_NO_SUCH_VARIABLE"
        assert addon.preferences.api_key(prefs) == "kept-in-preferences"
    finally:
        bpy.context.preferences.addons.remove(entry)


class PrefsHolder:
    def __init__(self, prefs, layout):
        self._prefs = prefs
        self.layout = layout

    def __getattr__(self, name):
        return getattr(self._prefs, name)


def test_recording_layout_catches_a_wrong_path(addon, factory_blender):
    bpy = factory_blender
    layout = RecordingLayout(bpy)
    with pytest.raises(AssertionError, match="no property 'clip'"):
        layout.prop(bpy.context.scene.bvb, "clip")
    with pytest.raises(KeyError):
        layout.operator("bvb.no_such_operator")
    with pytest.raises(AssertionError, match="has no property 'scene_name'"):
        layout.operator("bvb.open_run").scene_name = "x"


def test_unregister_removes_everything(factory_blender):
    bpy = factory_blender
    module = import_addon()
    module.register()
    names = [n for n in dir(bpy.types) if n.startswith(("BVB_", "BVB"))]
    assert set(PANELS) <= set(names)
    added = [h for h in bpy.app.handlers.frame_change_post if h.__module__.startswith("bvb")]
    assert added and bpy.app.timers.is_registered(module.properties.sync_reference)
    module.unregister()
    assert not [h for h in bpy.app.handlers.frame_change_post if h.__module__.startswith("bvb")]
    assert not bpy.app.timers.is_registered(module.properties.sync_reference)
    assert not bpy.app.timers.is_registered(module.operators.background.tick)
    forget_addon()
    assert not [n for n in dir(bpy.types) if n.startswith("BVB")]
    assert not hasattr(bpy.types.Scene, "bvb")
    assert not list(dir(bpy.ops.bvb))
