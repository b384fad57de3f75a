"""Command line of the eval bridge: dv, ls, overall, leaderboard, serve, report, vgi, steps.

It only parses arguments into eval_bridge.api's options, calls the API and prints what came back. The parsers are
built from the options classes alone (each in a light module apart from its stage); a stage's modules load in the
command that runs it, so ``--help`` and bad flags cost no scorer, web server or numpy.
"""

import argparse
import logging
import sys
import time
from typing import TYPE_CHECKING, NoReturn

from bvb_addon import errors, outcomes, path_args
from bvb_addon.command_line import Parser, prog, setup_logging, sub_parser
from bvb_addon.errors import USER_ERRORS, ArgumentError, JudgeError
from bvb_addon.options import add_options, from_namespace
from bvb_addon.run_dir import RunDir

from .leaderboard.options import LeaderboardOptions
from .pages.options import ExportOptions, ReportOptions, ViewOptions
from .scoring.options import DVOptions, LSOptions, OverallOptions, StepsOptions
from .scoring.rules_gate import RULE_BREAK
from .service import cli as service_cli
from .vgi import cli as vgi_cli

if TYPE_CHECKING:
    from . import api
    from .leaderboard.board import LeaderboardResult
    from .pages.inspect_export import ExportResult
    from .pages.report import ReportResult

log = logging.getLogger(__name__)

SubParsers = argparse._SubParsersAction
"""``bvb score``'s subcommands (what each ``_add_*`` adds its parser to)."""

EXAMPLES = """examples:
  bvb score dv --run results/r1 --split split.jsonl --videos VSI-Bench \\
      --judge-base-url https://api.openai.com/v1 --judge-model gpt-4o --workers 8
  bvb score dv --run results/r1 --split suite/split.jsonl --videos suite --judge geometry
  bvb score ls --run results/r1 --split split.jsonl --videos VSI-Bench --encoder ./vjepa2.1
  bvb score dv ... --backend ray --ray-address auto --judge-concurrency 8
  bvb score overall --run results/r1
  bvb leaderboard results/r1 results/r2 --out board.csv --reference published.csv
  bvb serve --root results --root VSI-Bench \\
      --judge-base-url https://api.openai.com/v1 --judge-model gpt-4o
"""


def _add_dv(sub: SubParsers) -> None:
    p = sub_parser(
        sub,
        "dv",
        "Dual VQA: judge answers on source and render, pooled retention",
        "bvb score dv --run results/r1 --split suite/split.jsonl --videos suite --judge geometry",
    )
    add_options(p, DVOptions)
    p.set_defaults(func=cmd_dv)


def _add_ls(sub: SubParsers) -> None:
    p = sub_parser(
        sub,
        "ls",
        "Latent Similarity with the release's V-JEPA 2.1 ViT-G encoder (a local snapshot folder)",
        "bvb score ls --run results/r1 --split suite/split.jsonl --videos suite --encoder ./vjepa2.1",
    )
    add_options(p, LSOptions)
    p.set_defaults(func=cmd_ls)


def _add_overall(sub: SubParsers) -> None:
    p = sub_parser(
        sub, "overall", "Overall from the run's DV and LS; writes overall.json", "bvb score overall --run results/r1"
    )
    add_options(p, OverallOptions)
    p.set_defaults(func=cmd_overall)


def _add_leaderboard(sub: SubParsers) -> None:
    p = sub_parser(
        sub,
        "leaderboard",
        "rank runs in BVB's published CSV shape",
        "bvb leaderboard results/r1 results/r2 --out board.csv --reference published.csv",
    )
    add_options(p, LeaderboardOptions)
    p.set_defaults(func=cmd_leaderboard)


def _add_serve(sub: SubParsers) -> None:
    p = sub_parser(
        sub,
        "serve",
        "local HTTP scoring service for the add-on",
        "bvb serve --root results --root VSI-Bench --judge-base-url https://api.openai.com/v1 --judge-model gpt-4o",
        epilog="Judges, encoders and roots are fixed here (flags or --config FILE); a job only names them. "
        "The token comes from $BVB_BRIDGE_TOKEN; without it one is generated and written (mode 0600) to --token-file.",
    )
    service_cli.add_serve_options(p)
    p.set_defaults(func=cmd_serve)


