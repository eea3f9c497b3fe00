"""The ``headwise`` console script."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from headwise import __version__
from headwise.cli import main


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"headwise {__version__}"
    assert main([]) == 0
    listed = capsys.readouterr().out
    assert all(c in listed for c in ("demo", "train", "eval", "predict", "tour"))


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "headwise.cli", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "usage: headwise" in out


def test_tour_runs_and_checks_every_backend(capsys):
    assert main(["tour", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "█" in out and "capture_attention" in out
    rows = [line for line in out.splitlines() if line.split()[-2:-1] and "e-" in line]
    assert len(rows) == 15  # 5 patterns x 3 backends, each with its measured error
    for line in rows:
        err = float(next(tok for tok in line.split() if "e-" in tok))
        assert err < 1e-5


# --- start-up: only what the sub-command needs is imported ----------------------------------
HEAVY = ("torch", "sklearn", "scipy", "fastapi", "onnxruntime", "onnx", "transformers",
         "matplotlib", "uvicorn", "pandas")


@pytest.mark.parametrize("argv", [[], ["--help"], ["--version"], ["predict", "--help"],
                                  ["serve", "--help"], ["export", "--help"],
                                  ["inspect", "--help"], ["tour", "--help"],
                                  ["ensemble", "--help"], ["soup", "--help"]])
def test_help_imports_no_heavy_library(argv):
    code = ("import sys\nfrom headwise.cli import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_help_lists_every_command_with_its_own_line():
    from headwise.cli import COMMANDS, build_parser

    sub = next(a for a in build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == list(COMMANDS)
    lines = {a.dest: a.help for a in sub._choices_actions}
    assert lines == {name: line for name, (_, line) in COMMANDS.items()}
    light = build_parser([])  # the listing needs no sub-command module
    assert all(name in light.format_help() for name in COMMANDS)


def test_constants_repeated_for_a_light_start_stay_equal():
    import dataclasses

    from headwise.commands import _common, serve_options
    from headwise.intent.inference import LONG_TEXT_POLICIES, RUNTIMES
    from headwise.serve.config import ServeConfig
    from headwise.text.readers import FORMATS

    assert _common.FORMATS == FORMATS
    assert _common.RUNTIMES == RUNTIMES
    assert _common.LONG_TEXT_POLICIES == LONG_TEXT_POLICIES
    from headwise.intent.inference.bucketing import CHUNK_POOLING, MIN_CHUNK_LENGTH

    assert _common.CHUNKED_POLICIES == ("auto", *CHUNK_POOLING)
    assert f"(>= {MIN_CHUNK_LENGTH})" in _common.LONG_TEXT_WINDOW_HELP
    # every ServeConfig field is a --set setting or has its own option, never both
    fields = [f.name for f in dataclasses.fields(ServeConfig)]
    assert sorted(serve_options.SERVICE_SETTINGS) == sorted(
        set(fields) - set(serve_options.OWN_OPTIONS))
    assert set(serve_options.OWN_OPTIONS) <= set(fields)


# --- options anywhere, --debug before the sub-command ----------------------------------------
@pytest.mark.parametrize("argv, want", [
    (["predict", "M", "--json", "a", "b"], {"json": True, "texts": ["a", "b"], "top_k": 3}),
    (["predict", "M", "a", "--top-k", "2", "b"], {"texts": ["a", "b"], "top_k": 2}),
    (["predict", "--json", "M", "a"], {"model": "M", "texts": ["a"], "json": True}),
    (["predict", "M", "--", "--json", "-5 pounds"], {"texts": ["--json", "-5 pounds"],
                                                     "json": False}),
    (["ensemble", "out", "a", "--data", "d.csv", "b"], {"models": ["a", "b"], "data": "d.csv"}),
    (["soup", "out", "a", "--json", "b", "c"], {"models": ["a", "b", "c"], "json": True}),
])
def test_options_go_anywhere_among_positional_arguments(argv, want):
    from headwise.cli import build_parser

    args = build_parser([argv[0]]).parse_args(argv)
    assert {k: getattr(args, k) for k in want} == want


def test_debug_is_one_option_before_the_sub_command(tmp_path, capsys):
    from headwise.cli import build_parser

    for argv, debug in ((["eval", "m", "--data", "d"], False),
                        (["--debug", "eval", "m", "--data", "d"], True)):
        assert build_parser(["eval"]).parse_args(argv).debug is debug
    with pytest.raises(SystemExit) as e:  # not an option of the sub-commands
        build_parser(["eval"]).parse_args(["eval", "m", "--data", "d", "--debug"])
    assert e.value.code == 2 and "--debug" in capsys.readouterr().err
    missing = str(tmp_path / "missing")
    assert main(["predict", missing, "hi"]) == 1  # one line
    with pytest.raises(FileNotFoundError):  # the traceback
        main(["--debug", "predict", missing, "hi"])


# --- help text: defaults, metavars -----------------------------------------------------------
def _help(name: str) -> str:
    from headwise.cli import build_parser

    sub = next(a for a in build_parser([name])._actions
               if isinstance(a, argparse._SubParsersAction))
    return " ".join(sub.choices[name].format_help().split())


@pytest.mark.parametrize("name, wanted", [
    ("demo", ["--seed SEED corpus and training seed (default 0)"]),
    ("inspect", ["max_examples", "show_examples (12)", "batch_size (32)", "seed (0)"]),
    ("tour", ["timed repeats per backend (default 5)"]),
    ("serve", ["(default 8000)", "compound", "TF-IDF", "ensemble", "--config FILE",
               "auto|torch|onnx|FILE.onnx", "max_batch_size", "graceful_timeout"]),
    ("export", ["--onnx FILE", "--int8 FILE", "--data FILE"]),
    ("predict", ["--columns TEXT[,KEEP...]", "intents listed per text (default 3)"]),
])
def test_help_shows_defaults_and_shared_metavars(name, wanted):
    text = _help(name)
    for piece in wanted:
        assert piece in text, piece
    assert "(default" in text and "(default None)" not in text and "(default False)" not in text
    assert "(default (" not in text  # a tuple's repr, such as --columns's (None, ())


def test_the_cli_stays_small(monkeypatch):
    """Issue 32: fewer options than the 160 it was filed at (203 before the slimming), and
    a predict --help shorter than the 81 lines it had then (80 columns; 96 at its longest)."""
    from headwise.cli import build_parser

    monkeypatch.setenv("COLUMNS", "80")
    sub = next(a for a in build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    options = sum(bool(a.option_strings) and a.dest != "help"
                  for p in sub.choices.values() for a in p._actions)
    assert options <= 156, options  # headroom under 160: a new option must earn its place
    lines = sub.choices["predict"].format_help().splitlines()
    assert len(lines) <= 80, len(lines)


def test_data_and_file_options_are_named_file_everywhere():
    from headwise.cli import METAVARS, build_parser

    sub = next(a for a in build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        for action in p._actions:
            for option in set(action.option_strings) & set(METAVARS):
                assert action.metavar == METAVARS[option], (name, option)


# --- output cut short by its reader ----------------------------------------------------------
def test_a_closed_pipe_ends_the_command_quietly_with_141():
    # a command that prints far more than a pipe holds; the reader takes one line and goes
    code = ("import sys\nimport headwise.commands.tour as t\n"
            "t.run = lambda args: [print('x' * 99) for _ in range(200_000)] and 0\n"
            "from headwise.cli import main\nsys.exit(main(sys.argv[1:]))")
    for argv in (["tour"], ["--debug", "tour"]):
        proc = subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout.readline() == b"x" * 99 + b"\n"
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 141
        assert "Broken pipe" not in err and "Traceback" not in err and "Exception" not in err


# --- output directories ----------------------------------------------------------------------
def test_an_existing_file_as_output_directory_is_one_clear_line(tmp_path, capsys):
    from headwise.commands._common import check_combination, check_out_dir, check_out_file

    data = tmp_path / "train60.csv"
    data.write_text("text,label\nhi,greet\n")
    assert check_out_dir(tmp_path) == tmp_path
    assert check_out_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    with pytest.raises(ValueError, match=r"--out .*train60.csv is a file, not a directory"):
        check_out_dir(str(data))
    with pytest.raises(ValueError, match=r"cannot be made: .*train60.csv is a file"):
        check_out_dir(data / "model")
    with pytest.raises(ValueError, match="OUT .* is a file"):
        check_combination(str(data), ["a", "b"], "an ensemble")
    assert check_out_file(tmp_path / "m.onnx", "--onnx") == tmp_path / "m.onnx"
    with pytest.raises(ValueError, match="--onnx .* is a directory"):
        check_out_file(tmp_path, "--onnx")
    with pytest.raises(ValueError, match="--onnx .* cannot be written: .*train60.csv is a file"):
        check_out_file(data / "m.onnx", "--onnx")
    # the commands refuse it before any work (the model directory here does not even exist)
    assert main(["inspect", str(tmp_path / "nomodel"), "--data", str(data), "--out",
                 str(data)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file, not a directory" in err
    assert main(["export", str(tmp_path / "nomodel"), "--onnx", str(tmp_path)]) == 1
    assert "is a directory" in capsys.readouterr().err


def test_a_missing_model_is_the_only_missing_argument_of_predict(capsys):
    with pytest.raises(SystemExit) as e:
        main(["predict"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("required: MODEL")
