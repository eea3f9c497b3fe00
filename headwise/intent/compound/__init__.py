"""The compound variant: several intents per text and slot spans with normalised values.

:class:`CompoundClassifier` (:mod:`.classifier`), its training
(:func:`train_compound_classifier`, :mod:`.training`), its evaluation
(:func:`evaluate_compound`, :mod:`.evaluation`) and its per-intent thresholds and metrics
(:mod:`.thresholds`). The main names are importable from this package itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwise._lazy import lazy_names

if TYPE_CHECKING:
    from headwise.intent.compound.classifier import (
        COMPOUND_FILE,
        CompoundClassifier,
    )
    from headwise.intent.compound.evaluation import evaluate_compound
    from headwise.intent.compound.training import train_compound_classifier

_LAZY: dict[str, str] = {
    "COMPOUND_FILE": "headwise.intent.compound.classifier",
    "CompoundClassifier": "headwise.intent.compound.classifier",
    "evaluate_compound": "headwise.intent.compound.evaluation",
    "train_compound_classifier": "headwise.intent.compound.training",
}

__all__ = ["COMPOUND_FILE", "CompoundClassifier", "evaluate_compound",
           "train_compound_classifier"]

__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)
