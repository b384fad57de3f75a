"""``bvb human pack|serve|score``: a blinded study for people, and the benchmark's scores checked against it."""

import argparse
import sys
from pathlib import Path
from typing import Any

from bvb_addon import errors, path_args
from bvb_addon.command_line import Parser, add_log_flags, setup_logging

from .key import KEY, forms_of
from .media import ClipOptions
from .pack import BVBPackOptions, VGIPackOptions, pack_bvb, pack_vgi

EXAMPLES = """examples:
  bvb human pack bvb --runs gpt=results/r1 claude=results/r2 qwen=results/r3 --out studies/bvb1 --count 9
  bvb human pack vgi --tasks data/vgi/tasks.jsonl --videos genA=videos/a genB=videos/b --scores results/vgi \\
      --out studies/vgi1
  bvb human serve studies/bvb1                  (raters open the printed URL; answers land in studies/bvb1/answers)
  bvb human score studies/bvb1 studies/bvb1/answers
Send raters study.html only (or serve it); key.json unblinds the answers and stays with you."""


def _clip_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="folder for study.html and key.json")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw, the order and the codes")
    p.add_argument("--max-side", type=int, default=ClipOptions.max_side, help="clips' longest side in the page (px)")
    p.add_argument(
        "--max-frames",
        type=int,
        default=ClipOptions.max_frames,
        help="clips' most frames in the page (over their duration)",
    )
    p.add_argument(
        "--force", action="store_true", help="replace a study already in --out (its answers then cannot be scored)"
    )


def _sub(sub: Any, name: str, help_text: str, example: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".",
                            prog=f"bvb human {name}", epilog=f"example:\n  {example}")  # fmt: skip
    add_log_flags(parser)
    return parser


