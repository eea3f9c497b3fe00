"""The heads against the attribution: which heads attend to the tokens that integrated
gradients find deciding (:func:`deciding_heads`, what ``headwise explain`` and
``/v1/explain`` list), and the head report's view of it
(:func:`~headwise.inspect.analysis.inspect_classifier`): each listed bad case with its
words' attribution (:func:`case_views`), and whether the heads of a role (the negation
heads) attend to what the attribution finds deciding on the texts that hold the role's
words (:func:`role_agreement`), measured with its interval.

Every score here is the share of the classification token's per-head rollout
(:func:`~headwise.inspect.rollout.head_rollout`) on the deciding tokens of an
:class:`~headwise.inspect.attribution.Explanation`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import binomtest

from headwise.inspect.attribution import Explanation, explain, first_window
from headwise.inspect.forward import NoAttentionError
from headwise.inspect.integrated_gradients import SEGMENT_STEPS
from headwise.inspect.rollout import head_rollout
from headwise.inspect.words import Segmented

__all__ = ["case_views", "deciding_heads", "role_agreement", "unit_attribution"]


# -- heads -----------------------------------------------------------------------------
def deciding_heads(explanation: Explanation, *, roles: list | None = None,
                   top_tokens: int = 3, top_heads: int = 5) -> list[dict[str, Any]]:
    """The heads that attend most to the tokens that decide the first explained intent.

    The deciding tokens are the ``top_tokens`` with the largest positive attribution; a
    head's score is the share of the classification token's per-head rollout
    (:func:`~headwise.inspect.rollout.head_rollout`: that head at its layer, the layers
    below head-averaged) that lands on them.

    Args:
        explanation: from :func:`explain`, with attention.
        roles: ``roles[layer][head]`` of a head analysis
            (:func:`~headwise.inspect.roles.head_roles`; ``stats.json``'s ``"roles"``), or
            None when unknown.
        top_tokens: how many deciding tokens.
        top_heads: how many heads to list.

    Returns:
        ``[{"layer", "head", "mass", "tokens", "roles"}]``, best first (``roles`` a list of
        role names, None when unknown); empty without attention.
    """
    if explanation.attention is None or not explanation.attributions:
        return []
    scores = explanation.attributions[0].scores.copy()
    scores[explanation.special] = -np.inf
    order = [int(i) for i in np.argsort(-scores, kind="stable")
             if np.isfinite(scores[i]) and scores[i] > 0][:top_tokens]
    if not order:
        return []
    per_head = head_rollout(explanation.attention, explanation.pooled_as)
    mass = per_head[:, :, order].sum(-1)  # (layers, heads)
    ranked = np.dstack(np.unravel_index(np.argsort(-mass, axis=None, kind="stable"),
                                        mass.shape))[0][:top_heads]
    out = []
    for layer, head in ranked.tolist():
        known = None
        if roles is not None and layer < len(roles) and head < len(roles[layer]):
            known = [r["role"] for r in roles[layer][head]]
        out.append({"layer": layer, "head": head, "mass": float(mass[layer, head]),
                    "tokens": [explanation.tokens[i][0] for i in order], "roles": known})
    return out


# -- the head report -------------------------------------------------------------------
def unit_attribution(explanation: Explanation, seg: Segmented) -> np.ndarray:
    """(units,) the first explained intent's attribution summed over each unit's pieces
    (the head analysis's words; special tokens 0).

    Raises:
        ValueError: a segmentation of other tokens than the explanation's.
    """
    if seg.num_tokens != len(explanation.tokens):
        raise ValueError(f"the segmentation has {seg.num_tokens} tokens, the explanation "
                         f"{len(explanation.tokens)}")
    return np.add.reduceat(explanation.attributions[0].scores, seg.starts)


def case_views(classifier: Any, segs: Sequence[Segmented], *, steps: int = SEGMENT_STEPS
               ) -> list[dict[str, Any]]:
    """The attribution view of texts (the head report's bad cases): each unit's
    attribution to the predicted intent, and the completeness check.

    Returns:
        Per text ``{"units", "attribution", "intent", "completeness"}``.
    """
    out = []
    truncating = first_window(classifier)
    for seg in segs:
        ex = explain(truncating, seg.text, steps=steps)
        scores = unit_attribution(ex, seg)
        out.append({"units": list(seg.units),
                    "attribution": [None if sp else round(float(v), 6)
                                    for v, sp in zip(scores, seg.special, strict=True)],
                    "intent": ex.attributions[0].intent,
                    "completeness": ex.attributions[0].completeness()})
    return out


def role_agreement(classifier: Any, segs: Sequence[Segmented], marked: Sequence[np.ndarray],
                   heads: Sequence[tuple[int, int]], *, top_tokens: int = 3,
                   steps: int = SEGMENT_STEPS) -> dict[str, Any]:
    """Do the heads of a role attend to what decides, on the texts that have the role's
    words? Agreement, measured.

    On each text, the deciding units are the ``top_tokens`` with the largest positive
    attribution (integrated gradients) to the predicted intent; each head's share of the
    classification token's per-head rollout on them is compared. The text agrees when the
    role's heads put more of it there, on average, than the other heads.

    Args:
        classifier: a Transformer intent classifier.
        segs: the texts (segmented), each with at least one unit of the role.
        marked: per text, (units,) bool: the role's units (the negation words).
        heads: the (layer, head) pairs that have the role.
        top_tokens: the deciding units per text.
        steps: Gauss-Legendre nodes per segment of the integration path.

    Returns:
        ``{"texts", "heads", "agree", "share", "interval", "verdict",
        "role_mass", "other_mass", "role_word_deciding"}``: ``share`` of texts that
        agree with its 95 % Wilson interval; ``verdict`` ``"agree"`` (interval above one
        half), ``"disagree"`` (below), ``"inconclusive"`` or ``"no heads"`` / ``"no texts"``;
        the mean rollout share of the role's heads and of the others on the deciding
        units; the share of texts where a role word is among the deciding units.
    """
    heads = [tuple(h) for h in heads]
    out: dict[str, Any] = {"texts": 0, "heads": [list(h) for h in heads], "agree": 0,
                           "share": None, "interval": None, "role_mass": None,
                           "other_mass": None, "role_word_deciding": None}
    if not heads:
        return {**out, "verdict": "no heads"}
    role_mass, other_mass, agree, deciding_word = [], [], 0, 0
    truncating = first_window(classifier)
    for seg, mark in zip(segs, marked, strict=True):
        ex = explain(truncating, seg.text, steps=steps)
        if ex.attention is None:
            raise NoAttentionError("role agreement needs attention heads")
        scores = unit_attribution(ex, seg)
        scores[seg.special] = -np.inf
        top = [int(i) for i in np.argsort(-scores, kind="stable")[:top_tokens]
               if np.isfinite(scores[i]) and scores[i] > 0]
        if not top:
            continue
        per_head = np.add.reduceat(head_rollout(ex.attention, ex.pooled_as),
                                   seg.starts, axis=-1)[:, :, top].sum(-1)  # (L, H)
        role = np.zeros(per_head.shape, dtype=bool)
        for layer, head in heads:
            role[layer, head] = True
        if role.all():
            return {**out, "verdict": "every head has the role"}
        r, o = float(per_head[role].mean()), float(per_head[~role].mean())
        role_mass.append(r)
        other_mass.append(o)
        agree += int(r > o)
        deciding_word += int(bool(np.asarray(mark, dtype=bool)[top].any()))
    n = len(role_mass)
    if n == 0:
        return {**out, "verdict": "no texts"}
    share = agree / n
    ci = binomtest(agree, n).proportion_ci(confidence_level=0.95, method="wilson")
    low, high = float(ci.low), float(ci.high)
    verdict = "agree" if low > 0.5 else "disagree" if high < 0.5 else "inconclusive"
    return {**out, "texts": n, "agree": agree, "share": share, "interval": [low, high],
            "verdict": verdict, "role_mass": float(np.mean(role_mass)),
            "other_mass": float(np.mean(other_mass)),
            "role_word_deciding": deciding_word / n}

