"""Record per-head attention weights from any model built on :class:`MultiHeadAttention`.

Recording happens only inside ``with capture_attention() as cap:``. While it is active,
each MultiHeadAttention layer runs the "math" backend (the only one that yields weights)
and hands its weights to the capture; outside it the layers run their fused path
untouched (one context-variable lookup per call).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from torch import Tensor, nn

_ACTIVE: ContextVar[AttentionCapture | None] = ContextVar("headwise_capture", default=None)


class AttentionCapture(Mapping):
    """Recorded weights: ``cap[module]`` is the list of (batch, heads, q, k) tensors, one
    per forward call of that module, in call order.

    Args:
        modules: record only these modules (default: every MultiHeadAttention).
        detach: store detached tensors (default); False keeps them in the autograd graph.
        to_cpu: move the recorded tensors to the CPU.
    """

    def __init__(self, modules: list[nn.Module] | None = None, *, detach: bool = True,
                 to_cpu: bool = False) -> None:
        self._only = None if modules is None else {id(m) for m in modules}
        self.detach = detach
        self.to_cpu = to_cpu
        self._weights: dict[nn.Module, list[Tensor]] = {}
        self.gates: dict[nn.Module, list[Tensor]] = {}

    def wants(self, module: nn.Module) -> bool:
        """Whether ``module`` is being recorded."""
        return self._only is None or id(module) in self._only

    def record(self, module: nn.Module, weights: Tensor, gate: Tensor | None = None) -> None:
        """Store one call's weights (and its per-token head gates, for GLU fusion)."""
        for store, t in ((self._weights, weights), (self.gates, gate)):
            if t is None:
                continue
            if self.detach:
                t = t.detach()
            if self.to_cpu:
                t = t.cpu()
            store.setdefault(module, []).append(t)

    def __getitem__(self, module: nn.Module) -> list[Tensor]:
        return self._weights[module]

    def __iter__(self) -> Iterator[nn.Module]:
        return iter(self._weights)

    def __len__(self) -> int:
        return len(self._weights)

    def named(self, model: nn.Module) -> dict[str, list[Tensor]]:
        """The recorded weights keyed by each module's qualified name inside ``model``."""
        names = {m: n for n, m in model.named_modules()}
        return {names[m]: w for m, w in self._weights.items() if m in names}


def active_capture() -> AttentionCapture | None:
    """The capture in force in this context, or None."""
    return _ACTIVE.get()


@contextmanager
def capture_attention(modules: list[nn.Module] | None = None, *, detach: bool = True,
                      to_cpu: bool = False) -> Iterator[AttentionCapture]:
    """Record attention weights of MultiHeadAttention layers inside the ``with`` block.

    Args:
        modules: restrict recording to these layers (default: all).
        detach: store detached weights (default True).
        to_cpu: move weights to the CPU as they are recorded.

    Yields:
        An :class:`AttentionCapture`, filled as the layers run.

    Example:
        >>> with capture_attention() as cap:
        ...     model(x)
        >>> weights = cap[model.layers[0].attn][0]   # (batch, heads, q, k)
    """
    cap = AttentionCapture(modules, detach=detach, to_cpu=to_cpu)
    token = _ACTIVE.set(cap)
    try:
        yield cap
    finally:
        _ACTIVE.reset(token)
