"""Add-on preferences: machine settings that never go into a shared .blend."""

import bpy
from bpy.props import StringProperty

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
    bridge_url: StringProperty(
        name="Bridge URL",
        description="URL of the local eval bridge service (python -m eval_bridge serve)",
        default=defaults.BRIDGE_URL,
    )

    def draw(self, context):
        layout = self.layout
        layout.prop(self, "base_url")
        layout.prop(self, "api_key_env")
        layout.prop(self, "bridge_url")


def get(context=None):
    """Return this add-on's preferences."""
    context = context or bpy.context
    return context.preferences.addons[__package__].preferences


classes = (BVBPreferences,)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister():
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
