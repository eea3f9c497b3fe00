"""Two data-parallel CPU processes (torchrun, gloo) end with the weights of one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


@pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                    reason="torch.distributed with the gloo backend is unavailable")
def test_two_processes_match_one_process(tmp_path: Path):
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    pipes = dict(env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    one = subprocess.Popen([sys.executable, str(SCRIPT), str(single), *ARGS], **pipes)
    two = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         str(SCRIPT), str(ddp), *ARGS], **pipes)
    _, one_err = one.communicate(timeout=300)
    two_out, two_err = two.communicate(timeout=300)
    assert one.returncode == 0, one_err
    assert two.returncode == 0, two_err[-4000:]
    assert "world_size=2 rank=0" in two_out and "world_size=2 rank=1" in two_out

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
