"""The worker side: runs inside Blender, in the sandbox, one request at a time.

Started by the supervisor (``bvb_addon.sandbox.worker``) as
``python -I worker_main_bl.py --fd N ...`` (bpy module) or
``blender -b --factory-startup --python worker_main_bl.py -- --fd N ...`` (a Blender binary).
It owns the scene: agent programs run here, in this process, so the scene stays warm.
Everything it sends back is treated by the supervisor as untrusted data.

Not part of the bvb_addon package at import time: it imports bpy and runs as a script.
"""

import argparse
import ctypes
import io
import linecache
import math
import os
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compat_bl  # noqa: E402
import seccomp_filter  # noqa: E402
import wire  # noqa: E402

AGENT_FILENAME = "<agent>"
GEOMETRY_TYPES = {"MESH", "CURVE", "SURFACE", "META", "FONT", "CURVES", "POINTCLOUD", "VOLUME"}
NAMES_SHOWN = 20


class OutputLimit(BaseException):
    """Raised into the agent's program when it prints more than the hard limit (not an Exception,
    so a program's own ``except Exception`` does not swallow it)."""


class CappedStream(io.TextIOBase):
    """A text stream that keeps the first ``keep`` characters and stops the program past ``hard``."""

    def __init__(self, keep, hard, shared):
        self.keep = keep
        self.hard = hard
        self.shared = shared  # total characters written to either stream, in a one-item list
        self.parts = []
        self.kept = 0
        self.dropped = 0

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.shared[0] += len(text)
        if self.kept < self.keep:
            piece = text[: self.keep - self.kept]
            self.parts.append(piece)
            self.kept += len(piece)
            self.dropped += len(text) - len(piece)
        else:
            self.dropped += len(text)
        if self.shared[0] > self.hard:
            raise OutputLimit(f"the program printed more than {self.hard} characters")
        return len(text)

    def flush(self):
        pass

    def value(self):
        text = "".join(self.parts)
        if self.dropped:
            text += f"\n[... {self.dropped} more characters cut]"
        return text


