"""A stage's options as data: one frozen dataclass whose fields carry their default and a one-line description.

    @dataclass(frozen=True)
    class RenderOptions:
        run: Path = option(help="the run directory (results/<run>)")
        num_frames: int = option(64, "frames per clip", flag="--num-frames")

    add_options(parser, RenderOptions)                      # the command line, generated
    opts = from_namespace(RenderOptions, parser.parse_args())
    opts = from_mapping(RenderOptions, toml_table, "campaign.toml [render]")  # keys are field names
    to_mapping(opts)                                        # what a record or the service's JSON holds

A new option is one field. The flag is ``--`` plus the field's name with dashes unless ``flag`` says
otherwise (the names users know); ``old`` keeps a retired spelling working, hidden and warned
(``command_line.add_alias``). A field whose type is itself an options class (a judge, an encoder) is
flattened onto the command line and is a sub-table in a file.

Why our own builder over argparse and not a library (tyro, simple-parsing, pydantic-settings): those
spell flags their own way (``--judge.base-url``) and the flags users know (``--judge-base-url``,
``--protocol``) would each need an override or an alias; the house parser (``command_line.Parser``:
no prefix matching, did-you-mean, defaults in help) stays; and this module is stdlib only, so the
Blender extension imports it with nothing added to its zip. Stdlib only, bpy-free.
"""

import argparse
import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

from .command_line import add_alias
from .errors import ArgumentError, BVBError

T = TypeVar("T")
MISSING: Any = dataclasses.MISSING


def option(
    default: Any = MISSING,
    help: str = "",
    *,
    flag: str | None = None,
    short: str | None = None,
    old: tuple[str, ...] = (),
    metavar: str | None = None,
    positional: bool = False,
    nargs: str | None = None,
    parse: Callable[[str], Any] | None = None,
    cli: bool = True,
    record: bool = True,
    exclude: tuple[str, ...] = (),
    include: tuple[str, ...] = (),
    help_of: Mapping[str, str] | None = None,
    default_factory: Callable[[], Any] | None = None,
    cli_help_default: str | None = None,
    repeat: bool = False,
    group: str | None = None,
) -> Any:
    """A field of an options class: its default and one-line ``help``.

    ``flag``: the command-line name (default ``--field-name``); ``short``: a one-letter flag beside it;
    ``old``: retired names that still work (hidden, with a warning); ``positional``: an argument
    without a flag; ``nargs``: ``"+"``/``"*"``/``"?"`` for tuples and positionals; ``parse``: how a
    command-line word becomes the value (``"i/N"`` -> ``(i, N)``), a file's value is checked by type
    only; ``repeat``: a tuple field given by repeating its flag (``--root a --root b``; the help says the
    default); ``cli=False``: not on the command line (a value only code passes, like a campaign's
    budget); ``record=False``: never written to a record or returned as JSON (a budget holder, a
    callback); ``exclude``: for an options-class field, its fields left off this stage's command line;
    ``include``: for an options-class field, its ``cli=False`` fields this stage does put on its command line
    (``bvb render --timeout`` is the sandbox's render_timeout_s, ``bvb exec --timeout`` its step_timeout_s);
    ``help_of``: for an options-class field, {its field: the help this stage's command line gives it} where this
    stage means something of its own (VGI's judge cache defaults to its output folder, not DV's shared folder);
    ``group``: the title of the help section the flag is listed under (an options-class field's group is
    its fields' unless they name their own).
    """
    metadata = {
        "help": help,
        "flag": flag,
        "short": short,
        "old": old,
        "metavar": metavar,
        "positional": positional,
        "nargs": nargs,
        "parse": parse,
        "cli": cli,
        "record": record,
        "exclude": exclude,
        "include": include,
        "help_of": dict(help_of or {}),
        "cli_help_default": cli_help_default,
        "repeat": repeat,
        "group": group,
    }
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


# ---- field types -------------------------------------------------------------------------------


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (tp, False)."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(args) < len(typing.get_args(tp)):
            return args[0], True
    return tp, False


