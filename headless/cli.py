"""The ``bvb`` command line: one entry point whose subcommands delegate to each stage's module.

bvb synth ...            python -m headless.synth ...
bvb run ...              python -m headless.run ...
bvb render ...           python -m headless.render ...
bvb audit ...            python -m headless.audit ...
bvb score dv|ls|overall  python -m eval_bridge dv|ls|overall ...
bvb leaderboard ...      python -m eval_bridge leaderboard ...
bvb report ...           python -m eval_bridge report ...
bvb serve ...            python -m eval_bridge serve ...
bvb view RUN_OR_DIR...   python -m eval_bridge view ...  (the report, live, on loopback)
bvb export inspect ...   python -m eval_bridge export inspect ...
bvb human pack|serve|score  python -m eval_bridge.human.cli ...  (a blinded human study)
bvb exec ...             python -m headless.exec ...
bvb demo                 the whole pipeline on a synthetic suite, offline
bvb completion bash|zsh  a shell completion script: eval "$(bvb completion bash)"
"""

import argparse
import difflib
import importlib
import sys
from collections.abc import Sequence

from bvb_addon.command_line import SCORE_STAGES, Parser
from bvb_addon.errors import entry

# subcommand -> (module with main(argv), fixed leading arguments, one-line help)
DELEGATES = {
    "synth": ("headless.synth", [], "generate a synthetic indoor suite with exact ground truth"),
    "run": ("headless.run", [], "run an agent on every scene of a split"),
    "campaign": ("headless.campaign", [], "every stage of many configurations as one resumable job, one budget"),
    "render": ("headless.render", [], "render every submission of a run from its camera"),
    "audit": ("headless.audit", [], "check every submission of a run against the release prompt's scene rules"),
    "exec": ("headless.exec", [], "run one bpy program in a sandboxed worker"),
    "vgi-tasks": ("headless.vgi_tasks", [], "generate VGI procedure tasks built in Blender"),
    "vgi-timelines": ("headless.vgi_timelines", [], "export object timelines of a VGI run (sandboxed)"),
    "leaderboard": ("eval_bridge.cli", ["leaderboard"], "write the leaderboard CSV of runs"),
    "report": ("eval_bridge.cli", ["report"], "build the static HTML report of runs"),
    "serve": ("eval_bridge.cli", ["serve"], "start the local scoring service"),
    "view": ("eval_bridge.cli", ["view"], "serve the report live on loopback while runs and scorers write"),
    "export": ("eval_bridge.cli", ["export"], "export a run (inspect: an Inspect AI eval log)"),
    "human": ("eval_bridge.human.cli", [], "judges checked against people: blinded study pages and their scores"),
    "demo": ("headless.demo", [], "run the whole benchmark offline on a small synthetic suite"),
}
SCORE_AXES = SCORE_STAGES

EPILOG = """examples:
  bvb demo
  bvb synth --out data/synth --scenes 3 --difficulty easy --seed 0
  bvb run --split data/synth/split.jsonl --videos data/synth --output results/run_001 --model gpt-4o
  bvb render --run results/run_001 --preset fast
  bvb score dv --run results/run_001 --split data/synth/split.jsonl --videos data/synth --judge geometry
  bvb report results/run_001 --out results/report
  bvb view results/run_001
  bvb export inspect results/run_001 --out run_001.json
  eval "$(bvb completion bash)"      (tab completion of stages and options; zsh and tcsh too)
each subcommand takes --help."""


def delegate(module_name: str, argv: list[str]) -> int:
    """Run a stage module's main(argv); its exit code (2 when the module cannot be imported)."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        print(f"error: {module_name} is not available ({exc}); reinstall with ./bvb setup", file=sys.stderr)
        return 2
    result = module.main(argv)
    return int(result or 0)


def build_parser() -> Parser:
    """``bvb``'s parser: a subcommand per stage (each parses its own arguments)."""
    parser = Parser(
        prog="bvb",
        description="BVB (Blender-VideoBench): rebuild videos as animated Blender scenes and score them.",
        epilog=EPILOG,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, _lead, help_text) in DELEGATES.items():
        # add_help=False: "bvb run --help" shows the stage's own help.
        sub.add_parser(name, help=help_text, add_help=False)
    sub.add_parser(
        "score", help=f"score a run: {', '.join(SCORE_STAGES[:-1])} or {SCORE_STAGES[-1]} (bvb score dv --help)",
        add_help=False,
    )  # fmt: skip
    # Listed for --help only: main() answers `completion` before parsing.
    sub.add_parser("completion", help="a shell completion script: eval \"$(bvb completion bash)\" (zsh, tcsh too)",
                   add_help=False)  # fmt: skip
    return parser


