"""Command line of the eval bridge: dv, ls, overall, leaderboard, serve, report, vgi, steps.

It only parses arguments into eval_bridge.api's options, calls the API and prints what came back.
"""

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import NoReturn

from bvb_addon import errors
from bvb_addon.command_line import Parser, add_alias, sub_parser
from bvb_addon.errors import ArgumentError
from bvb_addon.options import add_options, from_namespace
from bvb_addon.run_dir import JUDGE_CACHE, SHARED, STEPS_ANALYSIS, RunDir

from . import api
from .leaderboard import board
from .pages import inspect_export, live, report
from .scoring.judge_options import JudgeOptions as _J
from .scoring.protocol import PROTOCOLS
from .service import app as service

log = logging.getLogger(__name__)

SubParsers = argparse._SubParsersAction
"""``bvb score``'s subcommands (what each ``_add_*`` adds its parser to)."""

EXAMPLES = """examples:
  bvb score dv --run results/r1 --split split.jsonl --videos VSI-Bench \\
      --judge-base-url https://api.openai.com/v1 --judge-model gpt-4o --workers 8
  bvb score dv --run results/r1 --split suite/split.jsonl --videos suite --judge geometry
  bvb score ls --run results/r1 --split split.jsonl --videos VSI-Bench --encoder ./vjepa2
  bvb score dv ... --backend ray --ray-address auto --judge-concurrency 8
  bvb score overall --run results/r1
  bvb leaderboard results/r1 results/r2 --out board.csv --reference published.csv
  bvb serve --root results --root VSI-Bench \\
      --judge-base-url https://api.openai.com/v1 --judge-model gpt-4o
"""


def _add_backend(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=("local", "ray"), default="local", help="local threads, or Ray tasks")
    p.add_argument(
        "--ray-address", help="Ray cluster to join (auto, or HOST:PORT; default: $RAY_ADDRESS or a local Ray)"
    )


def _add_judge_args(p: argparse.ArgumentParser) -> None:
    """The judge options shared by dv and steps (judge_options reads them)."""
    p.add_argument("--judge", choices=("vlm", "geometry"), default="vlm", help="vlm (an API) or geometry (offline)")
    p.add_argument("--judge-base-url", help="OpenAI-compatible endpoint of the VLM judge (required with --judge vlm)")
    p.add_argument("--judge-model", help=f"judge model id (default {_J.model}, the release's judge)")
    p.add_argument("--judge-api-key-env", default=_J.api_key_env, help="variable holding the judge's API key")
    p.add_argument("--protocol", choices=PROTOCOLS, default=_J.protocol, help="DV's rules (docs/protocol.md)")
    p.add_argument(
        "--vsi-prompt",
        choices=("auto", "local", "api"),
        default=_J.prompt_kind,
        help="vsi_official's numeric post-prompt: VSI-Bench's for local or for API models "
        "(auto: local for a loopback or private endpoint, else api)",
    )
    p.add_argument(
        "--probe-wait",
        type=float,
        default=_J.probe_wait,
        metavar="S",
        help="seconds to keep retrying an endpoint that refuses or times out before scoring starts (0: no probe)",
    )
    p.add_argument("--cache", help=f"judge cache file (default results/{SHARED}/{JUDGE_CACHE})")
    p.add_argument("--shared", help="folder of shared source answers (default results/_dual_vqa_shared)")
    p.add_argument(
        "--price-in", type=float, help="judge input price, USD per million tokens (default: the price sources')"
    )
    p.add_argument(
        "--price-out", type=float, help="judge output price, USD per million tokens (default: the price sources')"
    )
    p.add_argument("--retries", type=int, default=_J.retries, help="retries on 408/409/429/5xx and connection errors")
    p.add_argument(
        "--retry-base-delay", type=float, default=_J.retry_base_delay, help="first backoff in seconds (doubles)"
    )
    p.add_argument(
        "--max-tokens-field",
        choices=("max_completion_tokens", "max_tokens"),
        default=_J.max_tokens_field,
        help="request field for the answer-token cap: 32, or 16 under vsi_official (max_tokens for older servers)",
    )