def _add_report(sub: SubParsers) -> None:
    p = sub_parser(
        sub, "report", "static HTML report of scored runs", "bvb report results/r1 results/r2 --out results/report"
    )
    add_options(p, ReportOptions)
    p.set_defaults(func=cmd_report)


def _add_view(sub: SubParsers) -> None:
    p = sub_parser(
        sub, "view", "serve the report on loopback, refreshed while runs and scorers write", "bvb view results/r1"
    )
    add_options(p, ViewOptions)
    p.set_defaults(func=cmd_view)


def _add_export(sub: SubParsers) -> None:
    p = sub_parser(
        sub,
        "export",
        "export a run to another tool's format (inspect: an Inspect AI eval log)",
        "bvb export inspect results/r1 --out r1.json",
    )
    add_options(p, ExportOptions)
    p.set_defaults(func=cmd_export)


def _add_vgi(sub: SubParsers) -> None:
    vgi_cli.add_vgi(sub)


def _add_vgi_filter(sub: SubParsers) -> None:
    vgi_cli.add_vgi_filter(sub)


def _add_steps(sub: SubParsers) -> None:
    """``bvb score steps``' parser: a run's options (StepsOptions', generated), then a video generator's."""
    p = sub_parser(
        sub,
        "steps",
        "judge every step snapshot and analyse self-correction across agent steps",
        "bvb score steps --run results/r1 --split suite/split.jsonl --videos suite --judge geometry\n"
        "  bvb score steps --generator-steps wan=steps/wan --tasks tasks.jsonl --out results/vgi_steps "
        "--judge-base-url URL --judge-model M --step-range 4 10",
    )
    add_options(p, StepsOptions)
    vgi = p.add_argument_group("a video generator's denoising steps (instead of --run; the VLM judge of bvb score vgi)")
    vgi.add_argument(
        "--generator-steps", nargs="+", metavar="[NAME=]DIR",
        help="per generator, a folder of <instance id>/<step>.mp4 (named by the folder, or NAME; default: none, then --run)",
    )  # fmt: skip
    vgi.add_argument(
        "--tasks", help="the VGI tasks file of those instances; required with --generator-steps (default: none)"
    )
    vgi.add_argument(
        "--out",
        help="folder for <generator>/steps_analysis.json and the judge's cache; required with --generator-steps (default: none)",
    )
    vgi.add_argument("--step-range", nargs=2, type=int, metavar=("A", "B"), help="only steps A to B (default: all)")
    vgi.add_argument("--frame-budget", type=int, default=32, help="frames the judge sees per video")
    vgi.add_argument("--sampling", choices=("adaptive", "uniform"), default="adaptive", help="how they are picked")
    vgi.add_argument("--workers", type=int, default=4, help="videos judged at once")
    p.set_defaults(func=cmd_steps)


