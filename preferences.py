"""Add-on preferences: machine settings and secrets that never go into a shared .blend."""

import os

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, StringProperty

from .bvb_addon import defaults
from .bvb_addon.sandbox import platforms


class BVBPreferences(bpy.types.AddonPreferences):
    # The root package name: "bl_ext.<repo>.bvb" when installed as an extension.
    bl_idname = __package__

    base_url: StringProperty(
        name="Provider base URL",
        description="OpenAI-compatible endpoint of the model provider",
        default=defaults.PROVIDER_BASE_URL,
    )
    api_key_env: StringProperty(
        name="API key variable",
        description="Name of the environment variable that holds the API key; the key itself is never saved in a .blend",
        default=defaults.API_KEY_ENV,
    )
    api_key: StringProperty(
        name="API key",
        description="Optional: a key kept in Blender's preferences only (used when the variable is unset); never saved in a .blend",
        default="",
        subtype="PASSWORD",
    )
    bridge_url: StringProperty(
        name="Bridge URL",
        description="URL of the local eval bridge service (python -m eval_bridge serve)",
        default=defaults.BRIDGE_URL,
    )
    default_model: StringProperty(
        name="Default model",
        description="Model used when the Run panel names none",
        default=defaults.MODEL,
    )
    cost_limit: FloatProperty(
        name="Cost limit (USD)",
        description="Default per-scene cost limit for new scenes",
        default=defaults.COST_LIMIT_USD,
        min=0.0,
    )

    allow_weak_sandbox: BoolProperty(
        name="Allow a weaker sandbox",
        description=(
            "Run agent code and renders below the sandbox's required level: on Linux without bubblewrap, "
            "elsewhere with no isolation at all (agent code then runs as you)"
        ),
        default=False,
    )

    judge: EnumProperty(
        name="Judge",
        description="Who answers the Dual-VQA questions when scoring",
        items=(
            ("vlm", "VLM", "A vision-language model over an OpenAI-compatible API (the protocol's judge)"),
            (
                "geometry",
                "Geometry",
                "Offline: answers from ground truth and the render's scene graph (synthetic suites)",
            ),
        ),
        default="vlm",
    )
    judge_base_url: StringProperty(
        name="Judge base URL", description="Endpoint of the VLM judge (empty: the bridge's default)", default=""
    )
    judge_model: StringProperty(
        name="Judge model", description="VLM judge model id (empty: the bridge's default)", default=""
    )
    judge_api_key_env: StringProperty(
        name="Judge key variable",
        description="Variable holding the judge's API key, in the bridge's environment",
        default=defaults.API_KEY_ENV,
    )
    score_ls: BoolProperty(
        name="Latent Similarity", description="Also score LS (needs a V-JEPA 2 model on the bridge)", default=True
    )
    ls_model: StringProperty(
        name="V-JEPA 2 model",
        description="Folder or hub id of the LS encoder (empty: the bridge's $BVB_VJEPA_MODEL)",
        default="",
    )

    def draw(self, context):
        layout = self.layout
        col = layout.column()
        col.prop(self, "base_url")
        col.prop(self, "api_key_env")
        col.prop(self, "api_key")
        col.prop(self, "default_model")
        col.prop(self, "cost_limit")
        col.prop(self, "bridge_url")
        col.prop(self, "allow_weak_sandbox")
        col.label(text=platforms.level_label(self.allow_weak_sandbox))
        box = layout.box()
        box.label(text="Scoring (sent to the bridge)")
        box.prop(self, "judge")
        if self.judge == "vlm":
            box.prop(self, "judge_base_url")
            box.prop(self, "judge_model")
            box.prop(self, "judge_api_key_env")
        box.prop(self, "score_ls")
        if self.score_ls:
            box.prop(self, "ls_model")


def get(context=None):
    """Return this add-on's preferences."""
    context = context or bpy.context
    return context.preferences.addons[__package__].preferences


def allow_weak_sandbox(context=None):
    """The user's opt-in to a weaker sandbox level; False when the add-on has no preferences entry."""
    context = context or bpy.context
    entry = context.preferences.addons.get(__package__)
    return bool(entry is not None and entry.preferences is not None and entry.preferences.allow_weak_sandbox)


def api_key(prefs):
    """The key from the named environment variable, else the one kept in preferences, else ''."""
    name = prefs.api_key_env.strip()
    return (os.environ.get(name, "") if name else "") or prefs.api_key


def score_request(prefs):
    """Axes and per-axis options of a bridge job, from the preferences (the service's option names)."""
    dv = {"judge": prefs.judge}
    if prefs.judge == "vlm":
        for key in ("judge_base_url", "judge_model", "judge_api_key_env"):
            if getattr(prefs, key):
                dv[key] = getattr(prefs, key)
    axes = ["dv", "ls", "overall"] if prefs.score_ls else ["dv", "overall"]
    options = {"dv": dv}
    if prefs.score_ls and prefs.ls_model:
        options["ls"] = {"model": prefs.ls_model}
    return axes, options


classes = (BVBPreferences,)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister():
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
