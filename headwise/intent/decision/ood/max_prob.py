"""The maximum softmax probability (Hendrycks & Gimpel 2017, "A baseline for detecting
misclassified and out-of-distribution examples"): the score of today's threshold.

``score = max_c softmax(logits / T)_c``. With ``T`` the classifier's calibration
temperature it is the calibrated top probability that
:class:`~headwise.intent.classifier.IntentClassifier` thresholds by default.
"""

from __future__ import annotations

import numpy as np

from headwise.intent.decision.ood.base import LogitScoreDetector
from headwise.intent.decision.temperature import calibrated_probs


class MaxProbDetector(LogitScoreDetector):
    """The top softmax probability at a temperature; nothing to fit.

    Args:
        temperature: logits are divided by it before the softmax (> 0).

    Raises:
        ValueError: a non-positive temperature.
    """

    name = "max_prob"

    def _score(self, features: np.ndarray | None, logits: np.ndarray | None) -> np.ndarray:
        return calibrated_probs(logits, self.temperature).max(1)
