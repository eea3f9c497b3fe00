"""Batch invariance: a runtime whose answer for a row does not depend on the rows it is
batched with, so that a resumed, re-chunked or Ray Data run writes the very records of an
uninterrupted one."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MIN_ROWS", "BatchInvariantRuntime", "make_batch_invariant"]

#: the fewest rows a pass is run with: measured on MKL 2024.2 (PyTorch 2.13, AVX-512), a
#: float32 ``nn.Linear`` gives a row other bits in a product of 15 rows or fewer than in
#: any larger one (1 row only on AVX2 CPUs)
MIN_ROWS = 16


class BatchInvariantRuntime:
    """A runtime whose answer for a row does not depend on the rows it is batched with.

    The predictors pad a forward pass to its longest row, and PyTorch's kernels round
    differently (by ~1e-7) for another sequence width below ~16 tokens, and for a matrix
    product of few rows: a single row (a matrix-vector product) everywhere, and on AVX-512
    CPUs (MKL's small-matrix path) any product of up to 15 rows, which is what the
    classifier head multiplies, one pooled vector per text. So every forward pass is padded
    to a width fixed by its rows' length bucket (the power of two >= 8 at or above its
    width, capped at the model's maximum length; the predictors group rows by that bucket) and
    to at least :data:`MIN_ROWS` rows (copies of its first row); the outputs are cut back to
    the rows and width asked for. Everything else is the wrapped runtime's (``name``,
    ``model``, ...).

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
        """The batch as it is run: at least :data:`MIN_ROWS` rows (copies of the first),
        padded to its bucket's width."""
        rows, width = input_ids.shape
        bucket = max(8, 1 << max(0, width - 1).bit_length())
        target = max(width, min(bucket, self.max_length))
        ids = np.full((max(rows, MIN_ROWS), target), self.pad_id, dtype=np.int64)
        mask = np.zeros((max(rows, MIN_ROWS), target), dtype=np.int64)
        ids[:rows, :width], mask[:rows, :width] = input_ids, attention_mask
        if 0 < rows < MIN_ROWS:
            ids[rows:], mask[rows:] = ids[0], mask[0]
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


def make_batch_invariant(predictor: Any) -> Any:
    """Give a predictor that runs a network (PyTorch or onnxruntime;
    :mod:`headwise.intent.inference`) a :class:`BatchInvariantRuntime` (in place); a TF-IDF
    model's or an ensemble's predictor is left as it is (an ensemble's networks batch texts
    themselves). Returns the predictor."""
    runtime = getattr(predictor, "runtime", None)
    if getattr(runtime, "name", None) in ("torch", "onnx") \
            and not isinstance(runtime, BatchInvariantRuntime):
        predictor.runtime = BatchInvariantRuntime(runtime, pad_id=predictor.pad_id,
                                                  max_length=predictor.max_length)
    return predictor
