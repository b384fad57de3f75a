"""Issue 34's architecture figures of a source tree, so the refactor prints "after" beside "before".

Every figure is counted, never estimated, by one definition that works on any tree of this
project (``--root`` takes an exported older or newer tree):

options per stage parser
    Every stage's parser is built the way ``bvb`` builds it (``headless.cli.stage_parsers()``:
    the ``bvb STAGE`` modules' ``build_parser`` and eval_bridge's subcommands; nested
    subcommands such as ``human pack bvb`` are walked as parsers of their own) and nothing runs.
    An option is an argparse action with an option string other than ``-h``: ``--quiet`` and
    ``--verbose`` and hidden aliases of renamed options (``--min-level``) included, positionals
    not. That is how the issue counted: this script gives its 229 over 18 parsers, 43 for
    ``run`` and 26 for ``score dv`` on f6d9931 (2 Dec 07:18, before the parity work), where
    counting positionals and leaving the 2 aliases out would give 234. ``positionals`` and
    ``aliases`` are printed apart.
functions with 8 or more parameters
    ``def``/``async def`` in the code files (below) whose named parameters (positional-only,
    positional, keyword-only) number 8 or more; ``self``/``cls`` (the first parameter of a
    method in a class body) and ``*args``/``**kwargs`` are not counted: they are not options a
    caller chooses. The issue's 21 on f6d9931 (counting self/cls too would give more).
in-function imports of our own modules
    ``import``/``from ... import`` statements anywhere inside a ``def`` body (a statement, not
    a name: ``from . import a, b`` is one) whose module is relative or starts with one of
    ``OWN`` (top level of a module or of a class body is not counted). The issue's 193 on f6d9931.
lines of option plumbing
    Source lines that read the parsed command line: an attribute of (or ``getattr`` on,
    or ``vars()`` of) a name that is a parameter annotated ``argparse.Namespace`` or that was
    assigned from ``.parse_args(...)``/``.parse_known_args(...)`` in the same function. These are
    the lines that copy options by hand (``headless/run.py:_configs``, eval_bridge's
    ``JudgeOptions`` from ``args``, the service's config); ``plumbing_functions`` counts the
    functions holding them and ``plumbing_function_lines`` their whole length. The issue gave no
    figure; 242 lines on f6d9931. An unannotated namespace parameter is missed: every function
    here is annotated since test_types (on trees before 1 Dec 23:44 the figure reads low).
code files
    ``*.py`` under ``bvb_addon``, ``headless``, ``eval_bridge``, ``operators``, ``panels`` and
    at the top level of the tree (not ``tests``, ``bench``, ``docs``).
tests (``--tests``)
    The count ``pytest --collect-only -q`` reports (every tier; 10-20 s here).
the agent wing's size (issue 41)
    ``wing_lines``: lines of ``bvb_addon/agent/*.py`` and ``bvb_addon/agent_session.py``;
    ``runner_harness_names``: in ``bvb_addon/agent/runner.py``, occurrences of the words the runner
    branches on per harness: ``mini-bvb``, ``native`` (a whole word), ``.mini`` (the attribute, not
    ``.mini_bvb``) and ``harness ==``.
help times (``--help-times``)
    The median of 5 wall times of ``python -P -m headless.cli --help``, ``... run --help`` and
    ``... score dv --help`` (what ``./bvb`` runs, and what shell completion pays per Tab), beside
    ``python -c pass`` (the interpreter's own start), with each one's ratio to it.
the suite's time (``--suite-minutes``)
    Not measured here: ``.ci/run`` takes 35 to 48 minutes on the shared 2-core machine; a
    time measured apart is recorded beside the other figures.
files one scene crosses (``--trace``)
    One API-free scene (a one-scene synthetic suite, 64x48, 4 fps, 1 s: ``bvb synth`` in its own
    process, untraced, reused from ``--keep``) through ``bvb run`` (oracle agent), ``bvb render``
    (64 px, 4 frames), ``bvb score dv --judge geometry`` and ``bvb leaderboard``, each stage's
    ``main(argv)`` in this process under ``sys.setprofile``: the code files one of whose
    functions ran (``scene_files``) and their lines; ``scene_files_imported`` adds the files
    only imported. Code that runs in child processes (the sandboxed worker, Blender's render)
    is not seen: this counts the harness a scene passes through on the host (threads the
    stages start included), the same way before and after. The issue's "36 files (about 10,400
    lines)" names no method; this one gives 70 files (14,036 lines) on f6d9931.

    .venv/bin/python bench/architecture.py [--tests] [--trace] [--help-times] [--json FILE] [--baseline FILE] [--root DIR]
    .venv/bin/python bench/architecture.py --tests --trace --baseline bench/architecture_baseline.json

The last line: ``options=<n> parsers=<p> plumbing_lines=<l> params8=<f> inner_imports=<i>
wing_lines=<w> runner_harness_names=<r>`` (and ``tests=<t> scene_files=<s> suite_minutes=<m>
help_s=<h> run_help_s=<r> dv_help_s=<d> python_pass_s=<p>`` when measured).
"""

