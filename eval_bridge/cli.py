"""Command line of the eval bridge: dv, ls, overall, leaderboard, serve, report."""

import argparse
import hashlib
import logging
import os
import sys
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_JUDGE_CONCURRENCY = 8

EXAMPLES = """examples:
  python -m eval_bridge dv --run results/r1 --split split.jsonl --videos VSI-Bench \\
      --judge-base-url https://api.openai.com/v1 --judge-model gpt-4o --workers 8
  python -m eval_bridge dv --run results/r1 --split suite/split.jsonl --videos suite --judge geometry
  python -m eval_bridge ls --run results/r1 --split split.jsonl --videos VSI-Bench --model ./vjepa2
  python -m eval_bridge dv ... --backend ray --ray-address auto --judge-concurrency 8
  python -m eval_bridge overall --run results/r1
  python -m eval_bridge leaderboard results/r1 results/r2 --out board.csv --reference published.csv
  python -m eval_bridge serve --root results
"""


def _add_backend(p):
    p.add_argument("--backend", choices=("local", "ray"), default="local", help="local threads, or Ray tasks")
    p.add_argument(
        "--ray-address", help="Ray cluster to join (auto, or HOST:PORT; default: $RAY_ADDRESS or a local Ray)"
    )


def _add_judge_args(p):
    """The judge options shared by dv and steps (make_judge reads them)."""
    p.add_argument("--judge", choices=("vlm", "geometry"), default="vlm", help="vlm (an API) or geometry (offline)")
    p.add_argument("--judge-base-url", help="OpenAI-compatible endpoint of the VLM judge")
    p.add_argument("--judge-model", help="judge model id, e.g. gpt-4o")
    p.add_argument("--judge-api-key-env", default="OPENAI_API_KEY", help="variable holding the judge's API key")
    p.add_argument("--protocol", choices=("dual_vqa_v1", "vsi_official"), default="dual_vqa_v1")
    p.add_argument("--cache", help="judge cache file (default results/_dual_vqa_shared/judge_cache.sqlite)")
    p.add_argument("--shared", help="folder of shared source answers (default results/_dual_vqa_shared)")
    p.add_argument("--price-in", type=float, help="judge input price, USD per million tokens")
    p.add_argument("--price-out", type=float, help="judge output price, USD per million tokens")
    p.add_argument("--retries", type=int, default=6, help="retries on 408/409/429/5xx and connection errors")
    p.add_argument("--retry-base-delay", type=float, default=1.0, help="first backoff in seconds (doubles)")
    p.add_argument(
        "--max-tokens-field",
        choices=("max_completion_tokens", "max_tokens"),
        default="max_completion_tokens",
        help="request field for the 32-token cap (max_tokens for older servers)",
    )


def _add_dv(sub):
    p = sub.add_parser(
        "dv",
        help="Dual VQA: judge answers on source and render, pooled retention",
        epilog="example: python -m eval_bridge dv --run results/r1 --split suite/split.jsonl --videos suite "
        "--judge geometry",
    )
    p.add_argument("--run", required=True, help="the run directory (results/<run>)")
    p.add_argument("--split", required=True, help="split file (JSON lines, VSI-Bench fields)")
    p.add_argument("--videos", required=True, help="source videos root: <root>/<dataset>/<scene>.mp4")
    _add_judge_args(p)
    p.add_argument("--votes", type=int, default=1, help="ask N times, take the majority (ties are wrong)")
    p.add_argument("--workers", type=int, default=8, help="questions scored at once (in each scene task on Ray)")
    p.add_argument("--resume", action="store_true", help="keep questions already scored by this judge")
    p.add_argument("--scenes", nargs="+", help="re-score only these scenes (other scenes' rows are kept)")
    _add_backend(p)
    p.add_argument(
        "--judge-concurrency",
        type=int,
        help=f"most judge requests in flight at once, across the whole Ray cluster "
        f"(default {DEFAULT_JUDGE_CONCURRENCY} with --backend ray; unlimited beyond --workers locally)",
    )
    p.set_defaults(func=cmd_dv)


