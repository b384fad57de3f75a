"""Command line of the eval bridge. Subcommands are added by the scoring modules."""

import argparse


def build_parser():
    parser = argparse.ArgumentParser(
        prog="eval_bridge",
        description="Score BVB runs: Dual VQA, Latent Similarity, Overall.",
        epilog="example: python -m eval_bridge --help",
    )
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
    return 0
