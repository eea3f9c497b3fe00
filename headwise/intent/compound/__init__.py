"""The compound variant: several intents per text and slot spans with normalised values.

:class:`CompoundClassifier` (:mod:`.classifier`; trained by
:func:`~headwise.intent.training.pipeline.train_intent_classifier` for a multi-label recipe)
and its per-intent thresholds and metrics (:mod:`.thresholds`); its evaluation is every
kind's, :func:`headwise.intent.evaluation.evaluate`. The main names are importable from
this package itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwise._lazy import lazy_names

if TYPE_CHECKING:
    from headwise.intent.compound.classifier import (
        COMPOUND_FILE,
        CompoundClassifier,
    )

_LAZY: dict[str, str] = {
    "COMPOUND_FILE": "headwise.intent.compound.classifier",
    "CompoundClassifier": "headwise.intent.compound.classifier",
}

__all__ = ["COMPOUND_FILE", "CompoundClassifier"]

__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)
