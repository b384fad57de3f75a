"""The records' base: from a JSON object to a dataclass and back (known fields checked by kind, unknown keys
kept), a format version, and the one read and write of a record's file (bpy-free)."""

import dataclasses
import json
import logging
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ..atomic import write_json_atomic, write_text_atomic
from ..errors import BadFileError, NewerFormatError
from ..jsonfile import NOT_JSON, json_lines, read_json

log = logging.getLogger(__name__)

T = TypeVar("T")

_KINDS: dict[Any, tuple[type, ...]] = {
    str: (str,),
    int: (int,),
    float: (int, float),
    bool: (bool,),
    dict: (dict,),
    list: (list,),
}


_ALLOWED: dict[Any, tuple[type, ...] | None] = {}


def _allowed(annotation: Any) -> tuple[type, ...] | None:
    """The JSON kinds a field's annotation takes (None: any), worked out once per annotation."""
    if annotation not in _ALLOWED:
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
            arms = [_allowed(arm) for arm in typing.get_args(annotation)]
            kinds = None if any(arm is None for arm in arms) else tuple(kind for arm in arms for kind in arm or ())
        elif annotation is type(None):
            kinds = (type(None),)
        else:
            kinds = _KINDS.get(typing.get_origin(annotation) or annotation)
        _ALLOWED[annotation] = kinds
    return _ALLOWED[annotation]


def _accepts(annotation: Any, value: Any) -> bool:
    """Whether a JSON value fits a field's annotation (str, int, float, bool, dict, list, X | None)."""
    kinds = _allowed(annotation)
    if kinds is None:
        return True
    if isinstance(value, bool):
        return bool in kinds  # JSON true is not a count
    return isinstance(value, kinds)


_SHAPES: dict[type, tuple[dict[str, Any], tuple[dataclasses.Field, ...]]] = {}


def _shape(cls: type) -> tuple[dict[str, Any], tuple[dataclasses.Field, ...]]:
    """A record class's field annotations and fields, worked out once (rows are checked by the thousand)."""
    if cls not in _SHAPES:
        _SHAPES[cls] = (typing.get_type_hints(cls), dataclasses.fields(cls))
    return _SHAPES[cls]


def from_json(cls: type[T], data: Any, path: str | Path, what: str, fix: str = "fix or delete it") -> T:
    """``cls`` from a parsed JSON object; a BadFileError naming ``path`` (and ``fix``) when a field is missing or of
    another kind."""
    if not isinstance(data, dict):
        raise BadFileError(f"{what} {path} is not a JSON object; {fix}")
    hints, fields = _shape(cls)
    known = {}
    for f in fields:
        if f.name == "extra":
            continue
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise BadFileError(f"{what} {path} has no {f.name!r}; {fix}")
            continue
        if not _accepts(hints[f.name], data[f.name]):
            raise BadFileError(
                f"{what} {path}: {f.name!r} is {type(data[f.name]).__name__}, not {hints[f.name]}; {fix}"
            )
        known[f.name] = data[f.name]
    names = {f.name for f in fields}
    extra = {k: v for k, v in data.items() if k not in names}
    return cls(**known, extra=extra)  # type: ignore[call-arg]


def to_json(record: Any) -> dict:
    """The record as its JSON object: the fields in order (an optional one only when set), then the keys it kept."""
    out = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.name != "extra" and not (value is None and f.name in record.OPTIONAL):
            out[f.name] = value
    return {**out, **record.extra}


R = TypeVar("R", bound="Record")


class Record:
    """A record's behaviour; subclasses are dataclasses whose last fields are ``format`` and ``extra``."""

    FORMAT: ClassVar[int] = 1
    """The newest format this harness writes and reads; a file without ``format`` is format 1."""
    WHAT: ClassVar[str] = "file"
    """How messages name the record's file (its path says the rest)."""
    FIX: ClassVar[str] = "fix or delete it"
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()
    """Fields (default None) written only when set: keys that some files carry and others lack."""

    def as_dict(self) -> dict:
        """The record as its JSON object."""
        return to_json(self)

    @classmethod
    def from_dict(cls: type[R], data: object, path: str | Path = "") -> R:
        """The record of a parsed JSON object; a BadFileError naming ``path`` when it is not one."""
        record = from_json(cls, data, path, cls.WHAT, cls.FIX)
        cls.check_format({"format": getattr(record, "format", cls.FORMAT)}, path)
        return record

    @classmethod
    def check_format(cls, data: object, path: str | Path = "") -> None:
        """A NewerFormatError naming ``path`` when a parsed file is of a newer format than this harness's (a writer
        checks the file it would replace: a newer harness's file is refused, never rewritten)."""
        version = data.get("format", 1) if isinstance(data, dict) else 1
        if isinstance(version, int) and not isinstance(version, bool) and version > cls.FORMAT:
            raise NewerFormatError(
                f"{cls.WHAT} {path} is format {version}, newer than this harness's {cls.FORMAT}; update the harness"
            )


def read_record(cls: type[R], path: str | Path) -> R:
    """The record in a JSON file, or a BadFileError / MissingFileError naming the file."""
    return cls.from_dict(read_json(path, cls.WHAT, cls.FIX), path)


def write_record(path: str | Path, record: Record) -> dict:
    """Write the record atomically; returns the dict written."""
    data = record.as_dict()
    write_json_atomic(path, data)
    return data


def read_rows(cls: type[Record], path: str | Path, strict: bool = True) -> list[dict]:
    """The rows of a JSON-lines file, each checked against ``cls`` and with its defaults filled in.

    strict (a file written whole and atomically): a line that is not a row is a BadFileError naming the
    file and line. Not strict (a file appended to, where a killed writer leaves a fragment): such a line
    is skipped with a warning naming them. A missing file has no rows.
    """
    rows = []
    for number, data in json_lines(path):
        where = f"{path} line {number}"
        try:
            if data is NOT_JSON:
                raise BadFileError(f"{cls.WHAT} {where} is not JSON; {cls.FIX}")
            rows.append(cls.from_dict(data, where).as_dict())
        except BadFileError as exc:
            if strict:
                raise
            log.warning("%s; skipped", exc)
    return rows


def as_record(cls: type[R], row: Record | dict, what: str = "") -> R:
    """A row the harness built, as its record: a dict that is not one is a TypeError (a harness bug, exit 1)."""
    if isinstance(row, cls):
        return row
    try:
        return cls.from_dict(row.as_dict() if isinstance(row, Record) else row, what)
    except BadFileError as exc:
        raise TypeError(f"a {cls.__name__} the harness built does not fit its record: {exc}") from None


def rows_text(cls: type[Record], rows: Iterable[Record | dict], what: str = "") -> str:
    """JSON lines of rows, each checked against ``cls`` first."""
    return "".join(json.dumps(as_record(cls, row, what).as_dict()) + "\n" for row in rows)


def write_rows(cls: type[Record], path: str | Path, rows: Iterable[Record | dict]) -> Path:
    """Write a JSON-lines file of rows atomically, each checked against ``cls``."""
    return write_text_atomic(path, rows_text(cls, rows, str(path)))
