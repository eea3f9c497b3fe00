"""Does attention point at the words the prediction depends on?

Leave-one-out importance (Jain & Wallace 2019; DeYoung et al. 2020): a word's
importance is the drop in the predicted class's probability when that word is removed
(its pieces masked out of the attention and the pooling, positions unchanged). It is
compared, by Kendall's tau-b (scipy), with two attention-based scores of the same words:

* ``attention``: the classification token's head-averaged attention in the last layer
  (the pooled row: ``[CLS]``'s row, or the mean of all rows for mean pooling);
* ``rollout``: the classification token's attention rollout
  (:func:`~headwise.inspect.rollout.attention_rollout`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from headwise.attention import capture_attention
from headwise.inspect.forward import attention_layers, pooling_of
from headwise.inspect.rollout import attention_rollout, pool_vector
from headwise.inspect.words import Segmented
from headwise.intent.classifier import IntentClassifier


@torch.inference_mode()
def word_scores(clf: IntentClassifier, seg: Segmented, *, chunk: int = 32
                ) -> dict[str, np.ndarray]:
    """Leave-one-out, last-layer attention and rollout scores of each word of one text.

    Args:
        clf: a Transformer classifier.
        seg: the text, segmented (:func:`~headwise.inspect.words.segment`).
        chunk: texts with one word removed per forward pass.

    Returns:
        ``{"loo", "attention", "rollout"}``, each (words,) float64, and ``"predicted"``
        (the class id).
    """
    layers = attention_layers(clf.model)
    pooling = pooling_of(clf.model)
    device = next(clf.model.parameters()).device
    batch = clf.tokenizer([seg.text], max_length=clf.max_length)
    ids, mask = batch["input_ids"].to(device), batch["attention_mask"].bool().to(device)
    with capture_attention(layers, to_cpu=True) as cap:
        logits = clf.model(input_ids=ids, attention_mask=mask)["logits"]
    weights = np.stack([cap[m][0][0].double().numpy() for m in layers])  # (L, H, n, n)
    probs = torch.softmax(logits.double() / clf.temperature, -1)[0]
    pred = int(probs.argmax())
    words = seg.words
    starts, sizes = seg.starts, seg.sizes
    masks = mask.repeat(len(words), 1)
    for row, unit in enumerate(words):
        masks[row, starts[unit]:starts[unit] + sizes[unit]] = False
    dropped = torch.cat([clf.model(input_ids=ids.expand(len(part), -1),
                                   attention_mask=part)["logits"]
                         for part in masks.split(chunk)])
    p_drop = torch.softmax(dropped.double() / clf.temperature, -1)[:, pred]
    loo = (probs[pred] - p_drop).cpu().numpy()
    n = seg.num_tokens
    last = pool_vector(n, pooling) @ weights[-1].mean(0)
    roll = attention_rollout(weights, pooling)
    return {"loo": loo, "attention": np.add.reduceat(last, starts)[words],
            "rollout": np.add.reduceat(roll, starts)[words], "predicted": pred}


def faithfulness(clf: IntentClassifier, segments: Sequence[Segmented], *,
                 min_words: int = 3) -> dict[str, Any]:
    """Kendall tau between leave-one-out importance and attention / rollout, per text.

    Args:
        clf: a Transformer classifier.
        segments: the texts to score (each costs one forward pass per word).
        min_words: texts with fewer words are skipped (tau needs a ranking).

    Returns:
        ``{"examples": n scored, "attention": {"mean_tau", "median_tau",
        "positive_share"}, "rollout": {...}, "per_example": [{"index", "attention",
        "rollout"}]}``; tau is None where a score is constant.
    """
    from scipy.stats import kendalltau  # imported here: scipy.stats is slow to import

    taus: dict[str, list[float]] = {"attention": [], "rollout": []}
    per_example = []
    for index, seg in enumerate(segments):
        if len(seg.words) < min_words:
            continue
        s = word_scores(clf, seg)
        row: dict[str, Any] = {"index": index}
        for key in taus:
            tau = kendalltau(s["loo"], s[key]).statistic
            row[key] = None if not np.isfinite(tau) else float(tau)
            if row[key] is not None:
                taus[key].append(row[key])
        per_example.append(row)
    out: dict[str, Any] = {"examples": len(per_example), "per_example": per_example}
    for key, values in taus.items():
        v = np.array(values)
        out[key] = {"mean_tau": float(v.mean()) if len(v) else None,
                    "median_tau": float(np.median(v)) if len(v) else None,
                    "positive_share": float((v > 0).mean()) if len(v) else None,
                    "n": len(v)}
    return out
