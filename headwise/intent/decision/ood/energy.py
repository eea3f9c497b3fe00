"""The energy score (Liu et al. 2020, "Energy-based out-of-distribution detection").

The free energy of a text under the classifier is ``E(x) = -T * logsumexp(logits / T)``;
in-scope texts have lower energy. Unlike the top probability it keeps the logits' scale:
two texts with the same softmax but larger logits are further inside the training
distribution. The in-scope score is the negative energy, ``T * logsumexp(logits / T)``
(the paper uses ``T = 1``).
"""

from __future__ import annotations

import numpy as np

from headwise.intent.decision.ood.base import LogitScoreDetector


class EnergyDetector(LogitScoreDetector):
    """The negative free energy of the logits; nothing to fit.

    Args:
        temperature: the energy's ``T`` (> 0; Liu et al. use 1).

    Raises:
        ValueError: a non-positive temperature.
    """

    name = "energy"

    def _score(self, features: np.ndarray | None, logits: np.ndarray | None) -> np.ndarray:
        z = logits / self.temperature
        top = z.max(1, keepdims=True)
        return self.temperature * (top[:, 0] + np.log(np.exp(z - top).sum(1)))
