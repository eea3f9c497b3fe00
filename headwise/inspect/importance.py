"""Head importance: gate gradients, single-head ablation and iterative pruning.

* :func:`gradient_importance` (Michel et al. 2019, "Are Sixteen Heads Really Better than
  One?"): the expected absolute gradient of the loss with respect to each head's gate,
  ``E_x |dL(x)/dg_h|``, one example at a time, normalised per layer (L2).
* :func:`ablation` : the accuracy change when a single head's gate is set to 0.
* :func:`pruning_curve` : remove the least important 10 % of the heads at a time
  (importance recomputed after each step, normalised per layer so layers compete), and
  the same removals in random orders, as accuracy curves.

Heads are silenced through :meth:`MultiHeadAttention.set_head_gates`; every function
restores the gates it found. Each takes a single-label or a compound classifier: the loss,
the accuracy (exact match of the intent set for a compound one) and the gold are the
kind's (:mod:`headwise.inspect.forward`).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from headwise.inspect.forward import accuracy, attention_layers, known_rows, loss_of


@contextmanager
def saved_gates(clf: Any):
    """Restore every layer's head gates (and their ``requires_grad``) on exit."""
    layers = attention_layers(clf.model)
    saved = [m.head_gate.detach().clone() for m in layers]
    try:
        yield layers
    finally:
        for m, g in zip(layers, saved, strict=True):
            m.head_gate.requires_grad_(False)
            m.set_head_gates(g)


def set_gates(clf: Any, gates: np.ndarray) -> None:
    """Set all gates from a (layers, heads) array (1 keep, 0 silence)."""
    for m, g in zip(attention_layers(clf.model), gates, strict=True):
        m.set_head_gates(torch.as_tensor(g, dtype=m.head_gate.dtype))


def gradient_importance(clf: Any, texts: Sequence[str], gold: np.ndarray, *,
                        gates: np.ndarray | None = None, normalize: bool = True
                        ) -> np.ndarray:
    """Expected absolute gradient of the loss w.r.t. each head's gate: the cross-entropy
    (single-label), the binary cross-entropy of the intent set (compound,
    :func:`~headwise.inspect.forward.loss_of`).

    Args:
        clf: a Transformer classifier (single-label or compound).
        texts: the examples.
        gold: :func:`~headwise.inspect.forward.label_ids`'s rows; unknown ones are left
            out.
        gates: (layers, heads) gates to evaluate at (default: all ones).
        normalize: divide each layer's scores by their L2 norm (removed heads, gate 0,
            score 0 and do not count in it).

    Returns:
        (layers, heads) float64.

    Raises:
        ValueError: no example with a known class.
    """
    gold = np.asarray(gold)
    keep = np.flatnonzero(known_rows(gold)).tolist()
    if not keep:
        raise ValueError("no example has an intent the classifier knows")
    device = next(clf.model.parameters()).device
    with saved_gates(clf) as layers:
        if gates is not None:
            set_gates(clf, gates)
        params = [m.head_gate for m in layers]
        for p in params:
            p.requires_grad_(True)
        total = np.zeros((len(layers), layers[0].num_heads))
        for i in keep:
            batch = clf.tokenizer([texts[i]], max_length=clf.max_length)
            logits = clf.model(input_ids=batch["input_ids"].to(device),
                               attention_mask=batch["attention_mask"].bool().to(device))["logits"]
            loss = loss_of(clf, logits, gold[i:i + 1])
            grads = torch.autograd.grad(loss, params)
            total += np.stack([g.abs().double().cpu().numpy() for g in grads])
    scores = total / len(keep)
    if gates is not None:
        # a removed head (gate 0) has no importance left; its gradient (the loss change if
        # it were switched back on) must not inflate its layer's norm and so deflate the
        # layer's remaining heads, which would make pruning drain one layer first
        scores = np.where(np.asarray(gates) == 0, 0.0, scores)
    if normalize:
        norms = np.linalg.norm(scores, axis=1, keepdims=True)
        scores = np.divide(scores, norms, out=np.zeros_like(scores), where=norms > 0)
    return scores


