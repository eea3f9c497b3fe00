"""The Mahalanobis distance to the nearest intent (Lee et al. 2018, "A simple unified
framework for detecting out-of-distribution samples and adversarial attacks").

The pooled training vectors of each intent are taken as Gaussian with the intent's own mean
``mu_c`` and one covariance ``Sigma`` shared by all intents (estimated from the vectors
minus their intent's mean: ``sum_c sum_{i in c} (x_i - mu_c)(x_i - mu_c)^T / n``). A text's
score is the negative squared Mahalanobis distance to the closest mean::

    score(x) = -min_c (x - mu_c)^T Sigma^+ (x - mu_c)

with ``Sigma^+`` the pseudo-inverse (as scikit-learn's ``EmpiricalCovariance``), so a
covariance of lower rank than the width (few training rows) still works. ``covariance=
"ledoit_wolf"`` shrinks the estimate towards a scaled identity first (Ledoit & Wolf 2004),
better conditioned when there are few rows per dimension.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from headwise.intent.decision.ood.base import OodDetector, matmul

COVARIANCES = ("empirical", "ledoit_wolf")


class MahalanobisDetector(OodDetector):
    """Class means and a shared covariance of the pooled training vectors.

    Args:
        covariance: ``"empirical"`` (maximum likelihood) or ``"ledoit_wolf"`` (shrunk).

    Attributes (after :meth:`fit`):
        classes: (m,) the class ids with training rows (a class without rows has no mean
            and is left out of the minimum).
        means: (m, d) their mean vectors.
        precision: (d, d) the pseudo-inverse of the shared covariance.

    Raises:
        ValueError: an unknown covariance estimator.
    """

    name = "mahalanobis"
    needs_features = True
    needs_logits = False

    def __init__(self, covariance: str = "empirical") -> None:
        super().__init__()
        if covariance not in COVARIANCES:
            raise ValueError(f"covariance must be one of {COVARIANCES}, got {covariance!r}")
        self.covariance = covariance
        self.classes = np.zeros(0, dtype=np.int64)
        self.means = np.zeros((0, 0))
        self.precision = np.zeros((0, 0))
        self._mean_terms = np.zeros(0)

    def params(self) -> dict[str, Any]:
        return {"covariance": self.covariance}

    def _fit(self, features: np.ndarray | None, logits: np.ndarray | None,
             labels: np.ndarray | None) -> None:
        if labels is None:
            raise ValueError("the mahalanobis detector needs the training labels")
        if len(features) < 2:
            raise ValueError("the mahalanobis detector needs at least 2 training rows")
        classes, index = np.unique(labels, return_inverse=True)
        counts = np.bincount(index, minlength=len(classes)).astype(np.float64)
        means = np.zeros((len(classes), features.shape[1]))
        np.add.at(means, index, features)
        means /= counts[:, None]
        centred = features - means[index]
        if self.covariance == "empirical":
            cov = centred.T @ centred / len(features)
        else:
            from sklearn.covariance import ledoit_wolf

            cov, _ = ledoit_wolf(centred, assume_centered=True)
        from scipy.linalg import pinvh  # here: loading a classifier need not import scipy

        self._set(classes.astype(np.int64), means, pinvh(cov))

    def _set(self, classes: np.ndarray, means: np.ndarray, precision: np.ndarray) -> None:
        self.classes, self.means, self.precision = classes, means, precision
        self._mean_terms = np.einsum("cd,de,ce->c", means, precision, means)

    def distances(self, features: np.ndarray) -> np.ndarray:
        """Squared Mahalanobis distances (n, m) of pooled vectors to every class mean
        (columns: :attr:`classes`)."""
        fp = matmul(features, self.precision)
        d = (fp * features).sum(1)[:, None] - 2.0 * matmul(fp, self.means.T) + self._mean_terms
        return np.maximum(d, 0.0)

    def _score(self, features: np.ndarray | None, logits: np.ndarray | None) -> np.ndarray:
        if features.shape[1] != self.means.shape[1]:
            raise ValueError(f"the detector was fitted on {self.means.shape[1]}-d features, "
                             f"got {features.shape[1]}-d")
        return -self.distances(features).min(1)

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"classes": self.classes, "means": self.means, "precision": self.precision}

    def _restore(self, arrays: dict[str, np.ndarray]) -> None:
        if set(arrays) != {"classes", "means", "precision"}:
            raise ValueError(f"a mahalanobis state holds classes, means and precision, got "
                             f"{sorted(arrays)}")
        c, m, p = arrays["classes"], arrays["means"], arrays["precision"]
        if c.ndim != 1 or m.shape[0] != len(c) or m.ndim != 2 \
                or p.shape != (m.shape[1], m.shape[1]):
            raise ValueError(f"inconsistent mahalanobis arrays: classes {c.shape}, means "
                             f"{m.shape}, precision {p.shape}")
        self._set(c.astype(np.int64), m.astype(np.float64), p.astype(np.float64))
