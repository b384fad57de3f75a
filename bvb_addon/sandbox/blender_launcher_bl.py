"""Blender's command line in background mode, on the bpy module: ``blender_run`` and ``blender`` in a scene's workspace.

BVB's container runs ``blender_run --python FILE`` as ``xvfb-run -a blender --background FILE...``. Where no
Blender binary is configured, the workspace's ``blender_run`` and ``blender`` start this script under the
venv's Python instead (``python -I blender_launcher_bl.py [--background] ARGS``), and it handles the command
line an agent writes the way Blender 4.2 does: arguments left to right; a ``.blend`` opens that file
(``Read blend: "..."``, exit 1 when it cannot be read); ``--python FILE`` / ``-P``, ``--python-expr``,
``--python-text`` run in a fresh ``__main__`` with ``__file__`` set; an exception prints its traceback and
processing goes on, unless ``--python-exit-code N`` came before it (then ``Error: script failed, ...,
exiting.`` and exit N); ``sys.exit(n)`` ends with n; ``--`` ends the options and ``sys.argv`` holds the
whole line as Blender's does; ``-E``, ``-S``, ``-o``, ``-F``, ``-x``, ``-s``, ``-e``, ``-j``, ``-f``, ``-a``
set up and render; the options that only matter to a GUI or to start-up are accepted and ignored.
Output: the background banner first, ``Blender quit`` last, as Blender prints them.

Not part of the bvb_addon package at import time: it imports bpy and runs as a script.
"""

import os
import sys
import traceback
import types

# Options with no value that change nothing for a background bpy module (start-up, GUI, audio, debugging).
NO_VALUE = {
    "-b", "--background", "--factory-startup", "-noaudio", "-y", "--enable-autoexec", "-Y", "--disable-autoexec",
    "-q", "--quiet", "--offline-mode", "--online-mode", "-w", "--window-border", "-W", "--window-fullscreen",
    "-M", "--window-maximized", "-con", "--start-console", "--no-window-focus", "--no-native-pixels",
    "--python-use-system-env", "-r", "--register", "--register-allusers", "--unregister", "--unregister-allusers",
    "--disable-crash-handler", "--disable-abort-handler", "--disable-depsgraph-on-file-load", "--verbose",
}  # fmt: skip
# Options whose value is read and ignored.
ONE_VALUE = {
    "-t", "--threads", "--log", "--log-level", "--log-file", "--app-template", "--debug-value", "--gpu-backend",
    "--env-system-datafiles", "--env-system-scripts", "--env-system-extensions", "--env-system-python",
    "--open-last", "--cycles-device", "--cycles-print-stats",
}  # fmt: skip


class Quit(Exception):
    """End Blender with this exit code (after flushing output)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def banner(bpy) -> str:
    app = bpy.app
    return (
        f"Blender {app.version_string} (hash {app.build_hash.decode()} built "
        f"{app.build_date.decode()} {app.build_time.decode()})"
    )


def version_text(bpy) -> str:
    app = bpy.app
    fields = [("build date", app.build_date), ("build time", app.build_time),
              ("build commit date", app.build_commit_date), ("build commit time", app.build_commit_time),
              ("build hash", app.build_hash), ("build branch", app.build_branch),
              ("build platform", app.build_platform), ("build type", app.build_type),
              ("build c flags", app.build_cflags), ("build c++ flags", app.build_cxxflags),
              ("build link flags", app.build_linkflags), ("build system", app.build_system)]  # fmt: skip
    lines = [f"Blender {app.version_string}"]
    lines += [f"\t{name}: {value.decode(errors='replace')}" for name, value in fields]
    return "\n".join(lines)


def exit_status(exc: SystemExit) -> int:
    """The exit code Python gives a SystemExit (None: 0, an int: itself, anything else printed: 1)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


