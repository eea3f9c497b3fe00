"""The metrics log: one JSON object per line in ``out_dir/metrics.jsonl``, and the meter
that sums what a training line reports."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from headwise.train.distributed import DistContext, all_reduce_sum


class MetricsLog:
    """Appends records to a JSON-lines file and keeps them in memory.

    Args:
        path: the ``.jsonl`` file.
        enabled: False on data-parallel ranks other than 0 (nothing is written or kept).
        resume_step: None starts a new log (the file is emptied); a step number keeps
            the records up to that step and drops the later ones, which a resumed run is
            about to redo.
    """

    def __init__(self, path: str | Path, *, enabled: bool = True,
                 resume_step: int | None = None) -> None:
        self.path = Path(path)
        self.enabled = enabled
        self.records: list[dict[str, Any]] = []
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is not None and self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:  # a line torn by a crash
                    continue
                if isinstance(rec, dict) and rec.get("step", math.inf) <= resume_step:
                    self.records.append(rec)
        with open(self.path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in self.records)

    def write(self, record: dict[str, Any]) -> None:
        """Append one record (a flat dict of JSON values) and flush it to disk."""
        if not self.enabled:
            return
        self.records.append(record)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


class StepMeter:
    """Loss, examples and tokens since the last metrics line, summed over all ranks.

    Args:
        device: where the loss sum accumulates (the training device).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._reset()

    def _reset(self) -> None:
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        self.examples = 0.0
        self.tokens = 0.0
        self.start = time.perf_counter()

    def add(self, loss_sum: torch.Tensor, examples: float, tokens: float) -> None:
        """Count one step: this rank's example-weighted loss sum, global examples, tokens."""
        self.loss_sum += loss_sum
        self.examples += examples
        self.tokens += tokens

    def state_dict(self, ctx: DistContext) -> dict[str, float]:
        """Sums since the last line, over all ranks (a collective)."""
        return {"loss_sum": float(all_reduce_sum(self.loss_sum, ctx)),
                "examples": self.examples, "tokens": self.tokens}

    def load_state_dict(self, state: Mapping[str, float]) -> None:
        """Continue the sums of a checkpoint (on rank 0; the others start from 0)."""
        self.loss_sum.fill_(float(state.get("loss_sum", 0.0)))
        self.examples = float(state.get("examples", 0.0))
        self.tokens = float(state.get("tokens", 0.0))

    def record(self, ctx: DistContext, *, step: int, epoch: float, lr: float,
               grad_norm: torch.Tensor) -> dict[str, Any]:
        """The metrics line (a collective: every rank must call it at the same step)."""
        loss = float(all_reduce_sum(self.loss_sum, ctx)) / max(self.examples, 1.0)
        seconds = max(time.perf_counter() - self.start, 1e-9)
        rec = {"step": step, "epoch": epoch, "lr": lr, "loss": loss,
               "grad_norm": float(grad_norm), "tokens_per_s": self.tokens / seconds,
               "examples_per_s": self.examples / seconds}
        self._reset()
        return rec
