"""Batch invariance: a runtime whose answer for a row does not depend on the rows it is
batched with, so that a resumed, re-chunked or Ray Data run writes the very records of an
uninterrupted one."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["BatchInvariantRuntime", "make_batch_invariant"]


class BatchInvariantRuntime:
    """A runtime whose answer for a row does not depend on the rows it is batched with.

    The engines pad a forward pass to its longest row, and PyTorch's kernels round
    differently (by ~1e-7) for another sequence width below ~16 tokens, and for a single
    row (a matrix-vector product). So every forward pass is padded to a width fixed by
    its rows' length bucket (the power of two >= 8 at or above its width, capped at the
    model's maximum length; the engines group rows by that bucket) and a single row is run
    as two; the outputs are cut back to the rows and width asked for. Everything else is
    the wrapped runtime's (``name``, ``model``, ...).

    Args:
        runtime: a ``TorchRuntime`` or ``OnnxRuntime`` (``forward``, and
            ``forward_joint`` for a compound model).
        pad_id: the tokenizer's padding id.
        max_length: the model's maximum length in tokens (no pass is padded beyond it).
    """

    def __init__(self, runtime: Any, *, pad_id: int, max_length: int) -> None:
        self.inner = runtime
        self.name = runtime.name
        self.pad_id, self.max_length = int(pad_id), int(max_length)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def pad(self, input_ids: np.ndarray, attention_mask: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
        """The batch as it is run: at least two rows, padded to its bucket's width."""
        rows, width = input_ids.shape
        bucket = max(8, 1 << max(0, width - 1).bit_length())
        target = max(width, min(bucket, self.max_length))
        ids = np.full((max(rows, 2), target), self.pad_id, dtype=np.int64)
        mask = np.zeros((max(rows, 2), target), dtype=np.int64)
        ids[:rows, :width], mask[:rows, :width] = input_ids, attention_mask
        if rows == 1:
            ids[1], mask[1] = ids[0], mask[0]
        return ids, mask

    def forward(self, input_ids: np.ndarray, attention_mask: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """The wrapped runtime's ``forward`` on :meth:`pad`'s batch, cut back."""
        logits, pooled = self.inner.forward(*self.pad(input_ids, attention_mask))
        rows = len(input_ids)
        return logits[:rows], pooled[:rows]

    def forward_joint(self, input_ids: np.ndarray, attention_mask: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray | None]:
        """The wrapped runtime's ``forward_joint`` on :meth:`pad`'s batch, cut back."""
        logits, tags = self.inner.forward_joint(*self.pad(input_ids, attention_mask))
        rows, width = input_ids.shape
        return logits[:rows], None if tags is None else tags[:rows, :width]


def make_batch_invariant(engine: Any) -> Any:
    """Give a serve engine that runs a network (PyTorch or onnxruntime) a
    :class:`BatchInvariantRuntime` (in place); a TF-IDF model's or an ensemble's engine
    is left as it is (an ensemble's networks batch texts themselves). Returns the engine."""
    runtime = getattr(engine, "runtime", None)
    if getattr(runtime, "name", None) in ("torch", "onnx") \
            and not isinstance(runtime, BatchInvariantRuntime):
        engine.runtime = BatchInvariantRuntime(runtime, pad_id=engine.pad_id,
                                               max_length=engine.max_length)
    return engine
