"""No doc reference dangles: every docs file, section, heading and relative link that code or docs name exists.

Forms checked, in every .py, .md, .txt and .toml file of the checkout:
  docs/NAME.md                      the file exists
  docs/NAME.md section 5            NAME.md has a heading "## 5. ..." (also "sections 5 and 6", "5-8")
  docs/NAME.md, "Heading"           NAME.md has a heading holding that text (also ("Heading"))
  [text](path#anchor)               in Markdown: the path exists beside the file, and the anchor is a heading
  [text](path) section 3 / , "H"    the same section and heading checks on a link
and the design notes the code once cited from outside the repository (DESIGN.md) are never named.
"""

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".git", "node_modules", "dist", "build", "results", "__pycache__", ".pytest_cache", ".ruff_cache"}
SUFFIXES = {".py", ".md", ".txt", ".toml"}
OUTSIDE = "DESIGN" + ".md"  # spelled apart so that this file does not name it

SECTION = r",? sections? (\d+)((?:(?:, | and |-)\d+)*)"
HEADING = r",? \(?\"([^\"\n]+)\"\)?"
FILE_REF = re.compile(r"(?<![\w/.])(docs/[\w./-]+\.md)")
FILE_SECTION = re.compile(r"(?<![\w/.])(docs/[\w./-]+\.md)" + SECTION)
FILE_HEADING = re.compile(r"(?<![\w/.])(docs/[\w./-]+\.md)" + HEADING)
LINK = re.compile(r"\]\(([^)\s]+)\)")
LINK_SECTION = re.compile(r"\]\(([^)\s#]+\.md)\)" + SECTION)
LINK_HEADING = re.compile(r"\]\(([^)\s#]+\.md)\)" + HEADING)


def checked_files():
    for path in REPO.rglob("*"):
        parts = path.relative_to(REPO).parts
        if any(p in SKIP_DIRS or p.startswith(".venv") or p.endswith(".egg-info") for p in parts):
            continue
        if path.is_file() and path.suffix in SUFFIXES and path != Path(__file__).resolve():
            yield path


def headings(doc):
    return [line.lstrip("#").strip() for line in doc.read_text().splitlines() if line.startswith("#")]


def slug(heading):
    """GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", ""))
    return text.replace(" ", "-")


def numbers(first, rest):
    found = [int(first)] + [int(n) for n in re.findall(r"\d+", rest)]
    if "-" in rest and len(found) == 2:
        return list(range(found[0], found[1] + 1))
    return found


def problems_in(path):
    text = path.read_text(errors="replace")
    where = path.relative_to(REPO)
    out = []
    if OUTSIDE in text:
        out.append(f"{where}: names {OUTSIDE}, which is not in the repository (docs/protocol.md is)")

    def check(doc, label, sections=(), heading=None):
        if not doc.is_file():
            out.append(f"{where}: {label} does not exist")
            return
        titles = headings(doc)
        for n in sections:
            if not any(t.startswith(f"{n}. ") for t in titles):
                out.append(f"{where}: {label} has no section {n}")
        if heading and not any(heading.lower() in t.lower() for t in titles):
            out.append(f'{where}: {label} has no heading "{heading}"')

    for m in FILE_REF.finditer(text):
        check(REPO / m.group(1), m.group(1))
    for m in FILE_SECTION.finditer(text):
        check(REPO / m.group(1), m.group(1), numbers(m.group(2), m.group(3)))
    for m in FILE_HEADING.finditer(text):
        check(REPO / m.group(1), m.group(1), heading=m.group(2))
    if path.suffix == ".md":
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target) or target.startswith("mailto:"):
                continue  # a web address
            file_part, _, anchor = target.partition("#")
            doc = (path.parent / file_part).resolve() if file_part else path
            if not doc.exists():
                out.append(f"{where}: link {target} does not exist")
            elif anchor and doc.suffix == ".md" and anchor not in {slug(t) for t in headings(doc)}:
                out.append(f"{where}: link {target}: no heading with that anchor")
        for m in LINK_SECTION.finditer(text):
            check((path.parent / m.group(1)).resolve(), m.group(1), numbers(m.group(2), m.group(3)))
        for m in LINK_HEADING.finditer(text):
            check((path.parent / m.group(1)).resolve(), m.group(1), heading=m.group(2))
    return out


def test_no_reference_to_a_doc_file_or_section_dangles():
    problems = [p for path in checked_files() for p in problems_in(path)]
    assert not problems, "\n".join(problems)


def test_the_checker_finds_what_dangles(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/protocol.md").write_text("# P\n\n## 1. The task\n\n## Reading results\n")
    code = tmp_path / "code.py"
    code.write_text(
        '"""See docs/protocol.md section 1 and docs/protocol.md section 4, docs/protocol.md, "The task",\n'
        'docs/protocol.md, "Nope", docs/missing.md and ' + OUTSIDE + ' section 6."""\n'
    )
    page = tmp_path / "docs/guide.md"
    page.write_text("[p](protocol.md#reading-results) [q](protocol.md#nowhere) [r](gone.md) [w](https://x.org)\n")
    found = problems_in(code) + problems_in(page)
    assert any("has no section 4" in p for p in found) and not any("has no section 1" in p for p in found)
    assert any('no heading "Nope"' in p for p in found) and not any('"The task"' in p for p in found)
    assert any("docs/missing.md does not exist" in p for p in found)
    assert any(f"names {OUTSIDE}" in p for p in found)
    assert any("protocol.md#nowhere: no heading" in p for p in found)
    assert any("link gone.md does not exist" in p for p in found)
    assert not any("reading-results" in p or "x.org" in p for p in found)


def test_the_readme_is_a_front_door():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert "./bvb demo" in text and "./bvb test" in text
    for topic in ("huggingface.co/datasets/nyu-visionx/VSI-Bench", "vjepa2", "--encoder", "pip install"):
        assert topic in text, topic
