"""The ``bvb`` command line: one entry point whose subcommands delegate to each stage's module.

bvb synth ...            python -m headless.synth ...
bvb run ...              python -m headless.run ...
bvb render ...           python -m headless.render ...
bvb score dv|ls|overall  python -m eval_bridge dv|ls|overall ...
bvb leaderboard ...      python -m eval_bridge leaderboard ...
bvb report ...           python -m eval_bridge report ...
bvb serve ...            python -m eval_bridge serve ...
bvb view RUN_OR_DIR...   python -m eval_bridge view ...  (the report, live, on loopback)
bvb export inspect ...   python -m eval_bridge export inspect ...
bvb exec ...             python -m headless.exec ...
bvb demo                 the whole pipeline on a synthetic suite, offline
"""

import argparse
import importlib
import sys

# subcommand -> (module with main(argv), fixed leading arguments, one-line help)
DELEGATES = {
    "synth": ("headless.synth", [], "generate a synthetic indoor suite with exact ground truth"),
    "run": ("headless.run", [], "run an agent on every scene of a split"),
    "render": ("headless.render", [], "render every submission of a run from its camera"),
    "exec": ("headless.exec", [], "run one bpy program in a sandboxed worker"),
    "vgi-tasks": ("headless.vgi_tasks", [], "generate VGI procedure tasks built in Blender"),
    "vgi-timelines": ("headless.vgi_timelines", [], "export object timelines of a VGI run (sandboxed)"),
    "leaderboard": ("eval_bridge.cli", ["leaderboard"], "write the leaderboard CSV of runs"),
    "report": ("eval_bridge.cli", ["report"], "build the static HTML report of runs"),
    "serve": ("eval_bridge.cli", ["serve"], "start the local scoring service"),
    "view": ("eval_bridge.cli", ["view"], "serve the report live on loopback while runs and scorers write"),
    "export": ("eval_bridge.cli", ["export"], "export a run (inspect: an Inspect AI eval log)"),
}
SCORE_AXES = ("dv", "ls", "overall", "vgi", "steps")

EPILOG = """examples:
  bvb demo
  bvb synth --out data/synth --scenes 3 --difficulty easy --seed 0
  bvb run --split data/synth/split.jsonl --videos data/synth --output results/run_001 --model gpt-4o
  bvb render --run results/run_001 --preset fast
  bvb score dv --run results/run_001 --split data/synth/split.jsonl --videos data/synth --judge geometry
  bvb report results/run_001 --out results/report
  bvb view results/run_001
  bvb export inspect results/run_001 --out run_001.json
each subcommand takes --help."""


def delegate(module_name, argv):
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        print(f"error: {module_name} is not available ({exc}); reinstall with ./bvb setup", file=sys.stderr)
        return 2
    result = module.main(argv)
    return int(result or 0)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="bvb",
        description="BVB (Blender-VideoBench): rebuild videos as animated Blender scenes and score them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, _lead, help_text) in DELEGATES.items():
        # add_help=False: "bvb run --help" shows the stage's own help.
        sub.add_parser(name, help=help_text, add_help=False)
    sub.add_parser("score", help="score a run: dv, ls or overall (bvb score dv --help)", add_help=False)
    from headless import demo

    demo.add_parser(sub)
    return parser


def main(argv=None):
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
        if not rest or rest[0] not in SCORE_AXES:
            print(f"usage: bvb score {{{','.join(SCORE_AXES)}}} ... (example: bvb score overall --run results/run_001)")
            return 0 if rest and rest[0] in ("-h", "--help") else 2
        return delegate("eval_bridge.cli", rest)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