import argparse
import ast
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OWN = ("bvb_addon", "headless", "eval_bridge", "operators", "panels")
PACKAGES = OWN
SKIP_DIRS = {"__pycache__", ".venv", "tests", "bench", "docs", "build", "dist"}
MANY_PARAMS = 8


def code_files(root: Path) -> list[Path]:
    """The code files of a tree: every .py under the packages and at its top level."""
    files = sorted(p for p in root.glob("*.py"))
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if not SKIP_DIRS & set(path.relative_to(root).parts[:-1]):
                files.append(path)
    return files


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _functions(tree: ast.AST) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """Every def of a module with whether it sits directly in a class body (a method)."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, _ = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield child, isinstance(node, ast.ClassDef)
            stack.append((child, False))


def parameter_count(func: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> int:
    """Named parameters a caller passes: self/cls of a method and *args/**kwargs left out."""
    a = func.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in func.decorator_list)
    if method and not static and names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names)


def many_parameters(root: Path, files: Iterable[Path]) -> list[tuple[str, int]]:
    """``("path:line name", count)`` of every function with MANY_PARAMS or more parameters."""
    found = []
    for path in files:
        for func, method in _functions(_parse(path)):
            n = parameter_count(func, method)
            if n >= MANY_PARAMS:
                found.append((f"{path.relative_to(root)}:{func.lineno} {func.name}", n))
    return found


def _is_own(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        if node.level:
            return True
        modules = [node.module or ""]
    else:
        modules = [alias.name for alias in node.names]
    return any(m.split(".")[0] in OWN for m in modules)


def inner_imports(root: Path, files: Iterable[Path]) -> list[str]:
    """``path:line`` of every import statement of our own modules inside a function body."""
    found: list[tuple[str, int]] = []
    for path in files:
        seen: set[int] = set()
        for func, _ in _functions(_parse(path)):
            for node in ast.walk(func):
                # ast.walk of an outer def also reaches its inner defs' imports: count each once.
                if isinstance(node, ast.Import | ast.ImportFrom) and _is_own(node) and id(node) not in seen:
                    seen.add(id(node))
                    found.append((str(path.relative_to(root)), node.lineno))
    return [f"{path}:{line}" for path, line in sorted(found)]


def _namespace_names(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names in a function that hold a parsed command line."""
    names = set()
    a = func.args
    for param in (*a.posonlyargs, *a.args, *a.kwonlyargs):
        if param.annotation is not None and ast.unparse(param.annotation).split(".")[-1].strip("'\"") == "Namespace":
            names.add(param.arg)
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            callee = node.value.func
            if isinstance(callee, ast.Attribute) and callee.attr in ("parse_args", "parse_known_args"):
                for target in node.targets:
                    first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
                    if isinstance(first, ast.Name):
                        names.add(first.id)
    return names


def _reads(func: ast.FunctionDef | ast.AsyncFunctionDef, names: set[str]) -> set[int]:
    lines = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
            lines.add(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "vars", "hasattr")
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in names
        ):
            lines.add(node.lineno)
    return lines


def plumbing(root: Path, files: Iterable[Path]) -> dict[str, tuple[int, int]]:
    """``{"path:line name": (lines reading the namespace, function lines)}`` of every function that reads one."""
    found = {}
    for path in files:
        counted: set[int] = set()
        for func, _ in _functions(_parse(path)):
            names = _namespace_names(func)
            # A line is counted once: an inner def's reads are already its outer function's.
            lines = (_reads(func, names) if names else set()) - counted
            counted |= lines
            if lines:
                length = (func.end_lineno or func.lineno) - func.lineno + 1
                found[f"{path.relative_to(root)}:{func.lineno} {func.name}"] = (len(lines), length)
    return found


def _walk_parsers(name: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _walk_parsers(f"{name} {sub_name}", sub)


def parser_options(parser: argparse.ArgumentParser) -> tuple[int, int, int]:
    """(options, of them hidden aliases, positionals) of one parser; -h and a subcommand dispatcher are neither."""
    options = aliases = positionals = 0
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if not action.option_strings:
            positionals += 1
            continue
        options += 1
        aliases += action.help == argparse.SUPPRESS
    return options, aliases, positionals


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _stage_parsers_of_old(cli) -> dict[str, argparse.ArgumentParser]:
    """A tree older than ``headless.cli.stage_parsers()``: its parsers found the way that function finds them."""
    import importlib

    from eval_bridge import cli as bridge

    bridge_stages = _subcommands(bridge.build_parser())
    parsers = {}
    for name, (module, lead, *_) in cli.DELEGATES.items():
        if lead:
            parsers[name] = bridge_stages[lead[0]]
        elif hasattr(importlib.import_module(module), "build_parser"):
            parsers[name] = importlib.import_module(module).build_parser()
    for axis in getattr(cli, "SCORE_AXES", ("dv", "ls", "overall")):
        parsers[f"score {axis}"] = bridge_stages[axis]
    top = _subcommands(cli.build_parser())
    if "demo" in top:
        parsers["demo"] = top["demo"]
    return parsers


def stage_options(root: Path) -> dict[str, tuple[int, int, int]]:
    """``{"run": (options, aliases, positionals), "score dv": ..., "human pack bvb": ...}`` of the tree's stage parsers."""
    sys.path.insert(0, str(root))
    from headless import cli

    counts = {}
    parsers = cli.stage_parsers() if hasattr(cli, "stage_parsers") else _stage_parsers_of_old(cli)
    for stage, parser in parsers.items():
        for name, each in _walk_parsers(stage, parser):
            counts[name] = parser_options(each)
    return counts


def collected_tests(root: Path) -> tuple[int, float]:
    """(tests ``pytest --collect-only -q`` reports, seconds it took)."""
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    match = re.search(r"(\d+) tests? collected", out.stdout) or re.search(r"^(\d+) tests?", out.stdout, re.M)
    if not match:
        raise SystemExit(f"error: pytest --collect-only printed no count (exit {out.returncode}): {out.stdout[-300:]}")
    return int(match.group(1)), round(time.monotonic() - started, 1)


WING = ("bvb_addon/agent/*.py", "bvb_addon/agent_session.py")
# Whole words only: "native" not "alternative", ".mini" (the harness flag) not ".mini_bvb".
HARNESS_NAMES = (r"mini-bvb", r"\bnative\b", r"\.mini\b", r"harness ==")


def wing_figures(root: Path) -> dict:
    """Issue 41's agent-wing figures: its lines and the runner's per-harness branch words."""
    files = sorted({p for pattern in WING for p in root.glob(pattern)})
    runner = root / "bvb_addon" / "agent" / "runner.py"
    text = runner.read_text(encoding="utf-8") if runner.is_file() else ""
    return {
        "wing_lines": sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files),
        "runner_harness_names": sum(len(re.findall(pattern, text)) for pattern in HARNESS_NAMES),
    }


HELP_COMMANDS = {
    "help_s": ["-P", "-m", "headless.cli", "--help"],
    "run_help_s": ["-P", "-m", "headless.cli", "run", "--help"],
    "dv_help_s": ["-P", "-m", "headless.cli", "score", "dv", "--help"],
    "python_pass_s": ["-c", "pass"],
}


def help_times(root: Path, repeats: int = 5) -> dict:
    """Median wall seconds of each HELP_COMMANDS run (in the tree, as ./bvb runs it)."""
    times = {}
    for key, args in HELP_COMMANDS.items():
        runs = []
        for _ in range(repeats):
            started = time.perf_counter()
            done = subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True)
            runs.append(time.perf_counter() - started)
            if done.returncode:
                raise SystemExit(
                    f"error: python {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-300:]}"
                )
        times[key] = round(statistics.median(runs), 3)
    return times


def print_help_times(times: dict) -> None:
    """The help times side by side with ``python -c pass`` and each one's ratio to it."""
    base = times["python_pass_s"]
    print(f"{'command':<40} {'median s':>9} {'x python -c pass':>17}")
    for key, args in HELP_COMMANDS.items():
        print(f"{'python ' + ' '.join(args):<40} {times[key]:>9.3f} {_ratio(times[key], base):>17}")
    print()


def static_figures(root: Path) -> dict:
    """Every figure that needs no stage to run."""
    files = code_files(root)
    stages = stage_options(root)
    params = many_parameters(root, files)
    inner = inner_imports(root, files)
    plumbed = plumbing(root, files)
    return {
        "options": sum(o for o, _, _ in stages.values()),
        "aliases": sum(a for _, a, _ in stages.values()),
        "positionals": sum(p for _, _, p in stages.values()),
        "parsers": len(stages),
        "options_per_parser": {name: o for name, (o, _, _) in stages.items()},
        "plumbing_lines": sum(n for n, _ in plumbed.values()),
        "plumbing_functions": len(plumbed),
        "plumbing_function_lines": sum(length for _, length in plumbed.values()),
        "plumbing_by_function": {name: n for name, (n, _) in sorted(plumbed.items(), key=lambda kv: -kv[1][0])},
        "params8": len(params),
        "params8_functions": dict(sorted(params, key=lambda kv: -kv[1])),
        "inner_imports": len(inner),
        "code_files": len(files),
        "code_lines": sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files),
        **wing_figures(root),
    }


def _stage_argv(suite: Path, run_dir: Path, out: Path) -> list[tuple[str, list[str]]]:
    """One scene's stages as ``bvb`` runs them: (module with main(argv), argv)."""
    split, videos = str(suite / "split.jsonl"), str(suite)
    return [
        ("headless.run", ["--split", split, "--videos", videos, "--output", str(run_dir), "--agent", "oracle", "--quiet"]),
        ("headless.render", ["--run", str(run_dir), "--preset", "fast", "--num-frames", "4", "--resolution", "64", "--quiet"]),
        ("eval_bridge.cli", ["dv", "--run", str(run_dir), "--split", split, "--videos", videos, "--judge", "geometry", "--quiet"]),
        ("eval_bridge.cli", ["leaderboard", str(run_dir), "--out", str(out / "leaderboard.csv"), "--quiet"]),
    ]  # fmt: skip


def scene_files(root: Path, work: Path) -> dict:
    """Code files (and their lines) whose functions ran while one scene went from ``bvb run`` to the leaderboard."""
    import importlib

    suite = work / "suite"
    if not (suite / "split.jsonl").is_file():
        # The suite is set-up, not the scene's path: made in its own process, untraced.
        synth = [sys.executable, "-m", "headless.synth", "--out", str(suite), "--scenes", "1", "--difficulty", "easy",
                 "--width", "64", "--height", "48", "--fps", "4", "--duration", "1", "--quiet"]  # fmt: skip
        done = subprocess.run(synth, cwd=root, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"error: headless.synth failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    ours = {str(p.resolve()) for p in code_files(root)}
    ran: set[str] = set()
    imported: set[str] = set()

    def profile(frame, event, _arg):
        if event == "call":
            # A module's body runs as a call of "<module>": imported, not yet crossed.
            (imported if frame.f_code.co_name == "<module>" else ran).add(frame.f_code.co_filename)

    started = time.monotonic()
    scene = Path(tempfile.mkdtemp(prefix="scene_", dir=work))
    for module, argv in _stage_argv(suite, scene / "run", scene):
        # Threads the stage starts (DV's judge pool, progress) are traced too.
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            code = importlib.import_module(module).main(argv)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        if code:
            raise SystemExit(f"error: {module} {' '.join(argv[:1])} failed with exit {code} (work folder {scene})")
    crossed = sorted(f for f in (str(Path(s).resolve()) for s in ran if s.endswith(".py")) if f in ours)
    loaded = sorted(f for f in (str(Path(s).resolve()) for s in ran | imported if s.endswith(".py")) if f in ours)
    return {
        "scene_files": len(crossed),
        "scene_lines": sum(len(Path(f).read_text(encoding="utf-8").splitlines()) for f in crossed),
        "scene_files_imported": len(loaded),
        "scene_seconds": round(time.monotonic() - started, 1),
        "scene_file_list": [str(Path(f).relative_to(root.resolve())) for f in crossed],
    }


SUMMARY = ("options", "parsers", "plumbing_lines", "params8", "inner_imports", "wing_lines", "runner_harness_names",
           "tests", "scene_files", "suite_minutes", *HELP_COMMANDS)  # fmt: skip


def _ratio(now: float, before: float) -> str:
    return f"{now / before:.2f}" if before else "-"


def print_figures(figures: dict, baseline: dict | None) -> None:
    """The per-parser table and the scalar figures, with the baseline's and after/before beside them."""
    base = baseline or {}
    before_parsers = base.get("options_per_parser", {})
    print(f"{'parser':<22} {'options':>7}" + (f" {'before':>7}" if baseline else ""))
    for name in sorted(set(figures["options_per_parser"]) | set(before_parsers)):
        now = figures["options_per_parser"].get(name, "-")
        print(f"{name:<22} {now!s:>7}" + (f" {before_parsers.get(name, '-')!s:>7}" if baseline else ""))
    print()
    print(f"{'figure':<24} {'now':>9}" + (f" {'before':>9} {'after/before':>12}" if baseline else ""))
    for key, value in figures.items():
        if isinstance(value, dict | list):
            continue
        line = f"{key:<24} {value!s:>9}"
        if baseline and key in base:
            line += f" {base[key]!s:>9} {_ratio(value, base[key]):>12}"
        print(line)
    print()
    print("plumbing (lines reading argparse's namespace), top functions:")
    for name, n in list(figures["plumbing_by_function"].items())[:8]:
        print(f"  {n:4d}  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO, help="the tree to measure (default: this checkout)")
    parser.add_argument("--tests", action="store_true", help="also count the tests (pytest --collect-only)")
    parser.add_argument("--trace", action="store_true", help="also trace one scene from run to the leaderboard")
    parser.add_argument("--keep", type=Path, help="with --trace: the work folder (its suite is reused next time)")
    parser.add_argument(
        "--suite-minutes", type=float, help="record the wall time of a .ci/run measured apart (35 to 48 min here)"
    )
    parser.add_argument(
        "--help-times", action="store_true", help="also time bvb --help, run --help, score dv --help and python -c pass"
    )
    parser.add_argument("--json", type=Path, help="save the figures to this file")
    parser.add_argument("--baseline", type=Path, help="a saved --json file: print after/before beside it")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    figures = static_figures(root)
    if args.tests:
        figures["tests"], figures["collect_seconds"] = collected_tests(root)
    if args.suite_minutes is not None:
        figures["suite_minutes"] = args.suite_minutes
    if args.trace:
        work = args.keep or Path(tempfile.mkdtemp(prefix="bvb_arch_trace_"))
        try:
            figures.update(scene_files(root, work))
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    if args.help_times:
        figures.update(help_times(root))
    print_figures(figures, baseline)
    if args.help_times:
        print_help_times(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    print(" ".join(f"{key}={figures[key]}" for key in SUMMARY if key in figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
