"""Two data-parallel CPU processes (torchrun, gloo) end with the weights of one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from safetensors.torch import load_file

from headwise.train.checkpoint import MODEL_FILE, find_latest_checkpoint

SCRIPT = Path(__file__).with_name("run_tiny.py")
# 42 examples, global batch 4 (2 a process), 2 micro-batches a step: the last batch of
# an epoch holds 2 examples (1 a process) and the last step of an epoch 1 micro-batch.
ARGS = ("--dropout", "0", "--batch-size", "4", "--accum", "2", "--epochs", "2")


def _env() -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def _launch_two(out: Path, pipes: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         str(SCRIPT), str(out), *ARGS], timeout=300, **pipes)


@pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                    reason="torch.distributed with the gloo backend is unavailable")
def test_two_processes_match_one_process(tmp_path: Path):
    single = tmp_path / "single"
    pipes = dict(env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    one = subprocess.Popen([sys.executable, str(SCRIPT), str(single), *ARGS], **pipes)
    ddp = tmp_path / "ddp"
    two = _launch_two(ddp, pipes)
    if two.returncode != 0:
        # Once in about fifty CI runs a rank has died in gloo's C++ transport ("terminate
        # called without an active exception", SIGABRT) on a loaded 2-core machine; it did
        # not reproduce in 65 local launches, idle or loaded. Launch once more into a fresh
        # directory, and say so: a second failure fails the test.
        warnings.warn(f"torchrun failed once (exit {two.returncode}); launched again:\n"
                      f"{two.stderr[-2000:]}", stacklevel=1)
        ddp = tmp_path / "ddp-again"
        two = _launch_two(ddp, pipes)
    _, one_err = one.communicate(timeout=300)
    assert one.returncode == 0, one_err
    assert two.returncode == 0, f"{two.stdout[-2000:]}\n{two.stderr[-4000:]}"
    assert "world_size=2 rank=0" in two.stdout and "world_size=2 rank=1" in two.stdout

    a = load_file(find_latest_checkpoint(single) / MODEL_FILE)
    b = load_file(find_latest_checkpoint(ddp) / MODEL_FILE)
    assert find_latest_checkpoint(single).name == find_latest_checkpoint(ddp).name
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=0, atol=1e-6), name
    # only rank 0 logged: one line per logged step, with the single process's values
    lines = [json.loads(x) for x in (ddp / "metrics.jsonl").read_text().splitlines()]
    train_steps = [r["step"] for r in lines if "loss" in r]
    assert train_steps == sorted(set(train_steps))
    single_lines = [json.loads(x) for x in (single / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in single_lines if "loss" in r]
    assert losses[-1] < losses[0]  # it trained: the weights compared above moved
    for r1, r2 in zip(single_lines, lines, strict=True):
        assert r1["step"] == r2["step"]
        for key in ("loss", "eval_loss", "lr"):
            if key in r1:
                assert r2[key] == pytest.approx(r1[key], rel=1e-5), key
