"""The blocks of docs/*.md that restate the code are written from it, so a field added without its doc fails a test.

A block is a marker naming where it comes from, the body this tool writes, and an end marker:

    <!-- generated: python -m tools.docs; from bvb_addon.records.agent_meta:AgentMeta -->
    ...
    <!-- /generated -->

What a name becomes:
- an options class (a dataclass whose fields carry ``bvb_addon.options.option`` metadata):
  ``options.markdown_table`` (key, flag, type, default, description);
- any other dataclass (a record of a run file, a result, a config): a table of field, type, default and the
  field's description (its ``help``, else the docstring under it, else the comment ending its line). For a record of a JSON file
  (``bvb_addon.records.fields.Record``) the types are JSON's and ``extra`` (the keys it keeps) is left out;
- a function, a class, a protocol or a constant: its signature as the source spells it, with the first sentence
  of its docstring, in one ``python`` fence (a class: its constructor, public methods and properties).

Several names, comma-separated after one module, make one block (``from bvb_addon.video:probe,sample_frames``).
Adding a block is its marker line, then running the tool: a marker with no end line before the next marker
(or the end of the file) is a new block, and the tool writes its body and its end line.

    python -m tools.docs            # rewrite every block of docs/*.md (atomically; an unchanged file is not written)
    python -m tools.docs --check    # exit 1 naming each stale block and the command to run (tests/test_contracts_doc.py)
    python -m tools.docs --stats    # blocks, their lines, and the fenced lines still written by hand
"""

import argparse
import ast
import dataclasses
import importlib
import inspect
import io
import json
import re
import sys
import textwrap
import tokenize
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bvb_addon import outcomes
from bvb_addon.atomic import write_text_atomic
from bvb_addon.command_line import Parser
from bvb_addon.errors import ArgumentError, entry
from bvb_addon.options import markdown_table
from bvb_addon.records.fields import Record

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / "docs"
COMMAND = "python -m tools.docs"
START = re.compile(r"^<!-- generated: python -m tools\.docs; from (?P<spec>\S+) -->$")
END = "<!-- /generated -->"
WIDTH = 110
"""A signature line with its comment longer than this puts the comment on the next line."""


@dataclass(frozen=True)
class Block:
    """One generated block of a Markdown file: its spec and the lines its body spans (0-based, end exclusive)."""

    path: Path
    spec: str
    marker_line: int
    body_start: int
    body_end: int
    new: bool = False
    """A marker without its end line yet: the tool writes the body and the end line after it."""

    def where(self) -> str:
        return f"{_shown_path(self.path)}:{self.marker_line + 1}"


def _shown_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def find_blocks(path: Path, lines: list[str]) -> list[Block]:
    """The generated blocks of a file's lines; a marker without an end line before the next marker is a new block."""
    blocks = []
    number = 0
    while number < len(lines):
        match = START.match(lines[number].strip())
        if match:
            end = next((n for n in range(number + 1, len(lines)) if lines[n].strip() == END), None)
            nested = next((n for n in range(number + 1, end or len(lines)) if START.match(lines[n].strip())), None)
            if end is None or nested is not None:
                blocks.append(Block(path, match["spec"], number, number + 1, number + 1, new=True))
            else:
                blocks.append(Block(path, match["spec"], number, number + 1, end))
                number = end
        number += 1
    return blocks


# ---- what a spec names ---------------------------------------------------------------------------


def resolve(spec: str, where: str) -> list[tuple[str, Any]]:
    """``module:Name,Other`` -> [(name, object)]; an ArgumentError naming the marker when one is not there."""
    module_name, _, names = spec.partition(":")
    if not module_name or not names:
        raise ArgumentError(f"{where}: {spec!r} is not MODULE:NAME[,NAME...]; fix the marker")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ArgumentError(f"{where}: no module {module_name!r} ({exc}); fix the marker") from None
    found = []
    for name in names.split(","):
        if not hasattr(module, name):
            raise ArgumentError(f"{where}: {module_name} has no {name!r}; fix the marker")
        found.append((name, getattr(module, name)))
    return found


