"""bench/architecture.py's counts on a tiny tree written here: each definition's edge counted exactly."""

import argparse
import importlib.util
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SPEC = importlib.util.spec_from_file_location(
    "bench_architecture", Path(__file__).parent.parent / "bench" / "architecture.py"
)
architecture = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(architecture)

STAGE = """
import argparse
import json
from bvb_addon import errors
from . import top_level_relative


def eight(a, b, c, d, e, f, g, h):
    from bvb_addon.atomic import write
    import json as inner_json
    from . import sibling
    import headless.run, os

    def nested():
        from eval_bridge import api
        import numpy

    return write, inner_json, sibling, nested


def seven(a, b, c, d, e, f, g, *args, **kwargs):
    import bvbaddon_lookalike
    return a


class Stage:
    from headless import cli

    def method(self, a, b, c, d, e, f, g):
        return a

    def wide(self, a, b, c, d, e, f, g, h):
        return a

    @staticmethod
    def static(self, a, b, c, d, e, f, g):
        return a

    async def keywords(cls, a, b, c, /, d, *, e, f, g, h):
        return a


def plumb(args: argparse.Namespace, other):
    config = {
        "model": args.model,
        "seed": args.seed, "out": args.out,
        "extra": getattr(args, "extra", None),
    }
    return config, other.model


def main(argv=None):
    parser = argparse.ArgumentParser()
    ns, rest = parser.parse_known_args(argv)
    return vars(ns), ns.quiet
"""


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "headless").mkdir()
    (tmp_path / "headless" / "stage.py").write_text(textwrap.dedent(STAGE))
    (tmp_path / "headless" / "__pycache__").mkdir()
    (tmp_path / "headless" / "__pycache__" / "stale.py").write_text("def f(a, b, c, d, e, f, g, h): import headless\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def f(a, b, c, d, e, f, g, h): import headless\n")
    (tmp_path / "registration.py").write_text("def register():\n    from .operators import ops\n")
    return tmp_path


def test_the_code_files_are_the_packages_and_the_top_level(tree):
    files = [p.relative_to(tree).as_posix() for p in architecture.code_files(tree)]
    assert files == ["registration.py", "headless/stage.py"]


def test_eight_parameters_count_seven_do_not_and_self_is_not_a_parameter(tree):
    found = dict(architecture.many_parameters(tree, architecture.code_files(tree)))
    assert found == {
        "headless/stage.py:8 eight": 8,
        "headless/stage.py:32 wide": 8,
        "headless/stage.py:36 static": 8,
        "headless/stage.py:39 keywords": 8,
    }


def test_only_imports_of_our_own_modules_inside_functions_count(tree):
    found = architecture.inner_imports(tree, architecture.code_files(tree))
    # eight: bvb_addon.atomic, relative, headless.run (with os: one statement); nested: eval_bridge.
    # Not: json (stdlib), numpy, the lookalike, the top-level and class-body imports.
    assert found == [
        "headless/stage.py:9",
        "headless/stage.py:11",
        "headless/stage.py:12",
        "headless/stage.py:15",
        "registration.py:2",
    ]


def test_plumbing_is_the_lines_that_read_the_parsed_namespace(tree):
    found = architecture.plumbing(tree, architecture.code_files(tree))
    # plumb: the model line, the seed/out line, the getattr line (other.model is no namespace).
    # main: the return line reads ns twice (vars and .quiet): one line.
    assert found == {"headless/stage.py:43 plumb": (3, 7), "headless/stage.py:52 main": (1, 4)}


def test_options_are_option_strings_but_help_aliases_apart_positionals_not():
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("--model")
    parser.add_argument("-q", "--quiet", action="store_true")
    parser.add_argument("--old-name", dest="model", help=argparse.SUPPRESS)
    parser.add_subparsers(dest="command").add_parser("sub")
    assert architecture.parser_options(parser) == (3, 1, 1)
