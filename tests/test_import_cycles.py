"""No import cycles among the project's own modules (bvb_addon, eval_bridge, headless), lazy imports included."""

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bvb_addon", "eval_bridge", "headless")


def _modules():
    """{dotted module name: source path} for every module of the project's packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(name, modules):
    """The project module an imported name lands in (a.b.c may be the function c of module a.b), or None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module, path, modules):
    """Project modules that `module` imports anywhere in its source (top level and inside functions)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names] or [base]
        else:
            continue
        for name in names:
            target = _resolve(name, modules)
            # A package importing its own submodules (or a module its package) is not a cycle of ideas.
            if target and target != module and not module.startswith(target + "."):
                targets.add(target)
    return targets


def _cycles(graph):
    """Every strongly connected component of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle_and_ignores_a_chain():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycles_among_the_project_modules():
    modules = _modules()
    graph = {m: _imports(m, p, modules) for m, p in modules.items()}
    # The walk sees lazy imports too: run_dir imports records.run_config inside a function (a deferred cycle).
    assert "bvb_addon.records.run_config" in graph["bvb_addon.run_dir"] and "bvb_addon.backend" in graph["eval_bridge.scoring.dv"]
    cycles = _cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)