def ablation(clf: Any, texts: Sequence[str], gold: np.ndarray, *,
             batch_size: int = 64) -> dict[str, Any]:
    """Accuracy (exact match of a compound classifier's intent sets) with each single head
    silenced.

    Returns:
        ``{"base_accuracy", "accuracy": [[layer][head]], "delta": [[...]]}`` (delta =
        ablated minus base; negative means the head helps).
    """
    with saved_gates(clf) as layers:
        shape = (len(layers), layers[0].num_heads)
        base = accuracy(clf, texts, gold, batch_size=batch_size)
        acc = np.zeros(shape)
        for layer in range(shape[0]):
            for head in range(shape[1]):
                gates = np.ones(shape)
                gates[layer, head] = 0.0
                set_gates(clf, gates)
                acc[layer, head] = accuracy(clf, texts, gold, batch_size=batch_size)
    return {"base_accuracy": base, "accuracy": acc.tolist(), "delta": (acc - base).tolist()}


def pruning_fractions(num_heads: int, step: float = 0.1) -> list[int]:
    """Heads removed at each point of the curve: 0, ~10 %, ~20 % ... all."""
    points = int(round(1.0 / step))
    return sorted({int(round(k * step * num_heads)) for k in range(points + 1)})


def pruning_curve(clf: Any, texts: Sequence[str], gold: np.ndarray, *,
                  importance_texts: Sequence[str] | None = None,
                  importance_gold: np.ndarray | None = None, step: float = 0.1,
                  random_repeats: int = 3, seed: int = 0, batch_size: int = 64,
                  tolerance: float = 0.01) -> dict[str, Any]:
    """Accuracy as heads are removed: by gradient importance (iterative) and at random.

    Args:
        clf: a Transformer classifier (single-label or compound: its accuracy is the exact
            match of the intent sets).
        texts, gold: the evaluation examples and their gold
            (:func:`~headwise.inspect.forward.label_ids`; unknown rows left out).
        importance_texts, importance_gold: where the importance is measured (default the
            evaluation examples; pass a validation split to keep them apart).
        step: share of all heads removed per step.
        random_repeats: random removal orders averaged.
        seed: seed of the random orders.
        batch_size: texts per forward pass.
        tolerance: accuracy drop allowed for ``max_fraction_within`` (0.01 = 1 point).

    Returns:
        ``{"num_heads", "base_accuracy", "tolerance", "importance": {"removed",
        "fraction", "accuracy", "order": [[layer, head], ...]}, "random": {"fraction",
        "accuracy" (mean), "min", "max", "runs"}, "max_fraction_within": {"importance",
        "random"}}``.
    """
    imp_texts = texts if importance_texts is None else importance_texts
    imp_gold = gold if importance_gold is None else importance_gold
    with saved_gates(clf) as layers:
        shape = (len(layers), layers[0].num_heads)
        n = shape[0] * shape[1]
        counts = pruning_fractions(n, step)
        gates = np.ones(shape)
        order: list[list[int]] = []
        curve = []
        for target in counts:
            while len(order) < target:
                scores = gradient_importance(clf, imp_texts, imp_gold, gates=gates)
                scores[gates == 0] = np.inf
                ranked = np.argsort(scores, axis=None, kind="stable")
                for flat in ranked[: target - len(order)]:
                    layer, head = divmod(int(flat), shape[1])
                    gates[layer, head] = 0.0
                    order.append([layer, head])
            set_gates(clf, gates)
            curve.append(accuracy(clf, texts, gold, batch_size=batch_size))
        rng = np.random.default_rng(seed)
        runs = []
        for _ in range(random_repeats):
            perm = rng.permutation(n)
            run = []
            for target in counts:
                g = np.ones(n)
                g[perm[:target]] = 0.0
                set_gates(clf, g.reshape(shape))
                run.append(accuracy(clf, texts, gold, batch_size=batch_size))
            runs.append(run)
    base = curve[0]
    fractions = [c / n for c in counts]
    rand = np.array(runs) if runs else np.full((1, len(counts)), np.nan)
    mean = rand.mean(0)
    return {"num_heads": n, "base_accuracy": base, "tolerance": tolerance,
            "importance": {"removed": counts, "fraction": fractions, "accuracy": curve,
                           "order": order},
            "random": {"removed": counts, "fraction": fractions, "accuracy": mean.tolist(),
                       "min": rand.min(0).tolist(), "max": rand.max(0).tolist(),
                       "runs": rand.tolist()},
            "max_fraction_within": {
                "importance": max_fraction_within(fractions, curve, base, tolerance),
                "random": max_fraction_within(fractions, mean.tolist(), base, tolerance)}}


def max_fraction_within(fractions: Sequence[float], acc: Sequence[float], base: float,
                        tolerance: float) -> float:
    """The largest fraction whose accuracy is at least ``base - tolerance``."""
    ok = [f for f, a in zip(fractions, acc, strict=True) if a >= base - tolerance - 1e-12]
    return max(ok) if ok else 0.0
