"""Add-on preferences: machine settings and secrets that never go into a shared .blend."""

import os

import bpy
from bpy.props import FloatProperty, StringProperty

from .bvb_addon import defaults


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

    def draw(self, context):
        layout = self.layout
        col = layout.column()
        col.prop(self, "base_url")
        col.prop(self, "api_key_env")
        col.prop(self, "api_key")
        col.prop(self, "default_model")
        col.prop(self, "cost_limit")
        col.prop(self, "bridge_url")


def get(context=None):
    """Return this add-on's preferences."""
    context = context or bpy.context
    return context.preferences.addons[__package__].preferences


def api_key(prefs):
    """The key from the named environment variable, else the one kept in preferences, else ''."""
    name = prefs.api_key_env.strip()
    return (os.environ.get(name, "") if name else "") or prefs.api_key


classes = (BVBPreferences,)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister():
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
