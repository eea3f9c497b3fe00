"""Kill a training process at any moment, resume it, and get bit-identical weights.

The runs are subprocesses of ``run_tiny.py`` (42 examples, batch 4: 11 steps an epoch,
3 epochs, a checkpoint every 4 steps and at every new best validation loss). Independent
runs are started together to use every core.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from headwise.train.checkpoint import (
    MODEL_FILE,
    find_latest_checkpoint,
    load_checkpoint,
    read_pointer,
)

SCRIPT = Path(__file__).with_name("run_tiny.py")
TOTAL_STEPS = 33
SCENARIOS = {
    # killed inside step 15; the last checkpoint (step 12) is in the middle of epoch 2
    "mid-epoch": ("--kill-at-forward", "15"),
    # killed while writing the third checkpoint (step 11: best after epoch 1), after its
    # tensor files and before its JSON: the run must fall back to step 8
    "during-checkpoint-write": ("--kill-in-checkpoint", "3"),
}
EXPECTED_RESUME_STEP = {"mid-epoch": 12, "during-checkpoint-write": 8}


@dataclass
class Killed:
    returncode: int
    stderr: str
    step: int
    pointer: Path | None
    latest: Path
    torn: list[str]


def start(out_dir: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, str(SCRIPT), str(out_dir), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("resume")
    procs = {"uninterrupted": start(root / "uninterrupted")}
    procs.update({name: start(root / name, *kill) for name, kill in SCENARIOS.items()})
    done = {name: finish(p) for name, p in procs.items()}
    assert done["uninterrupted"][0] == 0, done["uninterrupted"][1]

    killed = {}
    for name in SCENARIOS:
        latest = find_latest_checkpoint(root / name)
        assert latest is not None, done[name][1]
        killed[name] = Killed(
            returncode=done[name][0], stderr=done[name][1], step=load_checkpoint(latest).step,
            pointer=read_pointer(root / name / "latest"), latest=latest,
            torn=[p.name for p in (root / name).iterdir() if p.name.startswith(".tmp-")])
    resumes = {name: start(root / name, "--resume") for name in SCENARIOS}
    resumed = {name: finish(p) for name, p in resumes.items()}
    return {"root": root, "killed": killed, "resumed": resumed}


def final_weights(out_dir: Path) -> dict[str, torch.Tensor]:
    last = find_latest_checkpoint(out_dir)
    assert last is not None and last.name == f"step-{TOTAL_STEPS:06d}"
    return load_file(last / MODEL_FILE)


def comparable_history(out_dir: Path) -> list[dict]:
    drop = ("tokens_per_s", "examples_per_s")
    lines = (out_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in drop} for line in lines]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_kill_and_resume_is_bit_identical(runs: dict, name: str):
    root, killed = runs["root"], runs["killed"][name]
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # the killed run left a complete checkpoint, `latest` names it, nothing torn counts
    assert killed.step == EXPECTED_RESUME_STEP[name]
    assert killed.pointer == killed.latest
    if name == "during-checkpoint-write":
        assert len(killed.torn) == 1 and killed.torn[0].startswith(".tmp-step-000011-")

    code, err = runs["resumed"][name]
    assert code == 0, err
    ref, got = final_weights(root / "uninterrupted"), final_weights(root / name)
    assert ref.keys() == got.keys()
    for key in ref:
        assert torch.equal(ref[key], got[key]), key
    # the log of the resumed run reads as if it had never stopped
    assert comparable_history(root / name) == comparable_history(root / "uninterrupted")
    assert not [p for p in (root / name).iterdir() if p.name.startswith((".tmp-", ".trash-"))]
