"""The distance to the k-th nearest training vector (Sun et al. 2022, "Out-of-distribution
detection with deep nearest neighbors").

Pooled vectors are L2-normalised (the paper finds normalisation essential); a text's score
is the negative Euclidean distance from its normalised vector to the ``k``-th nearest
normalised training vector (for unit vectors ``||u - v||^2 = 2 - 2 cos(u, v)``: a cosine
nearest-neighbour rule). No distribution is assumed, unlike the Mahalanobis score. The
search is brute force (one matrix product per chunk of queries), exact, and fast enough for
tens of thousands of training rows; the training bank is kept as float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from headwise.intent.decision.ood.base import OodDetector, matmul

#: queries per matrix product (bounds the (chunk, bank) similarity block's memory)
CHUNK = 1024


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norm (a zero row stays zero)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


class KnnDetector(OodDetector):
    """The k-th nearest-neighbour distance on L2-normalised pooled vectors.

    Args:
        k: which neighbour (>= 1; Sun et al. use 50 on CIFAR-10's 50k images, 10 suits
            intent data with ~100 rows per class).

    Attributes (after :meth:`fit`):
        bank: (n, d) float32 normalised training vectors.

    Raises:
        ValueError: ``k < 1``.
    """

    name = "knn"
    needs_features = True
    needs_logits = False

    def __init__(self, k: int = 10) -> None:
        super().__init__()
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        self.k = int(k)
        self.bank = np.zeros((0, 0), dtype=np.float32)
        self._bank64 = np.zeros((0, 0))
        self._bank_sq = np.zeros(0)

    def params(self) -> dict[str, Any]:
        return {"k": self.k}

    def _fit(self, features: np.ndarray | None, logits: np.ndarray | None,
             labels: np.ndarray | None) -> None:
        if len(features) < self.k:
            raise ValueError(f"k={self.k} needs at least {self.k} training rows, got "
                             f"{len(features)}")
        self._set(l2_normalise(features).astype(np.float32))

    def _set(self, bank: np.ndarray) -> None:
        self.bank = bank
        self._bank64 = bank.astype(np.float64)
        self._bank_sq = (self._bank64 ** 2).sum(1)

    def kth_distance(self, features: np.ndarray) -> np.ndarray:
        """(n,) Euclidean distance of each normalised row to its k-th nearest bank row."""
        z = l2_normalise(features)
        out = np.empty(len(z))
        for start in range(0, len(z), CHUNK):
            q = z[start:start + CHUNK]
            sq = (q ** 2).sum(1)[:, None] + self._bank_sq[None, :] - 2.0 * matmul(q, self._bank64.T)
            kth = np.partition(sq, self.k - 1, axis=1)[:, self.k - 1]
            out[start:start + CHUNK] = np.sqrt(np.maximum(kth, 0.0))
        return out

    def _score(self, features: np.ndarray | None, logits: np.ndarray | None) -> np.ndarray:
        if features.shape[1] != self.bank.shape[1]:
            raise ValueError(f"the detector was fitted on {self.bank.shape[1]}-d features, "
                             f"got {features.shape[1]}-d")
        return -self.kth_distance(features)

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"bank": self.bank}

    def _restore(self, arrays: dict[str, np.ndarray]) -> None:
        bank = arrays.get("bank")
        if set(arrays) != {"bank"} or bank.ndim != 2 or len(bank) < self.k:
            raise ValueError(f"a knn state holds one (n >= k, d) bank, got "
                             f"{ {k: v.shape for k, v in arrays.items()} }")
        self._set(np.ascontiguousarray(bank, dtype=np.float32))