def _add_ls(sub):
    p = sub.add_parser(
        "ls",
        help="Latent Similarity with a V-JEPA 2 encoder",
        epilog="example: python -m eval_bridge ls --run results/r1 --split suite/split.jsonl --videos suite "
        "--model /models/vjepa2",
    )
    p.add_argument("--run", required=True)
    p.add_argument("--split", required=True)
    p.add_argument("--videos", required=True)
    p.add_argument(
        "--model", default=os.environ.get("BVB_VJEPA_MODEL"), help="V-JEPA 2 folder or hub id ($BVB_VJEPA_MODEL)"
    )
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--dtype", choices=("auto", "bfloat16", "float16", "float32"), default="auto")
    p.add_argument("--num-frames", type=int, default=64, help="frames per clip, uniformly sampled")
    p.add_argument("--trust-remote-code", action="store_true", help="for community V-JEPA 2.1 ports")
    p.add_argument("--resume", action="store_true", help="keep scenes already scored with this model")
    p.add_argument("--scenes", nargs="+", help="re-score only these scenes")
    _add_backend(p)
    p.add_argument("--scenes-per-task", type=int, default=8, help="scenes per Ray task (one encoder load each)")
    p.set_defaults(func=cmd_ls)


def _add_overall(sub):
    p = sub.add_parser("overall", help="Overall from the run's DV and LS; writes overall.json")
    p.add_argument("--run", required=True)
    p.set_defaults(func=cmd_overall)


def _add_leaderboard(sub):
    p = sub.add_parser("leaderboard", help="rank runs in BVB's published CSV shape")
    p.add_argument("runs", nargs="+", help="scored run directories")
    p.add_argument("--out", required=True, help="CSV to write")
    p.add_argument("--reference", help="published results CSV to rank the runs among")
    p.set_defaults(func=cmd_leaderboard)


def _add_serve(sub):
    p = sub.add_parser("serve", help="local HTTP scoring service for the add-on")
    p.add_argument("--host", default="127.0.0.1", help="bind address (loopback by default)")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--root", action="append", help="folder the service may read and score under (repeatable)")
    p.add_argument("--token", default=os.environ.get("BVB_BRIDGE_TOKEN"), help="bearer token ($BVB_BRIDGE_TOKEN)")
    p.add_argument("--judge", choices=("vlm", "geometry"), help="default DV judge for jobs that name none")
    p.add_argument("--judge-base-url", help="default VLM judge endpoint")
    p.add_argument("--judge-model", help="default VLM judge model")
    p.add_argument("--protocol", choices=("dual_vqa_v1", "vsi_official"), help="default DV protocol")
    p.add_argument(
        "--encoder", default=os.environ.get("BVB_VJEPA_MODEL"), help="default V-JEPA 2 for LS ($BVB_VJEPA_MODEL)"
    )
    p.add_argument("--num-frames", type=int, help="default LS frames per clip")
    p.add_argument("--device", help="default LS device")
    p.set_defaults(func=cmd_serve)


