"""``headwise``: one sub-command per user task."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from headwise import __version__


def _demo(args: argparse.Namespace) -> int:
    from headwise import showcase

    n = 256 if args.quick else args.length
    showcase.run(n=n, repeats=2 if args.quick else args.repeats, show_masks=not args.no_masks)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``headwise`` command."""
    parser = argparse.ArgumentParser(
        prog="headwise",
        description="Multi-head attention, Transformer models and intent recognition.",
    )
    parser.add_argument("--version", action="version", version=f"headwise {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="the main job: a tour of the attention core",
                          description="Render the mask patterns, check every attention backend "
                          "against a float64 reference, time them, and show the dispatcher's "
                          "choice and captured per-head weights.")
    demo.add_argument("--length", type=int, default=1024, help="sequence length (default 1024)")
    demo.add_argument("--repeats", type=int, default=5, help="timed repeats per backend")
    demo.add_argument("--quick", action="store_true", help="a small, fast run")
    demo.add_argument("--no-masks", action="store_true", help="skip the mask renderings")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``headwise`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
