"""The release prompt's scene rules checked on the open scene: runs inside Blender, in the sandbox.

Imported by worker_main_bl.py as a top-level module after a submission is loaded (scripts off, as the
render loads it). One function per rule, named as the rule (bvb_addon.scene_rules.RULES); each returns
(violations, info), lists of {"rule", "datablock", "detail"}. ``info`` is what the prompt does not forbid
(a bevel or array modifier), shown and never counted. Reads only: the scene is left as it was loaded.
"""

import bpy
import compat_bl
import numpy as np
from primitive_topology import primitive_of

MAX_FINDINGS = 60
"""Findings per rule and kind kept in a row; the rest are counted in one last finding."""
MAX_PIECES_NAMED = 3
"""Non-primitive pieces of one mesh described in its finding."""

# Object types whose geometry is not a mesh: a curve, text or metaball is none of the six primitives.
NON_MESH_GEOMETRY = {"CURVE", "SURFACE", "META", "FONT", "CURVES", "POINTCLOUD", "VOLUME", "GPENCIL", "GREASEPENCIL"}
# Blender's "Physics" modifiers (the Add Modifier menu's Physics column) and Geometry Nodes.
FORBIDDEN_MODIFIERS = {
    "NODES": "a geometry nodes modifier",
    "PARTICLE_SYSTEM": "a particle system",
    "PARTICLE_INSTANCE": "a particle instance modifier",
    "CLOTH": "cloth physics",
    "SOFT_BODY": "soft body physics",
    "FLUID": "fluid physics",
    "COLLISION": "collision physics",
    "DYNAMIC_PAINT": "dynamic paint physics",
    "EXPLODE": "an explode modifier (particles)",
    "OCEAN": "an ocean modifier (simulation)",
    "SURFACE": "a force field surface",
}
# Blender's own images: the render and the compositor's viewer, which every render makes.
OWN_IMAGE_TYPES = {"RENDER_RESULT", "COMPOSITING"}
# Node types that read a mesh's colour attributes: a video painted as vertex colours is a replay too.
ATTRIBUTE_NODES = {"VERTEX_COLOR", "ATTRIBUTE"}
# Sequencer strips that put pictures in the render (the release renders with the scene's sequencer on).
PICTURE_STRIPS = {"IMAGE", "MOVIE", "MOVIECLIP"}
# Linked IDs of these kinds are the UI's (brushes from the essentials library), not the scene.
UI_KINDS = ("brushes", "palettes", "paint_curves", "workspaces", "screens", "window_managers")
ID_KINDS = ("objects", "meshes", "materials", "node_groups", "images", "collections", "textures", "worlds",
            "lights", "cameras", "curves", "fonts", "movieclips", "particles", "actions", "armatures", "lattices",
            "metaballs", "volumes", "pointclouds", "hair_curves", "grease_pencils", "lightprobes", "speakers",
            "sounds", "scenes", "texts", "linestyles", "masks", "cache_files")  # fmt: skip


class Findings:
    """A rule's violations and info, capped at MAX_FINDINGS each (a hostile file can hold millions)."""

    def __init__(self, rule):
        self.rule = rule
        self.violations = []
        self.info = []
        self._over = {"violations": 0, "info": 0}

    def _add(self, kind, datablock, detail):
        found = getattr(self, kind)
        if len(found) < MAX_FINDINGS:
            found.append({"rule": self.rule, "datablock": str(datablock)[:200], "detail": str(detail)[:400]})
        else:
            self._over[kind] += 1

    def violation(self, datablock, detail):
        self._add("violations", datablock, detail)

    def note(self, datablock, detail):
        self._add("info", datablock, detail)

    def result(self):
        for kind, over in self._over.items():
            if over:
                getattr(self, kind).append({"rule": self.rule, "datablock": "...", "detail": f"{over} more not listed"})
        return self.violations, self.info


def id_name(idblock):
    """A datablock as the row names it: its kind and name ("Object chair_1", "Material wood")."""
    return f"{type(idblock).__name__} {idblock.name}"


def scene_chain(scene):
    """The scene and its background sets, whose objects the render shows together."""
    scenes = []
    while scene is not None and scene not in scenes:
        scenes.append(scene)
        scene = scene.background_set
    return scenes