def render(spec: str, where: str = "") -> str:
    """The body of the block ``spec`` names (no trailing newline)."""
    parts: list[str] = []
    signatures: list[str] = []

    def flush() -> None:
        if signatures:
            parts.append("\n".join(["```python", *signatures, "```"]))
            signatures.clear()

    items = resolve(spec, where or spec)
    for name, obj in items:
        if isinstance(obj, type) and dataclasses.is_dataclass(obj):
            flush()
            title = f"`{obj.__name__}`:\n\n" if len(items) > 1 else ""
            parts.append(title + (markdown_table(obj) if is_options_class(obj) else field_table(obj)))
        else:
            signatures.extend(interface(name, obj, spec.partition(":")[0], where or spec))
    flush()
    return "\n\n".join(parts)


def is_options_class(cls: type) -> bool:
    """Whether a dataclass is an options class: its fields were declared with ``option(...)``."""
    return any("help" in f.metadata for f in dataclasses.fields(cls))


# ---- a dataclass's fields ------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(inspect.cleandoc(text).split())


def _class_node(obj: Any) -> ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | None:
    try:
        source = textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        return None
    node = ast.parse(source).body[0]
    return node if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) else None


def _comments(source: str) -> dict[int, str]:
    """The ``# comment`` ending each line of ``source`` (1-based line numbers), found by the tokenizer."""
    found: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string.lstrip("#").strip()
    return found


def field_docs(cls: type) -> dict[str, str]:
    """Each field's description: the string under it in the class body (the house way), else the comment ending
    its line; bases first."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        node = ast.parse(source).body[0]
        if not isinstance(node, ast.ClassDef):
            continue
        comments = _comments(source)
        body = node.body
        for statement, following in zip(body, body[1:] + [None], strict=True):
            if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
                continue
            if (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[statement.target.id] = _one_line(following.value.value)
            elif (statement.end_lineno or statement.lineno) in comments:
                docs[statement.target.id] = comments[statement.end_lineno or statement.lineno]
    return docs


_JSON_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "list",
               type(None): "null"}  # fmt: skip


def json_type(tp: Any) -> str:
    """A record field's annotation in JSON's words: ``str | None`` -> ``string or null``."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        names = [json_type(arm) for arm in typing.get_args(tp)]
        return ", ".join(names[:-1]) + " or " + names[-1]
    origin = typing.get_origin(tp)
    if origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        return f"list of {item.__name__}" if isinstance(item, type) and item not in _JSON_NAMES else "list"
    if origin is dict:
        return "object"
    return _JSON_NAMES.get(tp, getattr(tp, "__name__", str(tp)))


def _source_annotation(cls: type, name: str) -> str | None:
    """The annotation of field ``name`` as the source spells it (``Path | None``, not ``pathlib.Path | None``)."""
    for klass in cls.__mro__:
        node = _class_node(klass) if dataclasses.is_dataclass(klass) else None
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                if isinstance(statement, ast.AnnAssign) and getattr(statement.target, "id", None) == name:
                    return _annotation(statement.annotation)
    return None


def _annotation(node: ast.expr) -> str:
    """An annotation as the source spells it, a string one (a forward reference) without its quotes."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node)


def _size(value: int) -> str:
    """``8 GiB`` for a byte count that is a whole number of MiB or GiB, else ''."""
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if value >= 1 << shift and value % (1 << shift) == 0:
            return f" ({value >> shift} {unit})"
    return ""


def _default(f: "dataclasses.Field[Any]", as_json: bool, optional: frozenset[str]) -> str:
    if f.name in optional:
        return "absent"
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        if getattr(f.default_factory, "__name__", "") == "<lambda>":
            return "computed"  # a default that depends on the machine (CPU count ...): the description says how
        value = f.default_factory()
    else:
        return "required"
    if as_json:
        return f"`{json.dumps(value)}`"
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and _is_plain(value):
        return f"`{type(value).__name__}()`"  # its own table gives the fields' defaults
    if isinstance(value, set | frozenset):
        return f"`{type(value).__name__}({sorted(value)!r})`"  # a set's repr order follows the hash seed
    shown = f"`{value!r}`"
    if isinstance(value, int) and not isinstance(value, bool):
        shown += _size(value)
    return shown


def _is_plain(value: Any) -> bool:
    """Whether a dataclass instance is its class's defaults."""
    try:
        return bool(value == type(value)())
    except TypeError:
        return False