def _add_dv(sub: SubParsers) -> None:
    p = sub_parser(
        sub,
        "dv",
        "Dual VQA: judge answers on source and render, pooled retention",
        "bvb score dv --run results/r1 --split suite/split.jsonl --videos suite --judge geometry",
    )
    p.add_argument("--run", required=True, help="the run directory (results/<run>)")
    p.add_argument("--split", help="split file (JSON lines, VSI-Bench fields); required unless --merge-shards")
    p.add_argument("--videos", help="source videos root: <root>/<dataset>/<scene>.mp4; required unless --merge-shards")
    p.add_argument(
        "--merge-shards",
        action="store_true",
        help="merge the run's dual_vqa.shard-<i>-of-<N>.jsonl into dual_vqa.jsonl and its summary (no judge calls)",
    )
    p.add_argument(
        "--shard-count",
        type=int,
        metavar="N",
        help="with --merge-shards: the set of -of-N shards (default: the one N the run holds)",
    )
    p.add_argument(
        "--shard",
        metavar="i/N",
        help="score the i-th of N scene shards (scenes in name order, every N-th) into dual_vqa.shard-i-of-N.jsonl "
        "(default: every scene, into dual_vqa.jsonl)",
    )
    p.add_argument(
        "--text-only",
        action="store_true",
        help="the chance floor: ask every question of --split with no frames (the release's text-only prompt); "
        "answers go to _dual_vqa_shared/text_only_answers.jsonl",
    )
    _add_judge_args(p)
    p.add_argument("--votes", type=int, default=1, help="ask N times, take the majority (ties are wrong)")
    p.add_argument("--workers", type=int, default=8, help="questions scored at once (in each scene task on Ray)")
    p.add_argument("--resume", action="store_true", help="keep questions already scored by this judge")
    p.add_argument("--scenes", nargs="+", help="re-score only these scenes (other scenes' rows are kept; default: all)")
    _add_backend(p)
    p.add_argument(
        "--judge-concurrency",
        type=int,
        help=f"most judge requests in flight at once, across the whole Ray cluster "
        f"(default {api.DEFAULT_JUDGE_CONCURRENCY} with --backend ray; unlimited beyond --workers locally)",
    )
    p.set_defaults(func=cmd_dv)


def _add_ls(sub: SubParsers) -> None:
    p = sub_parser(
        sub,
        "ls",
        "Latent Similarity with a V-JEPA 2 encoder",
        "bvb score ls --run results/r1 --split suite/split.jsonl --videos suite --encoder /models/vjepa2",
    )
    p.add_argument("--run", required=True, help="the run directory (results/<run>)")
    p.add_argument("--split", required=True, help="split file (JSON lines, VSI-Bench fields)")
    p.add_argument("--videos", required=True, help="source videos root: <root>/<dataset>/<scene>.mp4")
    p.add_argument(
        "--encoder",
        default=os.environ.get("BVB_VJEPA_MODEL"),
        help="the LS encoder: a local snapshot folder loaded with transformers' AutoModel and its own remote code "
        "(default: $BVB_VJEPA_MODEL, else the release's apiantonio/vjepa2.1-vit-gigantic-384 from the local hub "
        "cache; nothing is downloaded), or V-JEPA 2.1 as "
        "released: a torch-hub entry point of Meta's vjepa2 repository, e.g. vjepa2_1_vit_large_384, with "
        "--encoder-repo and --checkpoint (384 px, ImageNet normalisation)",
    )
    add_alias(p, "--model", "--encoder", "encoder")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument(
        "--dtype", choices=("auto", "bfloat16", "float16", "float32"), default="auto", help="the encoder's dtype"
    )
    p.add_argument("--num-frames", type=int, default=64, help="frames per clip, uniformly sampled")
    p.add_argument(
        "--trust-remote-code", action="store_true", help="kept for old command lines: the snapshot's code always runs"
    )
    p.add_argument(
        "--shard",
        help="score the release's shard i/N (scenes in name order, every N-th) into vision_sim.shard-i-of-N.jsonl; "
        "the last shard to finish merges all N into vision_sim.jsonl (default: every scene, into vision_sim.jsonl)",
    )
    p.add_argument(
        "--encoder-repo",
        help="local checkout of facebookresearch/vjepa2 holding hubconf.py (default: torch hub's cache of it)",
    )
    p.add_argument(
        "--checkpoint",
        help="the entry point's .pt checkpoint file (ema_encoder/target_encoder weights; default: none)",
    )
    p.add_argument("--resume", action="store_true", help="keep scenes already scored with this model")
    p.add_argument("--scenes", nargs="+", help="re-score only these scenes (default: all)")
    _add_backend(p)
    p.add_argument("--scenes-per-task", type=int, default=8, help="scenes per Ray task (one encoder load each)")
    p.set_defaults(func=cmd_ls)


