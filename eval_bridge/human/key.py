"""A study's key (key.json): which code is which run, generator and instance; experimenter only.

The page a rater gets holds codes; the key, written beside it and never sent or served, unblinds
their answers. Every page of a pack has a pack id that its answers carry back.
"""

import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bvb_addon.errors import BVBError
from bvb_addon.jsonfile import read_json

from ..vgi.score import ROWS

PAGE = "study.html"
KEY = "key.json"
"""The blinding key: experimenter only, never sent with the page."""
BVB_INSTRUMENT = "bvb-human-rank-v1"
"""The release's instrument id: our answers keep its fields (pack_id, rater_id, rankings of scene_id and rank)."""
VGI_INSTRUMENT = "vgi-human-rate-v1"
KEY_FORMAT = 1


class HumanStudyError(BVBError, ValueError):
    """Bad input to a human study (a missing run, answers that do not belong to the pack); names the fix."""


def new_key(kind: str, instrument: str, seed: int) -> dict[str, Any]:
    """A new key's head: its kind, instrument, a random pack id, when and with which seed."""
    return {
        "format": KEY_FORMAT,
        "kind": kind,
        "instrument_id": instrument,
        # Random, not from the seed: two packs built with one seed must not take each other's answers.
        "pack_id": f"{kind}-{secrets.token_hex(6)}",
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seed": seed,
        "warning": "experimenter only: this file unblinds the study; send only study.html to raters",
    }


def judge_rows(label: str, rows: Path | None, scores: Path | None) -> str | None:
    """Where a generator's judge rows are: its --rows file, else <scores>/<label>/vgi.jsonl; None when neither is known."""
    path = rows or (scores / label / ROWS if scores else None)
    return str(path.resolve()) if path else None


def forms_of(key: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{pack id of a page: {page, scenes or items}}: every page a rater may have been sent."""
    if "forms" in key:
        return key["forms"]
    return {key["pack_id"]: {"page": PAGE}}


def read_key(pack: Path) -> dict[str, Any]:
    """A pack's key.json; a HumanStudyError when the folder holds none."""
    path = pack / KEY if pack.is_dir() else pack
    if not path.is_file():
        raise HumanStudyError(f"no study key at {path}; pass the folder bvb human pack wrote (it holds {KEY})")
    key = read_json(path, "study key", "build the pack again with bvb human pack")
    if not isinstance(key, dict) or key.get("kind") not in ("bvb", "vgi") or "pack_id" not in key:
        raise HumanStudyError(f"{path} is not a study key written by bvb human pack; pass the pack's folder")
    return key