def is_options(tp: Any) -> bool:
    """Whether ``tp`` is an options class (a dataclass) to flatten or read as a sub-table."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _item_type(tp: Any) -> Any | None:
    """``tuple[X, ...]`` -> X; anything else -> None."""
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return args[0]
    return None


def _table_type(tp: Any) -> Any | None:
    """``dict[str, X]`` (a file's table of named entries, like a service's judges) -> X; anything else -> None."""
    if typing.get_origin(tp) is dict:
        args = typing.get_args(tp)
        if len(args) == 2 and args[0] is str:
            return args[1]
    return None


def _choices(tp: Any) -> tuple[Any, ...] | None:
    return typing.get_args(tp) if typing.get_origin(tp) is Literal else None


def _type_name(tp: Any) -> str:
    base, optional = _unwrap_optional(tp)
    item = _item_type(base)
    if item is not None:
        name = f"list of {_type_name(item)}"
    elif _table_type(base) is not None:
        name = f"table of {_type_name(_table_type(base))}"
    elif _choices(base) is not None:
        name = " | ".join(repr(c) for c in _choices(base) or ())
    elif isinstance(base, type):
        name = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "Path": "path"}.get(
            base.__name__, base.__name__
        )
    else:
        name = str(base).replace("typing.", "")
    return f"{name} or none" if optional else name


def _default(f: "dataclasses.Field[Any]") -> Any:
    if f.default is not MISSING:
        return f.default
    factory: Any = f.default_factory
    if factory is not MISSING:
        return factory()
    return MISSING


def _fields(cls: type) -> Iterator[tuple["dataclasses.Field[Any]", Any]]:
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.init:
            yield f, hints[f.name]


# ---- the command line --------------------------------------------------------------------------


def flag_of(f: "dataclasses.Field[Any]") -> str:
    """The command-line name of field ``f``."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def _dest(prefix: str, name: str) -> str:
    return f"{prefix}{name}"