def _add_overall(sub: SubParsers) -> None:
    p = sub_parser(
        sub, "overall", "Overall from the run's DV and LS; writes overall.json", "bvb score overall --run results/r1"
    )
    p.add_argument("--run", required=True, help="the run directory (results/<run>)")
    p.set_defaults(func=cmd_overall)


def _add_leaderboard(sub: SubParsers) -> None:
    p = sub_parser(
        sub,
        "leaderboard",
        "rank runs in BVB's published CSV shape",
        "bvb leaderboard results/r1 results/r2 --out board.csv --reference published.csv",
    )
    add_options(p, board.LeaderboardOptions)
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
    service.add_serve_options(p)
    p.set_defaults(func=cmd_serve)


def _add_report(sub: SubParsers) -> None:
    p = sub_parser(
        sub, "report", "static HTML report of scored runs", "bvb report results/r1 results/r2 --out results/report"
    )
    add_options(p, report.ReportOptions)
    p.set_defaults(func=cmd_report)


def _add_view(sub: SubParsers) -> None:
    p = sub_parser(
        sub, "view", "serve the report on loopback, refreshed while runs and scorers write", "bvb view results/r1"
    )
    add_options(p, live.ViewOptions)
    p.set_defaults(func=cmd_view)


def _add_export(sub: SubParsers) -> None:
    p = sub_parser(
        sub,
        "export",
        "export a run to another tool's format (inspect: an Inspect AI eval log)",
        "bvb export inspect results/r1 --out r1.json",
    )
    add_options(p, inspect_export.ExportOptions)
    p.set_defaults(func=cmd_export)


def _add_vgi(sub: SubParsers) -> None:
    from .vgi.score import add_parser

    add_parser(sub).set_defaults(func=cmd_vgi)


def _add_vgi_filter(sub: SubParsers) -> None:
    from .vgi.filter import add_parser

    add_parser(sub).set_defaults(func=cmd_vgi_filter)


def _add_steps(sub: SubParsers) -> None:
    from .scoring.steps import add_parser

    add_parser(sub, _add_judge_args).set_defaults(func=cmd_steps)


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


def judge_options(args: argparse.Namespace) -> api.JudgeOptions:
    """The JudgeOptions that dv's and steps' judge arguments ask for."""
    return api.JudgeOptions(
        kind=args.judge,
        base_url=args.judge_base_url,
        model=args.judge_model or _J.model,
        api_key_env=args.judge_api_key_env,
        protocol=args.protocol,
        cache=args.cache,
        shared=args.shared,
        price_in=args.price_in,
        price_out=args.price_out,
        retries=args.retries,
        retry_base_delay=args.retry_base_delay,
        max_tokens_field=args.max_tokens_field,
        concurrency=getattr(args, "judge_concurrency", None),
        prompt_kind=args.vsi_prompt,
        probe_wait=args.probe_wait,
        budget=getattr(args, "budget_holder", None),  # set by `bvb campaign`, never a flag
    )


def _text_only(args: argparse.Namespace) -> dict:
    """``bvb score dv --text-only``: the release's chance floor, every question asked with no frames."""
    from bvb_addon.dataset import read_split

    from .scoring.dv import score_text_only, shared_dir

    if not args.split:
        raise ArgumentError("bvb score dv --text-only needs --split (the questions to ask)")
    judge = api.make_judge(judge_options(args), args.run)
    try:
        result = score_text_only(read_split(args.split), judge, args.shared or shared_dir(args.run), args.workers)
    finally:
        api._close(judge)
    accuracy = "n/a" if result["accuracy"] is None else f"{100 * result['accuracy']:.2f}%"
    print(
        f"text-only (chance floor): {result['correct']} of {result['questions']} correct, {accuracy}; "
        f"judge {result['judge_model']} ({result['protocol']}); {result['new_judge_calls']} new calls; "
        f"answers in {result['path']}"
    )
    return result