def render_objects(scene):
    """Every object the render of ``scene`` can show, each once: those of every scene of the file (a background
    set, a sequencer strip or a compositor node can bring any scene into the render) and of the collections they
    instance."""
    scenes = scene_chain(scene) + [other for other in bpy.data.scenes if other not in scene_chain(scene)]
    seen, objects = set(), []
    todo = [obj for s in scenes for obj in s.objects]
    while todo:
        obj = todo.pop()
        if obj.as_pointer() in seen:
            continue
        seen.add(obj.as_pointer())
        objects.append(obj)
        if obj.instance_type == "COLLECTION" and obj.instance_collection is not None:
            todo.extend(obj.instance_collection.all_objects)
    return sorted(objects, key=lambda o: o.name_full)


def render_materials(objects):
    """The materials of the render's objects (slots and mesh data), each once, in name order."""
    found = {}
    for obj in objects:
        slots = [slot.material for slot in obj.material_slots]
        data_materials = getattr(obj.data, "materials", None) or []
        for material in [*slots, *data_materials]:
            if material is not None and not getattr(material, "is_grease_pencil", False):
                found[material.name_full] = material
    return [found[name] for name in sorted(found)]


def mesh_pieces(mesh):
    """[(vertices, edges, {sides: faces}, {degree: vertices})] of each connected piece of a mesh (a loose vertex is
    a piece too); None when its indices point outside it (a corrupt mesh: Blender does not check a file's)."""
    nv, ne, nf = len(mesh.vertices), len(mesh.edges), len(mesh.polygons)
    if nv == 0:
        return []
    edges = np.empty(2 * ne, dtype=np.int64)
    mesh.edges.foreach_get("vertices", edges)
    starts = np.empty(nf, dtype=np.int64)
    totals = np.empty(nf, dtype=np.int64)
    mesh.polygons.foreach_get("loop_start", starts)
    mesh.polygons.foreach_get("loop_total", totals)
    corners = np.empty(len(mesh.loops), dtype=np.int64)
    mesh.loops.foreach_get("vertex_index", corners)
    if any(len(x) and (x.min() < 0 or x.max() >= nv) for x in (edges, corners)):
        return None
    if nf and (totals.min() < 3 or starts.min() < 0 or (starts + totals).max() > len(corners)):
        return None
    a, b = edges[0::2], edges[1::2]
    label = np.arange(nv, dtype=np.int64)
    # Hook each edge's higher root onto its lower one, then jump pointers until every label is a root:
    # a few rounds for a mesh of primitives, where a Python union-find would take seconds on big ones.
    while True:
        la, lb = label[a], label[b]
        differ = la != lb
        if not differ.any():
            break
        np.minimum.at(label, np.maximum(la, lb)[differ], np.minimum(la, lb)[differ])
        while True:
            jumped = label[label]
            if np.array_equal(jumped, label):
                break
            label = jumped
    roots, piece_of_vertex = np.unique(label, return_inverse=True)
    pieces = len(roots)
    verts = np.bincount(piece_of_vertex, minlength=pieces)
    edge_counts = np.bincount(piece_of_vertex[a], minlength=pieces) if ne else np.zeros(pieces, dtype=np.int64)
    degrees = histograms(piece_of_vertex, np.bincount(a, minlength=nv) + np.bincount(b, minlength=nv), pieces)
    sides = histograms(piece_of_vertex[corners[starts]], totals, pieces) if nf else [{} for _ in range(pieces)]
    return [(int(verts[i]), int(edge_counts[i]), sides[i], degrees[i]) for i in range(pieces)]


