"""``headwise``: one sub-command per user task.

Errors a user can fix (a bad data file, a missing model directory, a wrong option value)
end with a one-line message on standard error and exit status 1, not a traceback;
usage errors exit with status 2 (argparse's convention). ``headwise --debug COMMAND ...``
shows the traceback instead.

Output cut short by its reader (``headwise predict M --json < texts | head -1``) ends the
command quietly with status 141, what a shell reports for a process that SIGPIPE stopped
(128 + 13), as ``yes | head -1`` does for ``yes``: a pipeline under ``set -o pipefail``
still sees that the output was not all read.

Start-up stays light: only the module of the sub-command being run is imported (none for
``headwise --help``), and each command imports its heavy libraries (torch, scikit-learn,
FastAPI, onnxruntime) when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence

from headwise import __version__

#: sub-command -> (its module under headwise.commands, its line in ``headwise --help``),
#: in the order ``--help`` lists them (tests check each line against the module's own)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo", "the main job: train and compare intent models on the built-in corpus"),
    "train": ("train", "train an intent classifier"),
    "distill": ("distill", "distil a trained classifier into a smaller, faster student"),
    "eval": ("evaluate", "evaluate a trained classifier on labelled data"),
    "doctor": ("doctor", "find duplicates, conflicts, likely mislabels and leakage in data"),
    "calibrate": ("calibrate", "calibrate a saved classifier's confidence on held-out data"),
    "predict": ("predict", "predict the intents of texts"),
    "ensemble": ("ensemble", "average several classifiers' calibrated probabilities"),
    "soup": ("soup", "average fine-tuned classifiers' weights into one model"),
    "inspect": ("inspect", "analyse a Transformer classifier's attention heads (HTML report)"),
    "explain": ("explain", "explain one text's answer: token attribution and the deciding heads"),
    "serve": ("serve", "serve a classifier over HTTP"),
    "export": ("export", "export a classifier to ONNX"),
    "tour": ("tour", "a tour of the attention core"),
}
#: the metavar of an option in every sub-command that leaves it unnamed (a file is FILE)
METAVARS = {"--data": "FILE", "--valid": "FILE", "--config": "FILE", "--lexicon": "FILE",
            "--onnx": "FILE", "--int8": "FILE", "--greedy": "FILE"}
#: exit status when the reader of the output went away (128 + SIGPIPE)
BROKEN_PIPE_STATUS = 141


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that ends an option's line with ``(default X)`` when it has a default worth
    saying (not None, not False) and its text does not already speak of one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (action.option_strings and action.help is not None
                and action.help is not argparse.SUPPRESS and "default" not in text.lower()
                and default is not None and default is not False
                and default is not argparse.SUPPRESS and action.nargs != 0):
            return f"{text} (default %(default)s)"
        return action.help


class CommandParser(argparse.ArgumentParser):
    """A sub-command's parser: options may come anywhere among the positional arguments
    (``predict MODEL --json TEXT``, ``ensemble OUT A --data F B``), as users type them
    (:meth:`~argparse.ArgumentParser.parse_known_intermixed_args`); ``--`` still ends
    the options. Its help shows the defaults (:class:`DefaultsHelpFormatter`)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._intermixing = False

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        if self._intermixing:  # the two passes of the intermixed parse
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        except TypeError:  # a parser intermixing cannot read (argparse.REMAINDER)
            return super().parse_known_args(args, namespace)
        finally:
            self._intermixing = False


def command_in(argv: Sequence[str]) -> str | None:
    """The sub-command an argument list names (the first word that is not one of the
    top-level options, which take no values), or None (none, or an unknown one)."""
    words = iter(argv)
    for word in words:
        if word == "--":
            word = next(words, "")
        elif word.startswith("-"):
            continue
        return word if word in COMMANDS else None
    return None


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser of the ``headwise`` command.

    Args:
        commands: the sub-commands to give their full parsers (their modules are
            imported); the others are listed with their help line only. None (the
            default): every one.

    Returns:
        The parser.
    """
    import importlib

    full = set(COMMANDS) if commands is None else set(commands)
    parser = argparse.ArgumentParser(
        prog="headwise",
        description="Multi-head attention, Transformer models and intent recognition.",
        epilog="Run `headwise COMMAND --help` for a command's options.")
    parser.add_argument("--version", action="version", version=f"headwise {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show tracebacks on errors (before the COMMAND: headwise --debug "
                        "COMMAND ...)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                parser_class=CommandParser)
    for name, (module, line) in COMMANDS.items():
        if name not in full:
            sub.add_parser(name, help=line)
            continue
        importlib.import_module(f"headwise.commands.{module}").add_parser(sub)
        _finish(sub.choices[name])
    return parser


def _finish(p: argparse.ArgumentParser) -> None:
    """What every sub-command has: the shared metavars."""
    for action in p._actions:
        for option in action.option_strings:
            if option in METAVARS and action.metavar is None and action.nargs != 0:
                action.metavar = METAVARS[option]


def _quiet_stdout() -> None:
    """Point standard output at the null device, so that nothing more (the interpreter's
    final flush included) writes to a pipe whose reader has gone."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):  # no real file descriptor (a test's)
        sys.stdout = open(os.devnull, "w")  # lives as long as the process


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``headwise`` console script.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0, 1 (an error the user can fix, one line on stderr), 130
        (interrupted) or :data:`BROKEN_PIPE_STATUS` (the output's reader went away);
        usage errors raise ``SystemExit(2)``.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    command = command_in(argv)
    parser = build_parser([command] if command else [])
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        if args.debug:
            status = args.func(args)
        else:
            try:
                status = args.func(args)
            except KeyboardInterrupt:
                print("headwise: interrupted", file=sys.stderr)
                return 130
            except BrokenPipeError:
                raise
            except (ValueError, OSError) as e:
                # user-fixable problems: bad data (DataError is a ValueError), a missing
                # file, an unsafe checkpoint (UnsafeCheckpointError is a ValueError)
                print(f"headwise {args.command}: error: {e}", file=sys.stderr)
                return 1
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE_STATUS


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
