"""The scoring protocols, one module each (docs/protocol.md sections 5 and 6): adding a protocol is adding a module here.

Each module names itself (``NAME``), says whether a VLM judge speaks it (``VLM``; geometry_v1 is the
geometry judge's own), caps the judge's completion (``MAX_TOKENS``), and gives the text after the frames
(``prompt(question, kind)``, kind the judge's model kind: local or api), an answer's score in [0, 1]
(``score(question_type, answer, options, ground_truth)``) and its own aggregate of a run's scored rows for
the Dual VQA summary (``aggregate(rows, kind)``, None where it has none). ``eval_bridge.scoring.protocol`` holds
what every protocol shares (the one correctness rule, retention, Overall) and dispatches to these.
"""

import importlib
import pkgutil
from types import ModuleType
from typing import Any, Protocol

from bvb_addon.errors import ArgumentError


class ScoringProtocol(Protocol):
    """What a protocol module provides."""

    NAME: str
    VLM: bool
    MAX_TOKENS: int

    def prompt(self, question: Any, kind: str = "local") -> str: ...

    def score(self, question_type: str, answer: str, options: list | None, ground_truth: Any) -> float: ...

    def aggregate(self, rows: list[dict], kind: str = "local") -> dict | None: ...


def discover(path: list[str] | None = None, package: str = __name__) -> dict[str, ModuleType]:
    """{NAME: module} of every protocol module in the package's folder (modules starting with _ left out)."""
    found = {}
    for info in pkgutil.iter_modules(path if path is not None else __path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        found[module.NAME] = module
    return found


REGISTRY = discover()
PROTOCOLS = tuple(sorted(name for name, module in REGISTRY.items() if module.VLM))
"""The protocols a VLM judge speaks (``--protocol``)."""
JUDGE_OWN = tuple(sorted(name for name, module in REGISTRY.items() if not module.VLM))
"""The protocols no VLM speaks: each is its own judge's (geometry_v1, ``--judge geometry``)."""
GEOMETRY = "geometry_v1"


def get(name: str, geometry: bool = False) -> ModuleType:
    """The protocol's module, or a one-line error naming the known ones (geometry_v1 only where allowed)."""
    known = PROTOCOLS + (JUDGE_OWN if geometry else ())
    if name not in known:
        raise ArgumentError(f"unknown protocol {name!r}: use one of {', '.join(known)}")
    return REGISTRY[name]
