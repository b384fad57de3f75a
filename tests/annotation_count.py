"""Annotated public functions of the bpy-free core (bvb_addon outside *_bl.py, eval_bridge, headless), by module.

A public function (no leading underscore, module level or in a public class; ``__init__`` counts) is
annotated when every parameter but self/cls has an annotation and it has a return annotation
(``__init__`` needs none). python tests/annotation_count.py [--modules] prints the share.
"""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bvb_addon", "eval_bridge", "headless")


def core_modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not path.name.endswith("_bl.py"):
                yield path


def _public_functions(tree):
    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if not child.name.startswith("_") or child.name == "__init__":
                    yield child
            elif isinstance(child, ast.ClassDef) and not child.name.startswith("_"):
                yield from walk(child)

    yield from walk(tree)


def annotated(function):
    args = function.args
    params = [a for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg not in ("self", "cls")]
    params += [a for a in (args.vararg, args.kwarg) if a is not None]
    return all(p.annotation is not None for p in params) and (
        function.returns is not None or function.name == "__init__"
    )


def count(path):
    """(public functions, annotated ones) of one module."""
    functions = list(_public_functions(ast.parse(Path(path).read_text(), str(path))))
    return len(functions), sum(1 for f in functions if annotated(f))


def counts():
    return {path.relative_to(ROOT).as_posix(): count(path) for path in core_modules()}


def main(argv):
    per = counts()
    total, done = sum(n for n, _ in per.values()), sum(a for _, a in per.values())
    if "--modules" in argv:
        for module, (n, a) in per.items():
            if n:
                print(f"{module:50s} {a:4d}/{n:<4d}")
    full = sum(1 for n, a in per.values() if n and a == n)
    print(f"annotated public functions: {done}/{total} ({100 * done / max(total, 1):.1f}%); "
          f"fully annotated modules: {full}/{sum(1 for n, _ in per.values() if n)}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