def run_python(kind: str, what: str, exit_code: int, bpy) -> None:
    """Run a script file, an expression or a text block as Blender does; Quit on sys.exit or a set exit code."""
    source: str | bytes
    if kind == "file":
        filename = os.path.abspath(what)
        try:
            with open(filename, "rb") as handle:
                source = handle.read()
        except OSError as exc:
            # Blender raises this from C, so there is no traceback above the line.
            sys.stderr.write(f'OSError: Python file "{filename}" could not be opened: {exc.strerror}\n')
            failed(kind, what, exit_code)
            return
    elif kind == "text":
        text = bpy.data.texts.get(what)
        if text is None:
            sys.stderr.write(f"\nError: text block not found {what}.\n")
            failed(kind, what, exit_code)
            return
        filename, source = what, text.as_string()
    else:
        filename, source = "<string>", what
    module = types.ModuleType("__main__")
    module.__dict__["__file__"] = filename
    module.__dict__["__builtins__"] = __builtins__
    previous = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(compile(source, filename, "exec"), module.__dict__)
    except SystemExit as exc:
        raise Quit(exit_status(exc)) from None
    except BaseException as exc:  # an agent's script: every failure is printed, as Blender's PyErr_Print does
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        traceback.print_exception(type(exc), exc, tb)
        failed(kind, what, exit_code)
    finally:
        if previous is not None:
            sys.modules["__main__"] = previous


def failed(kind: str, what: str, exit_code: int) -> None:
    if exit_code:
        label = {"file": "file", "text": "text", "expr": "expr"}[kind]
        sys.stderr.write(f"\nError: script failed, {label}: '{what}', exiting.\n")
        raise Quit(exit_code)


def load_blend(path: str, bpy) -> None:
    filename = os.path.abspath(path)
    if not os.path.exists(filename):
        # Blender keeps going on its default scene (saving would write to the named path).
        print(f"... opened default scene instead; saving will write to: {filename}")
        return
    try:
        bpy.ops.wm.open_mainfile(filepath=filename)
    except RuntimeError:
        # The operator's report ("Error: ...") is already printed; Blender stops a background run there.
        raise Quit(1) from None
    # The Blender binary prints this line; the bpy module runs quiet.
    print(f'Read blend: "{filename}"', flush=True)


def frame_list(value: str, scene) -> list[int]:
    """Blender's -f value: frames and ranges (``1,3,5..8``); ``+N``/``-N`` count from the start/end frame."""
    frames: list[int] = []

    def one(text):
        text = text.strip()
        if text.startswith("+"):
            return scene.frame_start + int(text[1:])
        if text.startswith("-"):
            return scene.frame_end - int(text[1:])
        return int(text)

    for part in value.split(","):
        if ".." in part:
            first, last = part.split("..", 1)
            frames.extend(range(one(first), one(last) + 1))
        else:
            frames.append(one(part))
    return frames


def render(bpy, scene, frames: list[int] | None) -> None:
    """-a: the animation; -f: each frame as a one-frame animation, so the file gets its frame number in its
    name from the output path as Blender's -f writes it (``-o //r_ -f 1`` -> ``r_0001.png``)."""
    if frames is None:
        bpy.ops.render.render(animation=True, scene=scene.name)
        return
    start, end = scene.frame_start, scene.frame_end
    try:
        for frame in frames:
            scene.frame_start = scene.frame_end = frame
            bpy.ops.render.render(animation=True, scene=scene.name)
    finally:
        scene.frame_start, scene.frame_end = start, end


# Options that take a value and act on it (handled by Launcher.apply).
WITH_VALUE = {
    "-P", "--python", "--python-expr", "--python-text", "--python-exit-code", "--addons", "-E", "--engine",
    "-o", "--render-output", "-F", "--render-format", "-x", "--use-extension", "-s", "--frame-start",
    "-e", "--frame-end", "-j", "--frame-jump", "-S", "--scene", "-f", "--render-frame",
}  # fmt: skip


