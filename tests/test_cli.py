"""The ``headwise`` console script."""

from __future__ import annotations

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