def build_parser() -> Parser:
    """``bvb score``'s parser: every subcommand of the eval bridge."""
    parser = Parser(
        prog="bvb score",
        description="Score BVB runs: Dual VQA, Latent Similarity, Overall (and the leaderboard, report, service).",
        epilog=EXAMPLES,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (
        _add_dv,
        _add_ls,
        _add_overall,
        _add_leaderboard,
        _add_serve,
        _add_report,
        _add_vgi,
        _add_vgi_filter,
        _add_steps,
        _add_view,
        _add_export,
    ):
        add(sub)
    return parser


def _text_only(options: DVOptions) -> "api.TextOnlyResult":
    """``bvb score dv --text-only``: the release's chance floor, every question asked with no frames."""
    # deferred: the stage's modules load when it runs, never for --help
    from . import api

    result = api.score_text_only(options)
    accuracy = "n/a" if result.accuracy is None else f"{100 * result.accuracy:.2f}%"
    print(
        f"text-only (chance floor): {result.correct} of {result.questions} correct, {accuracy}; "
        f"judge {result.judge_model} ({result.protocol}); {result.new_judge_calls} new calls; "
        f"answers in {result.path}"
    )
    return result


def cmd_dv(args: argparse.Namespace, progress: "api.Progress | None" = None) -> "api.DVResult | api.TextOnlyResult":
    """``bvb score dv``: Dual VQA of a run; prints the retention line."""
    options = from_namespace(DVOptions, args)
    if options.text_only and not options.merge_shards:
        return _text_only(options)
    # deferred: the stage's modules load when it runs, never for --help
    from . import api
    from .scoring.dv_shards import shard_summary_line

    result = api.score_dv(options, progress=progress)
    summary = result.summary
    if options.merge_shards:
        print(shard_summary_line(result.to_summary()))
        return result
    counts = summary.counts
    rate = summary.retention_rate
    dv = "n/a (no question right on the sources)" if rate is None else f"{100 * rate:.2f}"
    print(
        f"DV {dv}: {counts['both_correct']:g} of {counts['source_correct']:g} source-correct questions retained; "
        f"accuracy source {_pct(summary.original_accuracy)}% render {_pct(summary.rendered_accuracy)}%; "
        f"{counts['questions']} questions ({counts['judge_errors']} judge errors, not scored), "
        f"{counts['scenes']} scenes, {counts['scenes_failed']} failed; "
        f"judge {summary.judge_model} ({summary.protocol}); cost ${summary.judge_cost_usd:.4f} "
        f"({summary.new_judge_calls} new calls, ${summary.new_judge_cost_usd:.4f}; "
        f"{summary.cache_hits} cache hits)"
    )
    if summary.release_joinable:
        # The release's own code pools only the questions of rendered scenes (failures left out).
        release_rate = summary.release_joinable.get("retention_rate")
        release_dv = "n/a" if release_rate is None else f"{100 * release_rate:.2f}"
        quirks = sum(n for side in (summary.quirks or {}).values() for n in side.values())
        print(
            f"release's pool: {summary.num_joinable} joinable questions, DV {release_dv} over them; "
            f"{quirks} verdicts decided by a release quirk (summary: quirks)"
        )
    if summary.vsi_bench:
        vsi = summary.vsi_bench
        print(
            f"VSI-Bench official overall: source {vsi['source']['overall']:.2f}, render {vsi['render']['overall']:.2f}"
        )
    if summary.judge_snapshots:
        answered = ", ".join(
            f"{s.get('model') or 'unnamed'}{' ' + s['system_fingerprint'] if s.get('system_fingerprint') else ''} "
            f"({s.get('answers')})"
            for s in summary.judge_snapshots
        )
        print(f"answered by: {answered}")
    if summary.rules == "enforce":
        broken = sum(1 for f in summary.failures.values() if f.get("status") == RULE_BREAK)
        print(f"scene rules enforced ({summary.rules_version}): {broken} scenes scored as rule breaks")
    print(f"wrote {result.rows} and {result.summary_path.name}")
    if result.judge_errors:
        print(
            f"warning: {result.judge_errors} questions failed at the judge ({result.judge_error_reason()}); "
            "rerun with --resume to retry them"
        )
    return result


def cmd_ls(args: argparse.Namespace, progress: "api.Progress | None" = None) -> "api.LSResult":
    """``bvb score ls``: Latent Similarity of a run; prints the vision_sim line."""
    # deferred: the stage's modules load when it runs, never for --help
    from . import api

    options = from_namespace(LSOptions, args)
    result = api.score_ls(options, progress=progress)
    summary = result.summary
    print(
        f"LS {_pct(summary.vision_sim)} (layout {_pct(summary.layout_sim)}, motion {_pct(summary.motion_sim)}; "
        f"failures as 0); scored-only {_pct((summary.scored_only or {}).get('vision_sim'))}; "
        f"{summary.num_ok} of {summary.num_scenes} scenes scored; encoder {summary.encoder or summary.model}"
        + (
            f" (checkpoint {summary.checkpoint}, sha256 {summary.checkpoint_sha256[:12]})"
            if summary.checkpoint_sha256
            else ""
        )  # fmt: skip
    )
    if summary.rules == "enforce":
        broken = (summary.by_status or {}).get(RULE_BREAK, 0)
        print(f"scene rules enforced ({summary.rules_version}): {broken} scenes scored 0 as rule breaks")
    print(f"wrote {result.rows} and {result.summary_path.name}" if result.shard is None
          else f"wrote the LS shard {result.shard[0]} of {result.shard[1]} in {options.run}")  # fmt: skip
    return result


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}"


