"""``headwise tour``: a tour of the attention core (masks, backends, dispatcher, capture)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tour", help="a tour of the attention core",
        description="Render the mask patterns, check every attention backend against a float64 "
        "reference, time them, and show the dispatcher's choice and captured per-head weights.")
    p.add_argument("--length", type=int, default=1024, help="sequence length (default 1024)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per backend (default 5)")
    p.add_argument("--quick", action="store_true", help="a small, fast run (length 256, 2 repeats)")
    p.add_argument("--no-masks", action="store_true", help="skip the mask renderings")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from headwise.demo import showcase

    n = 256 if args.quick else args.length
    showcase.run(n=n, repeats=2 if args.quick else args.repeats, show_masks=not args.no_masks)
    return 0
