"""Worker side of rendering and scene graphs: runs inside Blender, in the sandbox.

Imported by worker_main_bl.py as a top-level module (bpy is available there). Render
settings are changed only for the duration of a render and then put back, so a render
in the middle of an agent's episode never changes the scene the agent is building.
"""

import math
import os
import time
from typing import Any

import bpy
import compat_bl
import release_render
from mathutils import Vector

# Samples chosen for CPU machines (the harness's own cycles preset).
CYCLES_SAMPLES = 16
MAX_GRAPH_FRAMES = 20000
# Cycles' GPU backends, best first; the first that lists a device here renders.
CYCLES_GPU_BACKENDS = ("OPTIX", "CUDA", "HIP", "ONEAPI", "METAL")


class Restore:
    """Remember attributes, set new values, put the old ones back on exit."""

    def __init__(self):
        self.saved = []

    def set(self, owner, attr, value):
        old = getattr(owner, attr)
        if not isinstance(old, str) and hasattr(old, "__len__"):
            old = tuple(old)  # a bpy array is a live view: copy it, or "restoring" writes the new value back
        setattr(owner, attr, value)  # a refused value (TypeError) leaves nothing to put back
        self.saved.append((owner, attr, old))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # A value one setting refuses until another is back (5.x's FFMPEG before its media type VIDEO,
        # a 32-bit depth before EXR) gets a second try once every other setting is restored.
        refused = []
        for owner, attr, value in reversed(self.saved):
            try:
                setattr(owner, attr, value)
            except (AttributeError, TypeError, ValueError):
                refused.append((owner, attr, value))
        for owner, attr, value in refused:
            try:
                setattr(owner, attr, value)
            except (AttributeError, TypeError, ValueError):
                pass


def principled_base_color(material):
    """The material's Principled BSDF base colour when it is a plain value, else its viewport colour."""
    if compat_bl.uses_nodes(material):
        for node in material.node_tree.nodes:
            if node.type == "BSDF_PRINCIPLED":
                socket = node.inputs.get("Base Color")
                if socket is not None and not socket.is_linked:
                    return [round(float(c), 4) for c in socket.default_value]
    return [round(float(c), 4) for c in material.diffuse_color]


def gl_platform():
    """The GPU backend Blender draws with (EEVEE, Workbench), or None before it has started.

    In background mode the backend starts with the first render that needs it; until then
    the gpu module refuses every call.
    """
    try:
        import gpu  # deferred: a missing or not yet started GPU backend is the None below, not an import failure

        platform = gpu.platform
        return {"vendor": platform.vendor_get(), "renderer": platform.renderer_get(),
                "version": platform.version_get(), "device_type": platform.device_type_get()}  # fmt: skip
    except (ImportError, AttributeError, SystemError):
        return None


def is_software_gl(info):
    """True for a CPU rasteriser (Mesa llvmpipe, softpipe, swrast, an offscreen Mesa)."""
    text = f"{info.get('vendor', '')} {info.get('renderer', '')}".lower()
    software = ("llvmpipe", "softpipe", "swrast", "mesa offscreen")
    return info.get("device_type") == "SOFTWARE" or any(name in text for name in software)


def gl_renderer(info):
    return " ".join(part for part in (info.get("vendor"), info.get("renderer")) if part)


def probe_gl():
    """The GL platform EEVEE will render on: started, if need be, by a 4 px Workbench still of a
    scratch scene (the agent's scene is not touched), so a caller knows before a long render."""
    info = gl_platform()
    if info is not None:
        return info
    scratch = bpy.data.scenes.new("_bvb_gl_probe")
    camera_data = bpy.data.cameras.new("_bvb_gl_probe")
    camera = bpy.data.objects.new("_bvb_gl_probe", camera_data)
    try:
        scratch.collection.objects.link(camera)
        scratch.camera = camera
        scratch.render.engine = "BLENDER_WORKBENCH"  # type: ignore[assignment]  # the stubs list EEVEE only
        scratch.render.resolution_x = scratch.render.resolution_y = 4
        bpy.ops.render.render(scene=scratch.name)
    finally:
        bpy.data.objects.remove(camera)
        bpy.data.cameras.remove(camera_data)
        bpy.data.scenes.remove(scratch)
    return gl_platform()


