"""``headwise``: one sub-command per user task.

Errors a user can fix (a bad data file, a missing model directory, a wrong option value)
end with a one-line message on standard error and exit status 1, not a traceback;
usage errors exit with status 2 (argparse's convention).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from headwise import __version__

#: sub-command modules under headwise.commands, in the order ``--help`` lists them
COMMANDS = ("demo", "train", "evaluate", "calibrate", "predict", "ensemble", "soup", "inspect",
            "serve", "export", "tour")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``headwise`` command."""
    import importlib

    parser = argparse.ArgumentParser(
        prog="headwise",
        description="Multi-head attention, Transformer models and intent recognition.",
    )
    parser.add_argument("--version", action="version", version=f"headwise {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"headwise.commands.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``headwise`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    if args.debug:
        return args.func(args)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("headwise: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError) as e:
        # user-fixable problems: bad data (DataError is a ValueError), a missing file,
        # an unsafe checkpoint (UnsafeCheckpointError is a ValueError); --debug shows more
        print(f"headwise {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
