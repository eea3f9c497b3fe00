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

Out-of-scope answers follow the classifier: its top-probability threshold, or its
out-of-scope detector (:mod:`headwise.intent.decision.ood`) when it has one. A detector that reads
the pooled vectors (Mahalanobis, k-nearest neighbours) gets them from the same forward pass
(both runtimes return them; a chunked text's are its windows' mean, the vector its head
reads), so the micro-batcher's rows (:meth:`InferenceEngine.run`) then carry each text's
logits followed by its pooled vector. The answers keep their shape either way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from headwise.intent.answering import answers_from_probs
from headwise.intent.classifier import IntentClassifier
from headwise.intent.decision.temperature import calibrated_probs
from headwise.intent.prediction import OutOfScopeScores
from headwise.serve.bucketing import (
    BucketedEngine,
    EncodedText,
)
from headwise.serve.runtime import OnnxRuntime, TorchRuntime

__all__ = ["InferenceEngine", "prediction_records"]


def prediction_records(texts: Sequence[str], probs: np.ndarray, labels: Sequence[str], *,
                       top_k: int, scores: OutOfScopeScores, notes: Sequence[dict | None]
                       ) -> list[dict]:
    """The response records (``schemas.Prediction`` fields) of texts from their calibrated
    probabilities (n, intents): :meth:`Prediction.to_dict
    <headwise.intent.prediction.Prediction.to_dict>` of each answer (probabilities not
    rounded, so batched and unbatched answers agree to float precision), out of scope where
    ``scores`` rejects, and each text's long-text note."""
    answers = answers_from_probs(texts, probs, labels, top_k=top_k, scores=scores)
    return [{**a.to_dict(digits=None), "long_text": note}
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
        ood = classifier.ood
        #: whether :meth:`run`'s rows carry the pooled vectors (the detector reads them)
        self.with_features = ood is not None and ood.needs_features

    @property
    def labels(self) -> list[str]:
        """Intent names, index = class id."""
        return self.classifier.labels

    # -- windows -> logits ---------------------------------------------------------------
    def forward(self, items: Sequence[EncodedText]) -> tuple[np.ndarray, np.ndarray]:
        """Uncalibrated logits (n, intents) and pooled vectors (n, d), float64, of encoded
        texts, in one go.

        All windows of all texts are padded into length-bucketed batches; a chunked
        text's pooled vector is the mean of its windows' and its logits are the head
        applied to that mean.
        """
        rows = [c for item in items for c in item.chunks]
        logits = np.empty((len(rows), len(self.labels)), dtype=np.float64)
        pooled: np.ndarray | None = None
        for group, ids, mask in self.padded_batches(rows):
            lg, pl = self.runtime.forward(ids, mask)
            logits[group] = lg
            if pooled is None:
                pooled = np.empty((len(rows), pl.shape[1]), dtype=np.float64)
            pooled[group] = pl
        out = np.empty((len(items), len(self.labels)), dtype=np.float64)
        vectors = np.empty((len(items), pooled.shape[1]), dtype=np.float64)
        start = 0
        for j, item in enumerate(items):
            n = len(item.chunks)
            if n == 1:
                out[j], vectors[j] = logits[start], pooled[start]
            else:
                vectors[j] = pooled[start:start + n].mean(0)
                out[j] = vectors[j] @ self._weight.T + self._bias
            start += n
        return out, vectors

    def logits(self, items: Sequence[EncodedText]) -> np.ndarray:
        """Uncalibrated logits (n, intents) float64 of encoded texts (see :meth:`forward`)."""
        return self.forward(items)[0]

    def run(self, items: Sequence[EncodedText]) -> list[np.ndarray]:
        """The micro-batcher's call: one row per encoded text, its logits (intents,), or
        its logits followed by its pooled vector (intents + d,) when the classifier's
        out-of-scope detector reads pooled vectors (:attr:`with_features`)."""
        logits, pooled = self.forward(items)
        return list(np.hstack([logits, pooled]) if self.with_features else logits)

    # -- logits -> answers ---------------------------------------------------------------
    def answer(self, texts: Sequence[str], items: Sequence[EncodedText], logits: np.ndarray,
               *, top_k: int, threshold: float | None = None) -> list[dict]:
        """The response records (``schemas.Prediction`` fields) of texts from their logits.

        Args:
            texts: the texts.
            items: their encodings (for the long-text note).
            logits: (n, intents) from :meth:`logits`, or the stacked rows of :meth:`run`
                (logits followed by the pooled vector, when the detector reads those).
                Logits alone for a detector that reads pooled vectors (the explain
                endpoint's) make the engine run the texts again, truncated, for them.
            top_k: intents listed per text (capped at the number of intents).
            threshold: override of the classifier's out-of-scope threshold; given, the
                top-probability rule answers at it even when the classifier has a detector.

        Returns:
            One dict per text.
        """
        clf = self.classifier
        rows = np.asarray(logits, dtype=np.float64)
        n_labels = len(self.labels)
        logits = rows[:, :n_labels]
        pooled = rows[:, n_labels:] if rows.shape[1] > n_labels else None
        t = clf.threshold if threshold is None else float(threshold)
        probs = calibrated_probs(logits, clf.temperature)
        det = clf.ood
        if det is not None and threshold is None:
            if det.needs_features and pooled is None:
                pooled = self.forward(self.encode_truncated(texts))[1]
            scores = OutOfScopeScores.of_detector(det, pooled, logits)
        else:
            scores = OutOfScopeScores.top_probability(probs, t)
        return prediction_records(texts, probs, self.labels, top_k=top_k, scores=scores,
                                  notes=[self.long_text_note(item) for item in items])

    def predict(self, texts: Sequence[str], *, top_k: int = 3,
                threshold: float | None = None) -> list[dict]:
        """Encode, run and answer in one call (unbatched inference)."""
        items = self.encode(texts)
        return self.answer(texts, items, np.stack(self.run(items)), top_k=top_k,
                           threshold=threshold)
