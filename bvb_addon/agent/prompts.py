"""Prompt templates are files in prompts/; this fills them (``string.Template``, ``${name}``)."""

from functools import cache
from pathlib import Path
from string import Template
from typing import Any

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"


@cache
def _template(name):
    return Template((PROMPTS_DIR / f"{name}.txt").read_text())


def render(name: str, **values: Any) -> str:
    """The template ``prompts/<name>.txt`` filled with ``values``; a missing value is a KeyError."""
    return _template(name).substitute(**values).strip()
