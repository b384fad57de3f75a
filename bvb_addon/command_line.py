"""What every ``bvb`` stage's command line shares: one parser class and the logging flags.

The rules (tests/test_command_line.py walks every stage's parser and checks them):
usage says ``bvb STAGE``; every option's help shows its default; no prefix matching
(``--num-frame 8`` is an error, not ``--num-frames 8``); a wrong choice gets a did-you-mean;
``--quiet`` and ``--verbose`` on every stage; one name per idea across stages (an old name
stays as a hidden alias that says what to use). Stdlib only.
"""

import argparse
import difflib
import logging
import sys
from collections.abc import Sequence
from typing import Any

from . import progress

SCORE_STAGES = ("dv", "ls", "overall", "vgi", "vgi-filter", "steps")
"""The eval bridge's subcommands that ``bvb score`` runs; its others are stages of their own."""

OWN_LOGGERS = ("bvb_addon", "headless", "eval_bridge", "__main__")
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


def prog(name: str) -> str:
    """``bvb dv`` is ``bvb score dv``; every other stage is ``bvb NAME``."""
    return f"bvb score {name}" if name in SCORE_STAGES else f"bvb {name}"


def _shown(value: object) -> str:
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value) or "none"
    return str(value)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written; every option with a value shows its default.

    A help text that already says its default (``default: $BVB_VJEPA_MODEL``) or that the
    option is required is left alone; flags (store_true) have none to show.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or action.nargs == 0 or text == argparse.SUPPRESS:
            return text
        if "default" in text or "required" in text:
            return text
        if action.required:
            return f"{text} (required)" if text else "(required)"
        if action.default is None:
            return text
        return f"{text} (default: {_shown(action.default).replace('%', '%%')})"


class Parser(argparse.ArgumentParser):
    """argparse with the stages' rules: no prefix matching, defaults in help, did-you-mean on choices."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            choices = [str(c) for c in action.choices]
            close = difflib.get_close_matches(str(value), choices, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            name = "command" if isinstance(action, argparse._SubParsersAction) else "choice"
            raise argparse.ArgumentError(action, f"invalid {name}: {value!r}{hint} (choose from {', '.join(choices)})")
        super()._check_value(action, value)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """argparse's, except that words nobody took are refused by the subcommand that was chosen:
        its own usage and the closest option it has (argparse's top parser shows its usage only)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = _chosen(self, parsed)
            word = next((w for w in extras if w.startswith("-")), extras[0])
            options = [
                o
                for a in chosen._actions
                if a.help != argparse.SUPPRESS
                for o in a.option_strings
                if o.startswith("--")
            ]
            close = difflib.get_close_matches(word.split("=", 1)[0], options, n=1) if word.startswith("-") else []
            hint = f"; did you mean {close[0]!r}?" if close else f"; {chosen.prog} --help lists its options"
            chosen.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed


def _chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost subcommand parser that ``parsed`` went through (``parser`` itself when none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(parsed, action.dest, None)
            if name in action.choices:
                return _chosen(action.choices[name], parsed)
    return parser


def stage_parser(name: str, description: str, example: str | Sequence[str], **kwargs: Any) -> Parser:
    """The parser of stage ``name``: ``bvb NAME``, its example(s), the logging flags."""
    if isinstance(example, str):
        example = [example]
    epilog = "example" + ("s" if len(example) > 1 else "") + ":\n" + "\n".join(f"  {line}" for line in example)
    parser = Parser(prog=prog(name), description=description, epilog=epilog, **kwargs)
    add_log_flags(parser)
    return parser


def sub_parser(
    sub: "argparse._SubParsersAction[argparse.ArgumentParser]", name: str, help: str,
    example: str | Sequence[str] | None = None, **kwargs: Any,
) -> argparse.ArgumentParser:  # fmt: skip
    """A subcommand's parser (the eval bridge's): ``bvb score NAME`` or ``bvb NAME``."""
    if example is not None and isinstance(example, str):
        example = [example]
    if example:
        kwargs["epilog"] = (
            (kwargs.get("epilog", "") + "\n\n" if kwargs.get("epilog") else "")
            + "example"
            + ("s" if len(example) > 1 else "")
            + ":\n"
            + "\n".join(f"  {line}" for line in example)
        )
    kwargs.setdefault("description", help[0].upper() + help[1:] + ".")
    parser = sub.add_parser(name, help=help, prog=prog(name), **kwargs)
    add_log_flags(parser)
    return parser


def add_log_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bars or info lines; warnings and errors only"
    )
    group.add_argument(
        "-v", "--verbose", action="store_true", help="also the libraries' info lines (HTTP requests, ...) and debug"
    )


class _Alias(argparse.Action):
    """An old option name: it still works, hidden from --help, and says what to use instead."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str | None = None, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
        option_string: str | None = None,
    ) -> None:  # fmt: skip
        print(f"warning: {option_string} is now {self.new}; the old name will go", file=sys.stderr)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_alias(parser: argparse.ArgumentParser, old: str, new: str, dest: str, **kwargs: Any) -> None:
    """Keep ``old`` working as a hidden alias of ``new`` (stored in ``dest``); ``kwargs`` as ``new``'s
    (``type``, ``nargs``; ``nargs=0, const=True`` for a flag)."""
    parser.add_argument(
        old, dest=dest, action=_Alias, new=new, help=argparse.SUPPRESS, default=argparse.SUPPRESS, **kwargs
    )


class _Formatter(logging.Formatter):
    """Info lines as plain sentences; warnings and errors (and everything under --verbose) say
    their level and logger."""

    def __init__(self, verbose: bool) -> None:
        super().__init__(LOG_FORMAT)
        self.verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno <= logging.INFO and not self.verbose:
            return record.getMessage()
        return super().format(record)


def setup_logging(verbose: bool = False, quiet: bool = False) -> None:
    """The harness's own info lines (not with --quiet); the libraries' only with --verbose.

    httpx logs an ``HTTP Request: POST ... 200 OK`` line per model call at INFO: noise in a
    run's log unless asked for.
    """
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    root = logging.getLogger()
    for handler in root.handlers:
        if type(handler) is logging.StreamHandler:  # basicConfig's (not pytest's capture handlers)
            handler.setFormatter(_Formatter(verbose))
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    own = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    progress.quiet = quiet
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(own)
