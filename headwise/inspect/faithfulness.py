"""Does attention point at the words the prediction depends on?

Leave-one-out importance (Jain & Wallace 2019; DeYoung et al. 2020): a word's
importance is the drop in the predicted class's probability when that word is removed
(its pieces masked out of the attention and the pooling, positions unchanged). It is
compared, by Kendall's tau-b (scipy), with two attention-based scores of the same words:

* ``attention``: the classification token's head-averaged attention in the last layer
  (the pooled row: ``[CLS]``'s row, or the mean of all rows for mean pooling);
* ``rollout``: the classification token's attention rollout
  (:func:`~headwise.inspect.rollout.attention_rollout`).

Deletion curves (:func:`deletion_curves`) ask the same of every explanation method at
once, integrated gradients included: remove each method's top-ranked tokens and follow
how fast the predicted intent's probability falls (the area over the curve);
:func:`rank_methods` ranks the methods by that area, and names the most faithful only when
its lead over every other method holds under a paired bootstrap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from scipy.special import softmax

from headwise.attention import capture_attention
from headwise.inspect.attribution import Explanation, explain, first_window
from headwise.inspect.forward import (
    answer_probability,
    attention_layers,
    pooling_of,
    scored_answer,
)
from headwise.inspect.integrated_gradients import SEGMENT_STEPS, network_logits
from headwise.inspect.rollout import attention_rollout, pool_vector
from headwise.inspect.words import Segmented


@torch.inference_mode()
def word_scores(clf: Any, seg: Segmented, *, chunk: int = 32) -> dict[str, Any]:
    """Leave-one-out, last-layer attention and rollout scores of each word of one text.

    Args:
        clf: a Transformer classifier: single-label (a word's leave-one-out score is the
            drop of the predicted class's probability), or compound (the drop of the mean
            probability of the answered intents, of the most probable one when none is
            answered: :func:`~headwise.inspect.forward.answer_probability`).
        seg: the text, segmented (:func:`~headwise.inspect.words.segment`).
        chunk: texts with one word removed per forward pass.

    Returns:
        ``{"loo", "attention", "rollout"}``, each (words,) float64, and ``"predicted"``
        (the class id, or the (intents,) bool set answered: :func:`~headwise.inspect.forward.
        scored_answer`).
    """
    layers = attention_layers(clf.model)
    pooling = pooling_of(clf.model)
    device = next(clf.model.parameters()).device
    batch = clf.tokenizer([seg.text], max_length=clf.max_length)
    ids, mask = batch["input_ids"].to(device), batch["attention_mask"].bool().to(device)
    with capture_attention(layers, to_cpu=True) as cap:
        logits = clf.model(input_ids=ids, attention_mask=mask)["logits"]
    weights = np.stack([cap[m][0][0].double().numpy() for m in layers])  # (L, H, n, n)
    pred = scored_answer(clf, logits[0].double().cpu().numpy())
    base = answer_probability(clf, logits, pred)[0]
    words = seg.words
    starts, sizes = seg.starts, seg.sizes
    masks = mask.repeat(len(words), 1)
    for row, unit in enumerate(words):
        masks[row, starts[unit]:starts[unit] + sizes[unit]] = False
    dropped = torch.cat([clf.model(input_ids=ids.expand(len(part), -1),
                                   attention_mask=part)["logits"]
                         for part in masks.split(chunk)])
    p_drop = answer_probability(clf, dropped, pred)
    loo = (base - p_drop).cpu().numpy()
    n = seg.num_tokens
    last = pool_vector(n, pooling) @ weights[-1].mean(0)
    roll = attention_rollout(weights, pooling)
    return {"loo": loo, "attention": np.add.reduceat(last, starts)[words],
            "rollout": np.add.reduceat(roll, starts)[words],
            "predicted": int(pred) if np.ndim(pred) == 0 else pred}


def faithfulness(clf: Any, segments: Sequence[Segmented], *,
                 min_words: int = 3) -> dict[str, Any]:
    """Kendall tau between leave-one-out importance and attention / rollout, per text.

    Args:
        clf: a Transformer classifier (single-label or compound: :func:`word_scores`).
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


#: the shares of a text's tokens removed along a deletion curve
DELETION_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5)
#: the token rankings a deletion curve compares
DELETION_METHODS = ("ig", "rollout", "attention", "random")


def method_scores(classifier: Any, text: str, *, seed: int = 0, steps: int = SEGMENT_STEPS
                  ) -> tuple[Explanation, dict[str, np.ndarray]]:
    """Each deletion method's score of every token of one text (special tokens -inf, so
    they are never removed).

    Args:
        classifier: an intent classifier (a single-label network).
        text: the text.
        seed: the random ranking's seed.
        steps: Gauss-Legendre nodes per segment of the integration path.

    Returns:
        ``(explanation, {method: (tokens,) float64})``: ``ig`` always, ``rollout`` and
        ``attention`` for a network with heads, ``random``.
    """
    # the deletion curves mask tokens of the text cut to the maximum length: explain that
    ex = explain(first_window(classifier), text, steps=steps)
    special = ex.special
    n = len(ex.tokens)
    out = {"ig": ex.attributions[0].scores.copy()}
    if ex.attention is not None:
        out["rollout"] = attention_rollout(ex.attention, ex.pooled_as)
        out["attention"] = pool_vector(n, ex.pooled_as) @ \
            ex.attention[-1].astype(np.float64).mean(0)
    out["random"] = np.random.default_rng(seed).random(n)
    for v in out.values():
        v[special] = -np.inf
    return ex, out


