"""Option names users know keep working: every stage's flags as they were before the typed-stages change.

``tests/known_flags.json`` was written from the parsers of 2026-12-03 (before options became data,
issue 34), hidden aliases included. A flag may move to an options class, change its help or become
a hidden alias that says the new name; it may not stop parsing.
"""

import argparse
import json
from pathlib import Path

import pytest

from headless import cli

pytestmark = pytest.mark.unit

KNOWN = json.loads((Path(__file__).parent / "known_flags.json").read_text())


def walk(name: str, parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser and its subcommands' parsers (``human pack bvb``), by name."""
    found = {name: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                found.update(walk(f"{name} {sub}", child))
    return found


def flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings if s.startswith("--")} - {"--help"}


def current() -> dict[str, argparse.ArgumentParser]:
    parsers: dict[str, argparse.ArgumentParser] = {}
    for name, parser in cli.stage_parsers().items():
        parsers.update(walk(name, parser))
    return parsers


PARSERS = current()


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_every_known_flag_still_parses(name):
    assert name in PARSERS, f"bvb {name} is gone"
    lost = set(KNOWN[name]) - flags(PARSERS[name])
    assert not lost, f"bvb {name}: {sorted(lost)} no longer parse; keep them (option(old=...) for a new name)"