def field_table(cls: type) -> str:
    """A dataclass's fields as a Markdown table: field, type, default, description."""
    record = issubclass(cls, Record)
    hints = typing.get_type_hints(cls) if record else {}  # a config's hints may name classes imported for typing only
    docs = field_docs(cls)
    optional: frozenset[str] = getattr(cls, "OPTIONAL", frozenset()) if record else frozenset()
    lines = ["| field | type | default | description |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        if record and f.name == "extra":
            continue  # the keys a record keeps unknown, not a key of the file
        kind = json_type(hints[f.name]) if record else (_source_annotation(cls, f.name) or str(f.type))
        text = f.metadata.get("help") or docs.get(f.name, "")
        cells = [f"`{f.name}`", kind, _default(f, record, optional), text]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


# ---- signatures -----------------------------------------------------------------------------------


def _first_sentence(doc: str | None) -> str:
    if not doc:
        return ""
    paragraph = _one_line(doc.split("\n\n", 1)[0])
    # A sentence ends at a full stop before a capital or the end (not "e.g. the" or "2.0 s").
    match = re.match(r"(.+?(?<!e\.g)(?<!i\.e)\.)(?=\s+[A-Z`(\"]|$)", paragraph)
    return match.group(1) if match else paragraph


def _parameters(args: ast.arguments, drop_first: bool) -> str:
    """A def's parameters as written (``a: int = 1, *, b=None``), ``self``/``cls`` left out for methods."""
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    if drop_first and positional:
        positional, defaults = positional[1:], defaults[1:]

    def one(arg: ast.arg, default: ast.expr | None) -> str:
        text = arg.arg + (f": {_annotation(arg.annotation)}" if arg.annotation else "")
        if default is not None:
            text += (" = " if arg.annotation else "=") + ast.unparse(default)
        return text

    shown = [one(a, d) for a, d in zip(positional, defaults, strict=True)]
    if args.vararg:
        shown.append("*" + one(args.vararg, None))
    elif args.kwonlyargs:
        shown.append("*")
    shown.extend(one(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True))
    if args.kwarg:
        shown.append("**" + one(args.kwarg, None))
    return ", ".join(shown)


def _line(text: str, doc: str, indent: str = "") -> list[str]:
    if not doc:
        return [indent + text]
    if len(indent + text) + len(doc) + 5 <= WIDTH:
        return [f"{indent}{text}   # {doc}"]
    return [indent + text, f"{indent}    # {doc}"]


def _def(node: ast.FunctionDef | ast.AsyncFunctionDef, name: str, method: bool) -> str:
    returns = f" -> {_annotation(node.returns)}" if node.returns else ""
    prefix = "async " if isinstance(node, ast.AsyncFunctionDef) else ""
    return f"{prefix}{name}({_parameters(node.args, method)}){returns}"


def _decorators(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    return {ast.unparse(d) for d in node.decorator_list}


def _members(node: ast.ClassDef, cls: type) -> Iterator[tuple[str, str]]:
    """A class's public surface in source order: (text, doc) per constructor, method, property and attribute."""
    body = node.body
    for statement, following in zip(body, body[1:] + [None], strict=True):
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            decorators = _decorators(statement)
            doc = _first_sentence(ast.get_docstring(statement))
            if statement.name == "__init__":
                yield f"{cls.__name__}({_parameters(statement.args, True)})", doc
            elif statement.name.startswith("_") or "overload" in decorators or "typing.overload" in decorators:
                continue
            elif "property" in decorators or "functools.cached_property" in decorators:
                returns = f" -> {_annotation(statement.returns)}" if statement.returns else ""
                yield f"{statement.name}{returns}", doc
            else:
                static = "staticmethod" in decorators
                text = _def(statement, statement.name, method=not static)
                yield (f"{text}   (classmethod)" if "classmethod" in decorators else text), doc
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            name = statement.target.id
            if name.startswith("_") or "ClassVar" in ast.unparse(statement.annotation):
                continue
            doc = ""
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                doc = _first_sentence(str(following.value.value))
            yield f"{name}: {_annotation(statement.annotation)}", doc


def _constant(name: str, obj: Any, module: str, where: str) -> list[str]:
    """``NAME = value  # doc`` for a module constant, the value as the source spells it (when short)."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module)))
    body = tree.body
    for statement, following in zip(body, body[1:] + [None], strict=True):
        if not isinstance(statement, ast.Assign | ast.AnnAssign):
            continue
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            value = ast.unparse(statement.value) if statement.value is not None else ""
            doc = ""
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                doc = _first_sentence(str(following.value.value))
            text = f"{name} = {value}" if value and len(value) <= 60 else f"{name}: {type(obj).__name__}"
            return _line(text, doc)
    raise ArgumentError(f"{where}: {name} is not a function, class or constant assigned in {module}; fix the marker")


def interface(name: str, obj: Any, module: str, where: str) -> list[str]:
    """The signature lines of a function, a class (constructor, methods, properties) or a constant."""
    if inspect.isfunction(obj):
        node = _class_node(inspect.unwrap(obj))
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            raise ArgumentError(f"{where}: no source for {name}; fix the marker")
        return _line(_def(node, name, method=False), _first_sentence(inspect.getdoc(obj)))
    if isinstance(obj, type):
        node = _class_node(obj)
        if not isinstance(node, ast.ClassDef):
            raise ArgumentError(f"{where}: no source for class {name}; fix the marker")
        bases = ", ".join(ast.unparse(b) for b in node.bases)
        lines = _line(f"class {name}" + (f"({bases})" if bases else ""), _first_sentence(obj.__doc__))
        for text, doc in _members(node, obj):
            lines.extend(_line(text, doc, "    "))
        return lines
    return _constant(name, obj, module, where)


# ---- files ------------------------------------------------------------------------------------------


def refreshed(path: Path) -> tuple[str, list[Block]]:
    """A Markdown file's text with every generated block written from the code, and the blocks that changed."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    stale = []
    out: list[str] = []
    done = 0
    for block in find_blocks(path, lines):
        # A blank line each side: a table or fence next to the markers' HTML comments renders as itself.
        body = ["", *render(block.spec, block.where()).split("\n"), ""]
        out.extend(lines[done : block.body_start])
        out.extend(body)
        if block.new:
            out.append(END)
        if block.new or lines[block.body_start : block.body_end] != body:
            stale.append(block)
        done = block.body_end
    out.extend(lines[done:])
    return "\n".join(out), stale


def hand_written_fenced_lines(text: str) -> int:
    """Lines inside ``` fences outside generated blocks: the issue's count of hand-written signatures (301)."""
    count, fenced, generated = 0, False, False
    for line in text.split("\n"):
        stripped = line.strip()
        if START.match(stripped):
            generated = True
        elif stripped == END:
            generated = False
        elif stripped.startswith("```"):
            fenced = not fenced
        elif fenced and not generated:
            count += 1
    return count


def markdown_files(paths: list[Path]) -> list[Path]:
    return paths or sorted(DOCS.glob("*.md"))


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=COMMAND,
        description="Write the generated blocks of docs/*.md from the code (records, options, signatures).",
        epilog=f"examples:\n  {COMMAND}\n  {COMMAND} --check",
    )
    parser.add_argument("files", nargs="*", type=Path, metavar="FILE", help="Markdown files (default: docs/*.md)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale block")
    action.add_argument(
        "--stats", action="store_true", help="print blocks, generated lines and hand-written fenced lines"
    )
    return parser


@entry
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stale_count = 0
    for path in markdown_files(args.files):
        if not path.is_file():
            raise ArgumentError(f"{path} is not a file; give a Markdown file")
        text, stale = refreshed(path)
        if args.stats:
            lines = text.split("\n")
            blocks = find_blocks(path, lines)
            generated = sum(b.body_end - b.body_start for b in blocks)
            print(f"{_shown_path(path)}: {len(lines)} lines, {len(blocks)} generated blocks ({generated} lines), "
                  f"{hand_written_fenced_lines(text)} hand-written fenced lines")  # fmt: skip
        elif args.check:
            for block in stale:
                print(f"{block.where()}: the block from {block.spec} is stale; run: {COMMAND}")
            stale_count += len(stale)
        elif stale:
            write_text_atomic(path, text)
            print(f"{_shown_path(path)}: {len(stale)} block(s) rewritten")
    return outcomes.FAILED_EXIT if stale_count else outcomes.OK_EXIT


if __name__ == "__main__":
    sys.exit(main())