def _said(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` whose error keeps its own message on the command line: argparse replaces a ValueError's text
    with "invalid <function> value", dropping the fix our errors name."""

    def typed(text: str) -> Any:
        try:
            return parse(text)
        except BVBError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    typed.__name__ = getattr(parse, "__name__", "value")
    return typed


def _group(parser: Any, title: str | None) -> Any:
    """The argument group titled ``title`` of ``parser`` (made once); the parser itself without a title or
    when ``parser`` is already a group (argparse does not nest groups)."""
    if not title or not isinstance(parser, argparse.ArgumentParser):
        return parser
    for group in parser._action_groups:
        if group.title == title:
            return group
    return parser.add_argument_group(title)


def add_options(
    parser: argparse.ArgumentParser | Any,
    cls: type,
    *,
    exclude: tuple[str, ...] = (),
    include: tuple[str, ...] = (),
    group: str | None = None,
    given_only: bool = False,
    _prefix: str = "",
    _help_of: Mapping[str, str] | None = None,
) -> None:
    """Add one argument per field of ``cls`` (an options-class field: its fields, flattened).

    ``parser`` may be an argument group. Each argument's dest is the field's path (``judge__model``)
    so ``from_namespace`` reads it back whatever the flag is called. ``group``: the help section of
    fields that name none (a field's ``option(group=...)`` wins; sections are made on ``parser``).
    ``exclude``/``include``: fields of ``cls`` left off, and ``cli=False`` fields put on, this command line.
    ``given_only``: only the flags given land in the namespace (the help still says each default), so
    ``from_namespace(cls, args, base=...)`` lays the command line over a file's options.
    """
    for f, tp in _fields(cls):
        meta = f.metadata
        if f.name in exclude or not (meta.get("cli", True) or f.name in include):
            continue
        base, optional = _unwrap_optional(tp)
        dest = _dest(_prefix, f.name)
        title = meta.get("group") or group
        if is_options(base):
            add_options(
                parser, base, exclude=tuple(meta.get("exclude", ())), include=tuple(meta.get("include", ())),
                group=title, given_only=given_only, _prefix=dest + "__", _help_of=meta.get("help_of"),
            )  # fmt: skip
            continue
        target = _group(parser, title)
        default = _default(f)
        kwargs: dict[str, Any] = {"help": (_help_of or {}).get(f.name, meta.get("help", ""))}
        if meta.get("metavar"):
            kwargs["metavar"] = meta["metavar"]
        item = _item_type(base)
        value_type = item if item is not None else base
        choices = _choices(value_type)
        if base is bool:
            kwargs["action"] = argparse.BooleanOptionalAction if default is True else "store_true"
        else:
            if meta.get("parse"):
                kwargs["type"] = _said(meta["parse"])
            elif choices is None and value_type in (int, float, Path):
                kwargs["type"] = value_type
            if choices is not None:
                kwargs["choices"] = choices
            elif not meta.get("positional"):
                # The field's name, not its dest: a sub-option's flag reads --model MODEL, not AGENT__MODEL.
                kwargs.setdefault("metavar", f.name.upper())
            if meta.get("repeat"):
                kwargs["action"] = "append"  # into a list argparse makes; from_namespace keeps the default
            elif item is not None or meta.get("nargs"):
                kwargs["nargs"] = meta.get("nargs") or "+"
        shown = meta.get("cli_help_default")
        if shown is not None:
            kwargs["help"] = f"{kwargs['help']} (default: {shown})"
        if meta.get("positional"):
            if default is not MISSING:
                kwargs.setdefault("nargs", "?")
                kwargs["default"] = default
            kwargs.setdefault("metavar", f.name.upper())
            target.add_argument(dest, **kwargs)
            continue
        flags = [flag_of(f)] + ([meta["short"]] if meta.get("short") else [])
        if default is MISSING:
            kwargs["required"] = True
        else:
            # append extends a default it is given: a repeated option's list starts empty.
            kwargs["default"] = None if meta.get("repeat") else default
        if given_only:
            if default is not MISSING and "default" not in kwargs["help"] and "required" not in kwargs["help"]:
                shown = "none" if default in (None, ()) else str(_plain(default))
                kwargs["help"] = f"{kwargs['help']} (default: {shown})"
            kwargs["default"] = argparse.SUPPRESS
        target.add_argument(*flags, dest=dest, **kwargs)
        same: dict[str, Any] = {k: kwargs[k] for k in ("type", "nargs", "choices") if k in kwargs}
        if base is bool:
            same = {"nargs": 0, "const": default is not True}
        for old in meta.get("old", ()):
            add_alias(target, old, flags[0], dest, **same)


def from_namespace(
    cls: type[T], namespace: argparse.Namespace, *, base: Any = None, _prefix: str = "", **given: Any
) -> T:
    """The options ``add_options`` parsed; ``given`` sets fields the command line does not carry.

    ``base``: options (a file's) whose values stand where the namespace has none (``add_options(given_only=True)``
    leaves out every flag not given); an optional options-class field none of whose flags was given keeps
    ``base``'s value (or its default).
    """
    values: dict[str, Any] = {}
    for f, tp in _fields(cls):
        if f.name in given:
            values[f.name] = given[f.name]
            continue
        sub_type, optional = _unwrap_optional(tp)
        dest = _dest(_prefix, f.name)
        under = getattr(base, f.name) if base is not None else None
        if is_options(sub_type) and f.metadata.get("cli", True):
            if optional and not any(name.startswith(dest + "__") for name in vars(namespace)):
                if base is not None:
                    values[f.name] = under
                continue
            values[f.name] = from_namespace(sub_type, namespace, base=under, _prefix=dest + "__")
        elif not hasattr(namespace, dest):
            if base is not None:
                values[f.name] = under
        else:
            value = getattr(namespace, dest)
            if value is None and f.metadata.get("repeat"):
                if base is not None:
                    values[f.name] = under
                continue  # never given: the field's default
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)


# ---- files (campaign TOML, the service's config) and JSON ---------------------------------------


def _bad(where: str, key: str, value: Any, tp: Any) -> ArgumentError:
    return ArgumentError(f"{where}: {key} = {value!r} is not a {_type_name(tp)}; fix the value")


def _coerce(value: Any, tp: Any, where: str, key: str, parse: Callable[[str], Any] | None = None) -> Any:
    base, optional = _unwrap_optional(tp)
    if value is None:
        if optional:
            return None
        raise _bad(where, key, value, tp)
    if parse is not None and isinstance(value, str) and base is not str and _item_type(base) is None:
        # A file may spell a value as the command line does ("a=videos/a", "4G", "1/4"): the field's own parser
        # reads it, so both places accept the same words.
        try:
            return parse(value)
        except (BVBError, ValueError, argparse.ArgumentTypeError) as exc:
            raise ArgumentError(f"{where}: {key} = {value!r}: {exc}") from None
    if is_options(base):
        if not isinstance(value, Mapping):
            raise ArgumentError(f"{where}: {key} must be a table of {base.__name__}'s fields; fix the value")
        return from_mapping(base, value, f"{where} {key}")
    item = _item_type(base)
    if item is not None:
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise _bad(where, key, value, tp)
        return tuple(_coerce(v, item, where, key, parse) for v in value)
    if typing.get_origin(base) is tuple:  # a fixed pair such as a shard (i, N): one value per place
        places = typing.get_args(base)
        if isinstance(value, str) or not isinstance(value, list | tuple) or len(value) != len(places):
            raise ArgumentError(f"{where}: {key} = {value!r}: give {len(places)} values, e.g. [1, 4]")
        return tuple(_coerce(v, t, where, key) for v, t in zip(value, places, strict=True))
    entry = _table_type(base)
    if entry is not None:
        if not isinstance(value, Mapping):
            raise _bad(where, key, value, tp)
        return {str(name): _coerce(v, entry, where, f"{key}.{name}") for name, v in value.items()}
    choices = _choices(base)
    if choices is not None:
        if value not in choices:
            close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ArgumentError(f"{where}: {key} = {value!r}{hint}: choose from {', '.join(repr(c) for c in choices)}")
        return value
    if base is bool:
        if not isinstance(value, bool):
            raise _bad(where, key, value, tp)
        return value
    if base is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _bad(where, key, value, tp)
        return float(value)
    if base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(where, key, value, tp)
        return value
    if base is Path:
        if not isinstance(value, str | Path):
            raise _bad(where, key, value, tp)
        return Path(value)
    if base is str:
        if not isinstance(value, str):
            raise _bad(where, key, value, tp)
        return value
    return value  # a type this module does not check (a tuple of pairs, a callable): the class's own check


def _leaves(cls: type, path: tuple[str, ...] = ()) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(field name, path of the options-class fields holding it) of every field of ``cls``'s sub-options."""
    for f, tp in _fields(cls):
        base, _ = _unwrap_optional(tp)
        if is_options(base) and f.metadata.get("record", True):
            for sub, _tp in _fields(base):
                if sub.metadata.get("record", True):
                    yield sub.name, (*path, f.name)
            yield from _leaves(base, (*path, f.name))


def nest(cls: type, data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A flat table as ``from_mapping`` reads it: a key that is no field of ``cls`` but the field of exactly one
    of its sub-options (``model`` for ``agent.model``) goes into that sub-table; a name two sub-options share is
    an error naming both (give it in its sub-table), and so is a field given both flat and in its sub-table.
    ``data`` is not changed."""
    own = {f.name for f, _ in _fields(cls)}
    homes: dict[str, list[tuple[str, ...]]] = {}
    for name, path in _leaves(cls):
        homes.setdefault(name, []).append(path)
    # The table's own keys first (sub-tables copied), so a flat key lands in its sub-table whatever the order,
    # and neither overwrites the other.
    out: dict[str, Any] = {key: _copied(value) for key, value in data.items() if key in own or not homes.get(key)}
    for key, value in data.items():
        paths = homes.get(key, [])
        if key in own or not paths:
            continue
        if len(paths) > 1:
            tables = " or ".join(f"[{'.'.join(p)}]" for p in paths)
            raise ArgumentError(f"{where}: {key} is a field of {tables}; give it in that sub-table")
        table = out
        for part in paths[0]:
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise ArgumentError(f"{where}: {part} must be a table; fix the value")
        if key in table:
            sub = ".".join(paths[0])
            raise ArgumentError(f"{where}: {key} is given twice, flat and in [{sub}]; keep one")
        table[key] = value
    return out


def _copied(value: Any) -> Any:
    """A table's sub-tables copied (``nest`` fills them; the caller's data stays as it was)."""
    return {k: _copied(v) for k, v in value.items()} if isinstance(value, Mapping) else value


def from_mapping(cls: type[T], data: Mapping[str, Any], where: str, *, flat: bool = False, **given: Any) -> T:
    """Options from a file's table: keys are field names, checked by type; an unknown key is an error.

    ``where`` names the table in messages (``campaign.toml [configs.gpt]``); ``flat``: sub-options' fields may
    be given at the top level too (``nest``).
    """
    if flat:
        data = nest(cls, data, where)
    known = {f.name: (f, tp) for f, tp in _fields(cls) if f.metadata.get("record", True)}
    values: dict[str, Any] = dict(given)
    for key, value in data.items():
        if key not in known:
            # A flat table also takes its sub-options' fields (cost_limit, model, base_url in a campaign's [run]).
            accepted = sorted({*known, *(name for name, _path in _leaves(cls))} if flat else known)
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"the keys are: {', '.join(accepted)}"
            raise ArgumentError(f"{where}: unknown key {key!r}; {hint}")
        field, tp = known[key]
        values[key] = _coerce(value, tp, where, key, field.metadata.get("parse"))
    missing = [f.name for f, _ in known.values() if f.name not in values and _default(f) is MISSING]
    if missing:
        raise ArgumentError(f"{where}: {', '.join(missing)} missing; add {' and '.join(missing)} = ...")
    return cls(**values)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_mapping(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def to_mapping(options: Any) -> dict[str, Any]:
    """The options (or a result) as JSON-able data: paths as strings, tuples as lists, sub-options as tables.

    Fields marked ``record=False`` are left out; ``from_mapping`` reads the rest back.
    """
    return {
        f.name: _plain(getattr(options, f.name)) for f in dataclasses.fields(options) if f.metadata.get("record", True)
    }


# ---- docs ---------------------------------------------------------------------------------------


def describe(
    cls: type, *, _prefix: str = "", _exclude: tuple[str, ...] = (), _include: tuple[str, ...] = ()
) -> list[tuple[str, str, str, str, str]]:
    """(key, flag, type, default, description) per field, sub-options as ``judge.model``; docs are made of these.

    A field this stage's command line leaves out (``cli=False``, or its options-class field's ``exclude``) has no
    flag: it is set in a file only.
    """
    rows: list[tuple[str, str, str, str, str]] = []
    for f, tp in _fields(cls):
        if not f.metadata.get("record", True):
            continue
        base, _ = _unwrap_optional(tp)
        key = f"{_prefix}{f.name}"
        on_cli = f.name not in _exclude and (f.metadata.get("cli", True) or f.name in _include)
        if is_options(base):
            rows.extend(
                describe(
                    base, _prefix=key + ".", _include=tuple(f.metadata.get("include", ())),
                    _exclude=tuple(f.metadata.get("exclude", ())) if on_cli else tuple(g.name for g, _ in _fields(base)),
                )
            )  # fmt: skip
            continue
        default = _default(f)
        shown = "required" if default is MISSING else repr(_plain(default))
        if f.metadata.get("positional"):
            flag = f.name.upper()
        else:
            flag = flag_of(f) if on_cli else ""
        rows.append((key, flag, _type_name(tp), shown, f.metadata.get("help", "")))
    return rows


def markdown_table(cls: type) -> str:
    """The options of ``cls`` as a Markdown table (docs/contracts.md is checked against these)."""
    lines = ["| key | flag | type | default | description |", "|---|---|---|---|---|"]
    for key, flag, type_name, default, text in describe(cls):
        cells = [f"`{key}`", f"`{flag}`" if flag else "", type_name, f"`{default}`", text]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
