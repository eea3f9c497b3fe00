"""Per-head attention statistics over a dataset, at word level.

For every layer and head, over every query word of every example (special-token queries
are left out; the classification token is covered by :mod:`headwise.inspect.rollout`),
in two views:

* ``raw``: the word's attention over all units, special tokens included;
* ``words``: special-token columns removed and the row renormalised.

Per query row ``p`` (a distribution over ``K`` keys) the statistics are the entropy
``-sum p log p`` (nats) and ``entropy / log K`` (rows with ``K > 1``), the confidence
``max p``, the mean distance ``sum_j p_j |i - j|`` in units of the view, the mass on the
previous, same and next unit (0 where there is none), the mass on special tokens
(``raw``), and per category the mass ``sum_{j in c} p_j``, the category's share of the
keys ``|c| / K`` and whether the strongest key is in it. Dataset values are means over all
query rows pooled; a category's ``lift`` is its mean mass over its mean share of the keys
(1 for uniform attention), ``top_lift`` the same for the strongest key.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from headwise.inspect.words import words_only

VIEWS = ("raw", "words")
QUANTITIES = ("entropy", "entropy_norm", "confidence", "distance", "prev", "same", "next",
              "special")


def row_statistics(p: np.ndarray, query_pos: np.ndarray, key_pos: np.ndarray,
                   special_cols: np.ndarray, cat_cols: np.ndarray) -> dict[str, np.ndarray]:
    """Statistics of each query row.

    Args:
        p: (..., queries, keys) rows of attention weights.
        query_pos: (queries,) position of each query in the key sequence.
        key_pos: (keys,) position of each key.
        special_cols: (keys,) bool, special-token keys.
        cat_cols: (categories, keys) bool.

    Returns:
        Name -> (..., queries) arrays (``mass``/``share``/``top`` get a leading
        categories axis), plus ``valid`` (rows with any mass) and ``multi`` (``K > 1``).
    """
    k = p.shape[-1]
    logp = np.log(p, out=np.zeros_like(p), where=p > 0)
    entropy = -(p * logp).sum(-1)
    dist = np.abs(query_pos[:, None] - key_pos[None, :]).astype(np.float64)
    out = {"entropy": entropy,
           "entropy_norm": entropy / math.log(k) if k > 1 else np.zeros_like(entropy),
           "confidence": p.max(-1), "distance": (p * dist).sum(-1),
           "special": p[..., special_cols].sum(-1)}
    index = {int(pos): j for j, pos in enumerate(key_pos)}
    for name, step in (("prev", -1), ("same", 0), ("next", 1)):
        cols = np.array([index.get(int(q) + step, -1) for q in query_pos], dtype=np.int64)
        taken = p[..., np.arange(len(cols)), np.maximum(cols, 0)]
        out[name] = np.where(cols >= 0, taken, 0.0)
    top = p.argmax(-1)
    cats = np.asarray(cat_cols, dtype=bool)
    out["mass"] = np.stack([p[..., c].sum(-1) for c in cats]) if len(cats) else \
        np.zeros((0,) + entropy.shape)
    out["share"] = np.broadcast_to((cats.sum(-1) / k)[(...,) + (None,) * entropy.ndim],
                                   (len(cats),) + entropy.shape)
    out["top"] = cats[:, top].astype(np.float64) if len(cats) else np.zeros((0,) + top.shape)
    out["valid"] = p.sum(-1) > 0
    out["multi"] = np.full(entropy.shape, k > 1)
    return out


class HeadStatistics:
    """Accumulates :func:`row_statistics` of every example, per layer and head.

    Args:
        layers: attention layers.
        heads: heads per layer.
        categories: category names (the rows of the category masks given to ``add``).
    """

    def __init__(self, layers: int, heads: int, categories: Sequence[str]) -> None:
        self.shape = (layers, heads)
        self.categories = list(categories)
        c = len(self.categories)
        self.sums = {v: {q: np.zeros(self.shape) for q in QUANTITIES} for v in VIEWS}
        self.cat_sums = {v: {q: np.zeros((c, *self.shape)) for q in ("mass", "share", "top")}
                         for v in VIEWS}
        # rows whose keys include the category (its attention mass can only be there)
        self.cat_rows = {v: np.zeros((c, *self.shape)) for v in VIEWS}
        self.rows = {v: np.zeros(self.shape) for v in VIEWS}
        self.multi_rows = {v: np.zeros(self.shape) for v in VIEWS}
        self.examples = 0

    def add(self, unit_weights: np.ndarray, special: np.ndarray,
            cats: np.ndarray) -> dict[str, np.ndarray]:
        """Add one example.

        Args:
            unit_weights: (layers, heads, units, units) from
                :func:`~headwise.inspect.words.to_units`.
            special: (units,) bool.
            cats: (categories, units) bool.

        Returns:
            This example's per-head means in the ``words`` view: ``mass`` (categories,
            layers, heads) and ``special`` (layers, heads, from the ``raw`` view); empty
            arrays when the text has no word.
        """
        special = np.asarray(special, dtype=bool)
        words = np.flatnonzero(~special)
        per_example = {"mass": np.zeros((len(self.categories), *self.shape)),
                       "special": np.zeros(self.shape)}
        if len(words) == 0:
            return per_example
        self.examples += 1
        units = np.arange(len(special))
        views = {
            "raw": row_statistics(unit_weights[:, :, words, :], words, units, special, cats),
            "words": row_statistics(words_only(unit_weights, special), np.arange(len(words)),
                                    np.arange(len(words)), np.zeros(len(words), bool),
                                    cats[:, words]),
        }
        for v, rs in views.items():
            valid = rs["valid"].astype(np.float64)
            multi = valid * rs["multi"]
            self.rows[v] += valid.sum(-1)
            self.multi_rows[v] += multi.sum(-1)
            for q in QUANTITIES:
                w = multi if q == "entropy_norm" else valid
                self.sums[v][q] += (rs[q] * w).sum(-1)
            for q in ("mass", "share", "top"):
                self.cat_sums[v][q] += (rs[q] * valid).sum(-1)
            self.cat_rows[v] += ((rs["share"] > 0) * valid).sum(-1)
        rs, valid = views["words"], views["words"]["valid"]
        n = np.maximum(valid.sum(-1), 1)
        per_example["mass"] = (rs["mass"] * valid).sum(-1) / n
        per_example["special"] = views["raw"]["special"].mean(-1)
        return per_example

    def result(self) -> dict[str, Any]:
        """The dataset statistics: ``{"examples", "categories", "views": {view:
        {quantity: [[layer][head]], "rows", "categories": {name: {"mass", "share",
        "lift", "top_share", "top_lift", "mass_present", "rows_present"}}}}}`` (None where
        undefined). ``mass`` is averaged over all query rows, ``mass_present`` over the rows
        of texts that contain the category (where a head can attend to it at all)."""
        out: dict[str, Any] = {"examples": self.examples, "categories": self.categories,
                               "views": {}}
        for v in VIEWS:
            rows = self.rows[v]
            view: dict[str, Any] = {"rows": rows.tolist()}
            for q in QUANTITIES:
                if q == "special" and v == "words":
                    continue
                denom = self.multi_rows[v] if q == "entropy_norm" else rows
                view[q] = _ratio(self.sums[v][q], denom)
            cats = {}
            for i, name in enumerate(self.categories):
                mass, share, top = (self.cat_sums[v][q][i] for q in ("mass", "share", "top"))
                cats[name] = {"mass": _ratio(mass, rows), "share": _ratio(share, rows),
                              "lift": _ratio(mass, share), "top_share": _ratio(top, rows),
                              "top_lift": _ratio(top, share),
                              "mass_present": _ratio(mass, self.cat_rows[v][i]),
                              "rows_present": self.cat_rows[v][i].tolist()}
            view["categories"] = cats
            out["views"][v] = view
        return out


def _ratio(num: np.ndarray, den: np.ndarray) -> list[list[float | None]]:
    """``num / den`` as nested lists, None where ``den`` is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    return [[None if not np.isfinite(x) else float(x) for x in row] for row in r]