def cmd_overall(args: argparse.Namespace, progress: "api.Progress | None" = None) -> "api.OverallResult":
    """``bvb score overall``: Overall from the run's DV and LS."""
    # deferred: the stage's modules load when it runs, never for --help
    from . import api

    result = api.score_overall(from_namespace(OverallOptions, args))
    record = result.record
    if record.overall is None:
        have = {"DV": record.dual_vqa, "LS": record.latent_sim}
        known = ", ".join(f"{k} {v:.2f}" for k, v in have.items() if v is not None)
        print(f"Overall n/a: missing {', '.join(record.missing)} ({known}); score the missing axis first")
    else:
        print(f"Overall {record.overall:.2f} (DV {record.dual_vqa:.2f}, LS {record.latent_sim:.2f})")
    print(f"wrote {result.path}")
    return result


def cmd_leaderboard(args: argparse.Namespace, progress: "api.Progress | None" = None) -> "LeaderboardResult":
    """``bvb leaderboard``: the CSV and its table."""
    # deferred: the stage's modules load when it runs, never for --help
    from .leaderboard.board import leaderboard

    result = leaderboard(from_namespace(LeaderboardOptions, args))
    print(result.table)
    print(f"wrote {result.out}")
    return result


def cmd_serve(args: argparse.Namespace, progress: "api.Progress | None" = None) -> int:
    """``bvb serve``: the scoring service, until interrupted."""
    # deferred: the stage's modules load when it runs, never for --help
    from .service.app import serve

    return serve(service_cli.options_from(args))


def cmd_report(args: argparse.Namespace, progress: "api.Progress | None" = None) -> "ReportResult":
    """``bvb report``: the static HTML report."""
    # deferred: the stage's modules load when it runs, never for --help
    from .pages.report import report

    result = report(from_namespace(ReportOptions, args))
    print(f"wrote {result.index or result.out}")
    return result


