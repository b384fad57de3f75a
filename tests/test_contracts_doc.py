"""docs/*.md from the code (tools/docs.py): the generated blocks are current, and each kind of block is written
from what it names (a record's fields, an options class, signatures)."""

import dataclasses
import re
import sys
import textwrap
from pathlib import Path

import pytest

from bvb_addon import outcomes, records
from bvb_addon.records.fields import Record
from bvb_addon.records.trajectory import Compaction, LedgerEntry, Reopening, Step
from tools import docs

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
MARK = "<!-- generated: python -m tools.docs; from {} -->"


def test_the_docs_blocks_are_what_the_code_says(capsys):
    """A field added to a record or an options class without running the tool fails here, with the command."""
    code = docs.main(["--check"])
    assert code == outcomes.OK_EXIT, capsys.readouterr().out


def test_every_record_of_a_run_file_has_its_generated_block():
    text = (REPO / "docs" / "contracts.md").read_text()
    classes = [getattr(records, name) for name in records.__all__ if isinstance(getattr(records, name), type)]
    classes += [Step, LedgerEntry, Compaction, Reopening]
    for cls in classes:
        assert issubclass(cls, Record)
        assert MARK.format(f"{cls.__module__}:{cls.__name__}") in text, f"docs/contracts.md has no block of {cls}"


SAMPLE = '''
from dataclasses import dataclass, field

from bvb_addon.options import option
from bvb_addon.records.fields import Record


@dataclass
class Row(Record):
    """A sample record."""

    scene: str
    """The scene's id."""
    score: float | None = None
    tags: list = field(default_factory=list)
    format: int = 1
    extra: dict = field(default_factory=dict)
{more}

@dataclass(frozen=True)
class SampleOptions:
    run: str = option(help="the run directory")
    workers: int = option(8, "scenes at once", short="-j")


@dataclass
class Config:
    """A plain config."""

    memory_bytes: int = 8 << 30
    """Address space of a worker."""
    host: str = "127.0.0.1"  # where it listens (a comment ending the line describes a field too)


LIMIT = 3
"""The sample's limit."""


def score(run: str, *, workers: int = 8) -> float:
    """Score a run. More text here."""
    return 0.0


class Scorer:
    """Scores runs."""

    kind: str
    """vlm or geometry."""

    def __init__(self, model: str, retries=6) -> None:
        self.model = model

    @property
    def calls(self) -> int:
        """Calls made so far."""
        return 0

    def ask(self, question: str) -> str:
        """The answer to one question."""
        return ""

    def _private(self) -> None:
        pass
'''


@pytest.fixture
def sample(tmp_path, monkeypatch):
    """A module ``docsample`` on the path; ``write(more)`` rewrites it (a field added to Row) and forgets the old one."""

    def write(more: str = "") -> None:
        (tmp_path / "docsample.py").write_text(SAMPLE.replace("{more}", more))
        sys.modules.pop("docsample", None)

    monkeypatch.syspath_prepend(str(tmp_path))
    write()
    yield write
    sys.modules.pop("docsample", None)


def _doc(tmp_path: Path, *specs: str) -> Path:
    path = tmp_path / "doc.md"
    parts = ["# A doc", "", "Prose stays as written."]
    for spec in specs:
        parts += ["", MARK.format(spec), "stale text", "<!-- /generated -->", "", "More prose."]
    path.write_text("\n".join(parts) + "\n")
    return path


def test_a_record_block_is_its_fields_in_json_words_and_a_new_field_makes_it_stale(tmp_path, sample, capsys):
    path = _doc(tmp_path, "docsample:Row")
    assert docs.main(["--check", str(path)]) == outcomes.FAILED_EXIT
    assert docs.main([str(path)]) == outcomes.OK_EXIT
    text = path.read_text()
    assert text.startswith("# A doc\n\nProse stays as written.\n\n") and text.endswith("\n\nMore prose.\n")
    assert "| `scene` | string | required | The scene's id. |" in text
    assert "| `score` | number or null | `null` |  |" in text and "| `tags` | list | `[]` |  |" in text
    assert "`extra`" not in text, "the keys a record keeps are not a key of its file"
    capsys.readouterr()
    assert docs.main(["--check", str(path)]) == outcomes.OK_EXIT
    before = path.stat().st_mtime_ns
    assert docs.main([str(path)]) == outcomes.OK_EXIT and path.stat().st_mtime_ns == before, "nothing to rewrite"

    sample('\n    added: int = 0\n    """A field someone added."""\n')
    assert docs.main(["--check", str(path)]) == outcomes.FAILED_EXIT
    line = capsys.readouterr().out.strip()
    assert line == f"{path}:5: the block from docsample:Row is stale; run: python -m tools.docs", line
    assert path.read_text() == text, "--check writes nothing"


def test_an_options_class_block_is_its_markdown_table(tmp_path, sample):
    from bvb_addon.options import markdown_table

    path = _doc(tmp_path, "docsample:SampleOptions")
    docs.main([str(path)])
    import docsample

    assert markdown_table(docsample.SampleOptions) in path.read_text()
    assert "| `workers` | `--workers` | integer | `8` | scenes at once |" in path.read_text()


