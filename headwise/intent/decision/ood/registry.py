"""The detectors by name, and building one from a name or a saved state."""

from __future__ import annotations

from typing import Any

import numpy as np

from headwise.intent.decision.ood.base import OodDetector
from headwise.intent.decision.ood.energy import EnergyDetector
from headwise.intent.decision.ood.knn import KnnDetector
from headwise.intent.decision.ood.mahalanobis import COVARIANCES, MahalanobisDetector
from headwise.intent.decision.ood.max_prob import MaxProbDetector

#: name -> detector class
DETECTORS: dict[str, type[OodDetector]] = {
    "max_prob": MaxProbDetector,
    "energy": EnergyDetector,
    "mahalanobis": MahalanobisDetector,
    "knn": KnnDetector,
}


def check_detector_spec(spec: str) -> str:
    """``spec`` if it names a detector: ``"max_prob"``, ``"energy"``, ``"mahalanobis"``
    (or ``"mahalanobis:ledoit_wolf"``, the shrunk covariance), ``"knn"`` (or ``"knn:K"``,
    K a positive integer: the K-th neighbour).

    Raises:
        ValueError: anything else.
    """
    name, _, arg = str(spec).partition(":")
    ok = name in DETECTORS and (not arg or (name == "knn" and arg.isdigit() and int(arg) >= 1)
                                or (name == "mahalanobis" and arg in COVARIANCES))
    if not ok:
        raise ValueError(f"the out-of-scope detector must be one of {sorted(DETECTORS)} (or "
                         f"knn:K, K a positive integer, or mahalanobis:ledoit_wolf), got "
                         f"{spec!r}")
    return spec


def make_detector(spec: str, **params: Any) -> OodDetector:
    """An unfitted detector from its name (see :func:`check_detector_spec`) and keywords.

    Args:
        spec: the name; ``"knn:K"`` sets ``k``, ``"mahalanobis:ledoit_wolf"`` the
            covariance estimator.
        params: the detector's keywords (``temperature``, ``covariance``, ``k``).

    Raises:
        ValueError: an unknown name or a bad keyword value; TypeError: an unknown keyword.
    """
    name, _, arg = check_detector_spec(spec).partition(":")
    if arg:
        params = {**params, ("k" if name == "knn" else "covariance"):
                  int(arg) if name == "knn" else arg}
    return DETECTORS[name](**params)


def detector_from_state(state: dict[str, Any], arrays: dict[str, np.ndarray]) -> OodDetector:
    """Rebuild a detector from :meth:`OodDetector.to_state`'s output.

    Raises:
        ValueError: an unknown detector, bad hyperparameters, or arrays that do not fit.
    """
    try:
        cls = DETECTORS[state["detector"]]
        det = cls(**state.get("params", {}))
    except (KeyError, TypeError) as e:
        raise ValueError(f"not a valid out-of-scope detector state: {e!r}") from e
    threshold, classes = state.get("threshold"), state.get("num_classes")
    det.threshold = None if threshold is None else float(threshold)
    det.num_classes = None if classes is None else int(classes)
    det._restore(dict(arrays))
    det.fitted = bool(state.get("fitted", True))
    return det