@torch.no_grad()
def deletion_curves(classifier: Any, texts: Sequence[str], *,
                    fractions: Sequence[float] = DELETION_FRACTIONS, seed: int = 0,
                    steps: int = SEGMENT_STEPS) -> dict[str, Any]:
    """Deletion curves of each method over texts, and the area over them.

    For each text and method, the ``ceil(f * tokens)`` top-ranked real tokens are masked
    out for each fraction ``f``, and the predicted intent's probability (softmax of the
    logits over the temperature) is read again.

    Args:
        classifier: an intent classifier (a single-label network).
        texts: the texts.
        fractions: the shares of each text's real tokens removed.
        seed: the seed of the random ranking (text ``i`` uses ``seed + i``).
        steps: Gauss-Legendre nodes per segment of the integration path.

    Returns:
        ``{"fractions", "methods", "per_text": [{method: area}], "curves": {method:
        (texts, 1 + fractions) probabilities}, "area": {method: (texts,) area over the
        curve}, "completeness": (texts,) relative completeness errors}``.

    Raises:
        ValueError: no texts, or a fraction outside (0, 1].
    """
    if not texts:
        raise ValueError("deletion curves need at least one text")
    if any(not 0 < f <= 1 for f in fractions):
        raise ValueError(f"fractions must be in (0, 1], got {list(fractions)}")
    model = classifier.model
    device = next(model.parameters()).device
    temperature = float(getattr(classifier, "temperature", 1.0))
    curves: dict[str, list[np.ndarray]] = {}
    completeness = []
    for i, text in enumerate(texts):
        ex, scores = method_scores(classifier, text, seed=seed + i, steps=steps)
        completeness.append(ex.attributions[0].relative_error)
        pred = ex.attributions[0].index
        batch = classifier.tokenizer([text], max_length=classifier.max_length)
        ids = batch["input_ids"].to(device)
        mask = batch["attention_mask"].bool().to(device)
        real = int((~ex.special).sum())
        counts = [min(real, int(np.ceil(f * real - 1e-9))) for f in fractions]
        for method, s in scores.items():
            order = np.argsort(-s, kind="stable")
            masks = mask.repeat(len(counts), 1)
            for row, k in enumerate(counts):
                masks[row, torch.as_tensor(order[:k], device=device)] = False
            keep_rows = masks.sum(1) > 0
            probs = np.full(len(counts), np.nan)
            if bool(keep_rows.any()):
                logits = network_logits(model, ids.expand(int(keep_rows.sum()), -1),
                                 masks[keep_rows]).double() / temperature
                probs[keep_rows.cpu().numpy()] = torch.softmax(logits, -1)[:, pred].cpu().numpy()
            probs = np.nan_to_num(probs, nan=0.0)
            p0 = float(softmax(ex.logits / temperature)[pred])
            curves.setdefault(method, []).append(np.concatenate([[p0], probs]))
    out_curves = {m: np.stack(c) for m, c in curves.items()}
    area = {m: (c[:, :1] - c[:, 1:]).mean(1) for m, c in out_curves.items()}
    return {"fractions": list(fractions), "methods": list(out_curves),
            "curves": out_curves, "area": area,
            "completeness": np.array(completeness)}


#: bootstrap resamples of :func:`rank_methods`' intervals
RANK_RESAMPLES = 2000


def rank_methods(areas: Mapping[str, Sequence[Sequence[float]]], *,
                 resamples: int = RANK_RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """Rank explanation methods by their deletion-curve area (higher: more faithful), each
    with its 95 % bootstrap interval, and name the most faithful one when its lead over
    every other method, paired text by text, has a 95 % interval above zero.

    Args:
        areas: method -> the per-text areas of each group of texts (one group per seed or
            model run, or a single group); every method has the same texts in each group,
            in the same order, so that differences pair. Texts are resampled within their
            group.
        resamples: bootstrap resamples.
        seed: the bootstrap's seed.

    Returns:
        ``{"methods": [{"method", "area", "low", "high"}, ...]`` best first, ``"texts"``
        (all groups), ``"leader"`` (the largest mean area), ``"most_faithful"`` (the
        leader when its every paired lead clears zero, else None) and ``"leads"``
        (``{method: [mean, low, high]}`` of the leader minus each other method)}``.

    Raises:
        ValueError: no method, no text, or methods with different texts per group.
    """
    if not areas:
        raise ValueError("no method to rank")
    arrays = {m: [np.asarray(g, dtype=np.float64) for g in groups]
              for m, groups in areas.items()}
    shapes = {m: [a.shape for a in v] for m, v in arrays.items()}
    if len({tuple(v) for v in shapes.values()}) != 1:
        raise ValueError(f"the methods were scored on different texts: {shapes}")
    sizes = [a.shape[0] for a in next(iter(arrays.values()))]
    if not sum(sizes):
        raise ValueError("no text to rank the methods on")
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, n, size=(resamples, n)) for n in sizes if n]

    def interval(groups: list[np.ndarray]) -> tuple[float, float, float]:
        kept = [g for g in groups if g.shape[0]]
        total = np.concatenate(kept)
        sums = sum(g[d].sum(1) for g, d in zip(kept, draws, strict=True))
        low, high = np.percentile(sums / total.shape[0], [2.5, 97.5])
        return float(total.mean()), float(low), float(high)

    rows = []
    for m, groups in arrays.items():
        mean, low, high = interval(groups)
        rows.append({"method": m, "area": mean, "low": low, "high": high})
    rows.sort(key=lambda r: -r["area"])
    leader = rows[0]["method"]
    leads = {r["method"]: list(interval([a - b for a, b in zip(
        arrays[leader], arrays[r["method"]], strict=True)])) for r in rows[1:]}
    clear = all(v[1] > 0 for v in leads.values())
    return {"methods": rows, "texts": int(sum(sizes)), "leader": leader,
            "most_faithful": leader if clear else None, "leads": leads}
