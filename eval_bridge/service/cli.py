"""``bvb serve``'s command line: its parser (--config FILE and ServeOptions' flags) and the ServeOptions of its
arguments. ``eval_bridge.cli`` registers it beside the scoring commands; the service itself (``app.py``) loads only
when ``bvb serve`` runs."""

import argparse
import logging
import os
from dataclasses import replace as with_fields

from bvb_addon.options import add_options, from_namespace

from ..scoring.options import ENCODER_ENV, EncoderOptions
from .options import TOKEN_ENV, ServeOptions, read_config_file

log = logging.getLogger(__name__)

TOKEN_ON_COMMAND_LINE = (
    "--token puts the secret on the command line, where every local user can read it (/proc/PID/cmdline); "
    f"set ${TOKEN_ENV} instead, or leave it out and give clients the generated --token-file"
)


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """``bvb serve``'s arguments: --config FILE and ServeOptions' flags, which win over the file's keys."""
    parser.add_argument("--config", help="TOML file of these options: roots, [judges.NAME], [encoders.NAME], "
                        "default_judge, ... (default: none)")  # fmt: skip
    add_options(parser, ServeOptions, given_only=True)


def options_from(args: argparse.Namespace) -> ServeOptions:
    """The ServeOptions of ``bvb serve``'s arguments: the --config file's, the flags given laid over them, the
    token from $BVB_BRIDGE_TOKEN and the encoder from $BVB_VJEPA_MODEL when the command line names none."""
    from_file = read_config_file(args.config) if args.config else ServeOptions()
    options = from_namespace(ServeOptions, args, base=from_file)
    if options.token:
        log.warning(TOKEN_ON_COMMAND_LINE)
    elif os.environ.get(TOKEN_ENV):
        options = with_fields(options, token=os.environ[TOKEN_ENV])
    if options.encoder is None and os.environ.get(ENCODER_ENV):
        options = with_fields(options, encoder=EncoderOptions(os.environ[ENCODER_ENV]))
    return options.checked()
