"""Mixed precision: which precision a run takes, autocast, and a loss scaler for float16.

``auto`` is chosen by the machine. On CUDA it is bf16 where the device supports it, else
fp16. On the CPU it is bf16 autocast only where the CPU has native BF16 instructions
(``avx512_bf16`` or ``amx_bf16`` among the flags of ``/proc/cpuinfo``) *and* a short probe
(the forward and backward of a transformer-shaped feed-forward block, a few milliseconds)
runs faster under bf16 than in fp32; everywhere else fp32, since emulated bf16 is many
times slower. The choice is made once per process and says why
(:attr:`PrecisionChoice.reason`). Autocast leaves the weights, their gradients and the
optimizer state in fp32 (so a model trained in bf16 is saved in fp32 and serves anywhere);
the norms (:mod:`headwise.nn.norm`), the attention softmax and the losses compute in fp32
under it. What the choice is worth is measured in BENCHMARKS (``cpu_finetune``).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

__all__ = ["BF16_CPU_FLAGS", "MIN_BF16_SPEEDUP", "MixedPrecision", "PrecisionChoice",
           "auto_cpu_precision", "bf16_probe_speedup", "choose_cpu_precision", "cpu_flags",
           "native_bf16_flags", "resolve_precision"]

#: CPU flags (``/proc/cpuinfo``) of native BF16 arithmetic: AVX-512 BF16 and AMX
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
#: bf16 must run the probe at least this many times as fast as fp32 to be chosen
MIN_BF16_SPEEDUP = 1.1


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run takes, and why.

    Attributes:
        precision: "fp32", "bf16" or "fp16".
        reason: one line for the training log (what was asked, what the machine offers).
    """

    precision: str
    reason: str


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags from the first ``flags`` line of ``cpuinfo`` (Linux); empty
    where the file does not exist (other systems, where ``auto`` then takes fp32)."""
    path = Path(cpuinfo)
    if not sys.platform.startswith("linux") and str(path) == "/proc/cpuinfo":
        return frozenset()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def bf16_probe_speedup(tokens: int = 128, dim: int = 256, hidden: int = 1024,
                       repeats: int = 7) -> float:
    """How many times as fast bf16 autocast runs a training-shaped workload as fp32 here.

    The workload is the forward and backward of a feed-forward block
    (``Linear(dim, hidden)``, GELU, ``Linear(hidden, dim)``) on ``tokens`` rows: the
    matrix shapes of a fine-tuning step, not a large square matmul (whose bf16 rate can
    differ from them either way). Each precision runs once untimed, then ``repeats`` times,
    interleaved; the ratio of the fastest runs is returned (fp32 time / bf16 time): on a
    shared, busy machine some runs are slowed by other work, the fastest of several are
    not. It runs on one thread: what it measures is the core's bf16 arithmetic against
    its fp32, and on a busy machine a multi-threaded product waits for descheduled
    threads at random (on 2 shared cores the ratio swung many-fold between calls, while
    one thread's stayed steady). Tens of milliseconds on a CPU with native BF16; torch's
    random state and thread count are left as they were.
    """
    rng = torch.get_rng_state()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(tokens, dim, generator=g)
        w1 = (torch.randn(hidden, dim, generator=g) / dim ** 0.5).requires_grad_()
        w2 = (torch.randn(dim, hidden, generator=g) / hidden ** 0.5).requires_grad_()

        def run(bf16: bool) -> float:
            start = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                y = torch.nn.functional.linear(
                    torch.nn.functional.gelu(torch.nn.functional.linear(x, w1)), w2)
            y.float().square().mean().backward()
            w1.grad = w2.grad = None
            return time.perf_counter() - start

        run(False)
        run(True)
        fp32, bf16 = [], []
        for _ in range(repeats):
            fp32.append(run(False))
            bf16.append(run(True))
    finally:
        torch.set_rng_state(rng)
        torch.set_num_threads(threads)
    return min(fp32) / max(min(bf16), 1e-9)


def native_bf16_flags(flags: Iterable[str] | None = None) -> list[str]:
    """The native BF16 flags (:data:`BF16_CPU_FLAGS`) among ``flags`` (default: this CPU's,
    :func:`cpu_flags`); empty where torch emulates bf16."""
    have = set(cpu_flags() if flags is None else flags)
    return [f for f in BF16_CPU_FLAGS if f in have]


def choose_cpu_precision(flags: Iterable[str], probe: Callable[[], float]) -> PrecisionChoice:
    """``auto`` on the CPU: bf16 when ``flags`` name native BF16 (:data:`BF16_CPU_FLAGS`)
    and ``probe()`` (bf16's speed-up, as :func:`bf16_probe_speedup`) reaches
    :data:`MIN_BF16_SPEEDUP`; fp32 otherwise. ``probe`` is not called without the flags."""
    native = native_bf16_flags(flags)
    if not native:
        return PrecisionChoice("fp32", "auto: fp32, the CPU has no native BF16 (no "
                               f"{' or '.join(BF16_CPU_FLAGS)} flag), where bf16 is emulated "
                               "and slow")
    speedup = probe()
    if speedup >= MIN_BF16_SPEEDUP:
        return PrecisionChoice("bf16", f"auto: bf16 autocast, the CPU has {', '.join(native)} "
                               f"and a training-shaped probe ran {speedup:.1f}x as fast in "
                               f"bf16 as in fp32 on one thread")
    return PrecisionChoice("fp32", f"auto: fp32, the CPU has {', '.join(native)} but a "
                           f"training-shaped probe ran only {speedup:.2f}x as fast in bf16 "
                           f"as in fp32 on one thread (bf16 needs {MIN_BF16_SPEEDUP:g}x)")


@functools.cache
def auto_cpu_precision() -> PrecisionChoice:
    """:func:`choose_cpu_precision` of this machine's flags and probe, decided once per
    process (so every part of a run agrees)."""
    return choose_cpu_precision(cpu_flags(), bf16_probe_speedup)


def resolve_precision(precision: str, device: torch.device) -> PrecisionChoice:
    """The precision a run on ``device`` takes for the configured ``precision``.

    Raises:
        ValueError: fp16 off CUDA (its loss scaler is CUDA only), bf16 on a CUDA device
            without bf16, or an unknown precision.
    """
    cuda = device.type == "cuda"
    if precision == "auto":
        if cuda:
            ok = torch.cuda.is_bf16_supported()
            return PrecisionChoice("bf16" if ok else "fp16",
                                   f"auto: {'bf16' if ok else 'fp16'} on {device}"
                                   + ("" if ok else ", which has no bf16"))
        if device.type == "cpu":
            return auto_cpu_precision()
        return PrecisionChoice("fp32", f"auto: fp32 on {device}")
    if precision == "fp16" and not cuda:
        raise ValueError(f"precision='fp16' needs a CUDA device (training is on "
                         f"{device}); use 'bf16' or 'fp32' on the CPU")
    if precision == "bf16" and cuda and not torch.cuda.is_bf16_supported():
        raise ValueError(f"{device} does not support bfloat16; use 'fp16' or 'fp32'")
    if precision not in ("fp32", "bf16", "fp16"):
        raise ValueError(f"unknown precision {precision!r}")
    return PrecisionChoice(precision, f"{precision}, as configured")


class MixedPrecision:
    """Autocast and (for fp16) gradient scaling for one device.

    Args:
        precision: "fp32", "bf16", "fp16" or "auto" (:func:`resolve_precision`: bf16 or
            fp16 on CUDA; on the CPU bf16 only with native BF16 that a probe finds faster).
        device: the training device.

    Attributes:
        precision: the precision taken ("auto" resolved).
        reason: why (:attr:`PrecisionChoice.reason`).

    Raises:
        ValueError: as :func:`resolve_precision`.
    """

    def __init__(self, precision: str, device: torch.device) -> None:
        choice = resolve_precision(precision, device)
        self.precision = choice.precision
        self.reason = choice.reason
        self.device = device
        self.dtype = {"fp32": None, "bf16": torch.bfloat16,
                      "fp16": torch.float16}[self.precision]
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None

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