def cycles_device():
    """("GPU", "OPTIX: <names>") for the best Cycles GPU backend with a device here, else ("CPU", "CPU").

    The choice goes into the worker's preferences (never saved: factory settings, private HOME).
    """
    try:
        # Cycles' own AddonPreferences subclass (devices, compute_device_type): not in the stubs.
        prefs: Any = bpy.context.preferences.addons["cycles"].preferences
    except KeyError:
        return "CPU", "CPU"
    for backend in CYCLES_GPU_BACKENDS:
        try:
            prefs.compute_device_type = backend
        except TypeError:  # not compiled into this Blender
            continue
        prefs.refresh_devices()
        gpus = [d for d in prefs.devices if d.type == backend]
        if gpus:
            for device in prefs.devices:
                device.use = device.type == backend
            return "GPU", f"{backend}: {', '.join(d.name for d in gpus)}"
    prefs.compute_device_type = "NONE"
    return "CPU", "CPU"


def apply_preset(restore, scene, preset):
    render = scene.render
    render_engines = {"fast": "BLENDER_WORKBENCH", "cycles": "CYCLES"}
    restore.set(render, "engine", render_engines[preset])
    if preset == "fast":
        shading = scene.display.shading
        restore.set(shading, "light", "STUDIO")
        restore.set(shading, "color_type", "MATERIAL")
        restore.set(shading, "show_shadows", False)
        restore.set(shading, "show_cavity", False)
        # No anti-aliasing: on a CPU rasteriser (llvmpipe) even FXAA doubles the time per
        # frame (0.14 s against 0.07 s at 512 px, 200 objects); the H.264 encode softens edges.
        restore.set(scene.display, "render_aa", "OFF")
        # Workbench shows a material's viewport colour; agents set the node base colour.
        for material in bpy.data.materials:
            restore.set(material, "diffuse_color", principled_base_color(material))
    elif preset == "cycles":
        device, described = cycles_device()
        restore.set(scene.cycles, "device", device)
        restore.set(scene.cycles, "samples", CYCLES_SAMPLES)
        restore.set(scene.cycles, "use_denoising", True)
        restore.set(scene.cycles, "use_adaptive_sampling", True)
        # On a 2-core CPU the denoiser's prefilter costs as much as the path tracing itself
        # (2.1 s against 4.3 s per frame at 384 px with FAST); 4 bounces suffice for the judge.
        restore.set(scene.cycles, "denoising_prefilter", "FAST")
        restore.set(scene.cycles, "max_bounces", 4)
        # Only the camera moves between frames of an evaluation render: keep the BVH.
        restore.set(scene.render, "use_persistent_data", True)
        return f"Cycles {described}"
    return None


def rendered_by(cycles):
    """The reply's renderer fields: Cycles' device, or the GL platform EEVEE and Workbench drew with."""
    gl = None if cycles else gl_platform()
    renderer = cycles or (gl_renderer(gl) if gl else "unknown (the GPU backend did not report)")
    return {"renderer": renderer, "software_gl": bool(gl and is_software_gl(gl))}


