"""The interface every out-of-scope detector shares.

A detector turns what a classifier computes for a text — the logits and the pooled vector
its head reads — into an *in-scope score*: higher means more like the training data, so one
rule serves them all: a text is out-of-scope when its score is below the detector's
``threshold`` (chosen on validation data by
:func:`~headwise.intent.decision.oos.choose_score_threshold`)::

    det = make_detector("knn").fit(train_features, train_logits, train_labels)
    det.threshold = choose_score_threshold(det.score(vf, vl), correct, oos).threshold
    det.reject(features, logits)          # (n,) bool

Detectors that read only the logits (``needs_features`` False) take ``features=None``, and
those that read only the features take ``logits=None``. :meth:`OodDetector.to_state`
gives a JSON-ready dict and the fitted arrays (saved as safetensors by
:mod:`headwise.intent.decision.ood.persistence`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
import torch


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of two float arrays, computed by PyTorch on its intra-op threads.

    A detector scores what the model just computed: when PyTorch ran the model, its
    threads are still awake, and numpy's own BLAS threads started beside them on a machine
    of a few cores wait for each other, which made a single query several times slower
    (the BiLSTM's p50 and p99 in ``headwise demo``'s table: served by PyTorch, with a
    k-NN out-of-scope score). One pool of threads for both keeps a query's work on the
    cores it already holds. The result is the product in numpy's precision (both sides
    promoted as ``@`` would), equal to numpy's to its last bits or so (a BLAS kernel's
    blocking may change those with the number of rows).
    """
    dtype = np.result_type(a, b)
    a, b = (np.asarray(x, dtype=dtype) for x in (a, b))
    a, b = (x if x.flags.writeable else x.copy() for x in (a, b))  # torch shares memory
    return torch.from_numpy(a).matmul(torch.from_numpy(b)).numpy()