def set_parent_death_signal():
    """Die with the supervisor even outside bubblewrap (PR_SET_PDEATHSIG)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class SceneHost:
    def __init__(self, args):
        self.args = args
        self.sock = __import__("socket").socket(fileno=args.fd)
        self.workspace = os.path.realpath(args.workspace)
        self.pid = os.getpid()
        self.fingerprint = {}

    # ---- scene state -------------------------------------------------------------------

    def object_fingerprint(self):
        import bpy  # deferred: main loads bpy after the seccomp filter; a local name here

        # matrix_world is stale until the depsgraph is evaluated.
        bpy.context.view_layer.update()
        prints = {}
        for obj in bpy.context.scene.objects:
            data = obj.data
            size = 0
            if isinstance(data, bpy.types.Mesh):  # obj.type == "MESH"
                size = len(data.vertices)
            prints[obj.name] = (
                obj.type,
                tuple(round(v, 5) for row in obj.matrix_world for v in row),  # type: ignore[attr-defined]  # a Matrix iterates its rows; the stub has no __iter__
                data.name if data is not None else "",
                size,
                tuple(slot.material.name if slot.material else "" for slot in obj.material_slots),
                obj.parent.name if obj.parent else "",
            )
        return prints

    def summary(self):
        """The compact scene summary that goes with every step result."""
        import bpy  # deferred: main loads bpy after the seccomp filter; a local name here
        from mathutils import Vector  # deferred: comes with bpy (as above)

        scene = bpy.context.scene
        counts = {}
        lo = [math.inf] * 3
        hi = [-math.inf] * 3
        for obj in scene.objects:
            counts[obj.type] = counts.get(obj.type, 0) + 1
            if obj.type in GEOMETRY_TYPES:
                for corner in obj.bound_box:
                    world = obj.matrix_world @ Vector(corner)
                    for axis in range(3):
                        lo[axis] = min(lo[axis], world[axis])
                        hi[axis] = max(hi[axis], world[axis])
        camera = scene.camera
        now = self.object_fingerprint()
        before = self.fingerprint
        added = sorted(set(now) - set(before))
        removed = sorted(set(before) - set(now))
        modified = sorted(name for name in set(now) & set(before) if now[name] != before[name])
        self.fingerprint = now
        return {
            "scene": scene.name,
            "object_count": len(scene.objects),
            "objects_by_type": dict(sorted(counts.items())),
            "mesh_objects": counts.get("MESH", 0),
            "meshes": len(bpy.data.meshes),
            "materials": len(bpy.data.materials),
            "camera": {
                "present": camera is not None,
                "name": camera.name if camera else None,
                "animated": bool(camera and is_animated(camera)),
            },
            "frame_range": [scene.frame_start, scene.frame_end],
            "fps": scene.render.fps / (scene.render.fps_base or 1.0),
            "resolution": [scene.render.resolution_x, scene.render.resolution_y],
            "bounds": None
            if lo[0] == math.inf
            else {"min": [round(v, 4) for v in lo], "max": [round(v, 4) for v in hi]},
            "changes": {
                "added": added[:NAMES_SHOWN],
                "removed": removed[:NAMES_SHOWN],
                "modified": modified[:NAMES_SHOWN],
                "counts": [len(added), len(removed), len(modified)],
            },
        }

    def save_snapshot(self, name):
        """Save the scene atomically in the workspace under ``name`` (a plain file name)."""
        import bpy  # deferred: main loads bpy after the seccomp filter; a local name here

        final = os.path.join(self.workspace, name)
        tmp = os.path.join(self.workspace, "." + name + ".tmp")
        bpy.ops.wm.save_as_mainfile(filepath=tmp, copy=True, check_existing=False, compress=False)
        os.replace(tmp, final)

    # ---- requests ----------------------------------------------------------------------

    def op_ping(self, req):
        return {"status": "ok"}

    def op_run(self, req):
        import bpy  # deferred: main loads bpy after the seccomp filter; a local name here

        program = req["program"]
        shared = [0]
        out = CappedStream(req["output_chars"], req["output_hard_bytes"], shared)
        err = CappedStream(req["output_chars"], req["output_hard_bytes"], shared)
        status, tb, reason = "ok", "", ""
        namespace = {"__name__": "__main__", "__file__": AGENT_FILENAME, "__builtins__": __builtins__, "bpy": bpy}
        linecache.cache[AGENT_FILENAME] = (len(program), None, program.splitlines(True), AGENT_FILENAME)
        saved = sys.stdout, sys.stderr
        started = time.perf_counter()
        try:
            sys.stdout, sys.stderr = out, err
            exec(compile(program, AGENT_FILENAME, "exec"), namespace)
        except OutputLimit as exc:
            status, reason = "output_limit", str(exc)
        except MemoryError:
            status, reason = "oom", "the program ran out of memory (MemoryError)"
            tb = agent_traceback(*sys.exc_info())
        except SystemExit as exc:
            if exc.code not in (None, 0):
                status, reason = "error", f"the program called sys.exit({exc.code!r})"
        except BaseException:
            status = "error"
            tb = agent_traceback(*sys.exc_info())
            reason = tb.strip().splitlines()[-1] if tb.strip() else "error"
        finally:
            if os.getpid() != self.pid:
                # A process the program forked must never return into the request loop.
                os._exit(0)
            sys.stdout, sys.stderr = saved
        duration = time.perf_counter() - started
        os.chdir(self.workspace)
        reply = {
            "status": status,
            "stdout": escaped(out.value()),
            "stderr": escaped(err.value()),
            "traceback": escaped(tb),
            "reason": escaped(reason),
            "duration_s": duration,
        }
        try:
            reply["summary"] = self.summary()
        except Exception as exc:  # a program can leave the scene in a state the summary trips on
            reply["summary"] = {"error": f"{type(exc).__name__}: {exc}"}
        if status == "ok":
            self.save_snapshot(req["snapshot_name"])
            reply["snapshot_name"] = req["snapshot_name"]
        return reply

    def op_load(self, req):
        """Open an untrusted .blend: no auto-run scripts, no Python drivers, no UI."""
        import bpy  # deferred: main loads bpy after the seccomp filter; a local name here

        path = os.path.join(self.workspace, req["name"])
        bpy.context.preferences.filepaths.use_scripts_auto_execute = False
        started = time.perf_counter()
        try:
            bpy.ops.wm.open_mainfile(filepath=path, load_ui=False, use_scripts=False)
        except BaseException as exc:
            return {
                "status": "error",
                "reason": f"not a readable .blend: {str(exc).strip().splitlines()[-1] if str(exc).strip() else exc}",
                "duration_s": time.perf_counter() - started,
            }
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
        bpy.context.preferences.filepaths.use_scripts_auto_execute = False
        os.chdir(self.workspace)
        self.fingerprint = self.object_fingerprint()
        reply = {"status": "ok", "duration_s": time.perf_counter() - started, "summary": self.summary()}
        if req.get("reset_changes", True):
            reply["summary"]["changes"] = {"added": [], "removed": [], "modified": [], "counts": [0, 0, 0]}
        return reply

    def op_render(self, req):
        import render_side_bl  # deferred: it imports bpy at its top (after the filter, as above)

        return render_side_bl.render(self.workspace, req)

    def op_gl(self, req):
        import render_side_bl  # deferred: it imports bpy at its top (after the filter, as above)

        info = render_side_bl.probe_gl()
        if info is None:
            return {"status": "error", "reason": "the GPU backend did not start"}
        return {"status": "ok", "renderer": render_side_bl.gl_renderer(info), "software": render_side_bl.is_software_gl(info),
                "platform": info}  # fmt: skip

    def op_graph(self, req):
        import render_side_bl  # deferred: it imports bpy at its top (after the filter, as above)

        return {"status": "ok", "graph": render_side_bl.scene_graph(req.get("frames"))}

    def op_audit(self, req):
        import scene_rules_bl  # deferred: it imports bpy at its top (after the filter, as above)

        return scene_rules_bl.audit()

    def cleanup_processes(self):
        """Kill whatever the program left running, so nothing survives a step.

        pidns: every process in the sandbox's own pid namespace but its init and us.
        uid: every process of this worker's dedicated uid. descendants: our process tree
        only (a double-forked daemon escapes that one; it is the weakest level's limit).
        """
        mode = self.args.cleanup
        if mode == "none":
            return
        deadline = time.monotonic() + 3.0
        # Scan again after each round: a process can fork between a scan and its kill.
        while time.monotonic() < deadline:
            doomed = self.leftover_processes(mode)
            if not doomed:
                break
            for pid in doomed:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            reap_children()
            time.sleep(0.005)
        reap_children()

    def leftover_processes(self, mode):
        """Processes to kill (zombies included, so the next step starts with none)."""
        me = os.getpid()
        my_uid = os.getuid()
        # uid: only processes of this worker's own pids group, where it has one (a process cannot
        # leave it), never another worker's that happens to run as the same uid.
        my_group = pids_group("self") if mode == "uid" else None
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                parents[int(entry)] = proc_parent(int(entry))
        doomed = []
        for pid in parents:
            if pid == me or (mode == "pidns" and pid == 1):
                continue
            if mode == "uid":
                try:
                    if os.stat(f"/proc/{pid}").st_uid != my_uid:
                        continue
                except OSError:
                    continue
                if my_group is not None and pids_group(pid) != my_group:
                    continue
            elif mode == "descendants":
                ancestor, hops = parents.get(pid), 0
                while ancestor not in (None, 0, 1, me) and hops < 4096:
                    ancestor, hops = parents.get(ancestor), hops + 1
                if ancestor != me:
                    continue
            doomed.append(pid)
        return doomed

    def serve(self):
        handlers = {"ping": self.op_ping, "run": self.op_run, "load": self.op_load, "render": self.op_render,
                    "graph": self.op_graph, "gl": self.op_gl, "audit": self.op_audit}  # fmt: skip
        while True:
            try:
                req = wire.recv_msg(self.sock, 1 << 30)
            except wire.PeerClosed:
                return
            handler = handlers.get(req.get("op"))
            if req.get("op") == "exit":
                return
            try:
                reply = handler(req) if handler else {"status": "error", "reason": f"unknown op {req.get('op')!r}"}
            except MemoryError:
                reply = {"status": "oom", "reason": "the worker ran out of memory"}
            except Exception as exc:
                reply = {"status": "error", "reason": f"worker: {type(exc).__name__}: {exc}",
                         "traceback": traceback.format_exc()}  # fmt: skip
            if os.getpid() != self.pid:
                os._exit(0)
            self.cleanup_processes()
            reply["id"] = req.get("id")
            wire.send_msg(self.sock, reply)


def is_animated(obj):
    """True when the object moves: its own action, its data's action, a parent that moves, or constraints."""
    seen = 0
    while obj is not None and seen < 64:
        anim = obj.animation_data
        if anim and (compat_bl.action_fcurves(anim) or len(anim.drivers) or len(anim.nla_tracks)):
            return True
        data_anim = getattr(obj.data, "animation_data", None) if obj.data is not None else None
        if data_anim and compat_bl.action_fcurves(data_anim):
            return True
        if len(obj.constraints):
            return True
        obj = obj.parent
        seen += 1
    return False


def reap_children():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def pids_group(pid):
    """The process's group in the pids cgroup hierarchy when it is one of the harness's (/bvb/...), else None."""
    try:
        with open(f"/proc/{pid}/cgroup") as handle:
            for line in handle:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "pids" in controllers.split(","):
                    return path if path.startswith("/bvb/") else None
    except (OSError, ValueError):
        pass
    return None


def proc_parent(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def escaped(text):
    """``text`` with each lone surrogate as its escape: a program may print chr(0xD800), and the supervisor
    refuses a reply string that holds one (as it must: only a forged reply would)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def agent_traceback(exc_type, exc, tb):
    """The traceback from the agent's first frame on, with its line numbers and source lines."""
    while tb is not None and tb.tb_frame.f_code.co_filename != AGENT_FILENAME:
        tb = tb.tb_next
    return "".join(traceback.format_exception(exc_type, exc, tb))


def main(argv):
    parser = argparse.ArgumentParser(prog="worker_main_bl")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--seccomp", type=int, default=0)
    parser.add_argument("--cleanup", choices=("pidns", "uid", "descendants", "none"), default="none")
    args = parser.parse_args(argv)
    set_parent_death_signal()
    seccomp_error = seccomp_filter.install() if args.seccomp else "not requested"
    os.umask(0o077)
    os.chdir(args.workspace)
    started = time.perf_counter()
    import bpy  # deferred: after the seccomp filter, so every thread bpy starts inherits it

    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.context.preferences.filepaths.use_scripts_auto_execute = False
    worker = SceneHost(args)
    worker.fingerprint = worker.object_fingerprint()
    wire.send_msg(
        worker.sock,
        {
            "status": "ready",
            "seccomp_error": seccomp_error,
            "uid": os.getuid(),
            "cap_bnd": seccomp_filter.capability_bounding_set(),
            "blender": bpy.app.version_string,
            "startup_s": time.perf_counter() - started,
        },
    )
    worker.serve()


if __name__ == "__main__":
    argv = sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else sys.argv[1:]
    main(argv)
    sys.stdout.flush()
    # Blender's exit runs add-on and atexit code; the scene needs no saving here.
    os._exit(0)
