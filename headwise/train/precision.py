"""Mixed precision: autocast, and a loss scaler for float16."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor


class MixedPrecision:
    """Autocast and (for fp16) gradient scaling for one device.

    Args:
        precision: "fp32", "bf16", "fp16" or "auto" (bf16 on CUDA devices that support
            it, else fp16 on CUDA; fp32 on CPU, whose bf16 is usually slow).
        device: the training device.

    Raises:
        ValueError: fp16 off CUDA (its loss scaler is CUDA only), bf16 on a CUDA device
            without bf16, or an unknown precision.
    """

    def __init__(self, precision: str, device: torch.device) -> None:
        cuda = device.type == "cuda"
        if precision == "auto":
            if cuda:
                precision = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
            else:
                precision = "fp32"
        if precision == "fp16" and not cuda:
            raise ValueError(f"precision='fp16' needs a CUDA device (training is on "
                             f"{device}); use 'bf16' or 'fp32' on the CPU")
        if precision == "bf16" and cuda and not torch.cuda.is_bf16_supported():
            raise ValueError(f"{device} does not support bfloat16; use 'fp16' or 'fp32'")
        if precision not in ("fp32", "bf16", "fp16"):
            raise ValueError(f"unknown precision {precision!r}")
        self.precision = precision
        self.device = device
        self.dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
        self.scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """Run the forward pass (and loss) under autocast, or plainly in fp32."""
        if self.dtype is None:
            yield
            return
        with torch.autocast(self.device.type, dtype=self.dtype):
            yield

    def backward(self, loss: Tensor) -> None:
        """Backpropagate ``loss`` (scaled for fp16)."""
        if self.scaler is None:
            loss.backward()
        else:
            self.scaler.scale(loss).backward()

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Bring the gradients back to their true scale (before clipping)."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """Apply the update (skipped by the scaler when fp16 gradients overflowed)."""
        if self.scaler is None:
            optimizer.step()
        else:
            self.scaler.step(optimizer)
            self.scaler.update()

    def state_dict(self) -> dict[str, Any]:
        """The loss scaler's state (empty without one)."""
        return {} if self.scaler is None else self.scaler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output."""
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)
