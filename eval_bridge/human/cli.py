"""``bvb human pack|serve|score``: a blinded study for people, and the benchmark's scores checked against it."""

import argparse
import sys
from typing import Any

from bvb_addon import errors, outcomes
from bvb_addon.command_line import Parser, add_log_flags, setup_logging
from bvb_addon.options import add_options, from_namespace

from .key import KEY, forms_of
from .pack import BVBPackOptions, PackResult, VGIPackOptions, pack
from .score import SUMMARY, TABLE, HumanScoreOptions, HumanScoreResult, score_human
from .serve import HumanServeOptions, serve

EXAMPLES = """examples:
  bvb human pack bvb --runs gpt=results/r1 claude=results/r2 qwen=results/r3 --out studies/bvb1 --count 9
  bvb human pack vgi --tasks data/vgi/tasks.jsonl --videos genA=videos/a genB=videos/b --scores results/vgi \\
      --out studies/vgi1
  bvb human serve studies/bvb1                  (raters open the printed URL; answers land in studies/bvb1/answers)
  bvb human score studies/bvb1 studies/bvb1/answers
Send raters study.html only (or serve it); key.json unblinds the answers and stays with you."""


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
    add_options(bvb, BVBPackOptions)
    bvb.set_defaults(options=BVBPackOptions)
    vgi = kinds.add_parser("vgi", help="rate each generator's video of each instance: completeness and rule violations",
                           prog="bvb human pack vgi", formatter_class=parser.formatter_class)  # fmt: skip
    add_log_flags(vgi)
    add_options(vgi, VGIPackOptions)
    vgi.set_defaults(options=VGIPackOptions)

    serve = _sub(sub, "serve", "serve a study page on loopback and keep the answers raters send",
                 "bvb human serve studies/bvb1 --port 8780")  # fmt: skip
    add_options(serve, HumanServeOptions)

    score = _sub(sub, "score", "unblind raters' answers and check the benchmark's scores against them",
                 "bvb human score studies/bvb1 studies/bvb1/answers")  # fmt: skip
    add_options(score, HumanScoreOptions)
    return parser


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def cmd_pack(options: BVBPackOptions | VGIPackOptions) -> PackResult:
    """``bvb human pack bvb|vgi``: the page(s) and key.json, and a line for each."""
    result = pack(options)
    forms = forms_of(result.key)
    for form_id, form in forms.items():
        size = (result.out / form["page"]).stat().st_size / 2**20
        shown = f"{len(form['scenes'])} of the scenes, " if len(forms) > 1 else ""
        print(f"wrote {result.out / form['page']} ({shown}{result.what}, {size:.1f} MB; pack {form_id})")
    pages = "its page" if len(forms) == 1 else "each rater their own form"
    print(
        f"wrote {result.out / KEY}: the blinding key; keep it, send {pages} only (or run bvb human serve {result.out})"
    )
    return result


def cmd_serve(options: HumanServeOptions) -> None:
    """``bvb human serve``: the study on loopback until interrupted."""
    server = serve(options)
    print(
        f"serving the study in {options.pack} at {server.url}; answers go to {server.answers} (Ctrl-C stops)",
        flush=True,
    )
    server.run_forever()


def cmd_score(options: HumanScoreOptions) -> HumanScoreResult:
    """``bvb human score``: the scores' lines, and where they were written."""
    scored = score_human(options)
    result = scored.scores
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
    print(f"wrote {scored.written / SUMMARY} and {TABLE}")
    return scored


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
        cmd_pack(from_namespace(args.options, args))
    elif args.action == "serve":
        try:
            cmd_serve(from_namespace(HumanServeOptions, args))
        except KeyboardInterrupt:  # Ctrl-C is how the server is stopped: one line, no traceback
            print(outcomes.interrupted_line("bvb human serve", resumable=False), file=sys.stderr)
            return outcomes.INTERRUPTED_EXIT
    else:
        cmd_score(from_namespace(HumanScoreOptions, args))
    return 0