def _scenes(args: argparse.Namespace) -> tuple[str, ...] | None:
    return tuple(args.scenes) if args.scenes else None


def cmd_dv(args: argparse.Namespace, progress: api.Progress | None = None) -> api.Summary:
    """``bvb score dv``: Dual VQA of a run; prints the retention line."""
    from .scoring.dv import parse_shard, shard_path

    if args.merge_shards:
        from .scoring.dv_shards import merge_shards, shard_summary_line

        merged = merge_shards(args.run, args.shard_count)
        print(shard_summary_line(merged))
        return merged
    if args.text_only:
        return _text_only(args)
    missing = [flag for flag in ("split", "videos") if not getattr(args, flag)]
    if missing:
        raise ArgumentError(f"bvb score dv needs --{' and --'.join(missing)} (or --merge-shards to merge shards)")
    options = api.DVOptions(
        run=Path(args.run),
        split=Path(args.split),
        videos=Path(args.videos),
        judge=judge_options(args),
        votes=args.votes,
        workers=args.workers,
        resume=args.resume,
        scenes=_scenes(args),
        backend=args.backend,
        ray_address=args.ray_address,
        shard=parse_shard(args.shard) if args.shard else None,
    )
    summary = api.score_dv(options, progress=progress)
    counts = summary["counts"]
    rate = summary["retention_rate"]
    dv = "n/a (no question right on the sources)" if rate is None else f"{100 * rate:.2f}"
    print(
        f"DV {dv}: {counts['both_correct']:g} of {counts['source_correct']:g} source-correct questions retained; "
        f"accuracy source {_pct(summary['original_accuracy'])}% render {_pct(summary['rendered_accuracy'])}%; "
        f"{counts['questions']} questions ({counts['judge_errors']} judge errors, not scored), "
        f"{counts['scenes']} scenes, {counts['scenes_failed']} failed; "
        f"judge {summary['judge_model']} ({summary['protocol']}); cost ${summary['judge_cost_usd']:.4f} "
        f"({summary['new_judge_calls']} new calls, ${summary['new_judge_cost_usd']:.4f}; "
        f"{summary['cache_hits']} cache hits)"
    )
    joinable = summary.get("release_joinable") or {}
    if joinable:
        # The release's own code pools only the questions of rendered scenes (failures left out).
        release_rate = joinable.get("retention_rate")
        release_dv = "n/a" if release_rate is None else f"{100 * release_rate:.2f}"
        quirks = sum(n for side in (summary.get("quirks") or {}).values() for n in side.values())
        print(
            f"release's pool: {summary['num_joinable']} joinable questions, DV {release_dv} over them; "
            f"{quirks} verdicts decided by a release quirk (summary: quirks)"
        )
    if summary.get("vsi_bench"):
        vsi = summary["vsi_bench"]
        print(
            f"VSI-Bench official overall: source {vsi['source']['overall']:.2f}, render {vsi['render']['overall']:.2f}"
        )
    shard = parse_shard(args.shard) if args.shard else None
    rd = RunDir(args.run)
    print(f"wrote {shard_path(rd.dv_rows, shard)} and {shard_path(rd.dv_summary, shard).name}")
    failed = counts["by_status"].get("judge_error", 0)
    if failed:
        reason = api.judge_error_reason(summary)
        print(f"warning: {failed} questions failed at the judge ({reason}); rerun with --resume to retry them")
    return summary


def _names_a_hub_entry(encoder: str | None) -> bool:
    """A bare name (no folder of that name, no owner/ of a hub id) is a vjepa2 torch-hub entry point (V-JEPA 2.1)."""
    if not encoder:
        return False
    return "/" not in encoder and not Path(encoder).exists()


