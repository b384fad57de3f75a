"""The service's configuration, fixed when it starts: ``bvb serve``'s flags or its --config TOML file, read into
ServeOptions. Apart from the service (``app.py``, which re-exports it) so that the command line builds ``bvb serve``'s
parser without loading Starlette, pydantic or the scorers."""

import tomllib
from dataclasses import dataclass
from dataclasses import replace as with_fields
from pathlib import Path

from bvb_addon.errors import ArgumentError, BadFileError, MissingFileError
from bvb_addon.options import from_mapping, option

from ..scoring.options import EncoderOptions, JudgeOptions

GEOMETRY = "geometry"
TOKEN_ENV = "BVB_BRIDGE_TOKEN"
# A job chooses a judge by name; how it is asked (its cache, retries, budget) is the service's, from the file.
JUDGE_FIXED_BY_JOBS = ("cache", "shared", "retries", "retry_base_delay", "max_tokens_field", "concurrency",
                       "prompt_kind", "probe_wait")  # fmt: skip
# The flags name a snapshot, its frames and device; a V-JEPA 2.1 checkpoint is an [encoders.NAME] table.
ENCODER_BY_FILE = ("dtype", "encoder_repo", "checkpoint")


@dataclass(frozen=True)
class ServeOptions:
    """What the service may do, fixed when it starts: ``bvb serve``'s flags, or its --config TOML file whose keys
    are these fields' names (flags win); requests only choose among it by name."""

    roots: tuple[Path, ...] = option(
        (),
        "folder the service may read and score under (repeatable; default: the current folder)",
        flag="--root",
        metavar="ROOT",
        repeat=True,
    )
    host: str = option("127.0.0.1", "bind address (loopback; another address needs a token)")
    port: int = option(8765, "port (0 picks a free one)")
    token: str | None = option(
        None,
        "bearer token; avoid: a command line is readable by every local user (/proc/PID/cmdline). "
        f"Prefer ${TOKEN_ENV}, or let the service generate one into --token-file (the default)",
        record=False,
    )
    token_file: Path | None = option(
        None, "where a generated token is written (default $BVB_BRIDGE_TOKEN_FILE or ~/.config/bvb/bridge-token)"
    )
    judges: dict[str, JudgeOptions] = option(
        help="the judges a job may name ([judges.NAME] tables; geometry is always there)",
        default_factory=dict,
        cli=False,
    )
    default_judge: str | None = option(None, "the judge of a job that names none", cli=False)
    encoders: dict[str, EncoderOptions] = option(
        help="the LS encoders (V-JEPA 2.1 or 2 snapshot folders) a job may name ([encoders.NAME] tables)",
        default_factory=dict,
        cli=False,
    )
    default_encoder: str | None = option(None, "the encoder of a job that names none", cli=False)
    judge: JudgeOptions | None = option(
        None,
        "the judge named 'default' and made the default (--judge geometry: the offline judge is)",
        exclude=JUDGE_FIXED_BY_JOBS,
    )
    encoder: EncoderOptions | None = option(
        None, "the encoder named 'default' (default: $BVB_VJEPA_MODEL)", exclude=ENCODER_BY_FILE
    )

    def checked(self) -> "ServeOptions":
        """The options the service runs with: the judge and encoder named 'default' among the named ones,
        geometry always there, the current folder without roots; one line for what cannot work."""
        judges = {GEOMETRY: JudgeOptions(kind="geometry"), **self.judges}
        encoders = dict(self.encoders)
        default_judge, default_encoder = self.default_judge, self.default_encoder
        if self.judge is not None and self.judge.kind == GEOMETRY:
            default_judge = GEOMETRY
        elif self.judge is not None:
            judges["default"], default_judge = self.judge, "default"
        if self.encoder is not None:
            if not self.encoder.model:
                raise ArgumentError("serve: --num-frames and --device set the encoder --encoder PATH names; add it")
            encoders["default"], default_encoder = self.encoder, default_encoder or "default"
        for name, judge in judges.items():
            try:
                judge.check()
            except ValueError as exc:
                raise ArgumentError(f"judge {name!r}: {exc}") from None
        if default_judge is not None and default_judge not in judges:
            raise ArgumentError(f"default judge {default_judge!r} is not configured; configured: {', '.join(judges)}")
        if default_encoder is not None and default_encoder not in encoders:
            raise ArgumentError(f"default encoder {default_encoder!r} is not configured; add it under [encoders]")
        if not 0 <= self.port <= 65535:
            raise ArgumentError(f"serve: port {self.port} is not a port; use 0 to 65535 (0 picks a free one)")
        from .loopback_http import is_loopback  # deferred: its module loads uvicorn, the parser needs none of it

        if not is_loopback(self.host) and not self.token:
            raise ArgumentError(
                f"serve: binding {self.host} exposes the service beyond this machine; "
                f"set {TOKEN_ENV} (or pass --token) and give it to the clients yourself"
            )
        return with_fields(
            self, roots=self.roots or (Path.cwd(),), judges=judges, default_judge=default_judge, encoders=encoders,
            default_encoder=default_encoder, judge=None, encoder=None,
        )  # fmt: skip


def read_config_file(path: str | Path) -> ServeOptions:
    """The service's TOML configuration file as ServeOptions (keys are its field names); one line naming the file
    and the key when it does not parse."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise MissingFileError(
            f"service config {path} does not exist; pass an existing TOML file to --config"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise BadFileError(f"service config {path} is not valid TOML: {exc}") from None
    return from_mapping(ServeOptions, raw, f"service config {path}")
