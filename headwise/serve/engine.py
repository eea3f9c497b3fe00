"""The intent engine: texts -> token windows -> length-bucketed padded batches -> answers.

:class:`InferenceEngine` is what the service runs for a single-label intent classifier,
batched or not; its answers are those of :meth:`IntentClassifier.predict
<headwise.intent.classifier.IntentClassifier.predict>` for texts within the maximum
length. A longer text is truncated (as ``predict`` does), or split into overlapping
windows (:func:`headwise.models.chunked.split_into_chunks`) whose pooled vectors are
averaged before the classification head ("chunk and pool", as
:class:`~headwise.models.chunked.HierarchicalEncoder` with mean pooling), or refused.

Tokenizing, the long-text policy, bucketing and padding are shared with the compound
engine (:mod:`headwise.serve.bucketing`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from headwise.intent.calibration import calibrated_probs
from headwise.intent.classifier import IntentClassifier, answers_from_probs
from headwise.serve.bucketing import (
    MIN_BUCKET,
    BucketedEngine,
    EncodedText,
    LongTextError,
    length_bucket,
)
from headwise.serve.runtime import OnnxRuntime, TorchRuntime

__all__ = ["MIN_BUCKET", "EncodedText", "InferenceEngine", "LongTextError", "length_bucket",
           "prediction_records"]


def prediction_records(texts: Sequence[str], probs: np.ndarray, labels: Sequence[str], *,
                       top_k: int, threshold: float, notes: Sequence[dict | None]
                       ) -> list[dict]:
    """The response records (``schemas.Prediction`` fields) of texts from their calibrated
    probabilities (n, intents): the ``top_k`` intents best first, out-of-scope when the best
    is below ``threshold``, and each text's long-text note."""
    answers = answers_from_probs(texts, probs, labels, top_k=top_k, threshold=threshold)
    return [{"text": a.text, "intent": a.intent, "confidence": a.confidence,
             "out_of_scope": a.out_of_scope,
             "top_k": [{"intent": k, "confidence": c} for k, c in a.top_k], "long_text": note}
            for a, note in zip(answers, notes, strict=True)]


class InferenceEngine(BucketedEngine):
    """Turn texts into calibrated single-label answers with a runtime.

    Args:
        classifier: the loaded classifier (tokenizer, labels, temperature, threshold,
            maximum length, and the head used by chunk-and-pool).
        runtime: a :class:`TorchRuntime` or :class:`OnnxRuntime` of the same model.
        long_text: ``"truncate"``, ``"chunk"`` or ``"reject"``.
        chunk_stride: tokens between window starts (default half a window's body).
        max_rows: most rows in one forward pass (a gathered batch is split beyond it).

    Raises:
        ValueError: an unknown policy, or a stride too large for the window.
    """

    kind = "intent"

    def __init__(self, classifier: IntentClassifier, runtime: TorchRuntime | OnnxRuntime, *,
                 long_text: str = "truncate", chunk_stride: int | None = None,
                 max_rows: int = 64) -> None:
        super().__init__(classifier.tokenizer, runtime, max_length=classifier.max_length,
                         long_text=long_text, chunk_stride=chunk_stride, max_rows=max_rows)
        self.classifier = classifier
        head = classifier.model.classifier
        self._weight = head.weight.detach().double().cpu().numpy()
        self._bias = head.bias.detach().double().cpu().numpy() if head.bias is not None \
            else np.zeros(self._weight.shape[0])

    @property
    def labels(self) -> list[str]:
        """Intent names, index = class id."""
        return self.classifier.labels

    # -- windows -> logits ---------------------------------------------------------------
    def logits(self, items: Sequence[EncodedText]) -> np.ndarray:
        """Uncalibrated logits (n, intents) float64 of encoded texts, in one go.

        All windows of all texts are padded into length-bucketed batches; a chunked
        text's logits are the head applied to the mean of its windows' pooled vectors.
        """
        rows = [c for item in items for c in item.chunks]
        logits = np.empty((len(rows), len(self.labels)), dtype=np.float64)
        pooled: np.ndarray | None = None
        chunked = any(len(item.chunks) > 1 for item in items)
        for group, ids, mask in self.padded_batches(rows):
            lg, pl = self.runtime.forward(ids, mask)
            logits[group] = lg
            if chunked:
                if pooled is None:
                    pooled = np.empty((len(rows), pl.shape[1]), dtype=np.float64)
                pooled[group] = pl
        out = np.empty((len(items), len(self.labels)), dtype=np.float64)
        start = 0
        for j, item in enumerate(items):
            n = len(item.chunks)
            if n == 1:
                out[j] = logits[start]
            else:
                out[j] = pooled[start:start + n].mean(0) @ self._weight.T + self._bias
            start += n
        return out

    def run(self, items: Sequence[EncodedText]) -> list[np.ndarray]:
        """The micro-batcher's call: one logits row (intents,) per encoded text."""
        return list(self.logits(items))

    # -- logits -> answers ---------------------------------------------------------------
    def answer(self, texts: Sequence[str], items: Sequence[EncodedText], logits: np.ndarray,
               *, top_k: int, threshold: float | None = None) -> list[dict]:
        """The response records (``schemas.Prediction`` fields) of texts from their logits.

        Args:
            texts: the texts.
            items: their encodings (for the long-text note).
            logits: (n, intents) from :meth:`logits`.
            top_k: intents listed per text (capped at the number of intents).
            threshold: override of the classifier's out-of-scope threshold.

        Returns:
            One dict per text.
        """
        clf = self.classifier
        t = clf.threshold if threshold is None else float(threshold)
        return prediction_records(texts, calibrated_probs(logits, clf.temperature),
                                  self.labels, top_k=top_k, threshold=t,
                                  notes=[self.long_text_note(item) for item in items])

    def predict(self, texts: Sequence[str], *, top_k: int = 3,
                threshold: float | None = None) -> list[dict]:
        """Encode, run and answer in one call (unbatched inference)."""
        items = self.encode(texts)
        return self.answer(texts, items, self.logits(items), top_k=top_k, threshold=threshold)
