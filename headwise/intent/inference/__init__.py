"""Inference: the one path from texts to answers, for every classifier kind.

* :class:`Predictor` — encode (tokenize once, long-text policy), run (length-bucketed
  batches), answer (calibrate, decide out-of-scope, decode slots) into
  :class:`~headwise.intent.prediction.Prediction`\\ s and the long-text notes;
* :class:`SingleLabelPredictor`, :class:`CompoundPredictor`,
  :class:`ProbabilityPredictor` — the kinds: a network, a joint intent + slot model, a
  TF-IDF model or an ensemble;
* :class:`TorchRuntime`, :class:`OnnxRuntime` — the forward pass on PyTorch or
  onnxruntime;
* :func:`load_predictor` — the predictor of a model directory on the runtime ``auto``
  picks (what ``headwise predict``, the file stream, Ray and ``headwise serve`` run).

The classifiers' ``predict`` is their predictor on the torch runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwise._lazy import lazy_names

if TYPE_CHECKING:
    from headwise.intent.inference.bucketing import (
        LONG_TEXT_POLICIES,
        BucketedPredictor,
        EncodedText,
        LongTextError,
        long_text_note,
    )
    from headwise.intent.inference.compound import CompoundPredictor, JointRow
    from headwise.intent.inference.load import RUNTIMES, load_predictor
    from headwise.intent.inference.predictor import Predictor
    from headwise.intent.inference.proba import ProbabilityPredictor
    from headwise.intent.inference.runtime import OnnxRuntime, TorchRuntime
    from headwise.intent.inference.single import SingleLabelPredictor

_LAZY: dict[str, str] = {
    "LONG_TEXT_POLICIES": "headwise.intent.inference.bucketing",
    "BucketedPredictor": "headwise.intent.inference.bucketing",
    "EncodedText": "headwise.intent.inference.bucketing",
    "LongTextError": "headwise.intent.inference.bucketing",
    "long_text_note": "headwise.intent.inference.bucketing",
    "CompoundPredictor": "headwise.intent.inference.compound",
    "JointRow": "headwise.intent.inference.compound",
    "RUNTIMES": "headwise.intent.inference.load",
    "load_predictor": "headwise.intent.inference.load",
    "Predictor": "headwise.intent.inference.predictor",
    "ProbabilityPredictor": "headwise.intent.inference.proba",
    "OnnxRuntime": "headwise.intent.inference.runtime",
    "TorchRuntime": "headwise.intent.inference.runtime",
    "SingleLabelPredictor": "headwise.intent.inference.single",
}

__all__ = [
    "BucketedPredictor",
    "CompoundPredictor",
    "EncodedText",
    "JointRow",
    "LONG_TEXT_POLICIES",
    "LongTextError",
    "OnnxRuntime",
    "Predictor",
    "ProbabilityPredictor",
    "RUNTIMES",
    "SingleLabelPredictor",
    "TorchRuntime",
    "load_predictor",
    "long_text_note",
]

__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)