def histograms(piece, values, pieces):
    """[{value: count}] per piece of (piece, value) pairs: one 1-D unique of combined keys (unique over rows of
    a 2-D array costs ten times more, most of the audit's time on a scene of many small meshes)."""
    out = [{} for _ in range(pieces)]
    span = int(values.max()) + 1
    keys, counts = np.unique(piece * span + values, return_counts=True)
    for key, count in zip(keys.tolist(), counts.tolist(), strict=True):
        out[key // span][key % span] = count
    return out


def describe_piece(index, total, piece):
    verts, edges, sides, _ = piece
    faces = ", ".join(f"{count} with {size} sides" for size, count in sorted(sides.items())) or "no faces"
    return f"piece {index + 1} of {total}: {verts} vertices, {edges} edges, faces: {faces}"


def primitives_only(scene, objects):
    """The prompt: "Build ALL geometry from basic primitives only (cube, plane, cylinder, cone, uv_sphere, torus)
    and assemblies of them." and "no sculpting/arbitrary meshes".

    Every connected piece of every mesh has one primitive's topology (primitive_topology); a curve, text,
    metaball or other non-mesh geometry is none of them; a multiresolution modifier is sculpting. The live
    modifiers the prompt does not forbid (bevel, array, mirror) are information.
    """
    found = Findings("primitives_only")
    checked = set()  # a mesh shared by many objects is checked once
    for obj in objects:
        if obj.type in NON_MESH_GEOMETRY:
            found.violation(id_name(obj), f"a {obj.type.lower()} object: not one of the six mesh primitives")
            continue
        if obj.type != "MESH":
            continue
        allowed = []
        for modifier in obj.modifiers:
            if modifier.type == "MULTIRES":
                found.violation(id_name(obj), f"multiresolution modifier {modifier.name!r}: sculpting")
            elif modifier.type not in FORBIDDEN_MODIFIERS:
                allowed.append(modifier.type.lower())
        if allowed:
            # The prompt forbids none of these (bevel, array, mirror ...): shown, never counted.
            found.note(id_name(obj), f"modifiers: {', '.join(allowed)}")
        mesh = obj.data
        if mesh.name_full not in checked:
            checked.add(mesh.name_full)
            pieces = mesh_pieces(mesh)
            if pieces is None:
                found.violation(f"{id_name(mesh)} (object {obj.name})", "indices point outside the mesh: corrupt data")
                continue
            odd = [(i, p) for i, p in enumerate(pieces) if primitive_of(*p) is None]
            if odd:
                named = "; ".join(describe_piece(i, len(pieces), p) for i, p in odd[:MAX_PIECES_NAMED])
                more = f"; {len(odd) - MAX_PIECES_NAMED} more" if len(odd) > MAX_PIECES_NAMED else ""
                found.violation(
                    f"{id_name(mesh)} (object {obj.name})",
                    f"{len(odd)} of {len(pieces)} pieces are none of cube, plane, cylinder, cone, uv_sphere, "
                    f"torus: {named}{more}",
                )
            elif not pieces:
                found.note(id_name(obj), "an empty mesh (nothing to render)")
    return found.result()


def no_imported_models(scene, objects):
    """The prompt: "No imported models".

    No linked library and no datablock linked from or appended out of another file (an append that keeps a weak
    reference to its source); a library that only lends the UI its brushes is information.
    """
    found = Findings("no_imported_models")
    by_library, appended = {}, []
    for kind in ID_KINDS:
        for idblock in getattr(bpy.data, kind, ()):
            if idblock.library is not None:
                by_library.setdefault(idblock.library.name_full, []).append(id_name(idblock))
            elif getattr(idblock, "library_weak_reference", None) is not None:
                appended.append((idblock, idblock.library_weak_reference.filepath))
    ui_libraries = {
        idblock.library.name_full
        for kind in UI_KINDS
        for idblock in getattr(bpy.data, kind, ())
        if idblock.library is not None
    }
    for library in bpy.data.libraries:
        linked = by_library.get(library.name_full, [])
        detail = f"linked library {library.filepath!r}"
        if linked:
            found.violation(
                id_name(library), f"{detail}: {len(linked)} datablocks linked, e.g. {', '.join(linked[:5])}"
            )
        elif library.name_full in ui_libraries:
            found.note(id_name(library), f"{detail}: lends only UI data (brushes, palettes)")
        else:
            found.violation(id_name(library), detail)
    for idblock, source in appended:
        found.violation(id_name(idblock), f"appended from {source!r}")
    return found.result()


def no_geometry_nodes_particles_physics(scene, objects):
    """The prompt: "no geometry nodes, particles, physics".

    No Geometry Nodes modifier, particle system or physics modifier (cloth, soft body, fluid, collision, dynamic
    paint, explode, ocean), rigid body or rigid body constraint, and no force field.
    """
    found = Findings("no_geometry_nodes_particles_physics")
    for obj in objects:
        for modifier in obj.modifiers:
            what = FORBIDDEN_MODIFIERS.get(modifier.type)
            if what:
                found.violation(id_name(obj), f"modifier {modifier.name!r}: {what}")
        if obj.rigid_body is not None:
            found.violation(id_name(obj), f"a {obj.rigid_body.type.lower()} rigid body")
        if obj.rigid_body_constraint is not None:
            found.violation(id_name(obj), "a rigid body constraint")
        if obj.field is not None and obj.field.type != "NONE":
            found.violation(id_name(obj), f"a {obj.field.type.lower()} force field")
    if scene.rigidbody_world is not None and not found.violations:
        found.note(id_name(scene), "a rigid body world with no rigid body in the render")
    for group in bpy.data.node_groups:
        if group.bl_idname == "GeometryNodeTree" and group.users and not group.use_fake_user:
            used = any(m.type == "NODES" and m.node_group == group for obj in objects for m in obj.modifiers)
            if not used:
                found.note(id_name(group), "a geometry node group no modifier of the render uses")
    return found.result()


def real_users(idblock):
    """Users other than the fake user that keeps an unused datablock in the file."""
    return idblock.users - (1 if idblock.use_fake_user else 0)


def shader_trees(materials):
    """(owner, node tree) of the render's materials, the scene's world and every light, with the groups inside them."""
    trees = [(m, m.node_tree) for m in materials if compat_bl.uses_nodes(m)]
    world = bpy.context.scene.world
    if world is not None and compat_bl.uses_nodes(world):
        trees.append((world, world.node_tree))
    trees += [(light, light.node_tree) for light in bpy.data.lights if light.node_tree is not None]
    seen, todo, out = set(), list(trees), []
    while todo:
        owner, tree = todo.pop()
        if tree is None or tree.as_pointer() in seen:
            continue
        seen.add(tree.as_pointer())
        out.append((owner, tree))
        todo += [(owner, node.node_tree) for node in tree.nodes if getattr(node, "node_tree", None) is not None]
    return out


def no_image_textures(scene, objects):
    """The prompt: "no ... image textures".

    No image, movie clip or image sequence used by anything (a material, world, light, texture, modifier, camera
    background, compositor), packed or not, only Blender's own Render Result and Viewer; no image or movie strip in
    the sequencer; no colour attribute read by a material's Color Attribute or Attribute node.
    """
    found = Findings("no_image_textures")
    images = [image for image in bpy.data.images if image.type not in OWN_IMAGE_TYPES]
    clips = list(bpy.data.movieclips)
    # The stub makes user_map's optional key_types and value_types required.
    users = bpy.data.user_map(subset=images + clips) if images or clips else {}  # type: ignore[call-arg]
    for idblock in images + clips:
        source = getattr(idblock, "source", "MOVIE")
        stored = "packed in the .blend" if getattr(idblock, "packed_file", None) else f"file {idblock.filepath!r}"
        if real_users(idblock) > 0:
            named = sorted(id_name(user) for user in users.get(idblock, ()))
            by = f", used by {', '.join(named[:5])}" if named else ""
            found.violation(id_name(idblock), f"a {source.lower()} ({stored}){by}")
        else:
            found.note(id_name(idblock), f"an unused {source.lower()} ({stored}): not rendered")
    editor = scene.sequence_editor
    strips = getattr(editor, "strips_all", None) or getattr(editor, "sequences_all", None) or ()
    for strip in strips:
        if strip.type in PICTURE_STRIPS:
            found.violation(f"{id_name(scene)} strip {strip.name}", f"a sequencer {strip.type.lower()} strip")
    for owner, tree in shader_trees(render_materials(objects)):
        for node in tree.nodes:
            if node.type in ATTRIBUTE_NODES and any(output.is_linked for output in node.outputs):
                found.violation(id_name(owner), f"node {node.name!r} reads colour attribute {attribute_name(node)!r}")
    painted = sorted({obj.data.name for obj in objects if obj.type == "MESH" and len(obj.data.color_attributes)})
    if painted:
        found.note(", ".join(painted[:5]), f"{len(painted)} meshes hold colour attributes (no material reads them)")
    return found.result()


def attribute_name(node):
    return getattr(node, "layer_name", None) or getattr(node, "attribute_name", None) or "the active one"


def surface_source(link):
    """The node that really feeds a link, through reroutes."""
    node = link.from_node
    while node.type == "REROUTE" and node.inputs[0].is_linked:
        node = node.inputs[0].links[0].from_node
    return node


def single_principled_bsdf(scene, objects):
    """The prompt: "Materials = a single Principled BSDF with numeric values only."

    Each material the render uses has a node tree whose active Material Output takes its Surface from one
    Principled BSDF, nothing in its Volume or Displacement, and the BSDF's inputs are values, not links.
    """
    found = Findings("single_principled_bsdf")
    for material in render_materials(objects):
        name = id_name(material)
        if not compat_bl.uses_nodes(material):
            found.violation(name, "no node tree (a viewport colour, not a Principled BSDF)")
            continue
        nodes = material.node_tree.nodes
        outputs = [n for n in nodes if n.type == "OUTPUT_MATERIAL"]
        output = next((n for n in outputs if n.is_active_output), outputs[0] if outputs else None)
        if output is None:
            found.violation(name, "no Material Output node")
            continue
        surface = output.inputs.get("Surface")
        if surface is None or not surface.is_linked:
            found.violation(name, "nothing feeds the output's Surface")
        else:
            bsdf = surface_source(surface.links[0])
            if bsdf.type != "BSDF_PRINCIPLED":
                found.violation(name, f"the output's Surface comes from {bsdf.bl_label!r}, not a Principled BSDF")
            else:
                linked = [s.name for s in bsdf.inputs if s.is_linked]
                if linked:
                    found.violation(name, f"Principled BSDF inputs fed by nodes, not values: {', '.join(linked)}")
        extra = [s.name for s in output.inputs if s.name != "Surface" and s.is_linked]
        if extra:
            found.violation(name, f"the output's {', '.join(extra)} is fed by nodes")
        loose = sorted({n.bl_label for n in nodes if n != output and n.type not in ("BSDF_PRINCIPLED", "FRAME")})
        if loose:
            found.note(name, f"other nodes in the tree: {', '.join(loose[:8])}")
    return found.result()


def unit_scale_metric(scene, objects):
    """The prompt: "1 Blender unit = 1 meter. Keep Unit Scale = 1.0."

    The rendered scene's unit system is Metric and its unit scale 1.0.
    """
    found = Findings("unit_scale_metric")
    units = scene.unit_settings
    if units.system != "METRIC":
        found.violation(id_name(scene), f"unit system {units.system}, not METRIC")
    if abs(units.scale_length - 1.0) > 1e-6:
        found.violation(id_name(scene), f"unit scale {units.scale_length:g}, not 1.0")
    return found.result()


def camera_and_light(scene, objects):
    """The prompt: "Include at least one camera and one light."

    The rendered scene (with its background sets) holds at least one camera object and one light object.
    """
    found = Findings("camera_and_light")
    shown = [obj for s in scene_chain(scene) for obj in s.objects]  # another scene's camera is not this render's
    for kind, word in (("CAMERA", "camera"), ("LIGHT", "light")):
        if not any(obj.type == kind for obj in shown):
            found.violation(id_name(scene), f"no {word} object in the scene")
    return found.result()


RULE_CHECKS = (primitives_only, no_imported_models, no_geometry_nodes_particles_physics, no_image_textures,
               single_principled_bsdf, unit_scale_metric, camera_and_light)  # fmt: skip
"""In the prompt's order; each function's name is its rule's name (bvb_addon.scene_rules.RULES)."""


def audit():
    """The worker's reply: every rule checked on the loaded scene."""
    scene = bpy.context.scene
    objects = render_objects(scene)
    violations, info = [], []
    for check in RULE_CHECKS:
        found, noted = check(scene, objects)
        violations += found
        info += noted
    return {"status": "ok", "violations": violations, "info": info, "blender": bpy.app.version_string}
