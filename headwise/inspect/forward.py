"""Running a classifier for inspection: its attention layers, weights and predictions.

The inspect layer reads a model only through :func:`~headwise.attention.capture_attention`
and the per-head gates of :class:`~headwise.attention.MultiHeadAttention`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from headwise.attention import MultiHeadAttention, capture_attention
from headwise.intent.classifier import IntentClassifier


class NoAttentionError(ValueError):
    """The model has no attention heads to analyse or explain (e.g. the BiLSTM baseline)."""


def attention_layers(model: nn.Module) -> list[MultiHeadAttention]:
    """The model's self-attention layers, input side first: the one finder that the head
    analysis and the service's ``/v1/explain`` share.

    Raises:
        NoAttentionError: a model without multi-head attention (the BiLSTM).
        ValueError: layers with different head counts.
    """
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not layers:
        raise NoAttentionError(f"this model ({type(model).__name__}) has no attention heads: "
                               f"no multi-head attention layers to inspect or explain (the "
                               f"head analysis and /v1/explain need a Transformer "
                               f"classifier)")
    if len({m.num_heads for m in layers}) != 1:
        raise ValueError("the head analysis needs the same number of heads in every layer "
                         "(was the model pruned?)")
    return layers


def pooling_of(model: nn.Module) -> str:
    """``"cls"`` or ``"mean"``: how the classifier pools the sequence."""
    config = getattr(model, "config", None)
    return getattr(config, "pooling", "cls") if config is not None else "cls"


def label_ids(clf: IntentClassifier, labels: Sequence[str | None]) -> np.ndarray:
    """(n,) class index of each label; -1 for labels the classifier does not know
    (out-of-scope rows, unseen intents, None)."""
    index = {name: i for i, name in enumerate(clf.labels)}
    return np.array([index.get(y, -1) if y is not None else -1 for y in labels], dtype=np.int64)


@dataclass
class AttentionBatch:
    """One batch of :func:`iter_attention`.

    Attributes:
        indices: positions of the batch's texts in the input list.
        logits: (batch, classes) float64.
        weights: per layer, (batch, heads, seq, seq) CPU tensors (the model's dtype).
        lengths: (batch,) real tokens of each row (special tokens included).
    """

    indices: list[int]
    logits: np.ndarray
    weights: list[torch.Tensor]
    lengths: list[int]


@torch.inference_mode()
def iter_attention(clf: IntentClassifier, texts: Sequence[str], *, batch_size: int = 32,
                   max_weights: int = 1 << 26) -> Iterator[AttentionBatch]:
    """Forward ``texts`` in length-sorted batches, recording every layer's weights.

    Args:
        clf: a Transformer classifier.
        texts: the inputs.
        batch_size: the most texts per forward pass.
        max_weights: the most attention weights recorded per pass (all layers and heads);
            long inputs get smaller batches (512 tokens, 2 x 8 heads: 16 texts).

    Yields:
        :class:`AttentionBatch` objects (every text once, in length order).
    """
    layers = attention_layers(clf.model)
    per_token = len(layers) * layers[0].num_heads
    device = next(clf.model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    start = 0
    while start < len(order):
        idx = order[start:start + batch_size]
        batch = clf.tokenizer([texts[i] for i in idx], max_length=clf.max_length)
        seq = batch["input_ids"].shape[1]
        fits = max(1, max_weights // (per_token * seq * seq))
        if fits < len(idx):
            idx = idx[:fits]
            batch = {k: v[:fits] for k, v in batch.items()}
        start += len(idx)
        with capture_attention(layers, to_cpu=True) as cap:
            logits = clf.model(input_ids=batch["input_ids"].to(device),
                               attention_mask=batch["attention_mask"].bool().to(device))["logits"]
        weights = [cap[m][0] for m in layers]
        yield AttentionBatch(idx, logits.double().cpu().numpy(), weights,
                             batch["attention_mask"].sum(1).tolist())


def accuracy(clf: IntentClassifier, texts: Sequence[str], gold: np.ndarray, *,
             batch_size: int = 64) -> float:
    """Share of ``texts`` whose top logit is the gold class (rows with gold -1 left out).

    Raises:
        ValueError: no row with a known gold class.
    """
    keep = np.flatnonzero(gold >= 0)
    if len(keep) == 0:
        raise ValueError("no example has an intent the classifier knows")
    logits = clf.logits([texts[i] for i in keep], batch_size=batch_size)
    return float((logits.argmax(1) == gold[keep]).mean())
