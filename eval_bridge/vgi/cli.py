"""``bvb score vgi``, ``bvb score vgi-filter`` and ``bvb score steps --generator-steps``: parse, call the stage
function, print its lines. The parsers are generated from the options classes (``vgi.options``);
``eval_bridge.cli`` registers them beside the other scoring commands. The stages (the scorer, the filter, the
leaderboard) load when a command runs, not for the parsers.
"""

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from bvb_addon.command_line import sub_parser
from bvb_addon.options import add_options, from_namespace
from bvb_addon.run_dir import STEPS_ANALYSIS

from ..scoring.options import JudgeOptions
from .options import VLM_ONLY, VGIFilterOptions, VGIOptions, VGIResult, VGIStepsOptions, VGIStepsResult, named_folder

if TYPE_CHECKING:
    from ..api import Progress
    from .filter import VGIFilterResult


def add_vgi(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``bvb score vgi``'s parser, generated from VGIOptions."""
    p = sub_parser(
        sub,
        "vgi",
        "VGI process-sensitive scoring of procedure videos, one folder per generator, and their leaderboard",
        "bvb score vgi --tasks data/vgi/tasks.jsonl --videos genA=out/genA genB=out/genB --out results/vgi "
        "--judge-base-url https://api.openai.com/v1 --judge-model gpt-4o",
    )
    add_options(p, VGIOptions)
    p.set_defaults(func=cmd_vgi)
    return p


def add_vgi_filter(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``bvb score vgi-filter``'s parser, generated from VGIFilterOptions."""
    p = sub_parser(
        sub,
        "vgi-filter",
        "VGI's pre-generation filter: keep tasks solved by one generator and failed by another on the easiest level",
        "bvb score vgi-filter --results results/vgi_easy --tasks data/vgi/tasks.jsonl --kept-tasks data/vgi/kept.jsonl",
    )
    add_options(p, VGIFilterOptions)
    p.set_defaults(func=cmd_vgi_filter)
    return p


def cmd_vgi(args: argparse.Namespace, progress: "Progress | None" = None) -> VGIResult:
    """``bvb score vgi``: VGI scores of each generator's videos, and the leaderboard over them."""
    # deferred: the stage's modules load when it runs, never for --help
    from bvb_addon.progress import bar as progress_bar

    # deferred: the stage's modules load when it runs, never for --help
    from .. import api
    from .score import half_instances, read_tasks

    options = from_namespace(VGIOptions, args)
    bars: list = []  # made at the first video, so that bad input is the only line on stderr

    def advance(_row: dict) -> None:
        if not bars:
            # By then the stage has read and checked the tasks file: counting its rows again is cheap.
            tasks = read_tasks(options.tasks)
            total = len(half_instances(tasks, options.half_seed) if options.half else tasks)
            bars.append(progress_bar(total=total * len(options.generators), desc="vgi", unit="video"))
        bars[0].update()

    try:
        result = api.score_vgi(options, progress=advance)
    finally:
        for bar in bars:
            bar.close()
    print_vgi(result)
    return result


def print_vgi(result: VGIResult) -> None:
    """Each generator's line (and its missing videos and failures), the leaderboard, where they were written."""
    # deferred: the stage's modules load when it runs, never for --help
    from .leaderboard import BOARD_CSV, format_table

    for name, summary in result.generators.items():
        counts, settings = summary["counts"], summary["settings"]
        print(
            f"VGI {name}: score {summary['overall']['score']:.1f}, success {summary['overall']['success']:.1f} "
            f"over {counts['scored']} of {counts['instances']} instances ({counts['missing']} missing, "
            f"{counts['video_errors']} unreadable, {counts['judge_errors']} judge errors, not scored); "
            f"judge {summary['judge']}"
            + (f", {settings['sampling']} {settings['frame_budget']} frames, window {settings['window']} "
               f"stride {settings['stride']}, prompts {settings['prompt_version']}" if "sampling" in settings else "")
            + (f"; half (seed {settings['half_seed']}, {counts['instances']} of {settings['of']})"
               if settings.get("half") else "")
        )  # fmt: skip
        if summary["missing"]:
            shown = ", ".join(summary["missing"][:10]) + (" ..." if len(summary["missing"]) > 10 else "")
            print(f"  missing videos (scored 0): {shown}")
        for task_id, reason in summary["failures"].items():
            print(f"  {task_id}: {reason}")
    print(format_table(result.leaderboard))
    print(f"wrote {result.out / BOARD_CSV} and each generator's vgi.jsonl")


def cmd_vgi_filter(args: argparse.Namespace, progress: "Progress | None" = None) -> "VGIFilterResult":
    """``bvb score vgi-filter``: the pre-generation filter over generators' easiest-level scores."""
    # deferred: the stage's modules load when it runs, never for --help
    from .filter import FILTER_JSON, KEPT_TXT, vgi_filter

    options = from_namespace(VGIFilterOptions, args)
    result = vgi_filter(options)
    print(
        f"VGI filter on level {result.level} over {len(result.generators)} generators: kept "
        f"{len(result.kept)} of {len(result.kept) + len(result.dropped)} tasks"
    )
    for task, reason in result.dropped.items():
        print(f"  dropped {task}: {reason}")
    kept = f" and {options.kept_tasks}" if options.kept_tasks else ""
    print(f"wrote {Path(options.results) / FILTER_JSON} and {KEPT_TXT}{kept}")
    return result


def steps_options(args: argparse.Namespace, judge: JudgeOptions) -> VGIStepsOptions:
    """``bvb score steps --generator-steps``' options: the steps parser's VGI group, and its judge flags' VLM."""
    # The steps parser's judge is DV's JudgeOptions: only the fields VGI's judge has carry over.
    vlm = JudgeOptions(**{name: getattr(judge, name) for name in vars(judge) if name not in VLM_ONLY})
    return VGIStepsOptions(
        tasks=Path(args.tasks), out=Path(args.out), generators=tuple(map(named_folder, args.generator_steps)), vlm=vlm,
        frame_budget=args.frame_budget, sampling=args.sampling,
        step_range=tuple(args.step_range) if args.step_range else None, workers=args.workers,
    )  # fmt: skip


def print_steps(result: VGIStepsResult) -> None:
    """Each generator's three figures along its denoising steps, and where its analysis was written."""
    for name, analysis in result.generators.items():
        span = f" (steps {analysis['step_range'][0]}-{analysis['step_range'][1]})" if analysis["step_range"] else ""
        print(
            f"steps {name}{span}: {analysis['questions']} instances over steps {analysis['steps'][:1]}..{analysis['steps'][-1:]}; "
            f"wrong->correct {100 * analysis['wrong_to_correct_rate']:.1f}%, "
            f"wrong->another wrong {100 * analysis['wrong_to_other_wrong_rate']:.1f}%, "
            f"stable over the second half {100 * analysis['stability_second_half']:.1f}%; judge {analysis['judge']}"
        )
        print(f"wrote {result.out / name / STEPS_ANALYSIS}")