def test_a_plain_dataclass_keeps_python_types_and_shows_sizes(tmp_path, sample):
    path = _doc(tmp_path, "docsample:Config")
    docs.main([str(path)])
    assert "| `memory_bytes` | int | `8589934592` (8 GiB) | Address space of a worker. |" in path.read_text()
    assert "| `host` | str | `'127.0.0.1'` | where it listens (a comment ending the line describes a field too) |" in (
        path.read_text()
    )


def test_functions_classes_and_constants_are_their_signatures_as_the_source_spells_them(tmp_path, sample):
    path = _doc(tmp_path, "docsample:LIMIT,score,Scorer")
    docs.main([str(path)])
    body = (
        path.read_text().split(MARK.format("docsample:LIMIT,score,Scorer") + "\n", 1)[1].split("\n<!--", 1)[0].strip()
    )
    assert body == textwrap.dedent("""\
        ```python
        LIMIT = 3   # The sample's limit.
        score(run: str, *, workers: int = 8) -> float   # Score a run.
        class Scorer   # Scores runs.
            kind: str   # vlm or geometry.
            Scorer(model: str, retries=6)
            calls -> int   # Calls made so far.
            ask(question: str) -> str   # The answer to one question.
        ```""")


def test_a_bad_marker_is_one_line_naming_the_file_and_line(tmp_path, sample, capsys):
    path = _doc(tmp_path, "docsample:Nothing")
    assert docs.main(["--check", str(path)]) == outcomes.USAGE_EXIT
    assert capsys.readouterr().err.strip() == f"error: {path}:5: docsample has no 'Nothing'; fix the marker"
    path = _doc(tmp_path, "no_such_module_here:Row")
    assert docs.main([str(path)]) == outcomes.USAGE_EXIT
    assert f"{path}:5: no module 'no_such_module_here'" in capsys.readouterr().err


def test_adding_a_block_is_its_marker_line(tmp_path, sample, capsys):
    """A marker with no end line before the next marker or the end is a new block: the tool writes body and end."""
    path = tmp_path / "doc.md"
    path.write_text(f"Prose.\n{MARK.format('docsample:LIMIT')}\nMore prose.\n{MARK.format('docsample:Config')}\n")
    assert docs.main(["--check", str(path)]) == outcomes.FAILED_EXIT
    assert capsys.readouterr().out.count("is stale; run: python -m tools.docs") == 2
    assert docs.main([str(path)]) == outcomes.OK_EXIT
    text = path.read_text()
    assert text.startswith(f"Prose.\n{MARK.format('docsample:LIMIT')}\n\n```python\nLIMIT = 3")
    assert "```\n\n<!-- /generated -->\nMore prose.\n" in text and text.endswith("<!-- /generated -->\n")
    assert docs.main(["--check", str(path)]) == outcomes.OK_EXIT


def test_hand_written_fenced_lines_leave_generated_blocks_out():
    text = "\n".join(["```", "a", "b", "```", MARK.format("m:X"), "```python", "c", "```", "<!-- /generated -->"])
    assert docs.hand_written_fenced_lines(text) == 2


def test_the_field_docs_are_the_strings_under_the_fields():
    assert docs.field_docs(records.RenderRow)["frames"].startswith("Frames in the mp4")
    assert {f.name for f in dataclasses.fields(records.AgentMeta)} >= set(docs.field_docs(records.AgentMeta))


def _codes(text: str) -> list[str]:
    return re.findall(r"`(\w+)`", text)


def test_key_lists_of_files_written_from_dicts_are_the_code_s_constants():
    """Files with no record class (the leaderboard CSV, overall.json's identity, BVB's agent_meta keys) keep their
    hand-written lists in contracts.md; each list is the constant the writer uses, in order."""
    from bvb_addon.records.agent_meta import RELEASE_KEYS
    from eval_bridge.leaderboard import identity, noise
    from eval_bridge.scoring.overall import OWN_COLUMNS

    text = (REPO / "docs" / "contracts.md").read_text()
    comparable = text.split("is what two runs must share to be comparable:", 1)[1].split("\n\n", 1)[0]
    assert _codes(comparable) == list(identity.KEYS)
    release = text.split("`bvb_addon.records.agent_meta.RELEASE_KEYS`:", 1)[1].split("), plus", 1)[0]
    assert _codes(release) == list(RELEASE_KEYS)
    own = text.split("Leaderboard CSV (`python -m eval_bridge leaderboard", 1)[1].split("then ours:", 1)[1]
    named = [c for c in _codes(own.split("\n\n", 1)[0]) if c in OWN_COLUMNS]
    assert list(dict.fromkeys(named)) == list(OWN_COLUMNS), "in order, each at its first mention"
    columns = text.split("`leaderboard.csv` columns:", 1)[1].split("\n\n", 1)[0]
    ci = columns.split("`noise.CI_COLUMNS`", 1)[1].split(";", 1)[0]
    assert _codes(ci) == list(noise.CI_COLUMNS)
    assert _codes(columns.split("`noise.NOISE_COLUMNS`", 1)[1].split(")", 1)[0]) == list(noise.NOISE_COLUMNS)