class OodDetector(ABC):
    """An in-scope score fitted on training rows, and the threshold below which a text is
    out-of-scope (abstract: subclasses give the score).

    Attributes:
        name: the detector's registry name (``"max_prob"``, ``"energy"``, ...).
        needs_features: whether the score reads the pooled features.
        needs_logits: whether the score reads the logits.
        threshold: reject below it; None until chosen.
        num_classes: the classifier's number of intents (None for a detector that does not
            read them: a feature-only detector fitted without logits).
    """

    name: ClassVar[str]
    needs_features: ClassVar[bool] = False
    needs_logits: ClassVar[bool] = True

    def __init__(self) -> None:
        self.threshold: float | None = None
        self.num_classes: int | None = None
        self.fitted = False

    # -- the public interface ------------------------------------------------------------
    def fit(self, features: np.ndarray | None, logits: np.ndarray | None,
            labels: np.ndarray | None) -> OodDetector:
        """Fit on training rows.

        Args:
            features: (n, d) pooled vectors (None for a logits-only detector).
            logits: (n, intents) raw logits (None for a feature-only detector).
            labels: (n,) integer class ids (needed by class-conditional detectors).

        Returns:
            ``self``.

        Raises:
            ValueError: a missing input the detector needs, non-finite values, mismatched
                row counts, labels out of range, or too few rows.
        """
        f = check_matrix(features, "features") if self.needs_features else None
        lg = check_matrix(logits, "logits") if logits is not None else None
        if self.needs_logits and lg is None:
            raise ValueError(f"the {self.name} detector needs the logits")
        if f is not None and lg is not None and len(f) != len(lg):
            raise ValueError(f"{len(f)} feature rows but {len(lg)} logit rows")
        n = len(f) if f is not None else len(lg)
        y = None
        if labels is not None:
            y = np.asarray(labels)
            if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
                raise ValueError(f"labels must be ({n},) integer class ids, got shape "
                                 f"{y.shape} of {y.dtype}")
            if lg is not None and len(y) and (y.min() < 0 or y.max() >= lg.shape[1]):
                raise ValueError(f"labels must be class ids in [0, {lg.shape[1]})")
        self.num_classes = None if lg is None else int(lg.shape[1])
        self._fit(f, lg, y)
        self.fitted = True
        return self

    def score(self, features: np.ndarray | None, logits: np.ndarray | None) -> np.ndarray:
        """The in-scope score (n,) float64 of each row: higher = more in-scope.

        Raises:
            RuntimeError: not fitted.
            ValueError: a missing input, non-finite values, mismatched rows, or widths
                other than the fitted ones.
        """
        if not self.fitted:
            raise RuntimeError(f"the {self.name} detector is not fitted")
        f = check_matrix(features, "features") if self.needs_features else None
        lg = check_matrix(logits, "logits") if self.needs_logits else None
        if self.needs_logits and self.num_classes is not None \
                and lg.shape[1] != self.num_classes:
            raise ValueError(f"the detector was fitted on {self.num_classes} intents, the "
                             f"logits have {lg.shape[1]}")
        if f is not None and lg is not None and len(f) != len(lg):
            raise ValueError(f"{len(f)} feature rows but {len(lg)} logit rows")
        return self._score(f, lg)

    def reject(self, features: np.ndarray | None, logits: np.ndarray | None) -> np.ndarray:
        """Whether each row is out-of-scope: (n,) bool, ``score < threshold``.

        Raises:
            RuntimeError: no threshold chosen yet (or not fitted).
        """
        if self.threshold is None:
            raise RuntimeError(f"the {self.name} detector has no threshold yet: choose one "
                               f"on validation data (choose_score_threshold)")
        return self.score(features, logits) < self.threshold

    def params(self) -> dict[str, Any]:
        """The detector's hyperparameters (JSON-ready; the constructor's keywords)."""
        return {}

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """``(state, arrays)``: a JSON-ready dict (name, hyperparameters, threshold, number
        of intents) and the fitted arrays by name (possibly empty)."""
        state = {"detector": self.name, "params": self.params(), "threshold": self.threshold,
                 "num_classes": self.num_classes, "fitted": self.fitted}
        return state, {k: np.ascontiguousarray(v) for k, v in self._arrays().items()}

    def describe(self) -> str:
        """The name with its hyperparameters, e.g. ``knn(k=10)``."""
        p = ", ".join(f"{k}={v}" for k, v in self.params().items())
        return f"{self.name}({p})" if p else self.name

    def __repr__(self) -> str:
        t = "unset" if self.threshold is None else f"{self.threshold:.4g}"
        return f"{type(self).__name__}({self.describe()}, threshold={t})"

    # -- what a subclass gives -------------------------------------------------------------
    @abstractmethod
    def _fit(self, features: np.ndarray | None, logits: np.ndarray | None,
             labels: np.ndarray | None) -> None:
        """Fit on checked inputs (float64 matrices, int labels or None)."""

    @abstractmethod
    def _score(self, features: np.ndarray | None, logits: np.ndarray | None) -> np.ndarray:
        """The score of checked inputs."""

    def _arrays(self) -> dict[str, np.ndarray]:
        """The fitted arrays to save."""
        return {}

    def _restore(self, arrays: dict[str, np.ndarray]) -> None:
        """Set the fitted arrays from :meth:`_arrays`'s output (a subclass with arrays
        checks their names and shapes, ValueError otherwise)."""
        if arrays:
            raise ValueError(f"the {self.name} detector has no arrays, got {sorted(arrays)}")


def check_matrix(x: np.ndarray | None, what: str) -> np.ndarray:
    """``x`` as a C-contiguous float64 (n, d) array with n >= 1 and finite values.

    Raises:
        ValueError: None, another number of dimensions, no rows or columns, or a NaN or
            infinite value.
    """
    if x is None:
        raise ValueError(f"{what} are needed")
    a = np.ascontiguousarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{what} must be a non-empty (rows, columns) array, got shape "
                         f"{a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{what} have non-finite values")
    return a


class LogitScoreDetector(OodDetector):
    """A score of the logits alone at a temperature ``T`` (the top probability, the
    energy): nothing to fit, one hyperparameter.

    Raises:
        ValueError: a non-positive temperature.
    """

    def __init__(self, temperature: float = 1.0) -> None:
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.temperature = float(temperature)

    def params(self) -> dict[str, Any]:
        return {"temperature": self.temperature}

    def _fit(self, features: np.ndarray | None, logits: np.ndarray | None,
             labels: np.ndarray | None) -> None:
        pass