def render_release(workspace, req):
    """The bvb preset: BVB's render script, setting exactly what it sets and nothing else (docs/protocol.md).

    The engine (the first id of release_render.ENGINES this Blender takes), a square image, the frame rate
    as a whole number, PNG RGB; each frame by frame_set and a still render, as the release does. Samples,
    film, colour management and compositing stay the scene's own. The scene's settings are put back after.
    """
    scene = bpy.context.scene
    render = scene.render
    side = int(req["longest_side"])
    prefix = req["prefix"]
    started = time.perf_counter()
    with Restore() as restore:
        engine = None
        for candidate in release_render.ENGINES:
            try:
                restore.set(render, "engine", candidate)
            except TypeError:  # not an engine of this Blender
                continue
            engine = candidate
            break
        restore.set(render, "resolution_x", side)
        restore.set(render, "resolution_y", side)
        restore.set(render, "resolution_percentage", 100)
        fps = release_render.integer_fps(render.fps, render.fps_base)
        restore.set(render, "fps", fps)
        restore.set(render, "fps_base", 1.0)
        restore.set(render, "use_file_extension", True)
        for attr, value in compat_bl.png_stills(render.image_settings):
            restore.set(render.image_settings, attr, value)
        restore.set(render.image_settings, "color_mode", "RGB")
        restore.set(render, "filepath", render.filepath)
        restore.set(scene, "frame_current", scene.frame_current)
        names = []
        for index, frame in enumerate(int(f) for f in req["frames"]):
            scene.frame_set(frame)
            name = f"{prefix}{index:04d}"
            render.filepath = os.path.join(workspace, name)  # use_file_extension adds .png
            # The operator returns its state set ({"FINISHED"}); the stubs type it as None.
            result: Any = bpy.ops.render.render(write_still=True)
            if "FINISHED" not in result:
                return {"status": "error", "reason": f"BVB_RENDER_ERROR render_failed frame={frame} result={result}"}
            names.append(name + ".png")
    if not all(os.path.isfile(os.path.join(workspace, n)) for n in names):
        return {"status": "error", "reason": "BVB_RENDER_ERROR missing_frames"}
    return {"status": "ok", "files": names, "duration_s": time.perf_counter() - started, "fps": fps,
            "engine": engine or "", **rendered_by(None)}  # fmt: skip


def render(workspace, req):
    """Render req["frames"] from the scene camera into the workspace; reply with the file names."""
    scene = bpy.context.scene
    if scene.camera is None:
        # No release marker here: this text reaches the native agent; error.json adds the marker itself.
        return {"status": "error", "reason": "the scene has no camera (set bpy.context.scene.camera)"}
    if req["preset"] == "bvb":
        return render_release(workspace, req)
    frames = [int(f) for f in req["frames"]]
    if req.get("width") and req.get("height"):
        width, height = int(req["width"]), int(req["height"])
    else:
        # No source aspect given: the scene's own output aspect.
        r = scene.render
        aspect = (r.resolution_x * r.pixel_aspect_x) / max(1e-6, r.resolution_y * r.pixel_aspect_y)
        longest = int(req["longest_side"])
        w, h = (longest, longest / aspect) if aspect >= 1 else (longest * aspect, longest)
        width, height = max(2, int(round(w / 2)) * 2), max(2, int(round(h / 2)) * 2)
    prefix = req["prefix"]
    started = time.perf_counter()
    render = scene.render
    with Restore() as restore:
        cycles = apply_preset(restore, scene, req["preset"])
        for attr, value in (
            ("resolution_x", width),
            ("resolution_y", height),
            ("resolution_percentage", 100),
            ("pixel_aspect_x", 1.0),
            ("pixel_aspect_y", 1.0),
            ("use_border", False),
            ("film_transparent", False),
            ("use_stamp", False),
            ("use_compositing", False),
            ("use_sequencer", False),
        ):
            restore.set(render, attr, value)
        settings = render.image_settings
        for attr, value in compat_bl.png_stills(settings):
            restore.set(settings, attr, value)
        restore.set(settings, "color_mode", "RGB")
        restore.set(settings, "color_depth", "8")
        restore.set(settings, "compression", 15)
        restore.set(render, "use_file_extension", True)
        restore.set(render, "filepath", render.filepath)
        restore.set(scene, "frame_start", scene.frame_start)
        restore.set(scene, "frame_end", scene.frame_end)
        restore.set(scene, "frame_step", scene.frame_step)
        restore.set(scene, "frame_current", scene.frame_current)
        names = []
        step = frames[1] - frames[0] if len(frames) > 1 else 1
        stepped = step >= 1 and all(b - a == step for a, b in zip(frames, frames[1:], strict=False))
        if stepped:
            # One animation render keeps the engine warm between frames (much faster than stills).
            scene.frame_start, scene.frame_end, scene.frame_step = frames[0], frames[-1], step
            if scene.frame_end < scene.frame_start:
                scene.frame_start = scene.frame_end
            render.filepath = os.path.join(workspace, f"{prefix}#######")
            bpy.ops.render.render(animation=True)
            names = [f"{prefix}{frame:07d}.png" for frame in frames]
        else:
            for index, frame in enumerate(frames):
                scene.frame_set(frame)
                name = f"{prefix}{index:07d}.png"
                render.filepath = os.path.join(workspace, name)
                bpy.ops.render.render(write_still=True)
                names.append(name)
    missing = [n for n in names if not os.path.isfile(os.path.join(workspace, n))]
    if missing:
        return {"status": "error", "reason": f"the renderer wrote no image for {len(missing)} of {len(names)} frames"}
    return {"status": "ok", "files": names, "duration_s": time.perf_counter() - started, **rendered_by(cycles)}