def cmd_ls(args: argparse.Namespace, progress: api.Progress | None = None) -> api.Summary:
    """``bvb score ls``: Latent Similarity of a run; prints the vision_sim line."""
    if _names_a_hub_entry(args.encoder) and not args.checkpoint:
        from .scoring.ls import HUB_HINT, LSError

        raise LSError(f"--encoder {args.encoder} needs --checkpoint FILE; {HUB_HINT}")
    encoder = api.EncoderOptions(
        args.encoder,
        args.device,
        args.dtype,
        True,  # the release's load runs the snapshot's code; --trust-remote-code stays for old command lines
        args.num_frames,
        args.encoder_repo,
        args.checkpoint,
    )
    options = api.LSOptions(
        run=Path(args.run),
        split=Path(args.split),
        videos=Path(args.videos),
        encoder=encoder,
        resume=args.resume,
        scenes=_scenes(args),
        backend=args.backend,
        ray_address=args.ray_address,
        scenes_per_task=args.scenes_per_task,
        shard=_ls_shard(args.shard),
    )
    summary = api.score_ls(options, progress=progress)
    print(
        f"LS {_pct(summary['vision_sim'])} (layout {_pct(summary['layout_sim'])}, motion {_pct(summary['motion_sim'])}; "
        f"failures as 0); scored-only {_pct((summary.get('scored_only') or {}).get('vision_sim'))}; "
        f"{summary['num_ok']} of {summary['num_scenes']} scenes scored; encoder {summary.get('encoder') or summary['model']}"
        + (
            f" (checkpoint {summary['checkpoint']}, sha256 {summary['checkpoint_sha256'][:12]})"
            if summary.get("checkpoint_sha256")
            else ""
        )  # fmt: skip
    )
    print(f"wrote {RunDir(args.run).ls_rows} and {RunDir(args.run).ls_summary.name}" if options.shard is None
          else f"wrote the LS shard {options.shard[0]} of {options.shard[1]} in {args.run}")  # fmt: skip
    return summary


def _ls_shard(value: str | None) -> tuple[int, int] | None:
    if not value:
        return None
    from .scoring.ls import parse_shard

    return parse_shard(value)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}"


def cmd_overall(args: argparse.Namespace, progress: api.Progress | None = None) -> api.Summary:
    """``bvb score overall``: Overall from the run's DV and LS."""
    result = api.score_overall(args.run)
    if result["overall"] is None:
        have = {"DV": result["dual_vqa"], "LS": result["latent_sim"]}
        known = ", ".join(f"{k} {v:.2f}" for k, v in have.items() if v is not None)
        print(f"Overall n/a: missing {', '.join(result['missing'])} ({known}); score the missing axis first")
    else:
        print(f"Overall {result['overall']:.2f} (DV {result['dual_vqa']:.2f}, LS {result['latent_sim']:.2f})")
    print(f"wrote {RunDir(args.run).overall}")
    return result


def cmd_leaderboard(args: argparse.Namespace, progress: api.Progress | None = None) -> board.LeaderboardResult:
    """``bvb leaderboard``: the CSV and its table."""
    result = board.leaderboard(from_namespace(board.LeaderboardOptions, args))
    print(result.table)
    print(f"wrote {result.out}")
    return result


def cmd_serve(args: argparse.Namespace, progress: api.Progress | None = None) -> int:
    """``bvb serve``: the scoring service, until interrupted."""
    return service.serve(service.options_from(args))


def cmd_report(args: argparse.Namespace, progress: api.Progress | None = None) -> report.ReportResult:
    """``bvb report``: the static HTML report."""
    result = report.report(from_namespace(report.ReportOptions, args))
    print(f"wrote {result.index or result.out}")
    return result


