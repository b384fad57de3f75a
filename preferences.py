"""Add-on preferences: machine settings and secrets that never go into a shared .blend."""

import os

import bpy
from bpy.props import BoolProperty, StringProperty

from .bvb_addon import bridge_client, defaults
from .bvb_addon.sandbox import platforms
from .registration import register_classes, unregister_classes


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

    allow_weak_sandbox: BoolProperty(
        name="Allow a weaker sandbox",
        description=(
            "Run agent code and renders below the sandbox's required level: on Linux without bubblewrap, "
            "elsewhere with no isolation at all (agent code then runs as you)"
        ),
        default=False,
    )
    bridge_token_file: StringProperty(
        name="Bridge token file",
        description="File holding the bridge's bearer token (python -m eval_bridge serve writes it and prints where)",
        default=str(bridge_client.default_token_file()),
        subtype="FILE_PATH",
    )
    # Names of judges and encoders the bridge was started with: endpoints, keys and prices stay on the bridge.
    judge: StringProperty(
        name="Judge",
        description="A judge configured on the bridge, e.g. geometry (empty: the bridge's default judge)",
        default="",
    )
    score_ls: BoolProperty(
        name="Latent Similarity", description="Also score LS (needs a V-JEPA 2 encoder on the bridge)", default=True
    )
    ls_encoder: StringProperty(
        name="LS encoder",
        description="An encoder configured on the bridge (empty: the bridge's default encoder)",
        default="",
    )

    def draw(self, context):
        layout = self.layout
        col = layout.column()
        col.prop(self, "base_url")
        col.prop(self, "api_key_env")
        col.prop(self, "api_key")
        col.prop(self, "default_model")
        col.prop(self, "bridge_url")
        col.prop(self, "bridge_token_file")
        col.prop(self, "allow_weak_sandbox")
        col.label(text=platforms.level_label(self.allow_weak_sandbox))
        box = layout.box()
        box.label(text="Scoring (names configured on the bridge)")
        box.prop(self, "judge")
        box.prop(self, "score_ls")
        if self.score_ls:
            box.prop(self, "ls_encoder")


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
    """Axes and per-axis options of a bridge job, from the preferences: the names of a judge and an encoder."""
    axes = ["dv", "ls", "overall"] if prefs.score_ls else ["dv", "overall"]
    options = {}
    if prefs.judge.strip():
        options["dv"] = {"judge": prefs.judge.strip()}
    if prefs.score_ls and prefs.ls_encoder.strip():
        options["ls"] = {"encoder": prefs.ls_encoder.strip()}
    return axes, options


classes = (BVBPreferences,)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
