"""The headless agent runner.

python -m headless.run ARGS                      (project venv, bpy module)
blender -b --python headless/run.py -- ARGS      (a Blender 4.2 binary)
"""

import argparse
import platform
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

if __package__ in (None, ""):
    # Run as a script by Blender: make the checkout importable first.
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon.errors import entry  # noqa: E402
from headless import bootstrap  # noqa: E402

if TYPE_CHECKING:
    from bvb_addon.agent.config import AgentConfig
    from bvb_addon.agent.runner import RunOptions

EXAMPLES = [
    "bvb run --split suite/split.jsonl --videos suite --output results/gpt-4o --model gpt-4o --cost-limit 3.0",
    "bvb run --split vsi/split.jsonl --videos vsi --output results/gpt-4o --model gpt-4o --workers 8 --budget 200",
    "bvb run --split suite/split.jsonl --videos suite --output results/floor --agent empty-room",
]


NATIVE_ONLY = {
    "--max-steps": "--max-turns",
    "--wall-limit": "--scene-timeout",
    "--step-timeout": "--exec-timeout",
    "--frames-per-call": None,
    "--frame-size": None,
    "--keep-images": None,
    "--context-window": None,
    "--max-tokens": None,
    "--temperature": None,
    "--price-cached-in": None,
}
"""Options only native reads, with mini-bvb's counterpart (None: mini-bvb sends and shows what BVB's agent does)."""
MINI_ONLY = {
    "--max-turns": "--max-steps",
    "--scene-timeout": "--wall-limit",
    "--exec-timeout": "--step-timeout",
    "--cpus": None,
    "--memory": "--worker-memory-gb",
    "--allow-network": None,
    "--model-retries": None,
    "--model-timeout": None,
}
"""Options only mini-bvb reads, with native's counterpart."""


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def parse_given(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The arguments, with ``given``: the harness-specific options (NATIVE_ONLY, MINI_ONLY) on the command line."""
    unset = object()
    watched = [_dest(flag) for flag in (*NATIVE_ONLY, *MINI_ONLY)]
    # argparse fills in a default only where the namespace has no value yet: what stays unset was not given.
    args = parser.parse_args(argv, namespace=argparse.Namespace(**{dest: unset for dest in watched}))
    args.given = {dest for dest in watched if getattr(args, dest) is not unset}
    for dest in watched:
        if dest not in args.given:
            setattr(args, dest, parser.get_default(dest))
    return args


def check_harness_options(given: set[str], mini: bool) -> None:
    """Refuse options the run's harness would ignore (a silently dropped --max-steps left a scene without a stop)."""
    from bvb_addon.agent.runner import RunError

    own, other = ("mini-bvb", "native") if mini else ("native", "mini-bvb")
    foreign = NATIVE_ONLY if mini else MINI_ONLY
    wrong = [flag for flag in foreign if _dest(flag) in given]
    if not wrong:
        return
    swaps = [f"{foreign[flag]} instead of {flag}" for flag in wrong if foreign[flag]]
    drops = [flag for flag in wrong if not foreign[flag]]
    fixes = ([f"use {', '.join(swaps)}"] if swaps else []) + ([f"drop {', '.join(drops)}"] if drops else [])
    raise RunError(
        f"{', '.join(wrong)}: {'an option' if len(wrong) == 1 else 'options'} of the {other} harness, which this "
        f"{own} run would ignore; {' and '.join(fixes)}{', or add --harness native' if mini else ''}"
    )


def build_parser() -> argparse.ArgumentParser:
    """``bvb run``'s parser (defaults from AgentConfig, RunOptions and SandboxConfig)."""
    from bvb_addon.agent.config import AGENTS, REASONING_LEVELS, AgentConfig
    from bvb_addon.agent.mini_bvb import MiniBVBSettings
    from bvb_addon.agent.runner import RunOptions
    from bvb_addon.command_line import stage_parser
    from bvb_addon.defaults import dataclass_defaults

    # Every default below is the settings dataclasses' own, stated there once.
    from bvb_addon.sandbox.config import SandboxConfig

    a, r, sb = dataclass_defaults(AgentConfig), dataclass_defaults(RunOptions), dataclass_defaults(SandboxConfig)
    m = dataclass_defaults(MiniBVBSettings)

    parser = stage_parser("run", "Run an agent on every scene of a split and write a BVB run directory.", EXAMPLES)
    parser.add_argument("--version", action="store_true", help="print harness, Blender and Python versions")
    parser.add_argument(
        "--venv", help="virtual environment with the dependencies (Blender binary only; default: the checkout's .venv)"
    )
    run = parser.add_argument_group("run")
    run.add_argument("--split", help="split file (JSON lines, VSI-Bench fields; required with --mode bvb)")
    run.add_argument(
        "--mode",
        choices=("bvb", "vgi"),
        default=r["mode"],
        help="bvb: rebuild the videos of a split; vgi: build and animate the procedure tasks of --tasks",
    )
    run.add_argument("--tasks", help="VGI tasks.jsonl (required with --mode vgi; --videos is the VGI suite folder)")
    run.add_argument("--videos", help="VSI-Bench-style root holding <dataset>/<scene>.mp4 (required)")
    run.add_argument(
        "--output",
        help="run directory to write, e.g. results/<run> (required with --harness native; mini-bvb's default is "
        "BVB's results/mini-harness-<model>[-reasoning-<effort>]-run01)",
    )
    run.add_argument("--scenes", nargs="+", default=[], metavar="ID", help="only these scene names (default: all)")
    run.add_argument("--limit", type=int, default=r["limit"], metavar="N", help="only the first N scenes (0: all)")
    run.add_argument(
        "--harness",
        choices=("mini-bvb", "native"),
        default=r["harness"],
        help="mini-bvb: BVB's Stage-1 agent exactly (bash and frames blocks in a scene sandbox; the benchmark's "
        "protocol); native: ours (python, frames and render actions in a warm Blender worker; always with --mode vgi); "
        "never ranked together",
    )
    run.add_argument(
        "--shard",
        metavar="i/N",
        help="run shard i of N, split by scene order: 1 <= i <= N under mini-bvb (BVB's, config.shard-i-of-N.json), "
        "0 <= i < N under native (default: all scenes)",
    )
    run.add_argument(
        "--skip-scenes", nargs="+", default=[], metavar="ID", help="mini-bvb: leave these scenes out (before --shard)"
    )
    run.add_argument(
        "--workers", type=int, default=r["workers"], metavar="N", help="scenes run at once, each in its own worker"
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue interrupted and faulted scenes; ended ones (submitted, a limit, failed) stay as they ended",
    )
    run.add_argument(
        "--retry-failed",
        action="store_true",
        help="with --resume: re-open scenes that ended in an agent failure (recorded in their trajectory)",
    )
    run.add_argument(
        "--trials",
        type=int,
        default=1,
        metavar="K",
        help="run the whole split K times into OUTPUT.trial1 ... OUTPUT.trialK (the leaderboard aggregates them)",
    )
    run.add_argument(
        "--backend", choices=("local", "ray"), default=r["backend"], help="local threads, or one Ray task per scene"
    )
    run.add_argument("--ray-address", help="Ray cluster to join (default: $RAY_ADDRESS, else a local Ray)")
    agent = parser.add_argument_group("agent")
    agent.add_argument("--agent", choices=AGENTS, default=a["agent"], help="a model over the API, or an API-free agent")
    agent.add_argument("--model", default=a["model"], help="model id at the provider")
    agent.add_argument(
        "--reasoning",
        choices=REASONING_LEVELS,
        help=f"reasoning effort; mini-bvb sends it as given, only when given; native: default {a['reasoning']}",
    )
    agent.add_argument(
        "--model-timeout",
        type=float,
        default=m["model_timeout"],
        metavar="S",
        help="mini-bvb: seconds one call may take",
    )
    agent.add_argument("--base-url", default=a["base_url"], help="OpenAI-compatible endpoint")
    agent.add_argument(
        "--probe-wait",
        type=float,
        default=r["probe_wait"],
        metavar="S",
        help="seconds to keep retrying an endpoint that refuses or times out before the first scene (0: no probe)",
    )
    agent.add_argument(
        "--api-key-env", default=a["api_key_env"], metavar="NAME", help="environment variable with the key"
    )
    agent.add_argument(
        "--price-in",
        type=float,
        metavar="USD",
        help="USD per million input tokens (default: the price table, then genai-prices)",
    )
    agent.add_argument(
        "--price-out", type=float, metavar="USD", help="USD per million output tokens (default: as --price-in)"
    )
    agent.add_argument(
        "--price-cached-in",
        type=float,
        metavar="USD",
        help="USD per million cached input tokens (default: the price source's, else --price-in)",
    )
    agent.add_argument("--max-tokens", type=int, default=a["max_tokens"], help="completion tokens per call")
    agent.add_argument("--temperature", type=float, help="sampling temperature (default: the provider's)")
    limits = parser.add_argument_group("limits")
    limits.add_argument("--cost-limit", type=float, default=a["cost_limit"], metavar="USD", help="model cost per scene")
    limits.add_argument(
        "--budget",
        type=float,
        default=r["budget"],
        metavar="USD",
        help="model cost for the whole run, across all workers; when reached, running scenes end as limit/budget "
        "and submit, the rest stay unstarted (--resume with a larger budget continues; default: no run budget)",
    )
    limits.add_argument(
        "--max-steps", type=int, default=a["max_steps"], metavar="N", help="replies per scene (0: no limit)"
    )
    limits.add_argument(
        "--wall-limit", type=float, default=a["wall_limit"], metavar="S", help="seconds per scene (0: no limit)"
    )
    limits.add_argument(
        "--step-timeout", type=float, default=a["step_timeout"], metavar="S", help="seconds per python step"
    )
    limits.add_argument(
        "--frames-per-call", type=int, default=a["frames_per_call"], help="images per frames/render action"
    )
    limits.add_argument(
        "--frame-size", type=int, default=a["frame_longest_side"], help="longest side of images shown to the agent"
    )
    limits.add_argument(
        "--keep-images",
        type=int,
        default=a["keep_images"],
        metavar="N",
        help="only the newest N image observations stay in the prompt (0: all)",
    )
    limits.add_argument(
        "--context-window",
        type=int,
        default=a["context_window"],
        metavar="TOKENS",
        help="the model's context; older images are elided before a prompt that would not fit "
        "(0: from the price source when it knows the model)",
    )
    mini = parser.add_argument_group("mini-bvb (BVB's run_agent.py options)")
    mini.add_argument(
        "--max-turns", type=int, default=m["max_turns"], metavar="N", help="model calls per scene (0: no cap)"
    )
    mini.add_argument(
        "--scene-timeout", type=float, default=m["scene_timeout"], metavar="S", help="seconds per scene (0: off)"
    )
    mini.add_argument(
        "--exec-timeout", type=float, default=m["exec_timeout"], metavar="S", help="seconds per bash block"
    )
    mini.add_argument("--cpus", type=float, default=m["cpus"], help="CPUs of a scene's sandbox")
    mini.add_argument("--memory", default="4g", help="memory of a scene's sandbox (e.g. 4g, 512m)")
    mini.add_argument("--allow-network", action="store_true", help="give the scene's sandbox the network")
    mini.add_argument(
        "--model-retries", type=int, default=m["num_retries"], metavar="N", help="LiteLLM's retries of one call"
    )
    sandbox = parser.add_argument_group("sandbox")
    sandbox.add_argument(
        "--sandbox-min",
        default=sb["min_level"],
        choices=("bwrap", "uid", "rlimits"),
        help="refuse to run below this sandbox level",
    )
    sandbox.add_argument(
        "--allow-weak-sandbox", action="store_true", help="run even when the sandbox is below its minimum"
    )
    sandbox.add_argument(
        "--agent-gpu", action="store_true",
        help="give the agent's python workers the machine's GPU too (render workers always have it)",
    )  # fmt: skip
    sandbox.add_argument(
        "--worker-memory-gb",
        type=float,
        default=sb["memory_bytes"] / (1 << 30),
        help="memory of a worker, in GiB: each process's address-space limit and memory.max of its whole "
        "process tree (a memory cgroup, where one can be made; see the sandbox level line)",
    )
    sandbox.add_argument("--blender-bin", help="Blender binary for workers (default: $BLENDER_BIN or the bpy module)")
    return parser


def _configs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> "tuple[RunOptions, AgentConfig]":
    from bvb_addon.agent.config import AgentConfig
    from bvb_addon.agent.runner import RunError, RunOptions, parse_shard
    from bvb_addon.sandbox.config import SandboxConfig

    if args.harness == "mini-bvb" and args.mode != "vgi" and not args.output:
        from bvb_addon.agent.mini_bvb_protocol import run_name

        # BVB's run_model.sh: results/mini-harness-<slug>[-reasoning-<effort>]-run01.
        args.output = str(
            Path("results") / run_name(args.model if args.agent == "model" else args.agent, args.reasoning)
        )
    missing = [
        flag
        for flag, value in (
            ("--tasks" if args.mode == "vgi" else "--split", args.tasks if args.mode == "vgi" else args.split),
            ("--videos", args.videos),
            ("--output", args.output),
        )
        if not value
    ]
    if missing:
        parser.error(f"{', '.join(missing)} required (or --version)")
    if args.workers < 1:
        raise RunError("--workers must be at least 1")
    mini = args.harness == "mini-bvb" and args.mode != "vgi"  # VGI's procedure tasks are native's (Runner.harness)
    config = AgentConfig(
        agent=args.agent,
        model=args.model,
        reasoning=args.reasoning or "none",
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        price_in=args.price_in,
        price_out=args.price_out,
        price_cached_in=args.price_cached_in,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        cost_limit=args.cost_limit,
        max_steps=args.max_steps,
        wall_limit=args.wall_limit,
        step_timeout=args.step_timeout,
        frames_per_call=args.frames_per_call,
        frame_longest_side=args.frame_size,
        keep_images=args.keep_images,
        context_window=args.context_window,
    )
    sandbox = {"step_timeout_s": max(args.step_timeout, 1.0)}
    sandbox["min_level"] = args.sandbox_min
    if args.allow_weak_sandbox:
        sandbox["allow_below_minimum"] = True
    if args.agent_gpu:
        sandbox["gpu"] = True
    if args.worker_memory_gb:
        sandbox["memory_bytes"] = int(args.worker_memory_gb * (1 << 30))
    if args.blender_bin:
        sandbox["blender_bin"] = args.blender_bin
    from bvb_addon.agent.mini_bvb import MiniBVBSettings
    from bvb_addon.agent.mini_bvb_run import parse_shard as parse_mini_shard

    if args.skip_scenes and not mini:
        raise RunError("--skip-scenes is a mini-bvb option; with --harness native use --scenes")
    check_harness_options(getattr(args, "given", set()), mini)
    settings = MiniBVBSettings(
        reasoning=args.reasoning,
        max_turns=args.max_turns,
        scene_timeout=args.scene_timeout,
        exec_timeout=args.exec_timeout,
        cpus=args.cpus,
        memory_bytes=parse_memory(args.memory),
        allow_network=args.allow_network,
        model_timeout=args.model_timeout,
        num_retries=args.model_retries,
    )
    if mini:
        shard = parse_mini_shard(args.shard) if args.shard else (0, 1)
    else:
        shard = parse_shard(args.shard or "0/1")
    options = RunOptions(
        split=args.split,
        videos=args.videos,
        output=args.output,
        scenes=args.scenes,
        limit=args.limit,
        resume=args.resume or args.retry_failed,
        retry_failed=args.retry_failed,
        shard=shard,
        workers=args.workers,
        sandbox=SandboxConfig(**sandbox),
        progress=not args.quiet,
        mode=args.mode,
        tasks=args.tasks,
        backend=args.backend,
        ray_address=args.ray_address,
        probe_wait=args.probe_wait,
        budget=args.budget,
        harness=args.harness,
        mini_bvb=settings,
        skip_scenes=args.skip_scenes,
        shard_given=bool(args.shard),
    )
    return options, config


def parse_memory(text: str) -> int:
    """Docker's --memory form (``4g``, ``512m``, ``1024k``, bytes) in bytes."""
    from bvb_addon.agent.runner import RunError

    units = {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    value = str(text).strip().lower()
    factor = units.get(value[-1:], None)
    number = value[:-1] if factor else value
    try:
        amount = float(number) * (factor or 1)
    except ValueError:
        raise RunError(f"--memory {text!r}: give a size like 4g or 512m (BVB's default is 4g)") from None
    if amount <= 0:
        raise RunError(f"--memory {text!r}: must be positive, e.g. 4g")
    return int(amount)


def _terminate_as_interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt


@entry
def main(argv: list[str] | None = None) -> int:
    """Entry point. ``argv`` is the runner's own arguments (as ``bvb run`` and the demo pass
    them); None reads them from sys.argv, after ``--`` inside a Blender binary."""
    # First: inside a Blender binary this makes the checkout and its venv importable.
    own_args = bootstrap.entry_args(argv, "headless.run")
    parser = build_parser()
    args = parse_given(parser, own_args)
    from bvb_addon import versions

    if args.version:
        print(f"BVB harness {versions.HARNESS_VERSION}")
        print(f"Blender {versions.blender_version() or 'not available'}")
        print(f"Python {platform.python_version()}")
        return 0
    if not (args.split or args.tasks or args.videos or args.output):
        parser.print_help()
        return 0
    from bvb_addon import outcomes
    from bvb_addon.command_line import setup_logging

    setup_logging(args.verbose, args.quiet)

    if args.trials < 1 or (args.trials > 1 and not args.output):
        print(f"error: --trials {args.trials} needs K >= 1 and --output (trials go to OUTPUT.trialK)", file=sys.stderr)
        return 2
    rerun = outcomes.rerun_command("headless.run", own_args)
    if args.trials == 1:
        return _run_once(args, parser, rerun)
    base = args.output
    faulted = []
    for trial in range(1, args.trials + 1):
        # Same configuration, a fresh run directory per trial: eval_bridge.leaderboard.noise reads the naming.
        args.output = f"{base}.trial{trial}"
        print(f"trial {trial} of {args.trials}: {args.output}", flush=True)
        code = _run_once(args, parser, rerun)
        if code == outcomes.FAULT_EXIT:
            faulted.append(trial)  # the other trials still run; --resume redoes this one's faults
        elif code:
            return code
    if faulted:
        print(f"faults: trials {', '.join(map(str, faulted))} of {args.trials} had scenes end in a harness or "
              f"environment fault; rerun: {rerun}", flush=True)  # fmt: skip
        return outcomes.FAULT_EXIT
    return 0


def _run_once(args: argparse.Namespace, parser: argparse.ArgumentParser, rerun: str) -> int:
    """One run of the split into args.output; the exit code."""
    from bvb_addon import outcomes, path_args
    from bvb_addon.agent.runner import Runner, summarize
    from bvb_addon.errors import USER_ERRORS, report

    try:
        path_args.check(
            folders=[("--videos", args.videos), ("--output", args.output)],
            new_files=[("--split", args.split), ("--tasks", args.tasks)],
        )
        options, config = _configs(args, parser)
        runner = Runner(options, config)
    except USER_ERRORS as exc:
        return report(exc)
    # A batch scheduler's SIGTERM stops the run like Ctrl-C: current steps finish and are saved.
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    from tqdm.contrib.logging import logging_redirect_tqdm

    start = time.monotonic()
    try:
        # Log lines go above the progress bar instead of through it.
        with logging_redirect_tqdm():
            results = runner.run()
    except USER_ERRORS as exc:  # RunError, PriceError, SplitError, VideoError, ModelError: one line each
        return report(exc)
    except OSError as exc:  # a full disk writing config.json: no scene started
        return outcomes.environment_exit(exc, rerun)
    except KeyboardInterrupt:
        print("error: interrupted twice; quitting without waiting (trajectories are saved)", file=sys.stderr)
        sys.stdout.flush()
        import os

        os._exit(130)
    print(summarize(results, time.monotonic() - start, runner.budget, runner.unstarted))
    if runner.interrupted:
        return outcomes.INTERRUPTED_EXIT
    return outcomes.finish("run", results.values(), rerun)


if __name__ == "__main__":
    code = main()
    if code:
        sys.exit(code)
