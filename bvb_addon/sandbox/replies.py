"""The worker's replies as data to validate (bpy-free): every field's type and range.

Agent code runs in the worker's own Python process, so it can patch whatever builds or sends
a reply: each field of it is model-controlled. The supervisor validates a reply against these
models before anything reads it; a reply that does not validate is the agent's doing
(``sandbox_error``, a failed step the agent sees), never the harness's.
"""

from typing import Annotated, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

# Blender's own bounds: frames within +-1048574, resolution 4..65536 px, names under 64 bytes.
Frame = Annotated[StrictInt, Field(ge=-1_048_574, le=1_048_574)]
Pixels = Annotated[StrictInt, Field(ge=1, le=65_536)]
Count = Annotated[StrictInt, Field(ge=0, le=1 << 40)]
Name = Annotated[StrictStr, Field(max_length=256)]
# A program can honestly move an object to inf or nan; the bounds then say so.
Coordinate = StrictFloat
NAMES_SHOWN = 20  # the worker lists at most this many names per kind of change
TEXT_FIELD = 1 << 24  # the worker caps its outputs far below; anything longer is forged


class _Reply(BaseModel):
    # Strict* types: "3" is not 3 and 1 is not True (a JSON list still makes a tuple);
    # unknown fields are refused, not carried along.
    model_config = ConfigDict(extra="forbid", frozen=True)


class Camera(_Reply):
    present: StrictBool
    name: Name | None = None
    animated: StrictBool = False


class Bounds(_Reply):
    min: tuple[Coordinate, Coordinate, Coordinate]
    max: tuple[Coordinate, Coordinate, Coordinate]


class Changes(_Reply):
    added: list[Name] = Field(default_factory=list, max_length=NAMES_SHOWN)
    removed: list[Name] = Field(default_factory=list, max_length=NAMES_SHOWN)
    modified: list[Name] = Field(default_factory=list, max_length=NAMES_SHOWN)
    counts: tuple[Count, Count, Count] = (0, 0, 0)

    @model_validator(mode="after")
    def _counts_cover_names(self):
        for kind, count in zip(("added", "removed", "modified"), self.counts, strict=True):
            if count < len(getattr(self, kind)):
                raise ValueError(f"changes.counts says {count} {kind} but names {len(getattr(self, kind))}")
        return self


class SceneSummary(_Reply):
    """What the worker's ``SceneHost.summary`` returns after every step."""

    scene: Name
    object_count: Count
    objects_by_type: dict[Annotated[StrictStr, Field(max_length=32)], Count] = Field(max_length=64)
    mesh_objects: Count
    meshes: Count
    materials: Count
    camera: Camera
    frame_range: tuple[Frame, Frame]
    fps: Annotated[StrictFloat, Field(gt=0, le=1e9, allow_inf_nan=False)]  # fps / fps_base, both bounded by Blender
    resolution: tuple[Pixels, Pixels]
    bounds: Bounds | None
    changes: Changes

    @field_validator("frame_range")
    @classmethod
    def _ordered(cls, value):
        if value[1] < value[0]:
            raise ValueError(f"frame_range ends ({value[1]}) before it starts ({value[0]})")
        return value


class SummaryError(_Reply):
    """The summary the worker sends when computing the real one failed (a program can break the scene)."""

    error: Annotated[StrictStr, Field(max_length=2000)]


Summary = SceneSummary | SummaryError
Text = Annotated[StrictStr, Field(max_length=TEXT_FIELD)]
Seconds = Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)]


class RunReply(_Reply):
    id: StrictInt
    status: Literal["ok", "error", "oom", "output_limit"]
    stdout: Text = ""
    stderr: Text = ""
    traceback: Text = ""
    reason: Text = ""
    duration_s: Seconds = 0.0
    summary: Summary | None = None
    snapshot_name: Annotated[StrictStr, Field(max_length=255)] | None = None

    @model_validator(mode="after")
    def _snapshot_when_ok(self):
        if self.status == "ok" and not self.snapshot_name:
            raise ValueError("an ok step names no snapshot")
        return self


class LoadReply(_Reply):
    id: StrictInt
    status: Literal["ok", "error", "oom"]
    reason: Text = ""
    traceback: Text = ""
    duration_s: Seconds = 0.0
    summary: Summary | None = None


class RenderReply(_Reply):
    id: StrictInt
    status: Literal["ok", "error", "oom"]
    reason: Text = ""
    traceback: Text = ""
    duration_s: Seconds = 0.0
    files: list[Annotated[StrictStr, Field(max_length=255)]] = Field(default_factory=list, max_length=100_000)
    renderer: Annotated[StrictStr, Field(max_length=1000)] = ""
    software_gl: StrictBool = False
    fps: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None  # the bvb preset's whole frame rate
    engine: Name = ""  # the engine id the bvb preset rendered with


M = TypeVar("M", bound=BaseModel)


class ReplyInvalid(ValueError):
    """A worker reply that does not validate; the message names the first bad field."""


def validate(model: type[M], reply: object) -> M:
    """``reply`` (a decoded JSON value) as ``model``, or ReplyInvalid naming the first bad field."""
    try:
        return model.model_validate(reply)
    except ValidationError as exc:
        raise ReplyInvalid(first_error(exc)) from None


def first_error(exc: ValidationError) -> str:
    """One line: where the first error is and what is wrong there (never the bad value itself: it is the agent's)."""
    error = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in error["loc"]) or "the reply"
    return f"{where}: {error['msg']}"


def frame_range_of(summary: object) -> tuple[int, int] | None:
    """The (first, last) frames a step's summary reports, or None when it has no valid range."""
    value = (summary or {}).get("frame_range") if isinstance(summary, dict) else None
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    first, last = value
    valid = all(isinstance(v, int) and not isinstance(v, bool) and abs(v) <= 1_048_574 for v in value)
    return (first, last) if valid and first <= last else None