def cmd_view(args: argparse.Namespace, progress: api.Progress | None = None) -> NoReturn:
    """``bvb view``: the live report on loopback, until interrupted."""
    options = from_namespace(live.ViewOptions, args)
    server = live.view(options)
    shown = ", ".join(map(str, options.paths))
    print(f"serving the live report of {shown} at {server.url} (read-only; Ctrl-C stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        server.stop()


def cmd_export(args: argparse.Namespace, progress: api.Progress | None = None) -> inspect_export.ExportResult:
    """``bvb export inspect``: the run as an Inspect AI eval log."""
    result = inspect_export.export(from_namespace(inspect_export.ExportOptions, args))
    print(f"wrote {result.out}: {result.samples} samples (open with: inspect view --log-dir {result.out.parent})")
    return result


def cmd_steps(args: argparse.Namespace, progress: api.Progress | None = None) -> api.Summary:
    """``bvb score steps``: the self-correction analysis of a run's step snapshots, or of generators' steps."""
    if args.generator_steps:
        return _vgi_steps(args)
    missing = [flag for flag in ("run", "split", "videos") if not getattr(args, flag)]
    if missing:
        raise ArgumentError(
            f"bvb score steps needs --{', --'.join(missing)} (a BVB run), or --generator-steps with --tasks and --out"
        )
    options = api.StepsOptions(
        run=Path(args.run),
        split=Path(args.split),
        videos=Path(args.videos),
        judge=judge_options(args),
        scenes=_scenes(args),
    )
    result = api.score_steps(options)
    print(
        f"steps: {result['questions']} questions over {result['scenes']} scenes; "
        f"wrong->correct {100 * result['wrong_to_correct_rate']:.1f}%, "
        f"wrong->other wrong {100 * result['wrong_to_other_wrong_rate']:.1f}%, "
        f"correct->wrong {100 * result['correct_to_wrong_rate']:.1f}%, "
        f"stable over the second half {100 * result['stability_second_half']:.1f}%, "
        f"mean lock-in step {result['mean_lock_in_step']:.2f}"
    )
    print(f"wrote {RunDir(args.run).steps_analysis}")
    return result


def _vgi_steps(args: argparse.Namespace) -> api.Summary:
    """``bvb score steps --generator-steps``: VGI's three figures along each generator's denoising steps."""
    from .vgi.score import generator_folders

    if args.run or not args.tasks or not args.out or args.judge != "vlm":
        raise ArgumentError(
            "--generator-steps takes --tasks FILE and --out DIR and the VLM judge (--judge-base-url, --judge-model), "
            "not --run or --judge geometry"
        )
    vlm = api.JudgeOptions(
        base_url=args.judge_base_url, model=args.judge_model, api_key_env=args.judge_api_key_env, cache=args.cache,
        price_in=args.price_in, price_out=args.price_out, retries=args.retries, retry_base_delay=args.retry_base_delay,
    )  # fmt: skip
    options = api.VGIStepsOptions(
        Path(args.tasks), Path(args.out), tuple(generator_folders(args.generator_steps, "--generator-steps")), vlm,
        args.frame_budget, args.sampling, tuple(args.step_range) if args.step_range else None, args.workers,
    )  # fmt: skip
    result = api.score_vgi_steps(options)
    for name, analysis in result["generators"].items():
        span = f" (steps {analysis['step_range'][0]}-{analysis['step_range'][1]})" if analysis["step_range"] else ""
        print(
            f"steps {name}{span}: {analysis['questions']} instances over steps {analysis['steps'][:1]}..{analysis['steps'][-1:]}; "
            f"wrong->correct {100 * analysis['wrong_to_correct_rate']:.1f}%, "
            f"wrong->another wrong {100 * analysis['wrong_to_other_wrong_rate']:.1f}%, "
            f"stable over the second half {100 * analysis['stability_second_half']:.1f}%; judge {analysis['judge']}"
        )
        print(f"wrote {Path(args.out) / name / STEPS_ANALYSIS}")
    return result


def cmd_vgi(args: argparse.Namespace, progress: api.Progress | None = None) -> api.Summary:
    """``bvb score vgi``: VGI scores of each generator's videos, and the leaderboard over them."""
    from bvb_addon.progress import bar as progress_bar

    from .vgi.leaderboard import BOARD_CSV, format_table
    from .vgi.score import generator_folders, half_instances, read_tasks

    if args.bootstrap < 10:
        raise ArgumentError(f"--bootstrap {args.bootstrap} is too few resamples; use at least 10 (default 2000)")
    vlm = api.JudgeOptions(
        base_url=args.judge_base_url,
        model=args.judge_model,
        api_key_env=args.judge_api_key_env,
        cache=args.cache,
        price_in=args.price_in,
        price_out=args.price_out,
        retries=args.retries,
        retry_base_delay=args.retry_base_delay,
    )
    options = api.VGIOptions(
        tasks=Path(args.tasks),
        out=Path(args.out),
        generators=tuple(generator_folders(args.generators)),
        judge=args.judge,
        vlm=vlm,
        timelines=args.timelines,
        frame_budget=args.frame_budget,
        sampling=args.sampling,
        window=args.window,
        stride=args.stride,
        max_frames=args.max_frames,
        half=args.half,
        half_seed=args.half_seed,
        resume=args.resume,
        workers=args.workers,
        resamples=args.bootstrap,
    )
    tasks = read_tasks(options.tasks)
    total = len(half_instances(tasks, args.half_seed) if args.half else tasks) * len(options.generators)
    bars: list = []  # made at the first video, so that bad input is the only line on stderr

    def advance(_row: dict) -> None:
        if not bars:
            bars.append(progress_bar(total=total, desc="vgi", unit="video"))
        bars[0].update()

    try:
        result = api.score_vgi(options, progress=advance)
    finally:
        for bar in bars:
            bar.close()
    for name, summary in result["generators"].items():
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
    print(format_table(result["leaderboard"]))
    print(f"wrote {Path(args.out) / BOARD_CSV} and each generator's vgi.jsonl")
    return result


def cmd_vgi_filter(args: argparse.Namespace, progress: api.Progress | None = None) -> dict:
    """``bvb score vgi-filter``: the pre-generation filter over generators' easiest-level scores."""
    from .vgi.filter import FILTER_JSON, KEPT_TXT, write

    result = write(args.results, args.level, args.tasks, args.kept_tasks)
    print(
        f"VGI filter on level {result['level']} over {len(result['generators'])} generators: kept "
        f"{len(result['kept'])} of {len(result['kept']) + len(result['dropped'])} tasks"
    )
    for task, reason in result["dropped"].items():
        print(f"  dropped {task}: {reason}")
    print(f"wrote {Path(args.results) / FILTER_JSON} and {KEPT_TXT}" + (f" and {args.kept_tasks}" if args.kept_tasks else ""))
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
    from bvb_addon import outcomes

    stage = FAULT_STAGES.get(args.command)
    if stage is None or not isinstance(result, dict):
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
    from bvb_addon import outcomes
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
    from bvb_addon import outcomes, path_args
    from bvb_addon.errors import USER_ERRORS, report

    from .scoring.judge import JudgeError

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    from bvb_addon.command_line import setup_logging

    setup_logging(args.verbose, args.quiet)
    try:
        # --out is the leaderboard's CSV, and a folder for report and vgi.
        out_is_file = args.command == "leaderboard"
        path_args.check(
            folders=[(f"--{name}", getattr(args, name, None)) for name in ("run", "videos", "shared", "timelines")]
            + [("--root", root) for root in getattr(args, "roots", None) or []]
            + [("run", run) for run in getattr(args, "runs", None) or []]
            + ([] if out_is_file else [("--out", getattr(args, "out", None))]),
            new_files=[
                (f"--{name.replace('_', '-')}", getattr(args, name, None))
                for name in ("split", "cache", "tasks", "config", "token_file")
            ]
            # --reference is repeatable (leaderboard, report): each path is checked.
            + [("--reference", path) for path in getattr(args, "reference", None) or []]
            + ([("--out", args.out)] if out_is_file else []),
        )
        result = args.func(args)
    except JudgeError as exc:  # every judge call failed: a judge fault that --resume redoes, not bad input
        print(f"error: {exc}", file=sys.stderr)
        return _judge_fault_exit(args, argv)
    except USER_ERRORS as exc:
        return report(exc)
    except OSError as exc:  # a full disk writing rows or summaries
        return outcomes.environment_exit(exc, outcomes.rerun_command("eval_bridge", argv))
    except KeyboardInterrupt:
        print("interrupted; rerun with --resume to continue", file=sys.stderr)
        return 130
    return _stage_exit(args, result, argv)