def _add_report(sub):
    p = sub.add_parser("report", help="static HTML report of scored runs")
    p.add_argument("runs", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--videos", help="source videos root")
    p.set_defaults(func=cmd_report)


def _add_vgi(sub):
    from .vgi import add_parser

    add_parser(sub)


def _add_steps(sub):
    from .steps import add_parser

    add_parser(sub, _add_judge_args)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="eval_bridge",
        description="Score BVB runs: Dual VQA, Latent Similarity, Overall.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_add_dv, _add_ls, _add_overall, _add_leaderboard, _add_serve, _add_report, _add_vgi, _add_steps):
        add(sub)
    return parser


def make_judge(args):
    """The judge an argparse namespace asks for (VLM with its cache, or geometry)."""
    from .dv import shared_dir

    if args.judge == "geometry":
        from .geometry import GeometryJudge

        return GeometryJudge()
    if not args.judge_base_url or not args.judge_model:
        raise ValueError(
            "a VLM judge needs --judge-base-url and --judge-model (or --judge geometry for the offline judge)"
        )
    from .cache import JudgeCache
    from .judge import VLMJudge
    from .pricing import Pricing

    cache_path = Path(args.cache) if args.cache else Path(args.shared or shared_dir(args.run)) / "judge_cache.sqlite"
    return VLMJudge(
        args.judge_base_url,
        args.judge_model,
        args.protocol,
        cache=JudgeCache(cache_path),
        api_key_env=args.judge_api_key_env,
        pricing=Pricing(args.judge_model, args.price_in, args.price_out),
        retries=args.retries,
        backoff_s=args.retry_base_delay,
        max_tokens_field=args.max_tokens_field,
        cap=judge_cap(args),
    )


def judge_cap(args):
    """The cap on judge requests in flight: cluster-wide on Ray, none locally unless asked for."""
    from bvb_addon.backend import ConcurrencyCap

    backend = getattr(args, "backend", "local")
    limit = getattr(args, "judge_concurrency", None)
    if limit is not None and limit < 1:
        raise ValueError(f"--judge-concurrency must be at least 1, got {limit}")
    if backend != "ray" and limit is None:
        return None
    # One cap per endpoint: a provider's rate limit holds for every run that calls it.
    name = "bvb_judge_" + hashlib.sha256(str(args.judge_base_url).encode()).hexdigest()[:12]
    return ConcurrencyCap(limit or DEFAULT_JUDGE_CONCURRENCY, backend=backend, name=name)


def cmd_dv(args, progress=None):
    from bvb_addon.dataset import read_split

    from .dv import DualVQA

    _check_backend(args)
    questions = read_split(args.split)
    judge = make_judge(args)
    try:
        summary = DualVQA(
            args.run,
            questions,
            args.videos,
            judge,
            votes=args.votes,
            workers=args.workers,
            resume=args.resume,
            scenes=args.scenes,
            shared=args.shared,
            progress=progress,
            split_path=args.split,
            backend=getattr(args, "backend", "local"),
            ray_address=getattr(args, "ray_address", None),
        ).run()
    finally:
        if getattr(judge, "cache", None) is not None:
            judge.cache.close()
    counts = summary["counts"]
    rate = summary["retention_rate"]
    dv = "n/a (no question right on the sources)" if rate is None else f"{100 * rate:.2f}"
    print(
        f"DV {dv}: {counts['both_correct']:g} of {counts['source_correct']:g} source-correct questions retained; "
        f"accuracy source {summary['original_accuracy']:.3f} render {summary['rendered_accuracy']:.3f}; "
        f"{counts['questions']} questions, {counts['scenes']} scenes, {counts['scenes_failed']} failed; "
        f"judge {summary['judge_model']} ({summary['protocol']}); cost ${summary['judge_cost_usd']:.4f} "
        f"({summary['new_judge_calls']} new calls, ${summary['new_judge_cost_usd']:.4f}; "
        f"{summary['cache_hits']} cache hits)"
    )
    print(f"wrote {Path(args.run) / 'dual_vqa.jsonl'} and dual_vqa_summary.json")
    failed = counts["by_status"].get("judge_error", 0)
    if failed:
        first = next(iter(r["reason"] for r in summary["failures"].values() if r["status"] == "judge_error"), "")
        if failed == counts["questions"]:
            print(f"error: every judge call failed ({first}); fix the judge settings and rerun with --resume",
                  file=sys.stderr)  # fmt: skip
        else:
            print(f"warning: {failed} questions failed at the judge ({first}); rerun with --resume to retry them")
    return summary


def cmd_ls(args, progress=None):
    from bvb_addon.dataset import read_split

    from .ls import WEIGHTS_HINT, EncoderSpec, LSError, run_ls

    if not args.model:
        raise LSError(f"ls needs V-JEPA 2 weights: {WEIGHTS_HINT} (or set BVB_VJEPA_MODEL)")
    _check_backend(args)
    questions = read_split(args.split)
    spec = EncoderSpec(args.model, args.device, args.dtype, args.trust_remote_code, args.num_frames)
    backend = getattr(args, "backend", "local")
    # Locally the encoder loads here, before any scene; on Ray each task loads its own.
    encoder = spec.build() if backend == "local" else spec
    summary = run_ls(
        args.run,
        questions,
        args.videos,
        encoder,
        resume=args.resume,
        scenes=args.scenes,
        progress=progress,
        backend=backend,
        ray_address=getattr(args, "ray_address", None),
        scenes_per_task=getattr(args, "scenes_per_task", 8),
    )
    counts = summary["counts"]
    print(
        f"LS {100 * summary['vision_sim']:.2f} (layout {100 * summary['layout']:.2f}, motion {100 * summary['motion']:.2f}; "
        f"failures as 0); scored-only {_pct(summary['vision_sim_scored'])}; "
        f"{counts['scored']} of {counts['scenes']} scenes scored; encoder {summary['model']}"
    )
    print(f"wrote {Path(args.run) / 'vision_sim.jsonl'} and vision_sim_summary.json")
    return summary


def _check_backend(args):
    """--backend ray without Ray installed: the install command, before any work."""
    if getattr(args, "backend", "local") == "ray":
        from bvb_addon.backend import require_ray

        require_ray()


def _pct(value):
    return "n/a" if value is None else f"{100 * value:.2f}"


def cmd_overall(args, progress=None):
    from .overall import compute_overall

    result = compute_overall(args.run)
    if result["overall"] is None:
        have = {"DV": result["dual_vqa"], "LS": result["latent_sim"]}
        known = ", ".join(f"{k} {v:.2f}" for k, v in have.items() if v is not None)
        print(f"Overall n/a: missing {', '.join(result['missing'])} ({known}); score the missing axis first")
    else:
        print(f"Overall {result['overall']:.2f} (DV {result['dual_vqa']:.2f}, LS {result['latent_sim']:.2f})")
    print(f"wrote {Path(args.run) / 'overall.json'}")
    return result


def cmd_leaderboard(args, progress=None):
    from .overall import format_table, leaderboard

    rows = leaderboard(args.runs, args.out, args.reference)
    print(format_table(rows))
    print(f"wrote {args.out}")
    return rows


def cmd_serve(args, progress=None):
    from .service import serve

    dv = {
        "judge": args.judge,
        "judge_base_url": args.judge_base_url,
        "judge_model": args.judge_model,
        "protocol": args.protocol,
    }
    ls = {"model": args.encoder, "num_frames": args.num_frames, "device": args.device}
    defaults = {"dv": {k: v for k, v in dv.items() if v}, "ls": {k: v for k, v in ls.items() if v}}
    return serve(args.host, args.port, args.root or [os.getcwd()], args.token, defaults)


def cmd_report(args, progress=None):
    from .report import build_report

    out = build_report(args.runs, args.out, args.videos)
    print(f"wrote {out or args.out}")
    return out


# The one-line errors that bad input raises; anything else is a bug and keeps its traceback.
def _user_errors():
    from bvb_addon.backend import BackendError
    from bvb_addon.dataset import SplitError
    from bvb_addon.video import VideoError

    from .judge import JudgeError
    from .ls import LSError
    from .overall import OverallError

    return (SplitError, VideoError, JudgeError, LSError, OverallError, BackendError, ValueError, FileNotFoundError)


# Per command: (outcomes stage, unit of its rows, whether it takes --resume). Others end 0 when they succeed.
FAULT_STAGES = {"dv": ("dv", "questions", True), "ls": ("ls", "scenes", True), "steps": ("steps", "scenes", False)}


def _stage_exit(args, result, argv):
    """The exit code of a finished command: FAULT_EXIT (and the rerun line) when rows ended in faults."""
    from bvb_addon import outcomes

    stage = FAULT_STAGES.get(args.command)
    if stage is None or not isinstance(result, dict):
        return outcomes.OK_EXIT
    name, unit, resumable = stage
    if "faults" in result:  # steps: the scenes that hit a fault, beside the scene count
        rows = list(result["faults"]) + [{"status": "ok"}] * max(0, result.get("scenes", 0) - len(result["faults"]))
    else:
        rows = [{"status": status} for status, n in result["counts"]["by_status"].items() for _ in range(n)]
    rerun = outcomes.rerun_command("eval_bridge", argv, "--resume" if resumable else None)
    return outcomes.finish(name, rows, rerun, unit)


def main(argv=None):
    from bvb_addon import outcomes, path_args

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    if not args.command:
        parser.print_help()
        return 0
    try:
        # --out is the leaderboard's CSV, and a folder for report and vgi.
        out_is_file = args.command == "leaderboard"
        path_args.check(
            folders=[(f"--{name}", getattr(args, name, None)) for name in ("run", "videos", "shared", "timelines")]
            + [("--root", root) for root in getattr(args, "root", None) or []]
            + [("run", run) for run in getattr(args, "runs", None) or []]
            + ([] if out_is_file else [("--out", getattr(args, "out", None))]),
            new_files=[(f"--{name}", getattr(args, name, None)) for name in ("split", "cache", "reference", "tasks")]
            + ([("--out", args.out)] if out_is_file else []),
        )
        result = args.func(args)
    except _user_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk writing rows or summaries
        return outcomes.environment_exit(exc, outcomes.rerun_command("eval_bridge", argv))
    except KeyboardInterrupt:
        print("interrupted; rerun with --resume to continue", file=sys.stderr)
        return 130
    return _stage_exit(args, result, argv)