class Launcher:
    """The state Blender's final argument pass carries: the exit code for scripts, the chosen scene."""

    def __init__(self, bpy):
        self.bpy = bpy
        self.exit_code = 0
        self.scene_name = None  # -S: without a window the context's scene cannot change, so renders name it

    def scene(self):
        return self.bpy.data.scenes.get(self.scene_name) if self.scene_name else self.bpy.context.scene

    def apply(self, arg: str, value: str | None) -> None:
        """One option with its value (None for -a and a file name); Quit ends the run."""
        bpy, scene = self.bpy, self.scene()
        if arg == "--python-exit-code":
            code = int(value) if value.isdigit() else -1
            if not 0 <= code <= 255:
                sys.stderr.write(f"\nError: expected an exit code in [0..255] after '{arg}'\n")
                return
            self.exit_code = code
        elif arg in ("-P", "--python"):
            run_python("file", value, self.exit_code, bpy)
        elif arg == "--python-expr":
            run_python("expr", value, self.exit_code, bpy)
        elif arg == "--python-text":
            run_python("text", value, self.exit_code, bpy)
        elif arg == "--addons":
            import addon_utils  # deferred: Blender's own module, importable only once bpy is (main)

            for name in filter(None, value.split(",")):
                addon_utils.enable(name, default_set=True)
        elif arg in ("-E", "--engine"):
            scene.render.engine = value
        elif arg in ("-S", "--scene"):
            if bpy.data.scenes.get(value) is None:
                sys.stderr.write(f"\nError: no scene found with name '{value}'\n")
            else:
                self.scene_name = value
        elif arg in ("-o", "--render-output"):
            scene.render.filepath = value
        elif arg in ("-F", "--render-format"):
            settings = scene.render.image_settings
            if hasattr(settings, "media_type"):
                # 5.x offers a format only under its media type (a video output takes FFMPEG alone), and
                # Blender's -F sets both; so does compat_bl.png_stills for the renders.
                media = {"FFMPEG": "VIDEO", "OPEN_EXR_MULTILAYER": "MULTI_LAYER_IMAGE"}.get(value, "IMAGE")
                if media != settings.media_type:
                    settings.media_type = media
            settings.file_format = value
        elif arg in ("-x", "--use-extension"):
            scene.render.use_file_extension = value not in ("0", "false", "False")
        elif arg in ("-s", "--frame-start"):
            scene.frame_start = int(value)
        elif arg in ("-e", "--frame-end"):
            scene.frame_end = int(value)
        elif arg in ("-j", "--frame-jump"):
            scene.frame_step = int(value)
        elif arg in ("-f", "--render-frame"):
            render(bpy, scene, frame_list(value, scene))
        elif arg in ("-a", "--render-anim"):
            render(bpy, scene, None)
        elif arg == "--python-console":
            sys.stderr.write("\nError: --python-console needs an interactive terminal; none in background mode\n")
        else:
            load_blend(arg, bpy)


def main(args: list[str]) -> int:
    options = args[: args.index("--")] if "--" in args else args
    if "-v" in options or "--version" in options:
        import bpy  # deferred: the slow start only for what needs it (-h does not); main's import below

        print(version_text(bpy), flush=True)
        return 0
    if "-h" in options or "--help" in options:
        print("Blender (bpy module) in background mode: blender_run [-b] [FILE.blend] [--python FILE] "
              "[--python-expr EXPR] [--python-exit-code N] [-E ENGINE] [-o PATH] [-f N | -a] [-- ARGS]")  # fmt: skip
        return 0
    sys.argv = ["blender", *args]
    import bpy  # deferred: bpy reads sys.argv when it loads, so after the line above

    print(banner(bpy), flush=True)
    launcher = Launcher(bpy)
    index = 0
    try:
        while index < len(args):
            arg = args[index]
            index += 1
            if arg == "--":
                break
            if arg in NO_VALUE or (arg.startswith("--debug") and arg != "--debug-value"):
                continue
            if arg in ONE_VALUE or arg in ("-p", "--window-geometry"):
                index += 4 if arg in ("-p", "--window-geometry") else 1
                continue
            value = None
            if arg in WITH_VALUE:
                if index >= len(args):
                    sys.stderr.write(f"\nError: {arg} requires an argument\n")
                    continue
                value = args[index]
                index += 1
            try:
                launcher.apply(arg, value)
            except (TypeError, ValueError, RuntimeError, KeyError, AttributeError) as exc:
                # A bad value for a setting (an unknown engine, a frame that is not a number): Blender says
                # so and goes on with the next argument.
                sys.stderr.write(f"\nError: {arg} {value if value is not None else ''}: {exc}\n")
    except Quit as stop:
        return stop.code
    print("\nBlender quit", flush=True)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Blender's exit does not run Python's interpreter teardown (slow and noisy for the bpy module).
    os._exit(code)