def build_parser() -> Parser:
    """``bvb human``'s parser: pack (bvb or vgi), serve, score."""
    parser = Parser(
        prog="bvb human",
        description="Judges checked against people: build a blinded study page, serve it, score the answers.",
        epilog=EXAMPLES,
    )
    add_log_flags(parser)
    sub = parser.add_subparsers(dest="action", metavar="ACTION")

    pack = _sub(sub, "pack", "build a blinded study page (bvb: rank reconstructions; vgi: rate videos)",
                "bvb human pack bvb --runs results/r1 results/r2 --out studies/bvb1")  # fmt: skip
    kinds = pack.add_subparsers(dest="kind", metavar="KIND")
    bvb = kinds.add_parser("bvb", help="rank K runs' reconstructions of each scene beside its source clip",
                           prog="bvb human pack bvb", formatter_class=parser.formatter_class)  # fmt: skip
    add_log_flags(bvb)
    bvb.add_argument("--runs", nargs="+", required=True, help="run directories (DIR or LABEL=DIR), two or more")
    bvb.add_argument(
        "--scenes", nargs="+", help="scenes to rank (default: --count drawn among those every run rendered)"
    )
    bvb.add_argument("--count", type=int, default=9, help="scenes drawn when --scenes is not given")
    bvb.add_argument("--split", help="split file naming each scene's dataset (default: the first run's config.json)")
    bvb.add_argument(
        "--videos", help="source videos root, <root>/<dataset>/<scene>.mp4 (default: the first run's config.json)"
    )
    bvb.add_argument(
        "--forms", type=int, default=1, help="pages for different raters, each its own draw of --per-form scenes"
    )
    bvb.add_argument("--per-form", type=int, help="scenes on each form (default: every scene drawn)")
    bvb.add_argument(
        "--language", choices=("en", "zh"), default="en", help="language of the release's rater instructions"
    )
    _clip_args(bvb)
    vgi = kinds.add_parser("vgi", help="rate each generator's video of each instance: completeness and rule violations",
                           prog="bvb human pack vgi", formatter_class=parser.formatter_class)  # fmt: skip
    add_log_flags(vgi)
    vgi.add_argument(
        "--tasks", required=True, help="the tasks file (tasks.jsonl: constraint, rubric, completeness, start_image)"
    )
    vgi.add_argument(
        "--videos", nargs="+", required=True, help="each generator's folder of <instance id>.mp4 (DIR or LABEL=DIR)"
    )
    vgi.add_argument(
        "--scores",
        help="the folder bvb score vgi --out wrote (judge rows: <scores>/<label>/vgi.jsonl; default: give it to score)",
    )
    vgi.add_argument(
        "--rows",
        nargs="+",
        default=[],
        help="LABEL=FILE: a generator's judge rows kept elsewhere (default: none; --scores)",
    )
    vgi.add_argument("--instances", nargs="+", help="instance ids to rate (default: --count drawn, or all)")
    vgi.add_argument("--count", type=int, help="instances drawn when --instances is not given (default: all)")
    _clip_args(vgi)

    serve = _sub(sub, "serve", "serve a study page on loopback and keep the answers raters send",
                 "bvb human serve studies/bvb1 --port 8780")  # fmt: skip
    serve.add_argument("pack", help="the folder bvb human pack wrote")
    serve.add_argument("--answers", help="folder for the answers sent (default: PACK/answers)")
    serve.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    serve.add_argument("--port", type=int, default=8780, help="port (0 picks a free one)")

    score = _sub(sub, "score", "unblind raters' answers and check the benchmark's scores against them",
                 "bvb human score studies/bvb1 studies/bvb1/answers")  # fmt: skip
    score.add_argument("pack", help="the folder bvb human pack wrote (it holds key.json)")
    score.add_argument("answers", nargs="+", help="answer files, or folders of them")
    score.add_argument("--out", help="folder for human_scores.json and human_items.csv (default: PACK/scored)")
    score.add_argument(
        "--scores", help="VGI: the folder bvb score vgi --out wrote, if not the one given to pack (default: the key's)"
    )
    return parser


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _positive(flag: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise errors.ArgumentError(f"{flag} {value}: give a number of at least 1")


def cmd_pack(args: argparse.Namespace) -> int:
    _positive("--count", args.count)
    _positive("--max-side", args.max_side)
    _positive("--max-frames", args.max_frames)
    _positive("--forms", getattr(args, "forms", None))
    _positive("--per-form", getattr(args, "per_form", None))
    clips = ClipOptions(args.max_side, args.max_frames)
    out = Path(args.out)
    if args.kind == "bvb":
        key = pack_bvb(
            BVBPackOptions(
                runs=tuple(args.runs), out=out, scenes=tuple(args.scenes) if args.scenes else None, count=args.count,
                seed=args.seed, split=Path(args.split) if args.split else None,
                videos=Path(args.videos) if args.videos else None, clips=clips, language=args.language, forms=args.forms,
                per_form=args.per_form, force=args.force,
            )
        )  # fmt: skip
        what = f"{len(key['scenes'])} scenes x {len(key['models'])} reconstructions"
    else:
        key = pack_vgi(
            VGIPackOptions(
                tasks=Path(args.tasks), generators=tuple(args.videos), out=out, rows=tuple(args.rows),
                scores=Path(args.scores) if args.scores else None,
                instances=tuple(args.instances) if args.instances else None, count=args.count, seed=args.seed,
                clips=clips, force=args.force,
            )
        )  # fmt: skip
        what = f"{len(key['items'])} videos of {len(key['instances'])} instances"
    forms = forms_of(key)
    for form_id, form in forms.items():
        size = (out / form["page"]).stat().st_size / 2**20
        shown = f"{len(form['scenes'])} of the scenes, " if len(forms) > 1 else ""
        print(f"wrote {out / form['page']} ({shown}{what}, {size:.1f} MB; pack {form_id})")
    pages = "its page" if len(forms) == 1 else "each rater their own form"
    print(f"wrote {out / KEY}: the blinding key; keep it, send {pages} only (or run bvb human serve {out})")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .serve import StudyServer, answers_folder

    pack = Path(args.pack)
    answers = answers_folder(pack, Path(args.answers) if args.answers else None)
    server = StudyServer(pack, answers, args.host, args.port)
    print(f"serving the study in {pack} at {server.url}; answers go to {answers} (Ctrl-C stops)", flush=True)
    server.run_forever()
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from .score import SUMMARY, TABLE, score_study

    result = score_study(
        Path(args.pack),
        [Path(a) for a in args.answers],
        Path(args.out) if args.out else None,
        Path(args.scores) if args.scores else None,
    )
    if result["kind"] == "bvb":
        print(f"BVB ranking: {result['raters']} raters, {result['scenes']} scenes")
        print(f"  {'model':24s} {'mean rank':>9s} {'first':>6s} {'win':>6s}")
        for row in result["models"]:
            print(f"  {row['model']:24s} {_fmt(row['mean_rank'], 2):>9s} {_fmt(row['first_share'], 2):>6s} "
                  f"{_fmt(row['mean_win'], 2):>6s}")  # fmt: skip
        for entry in result["spearman"].values():
            print(f"  Spearman rho (preference vs {entry['metric']}, {entry['pairs']} scene-model pairs): "
                  f"{_fmt(entry['spearman_rho'])}")  # fmt: skip
    else:
        print(
            f"VGI judge vs people: {result['raters']} raters, {result['items']} videos; "
            f"AUC {_fmt(result['auc'])} ({result['human_successes']} successes, {result['human_failures']} not); "
            f"pairwise accuracy {_fmt(result['pairwise_accuracy'])} ({result['pairs']} pairs, {result['judge_ties']} judge ties); "
            f"completeness agreement {_fmt(result['completeness_agreement'])}"
        )
        if result["unjudged"]:
            print(f"  {len(result['unjudged'])} rated videos have no judge score (left out): "
                  + ", ".join(f"{u['generator']}/{u['instance']}" for u in result["unjudged"]))  # fmt: skip
    print(f"wrote {Path(result['written']) / SUMMARY} and {TABLE}")
    return 0


@errors.entry
def main(argv: list[str] | None = None) -> int:
    """``bvb human``'s entry point: 0, or 2 for bad input (one line)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.action or (args.action == "pack" and not args.kind):
        parser.print_help()
        return 0 if not argv else 2
    setup_logging(args.verbose, args.quiet)
    if args.action == "pack":
        path_args.check(
            folders=[("--out", args.out), ("--scores", getattr(args, "scores", None))],
            files=[("--tasks", getattr(args, "tasks", None))],
        )
        return cmd_pack(args)
    if args.action == "serve":
        path_args.check(existing_folders=[("pack", args.pack)], folders=[("--answers", args.answers)])
        return cmd_serve(args)
    path_args.check(folders=[("--out", args.out)], existing_folders=[("--scores", args.scores)])
    return cmd_score(args)
