"""The suite's own guard: a test that hangs fails after pyproject's per-test timeout, with
its stack, and the tests after it still run (a hang once held CI until its 90 minutes ran
out, with no word of which test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

HANGING = '''
import multiprocessing

def test_waits_for_an_answer_that_never_comes():
    multiprocessing.get_context("spawn").Queue().get()  # no timeout: for ever

def test_after_it():
    assert True
'''


def test_the_suite_runs_under_a_per_test_timeout(request: pytest.FixtureRequest) -> None:
    assert 60 <= float(request.config.getini("timeout")) <= 600
    assert request.config.getini("timeout_method") == "signal"


def test_a_hanging_test_fails_with_its_stack_and_the_next_one_runs(tmp_path: Path) -> None:
    (tmp_path / "test_hang.py").write_text(HANGING)
    # the project's configuration, with the timeout shortened for the test
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
         str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), "-o", "timeout=3",
         str(tmp_path / "test_hang.py")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "Timeout" in out and "test_waits_for_an_answer_that_never_comes" in out, out