COMMANDS = (*DELEGATES, "score", "completion")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def stage_parsers() -> dict[str, argparse.ArgumentParser]:
    """{"run": parser, "score dv": parser, ...}: every stage's own parser (completion and the tests walk them)."""
    # deferred: bvb's delegation to one stage never needs the bridge's parsers
    from eval_bridge import cli as bridge

    bridge_stages = _subcommands(bridge.build_parser())
    parsers = {}
    for name, (module, lead, _) in DELEGATES.items():
        parsers[name] = bridge_stages[lead[0]] if lead else importlib.import_module(module).build_parser()
    for axis in SCORE_AXES:
        parsers[f"score {axis}"] = bridge_stages[axis]
    return parsers


def completion(parser: argparse.ArgumentParser, rest: list[str]) -> int:
    """``bvb completion bash|zsh|tcsh``: a shell completion script for every stage and option (shtab)."""
    shell = rest[0] if rest else "bash"
    try:
        import shtab  # deferred: an optional dependency (bvb completion only)
    except ImportError:
        print("error: bvb completion needs shtab; install it with: pip install shtab", file=sys.stderr)
        return 2
    if shell not in shtab.SUPPORTED_SHELLS:
        print(f"error: bvb completion {shell}: use one of {', '.join(shtab.SUPPORTED_SHELLS)}", file=sys.stderr)
        return 2
    # Typed as the base class: the stages' own parsers (any ArgumentParser) become its parents.
    full: argparse.ArgumentParser = Parser(prog="bvb", description=parser.description)
    sub = full.add_subparsers(dest="command", metavar="COMMAND")
    score = sub.add_parser("score", help="score a run").add_subparsers(dest="axis", metavar="AXIS")
    helps = {name: help_text for name, (_m, _l, help_text) in DELEGATES.items()}
    for name, stage in stage_parsers().items():
        target, leaf = (score, name.split()[1]) if name.startswith("score ") else (sub, name)
        # parents= copies the stage's options (its -h included) into the completion's tree.
        target.add_parser(leaf, parents=[stage], add_help=False, help=helps.get(name, stage.description))
    print(shtab.complete(full, shell=shell))
    return 0


def unknown(what: str, word: str, known: Sequence[str], usage: str) -> int:
    """One line for a command that does not exist, with the closest known one; exit code 2."""
    close = difflib.get_close_matches(word, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    print(f"{usage}\nerror: unknown {what} {word!r}; {hint}(one of: {', '.join(known)})", file=sys.stderr)
    return 2


@entry
def main(argv: list[str] | None = None) -> int:
    """``bvb``'s entry point: the delegated stage's exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    command, rest = argv[0], argv[1:]
    if command in DELEGATES:
        module, lead, _ = DELEGATES[command]
        return delegate(module, lead + rest)
    if command == "score":
        usage = f"usage: bvb score {{{','.join(SCORE_AXES)}}} ... (example: bvb score overall --run results/run_001)"
        if not rest or rest[0] in ("-h", "--help"):
            print(usage)
            return 0 if rest else 2
        if rest[0] not in SCORE_AXES:
            return unknown("score axis", rest[0], SCORE_AXES, usage)
        return delegate("eval_bridge.cli", rest)
    if command == "completion":
        return completion(parser, rest)
    if not command.startswith("-"):
        return unknown("command", command, COMMANDS, "usage: bvb COMMAND ... (bvb --help lists them)")
    parser.parse_args(argv)  # an unknown option: argparse's usage and error, exit 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
