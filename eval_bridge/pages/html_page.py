"""One home for the HTML that shows run data: every value is escaped here, and every page carries a CSP.

Everything a page shows comes from files a model or a downloaded run folder wrote: the reply,
the code, the outputs, the worker's scene summary (agent code can forge it), the counts, the
scene and run names. The pages are Jinja2 templates with autoescape, and the fragments that
build them are ``markupsafe.Markup`` templates (Jinja2's own escaping: ``fragment`` escapes
every argument whatever its type, a number as much as a string). Only this module, the page
templates and Pygments' highlighted code make markup; a value never does.

A Content-Security-Policy (a meta tag, so it holds on file:// pages too; ``bvb view`` also sends
it as a header) allows only the pages' own scripts, by their SHA-256: a script that got into a
page through any other path does not run, nor does an inline event handler or a javascript: URL.
"""

import base64
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup, escape

__all__ = ["Markup", "Script", "csp", "escape", "fragment", "join", "page_url", "render", "safe_name"]

ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def fragment(template: str, *args: Any, **kwargs: Any) -> Markup:
    """``template`` (markup written here, never run data) with every argument escaped, whatever its type."""
    return Markup(template).format(*args, **kwargs)


def join(parts: Iterable[Any], separator: str = "") -> Markup:
    """Fragments and values joined: values are escaped, fragments kept."""
    return Markup(separator).join(parts)


@cache
def _template(source):
    return ENV.from_string(source)


def render(source: str, **values: Any) -> str:
    """A page template (Jinja2, autoescape) filled with values; Markup values are kept as markup."""
    return _template(source).render(**values)


@dataclass(frozen=True)
class Script:
    """One of the pages' own scripts: constant source, its parameters in data- attributes (so its hash is fixed)."""

    source: str
    data: dict = field(default_factory=dict)

    def __html__(self):
        attributes = "".join(f" data-{escape(k)}='{escape(v)}'" for k, v in self.data.items())
        return f"<script{attributes}>{self.source}</script>"

    @property
    def hash(self) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(self.source.encode()).digest()).decode() + "'"


def csp(scripts: Iterable["Script"]) -> str:
    """The policy of a page whose only scripts are ``scripts``: nothing else runs, nothing leaves the page's origin."""
    hashes = " ".join(sorted({s.hash for s in scripts})) or "'none'"
    return (
        f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; object-src 'none'"
    )


UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(text: object, limit: int = 80) -> str:
    """A file name made from run data (a scene or folder name): only [A-Za-z0-9._-], never a path.

    A name that had to change gets a short hash of the original, so two names stay two files.
    """
    text = str(text)
    clean = UNSAFE_IN_NAME.sub("_", text)[:limit].lstrip(".") or "_"
    if clean != text:
        clean = f"{clean}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
    return clean


def page_url(*parts: object) -> str:
    """A relative URL of path parts, each percent-encoded (the template then escapes it for the attribute)."""
    return "/".join(quote(str(part), safe="") for part in parts)
