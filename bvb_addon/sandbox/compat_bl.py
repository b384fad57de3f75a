"""The differences between Blender 4.2, 4.5 LTS and 5.0 that the harness meets, in one place.

Each function asks Blender what it has (an enum item, an attribute) instead of comparing
version numbers, so one code base runs on all three. The module imports nothing: its
functions take bpy objects, so the worker (which imports it as a top-level module from
this folder), the add-on, and the standalone programs the harness writes for agents and
oracles (``program_source`` pastes the same functions into them) share one definition.

Known differences (docs/protocol.md section 10): slotted actions (4.4+) keep an object's F-curves
in a channelbag per slot, and ``Action.fcurves`` is gone in 5.0 (on 4.5 it writes to a
"Legacy Slot" the object is not bound to); EEVEE's engine id is ``BLENDER_EEVEE_NEXT`` in
4.2-4.5 and ``BLENDER_EEVEE`` in 5.0; 5.0 gives every material and world a node tree and
deprecates ``use_nodes``; 5.2 segfaults writing a scene fresh from ``scenes.new`` whose view
layer was never evaluated. Other 5.x changes need nothing here: the harness never touches the
compositor's node tree (``scene.node_tree`` -> ``compositing_node_group``; renders only switch
``render.use_compositing`` off), never writes video through Blender (PyAV encodes), reads no RNA
property as an ID property, and adds no Geometry Nodes modifiers. But a scene saved with video
output has 5.x's ``media_type`` VIDEO, whose ``file_format`` takes FFMPEG only: PNG stills
switch the media type first (``png_stills``).
"""

import inspect
import warnings


def eevee_engine(scene):
    """EEVEE's render engine id in this Blender, read from the engine enum."""
    items = scene.render.bl_rna.properties["engine"].enum_items
    return next((item.identifier for item in items if item.identifier.startswith("BLENDER_EEVEE")), "BLENDER_EEVEE")


def action_fcurves(anim_data):
    """The F-curves that animate an ID: those of its action slot where actions have slots, else the action's."""
    if anim_data is None or anim_data.action is None:
        return []
    action = anim_data.action
    if not hasattr(anim_data, "action_slot"):
        return list(action.fcurves)
    slot = anim_data.action_slot
    if slot is None:
        return []
    curves = []
    for layer in action.layers:
        for strip in layer.strips:
            bag = strip.channelbag(slot)
            if bag is not None:
                curves.extend(bag.fcurves)
    return curves


def new_fcurve(owner, action, data_path, index):
    """A new F-curve in ``action`` (assigned to ``owner`` first) that animates owner.data_path[index]."""
    if hasattr(action, "fcurve_ensure_for_datablock"):
        # Slotted actions: makes the layer, strip and slot and binds the owner to that slot.
        return action.fcurve_ensure_for_datablock(owner, data_path, index=index)
    return action.fcurves.new(data_path, index=index)


def node_tree(idblock):
    """The shader node tree of a material or world, switched on where Blender still has the switch."""
    if idblock.node_tree is None:
        idblock.use_nodes = True
    return idblock.node_tree


def uses_nodes(idblock):
    """True when a material or world renders through its node tree (always in 5.0, where use_nodes is deprecated)."""
    if idblock.node_tree is None:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return bool(idblock.use_nodes)


def png_stills(image_settings):
    """The (attribute, value) writes that make ``image_settings`` PNG stills, in the order to make them.

    5.x filters ``file_format`` by ``media_type``: on a video output (VIDEO) PNG is refused until
    the media type is IMAGE. 4.x has no media type and takes PNG from any format.
    """
    media = [("media_type", "IMAGE")] if hasattr(image_settings, "media_type") else []
    return [*media, ("file_format", "PNG")]


def write_blocks(data, path, blocks, **options):
    """``data.libraries.write(path, blocks, **options)``, each scene's view layers evaluated first.

    Blender 5.2 (bpy 5.2.3, the 5.2.2 binary) segfaults writing a scene made by ``scenes.new``
    that was never evaluated; ``view_layer.update()`` gives it what the writer reads.
    """
    blocks = set(blocks)
    for block in blocks:
        for layer in getattr(block, "view_layers", ()):
            layer.update()
    data.libraries.write(str(path), blocks, **options)


# What the harness's standalone programs need; their text must run on every supported Blender.
PROGRAM_FUNCTIONS = (action_fcurves, new_fcurve, node_tree)


def program_source(functions=PROGRAM_FUNCTIONS):
    """Python source defining ``functions``, to paste into a standalone bpy program."""
    return "\n\n".join(inspect.getsource(function) for function in functions) + "\n"