def world_bounds(obj):
    corners = [obj.matrix_world @ Vector(corner) for corner in obj.bound_box]
    lo = [min(c[axis] for c in corners) for axis in range(3)]
    hi = [max(c[axis] for c in corners) for axis in range(3)]
    return lo, hi


def rnd(values, digits=5):
    return [round(float(v), digits) for v in values]


def rotation_jumps(camera):
    """Consecutive rotation keyframes more than 180 degrees apart (the camera spins between them)."""
    jumps = []
    for fcurve in compat_bl.action_fcurves(camera.animation_data):
        if fcurve.data_path != "rotation_euler":
            continue
        points = sorted((kp.co[0], kp.co[1]) for kp in fcurve.keyframe_points)
        for (fa, va), (fb, vb) in zip(points, points[1:], strict=False):
            if abs(vb - va) > math.pi:
                jumps.append({"axis": fcurve.array_index, "frame_a": fa, "frame_b": fb,
                              "degrees": round(math.degrees(vb - va), 2)})  # fmt: skip
    return jumps


def scene_graph(frames=None):
    """The scene_graphs/<scene>.json content (docs/contracts.md)."""
    scene = bpy.context.scene
    start, end = scene.frame_start, scene.frame_end
    if frames is None:
        frames = list(range(start, max(start, end) + 1))[:MAX_GRAPH_FRAMES]
    frames = [int(f) for f in frames][:MAX_GRAPH_FRAMES]
    current = scene.frame_current
    scene.frame_set(start)
    objects = []
    for obj in scene.objects:
        entry: dict[str, Any] = {"name": obj.name, "type": obj.type}
        if obj.type in {"MESH", "CURVE", "SURFACE", "META", "FONT", "CURVES", "POINTCLOUD", "VOLUME"}:
            lo, hi = world_bounds(obj)
            entry["center"] = rnd([(a + b) / 2 for a, b in zip(lo, hi, strict=True)])
            entry["bounds_min"], entry["bounds_max"] = rnd(lo), rnd(hi)
            entry["dimensions"] = rnd([b - a for a, b in zip(lo, hi, strict=True)])
        else:
            location = obj.matrix_world.translation
            entry["center"] = rnd(location)
            entry["bounds_min"] = entry["bounds_max"] = rnd(location)
            entry["dimensions"] = [0.0, 0.0, 0.0]
        entry["materials"] = [
            {"name": slot.material.name, "base_color": principled_base_color(slot.material)}
            for slot in obj.material_slots
            if slot.material is not None
        ]
        objects.append(entry)
    camera = None
    if scene.camera is not None:
        cam = scene.camera
        poses = []
        for frame in frames:
            scene.frame_set(frame)
            matrix = cam.matrix_world
            lens = getattr(cam.data, "lens", None)
            poses.append({
                "frame": frame,
                "location": rnd(matrix.translation),
                "rotation_euler": rnd(matrix.to_euler("XYZ")),
                "lens": round(float(lens), 4) if lens is not None else None,
                "sensor_width": round(float(getattr(cam.data, "sensor_width", 36.0)), 4),
            })  # fmt: skip
        camera = {"name": cam.name, "frames": poses, "rotation_jumps": rotation_jumps(cam)}
    scene.frame_set(current)
    return {
        "scene": scene.name,
        "frame_range": [start, end],
        "fps": scene.render.fps / (scene.render.fps_base or 1.0),
        "resolution": [scene.render.resolution_x, scene.render.resolution_y],
        "objects": objects,
        "camera": camera,
        "blender": bpy.app.version_string,
    }