def cmd_view(args: argparse.Namespace, progress: "api.Progress | None" = None) -> NoReturn:
    """``bvb view``: the live report on loopback, until interrupted."""
    # deferred: the stage's modules load when it runs, never for --help
    from .pages.live import view

    options = from_namespace(ViewOptions, args)
    server = view(options)
    shown = ", ".join(map(str, options.paths))
    print(f"serving the live report of {shown} at {server.url} (read-only; Ctrl-C stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        server.stop()


def cmd_export(args: argparse.Namespace, progress: "api.Progress | None" = None) -> "ExportResult":
    """``bvb export inspect``: the run as an Inspect AI eval log."""
    # deferred: the stage's modules load when it runs, never for --help
    from .pages.inspect_export import export

    result = export(from_namespace(ExportOptions, args))
    print(f"wrote {result.out}: {result.samples} samples (open with: inspect view --log-dir {result.out.parent})")
    return result


def cmd_steps(
    args: argparse.Namespace, progress: "api.Progress | None" = None
) -> "api.StepsResult | api.VGIStepsResult":
    """``bvb score steps``: the self-correction analysis of a run's step snapshots, or of generators' steps."""
    if args.generator_steps:
        return _vgi_steps(args)
    # deferred: the stage's modules load when it runs, never for --help
    from . import api

    result = api.score_steps(from_namespace(StepsOptions, args))
    print(
        f"steps: {result.questions} questions over {result.scenes} scenes; "
        f"wrong->correct {100 * result.wrong_to_correct_rate:.1f}%, "
        f"wrong->other wrong {100 * result.wrong_to_other_wrong_rate:.1f}%, "
        f"correct->wrong {100 * result.correct_to_wrong_rate:.1f}%, "
        f"stable over the second half {100 * result.stability_second_half:.1f}%, "
        f"mean lock-in step {result.mean_lock_in_step:.2f}"
    )
    print(f"wrote {result.path}")
    return result


def _vgi_steps(args: argparse.Namespace) -> "api.VGIStepsResult":
    """``bvb score steps --generator-steps``: VGI's three figures along each generator's denoising steps."""
    judge = from_namespace(StepsOptions, args).judge  # the judge flags are StepsOptions' (generated)
    if args.run or not args.tasks or not args.out or judge.kind != "vlm":
        raise ArgumentError(
            "--generator-steps takes --tasks FILE and --out DIR and the VLM judge (--judge-base-url, --judge-model), "
            "not --run or --judge geometry"
        )
    # deferred: the stage's modules load when it runs, never for --help
    from . import api

    result = api.score_vgi_steps(vgi_cli.steps_options(args, judge))
    vgi_cli.print_steps(result)
    return result


# Per command: (outcomes stage, unit of its rows, whether it takes --resume). Others end 0 when they succeed.
FAULT_STAGES = {
    "dv": ("dv", "questions", True),
    "ls": ("ls", "scenes", True),
    "steps": ("steps", "scenes", False),
    "vgi": ("vgi", "videos", True),
}


def _stage_exit(args: argparse.Namespace, result: object, argv: list[str]) -> int:
    """The exit code of a finished command: FAULT_EXIT (and the rerun line) when rows ended in faults."""
    stage = FAULT_STAGES.get(args.command)
    if stage is None:
        return outcomes.OK_EXIT
    # deferred: the stage's modules load when it runs, never for --help
    from . import api  # loaded already: every command with a stage here scores through it

    if isinstance(result, api.DVResult | api.LSResult | api.StepsResult | api.VGIResult | api.VGIStepsResult):
        result = result.to_summary()  # the rows' statuses as the summary counts them
    if not isinstance(result, dict):
        return outcomes.OK_EXIT
    name, unit, resumable = stage
    if "faults" in result:  # steps: the scenes that hit a fault, beside the scene count
        rows = list(result["faults"]) + [{"status": "ok"}] * max(0, result.get("scenes", 0) - len(result["faults"]))
    else:
        by_status = result["by_status"] if "by_status" in result else result["counts"]["by_status"]  # LS's, DV's
        rows = [{"status": status} for status, n in by_status.items() for _ in range(n)]
    rerun = outcomes.rerun_command("eval_bridge", argv, "--resume" if resumable else None)
    return outcomes.finish(name, rows, rerun, unit)


def _judge_fault_exit(args: argparse.Namespace, argv: list[str]) -> int:
    """FAULT_EXIT after a JudgeError, with the fault line counted from the summary the stage wrote."""
    # deferred: the stage's modules load when it runs, never for --help
    from bvb_addon.records import read_dv_summary

    summary_path = RunDir(getattr(args, "run", None) or ".").dv_summary
    if args.command == "dv" and summary_path.is_file():
        code = _stage_exit(args, read_dv_summary(summary_path).as_dict(), argv)
        if code:
            return code
    print(f"faults: the judge failed; rerun: {outcomes.rerun_command('eval_bridge', argv)}", flush=True)
    return outcomes.FAULT_EXIT


@errors.entry
def main(argv: list[str] | None = None) -> int:
    """``bvb score``'s entry point: the exit code (outcomes' table)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    setup_logging(args.verbose, args.quiet)
    try:
        # --out is the leaderboard's CSV, and a folder for report and vgi.
        out_is_file = args.command == "leaderboard"
        path_args.check(
            folders=[(f"--{name}", getattr(args, name, None)) for name in ("run", "videos", "shared", "timelines")]
            + [("--shared", getattr(args, "judge__shared", None))]  # dv's and steps' judge (JudgeOptions.shared)
            + [("--root", root) for root in getattr(args, "roots", None) or []]
            + [("run", run) for run in getattr(args, "runs", None) or []]
            + ([] if out_is_file else [("--out", getattr(args, "out", None))]),
            new_files=[
                (f"--{name.replace('_', '-')}", getattr(args, name, None))
                for name in ("split", "cache", "tasks", "config", "token_file")
            ]
            + [("--cache", getattr(args, "judge__cache", None))]
            # --reference is repeatable (leaderboard, report): each path is checked.
            + [("--reference", path) for path in getattr(args, "reference", None) or []]
            + ([("--out", args.out)] if out_is_file else []),
        )
        result = args.func(args)
    except JudgeError as exc:  # every judge call failed: a judge fault that --resume redoes, not bad input
        print(f"error: {exc}", file=sys.stderr)
        return _judge_fault_exit(args, argv)
    except USER_ERRORS as exc:
        return errors.report(exc)
    except OSError as exc:  # a full disk writing rows or summaries
        return outcomes.environment_exit(exc, outcomes.rerun_command("eval_bridge", argv))
    except KeyboardInterrupt:
        print(outcomes.interrupted_line(prog(args.command), FAULT_STAGES.get(args.command, ("", "", False))[2]),
              file=sys.stderr)  # fmt: skip
        return outcomes.INTERRUPTED_EXIT
    return _stage_exit(args, result, argv)
