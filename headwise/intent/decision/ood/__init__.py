"""Out-of-scope detectors: in-scope scores beyond the calibrated top probability.

Every detector is fitted on the training rows (pooled vectors, logits, labels) and scores a
text so that higher means more in-scope; a text is out-of-scope below the detector's
threshold (chosen on validation data by
:func:`~headwise.intent.decision.oos.choose_score_threshold`).

* ``"max_prob"`` — the top softmax probability (Hendrycks & Gimpel 2017), today's score;
* ``"energy"`` — the negative free energy ``T * logsumexp(logits / T)`` (Liu et al. 2020);
* ``"mahalanobis"`` — minus the squared Mahalanobis distance of the pooled vector to the
  nearest class mean under a shared covariance (Lee et al. 2018);
* ``"knn"`` — minus the distance to the k-th nearest L2-normalised training vector (Sun et
  al. 2022).

``"auto"`` is no detector of its own: training fits several and keeps the one that does
best on the validation rows (:mod:`~headwise.intent.decision.ood.selection`).

A saved classifier keeps its detector in ``ood.json`` + ``ood.safetensors``
(:func:`save_detector`, :func:`load_detector`).
"""

from headwise.intent.decision.ood.base import OodDetector, check_matrix
from headwise.intent.decision.ood.energy import EnergyDetector
from headwise.intent.decision.ood.knn import KnnDetector, l2_normalise
from headwise.intent.decision.ood.mahalanobis import MahalanobisDetector
from headwise.intent.decision.ood.max_prob import MaxProbDetector
from headwise.intent.decision.ood.persistence import (
    OOD_ARRAYS,
    OOD_FILE,
    load_detector,
    remove_detector,
    save_detector,
)
from headwise.intent.decision.ood.registry import (
    DETECTORS,
    check_detector_spec,
    detector_from_state,
    make_detector,
)
from headwise.intent.decision.ood.selection import (
    AUTO,
    AUTO_CANDIDATES,
    AUTO_MIN_OOS_ROWS,
    BLEND_SETTINGS,
    balanced_mean,
    check_ood_setting,
    describe_auto,
    select_detector,
)

__all__ = [
    "AUTO",
    "AUTO_CANDIDATES",
    "AUTO_MIN_OOS_ROWS",
    "BLEND_SETTINGS",
    "DETECTORS",
    "OOD_ARRAYS",
    "OOD_FILE",
    "EnergyDetector",
    "KnnDetector",
    "MahalanobisDetector",
    "MaxProbDetector",
    "OodDetector",
    "check_detector_spec",
    "check_matrix",
    "detector_from_state",
    "l2_normalise",
    "load_detector",
    "make_detector",
    "remove_detector",
    "save_detector",
    "balanced_mean",
    "check_ood_setting",
    "describe_auto",
    "select_detector",
]
