"""The single-label predictor: texts -> token windows -> length-bucketed padded batches
-> calibrated answers.

:class:`SingleLabelPredictor` is how a network (an encoder or a BiLSTM) answers, batched or
not: in the library (``IntentClassifier.predict``, on PyTorch), ``headwise predict``, the
file stream and the service (on PyTorch or onnxruntime). A text longer than the maximum
length is truncated, or split into overlapping windows
(:func:`headwise.models.chunked.split_into_chunks`) whose pooled vectors are averaged before
the classification head ("chunk and pool", as
:class:`~headwise.models.chunked.HierarchicalEncoder` with mean pooling), or refused.

Tokenizing, the long-text policy, bucketing and padding are shared with the compound
predictor (:mod:`headwise.intent.inference.bucketing`).

Out-of-scope answers follow the classifier (:meth:`SingleLabelPredictor.scores`, the one
place that rule is written): its out-of-scope detector
(:mod:`headwise.intent.decision.ood`) when it has one and no threshold is given, else the
top probability against the threshold (default: the saved one). A detector that reads the
pooled vectors (Mahalanobis, k-nearest neighbours) gets them from the same forward pass
(both runtimes return them; a chunked text's are its windows' mean, the vector its head
reads), so :meth:`SingleLabelPredictor.run`'s rows then carry each text's logits followed by
its pooled vector. The answers keep their shape either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from headwise.intent.decision.temperature import calibrated_probs
from headwise.intent.inference.bucketing import BucketedPredictor, EncodedText
from headwise.intent.inference.runtime import OnnxRuntime, TorchRuntime
from headwise.intent.prediction import (
    MAX_PROB,
    OutOfScopeScores,
    Prediction,
    answers_from_probs,
)

__all__ = ["SingleLabelPredictor"]


class SingleLabelPredictor(BucketedPredictor):
    """Turn texts into calibrated single-label answers with a runtime.

    Args:
        classifier: an :class:`~headwise.intent.classifier.IntentClassifier` (tokenizer,
            labels, temperature, threshold, out-of-scope detector, maximum length, and the
            head used by chunk-and-pool).
        runtime: a :class:`TorchRuntime` or :class:`OnnxRuntime` of the same model.
        long_text: ``"truncate"``, ``"chunk"`` or ``"reject"``.
        chunk_stride: tokens between window starts (default half a window's body).
        max_rows: most rows in one forward pass (a gathered batch is split beyond it).

    Raises:
        ValueError: an unknown policy, or a stride too large for the window.
    """

    task = "single_label"

    def __init__(self, classifier: Any, runtime: TorchRuntime | OnnxRuntime, *,
                 long_text: str = "truncate", chunk_stride: int | None = None,
                 max_rows: int = 64) -> None:
        super().__init__(classifier.tokenizer, runtime, max_length=classifier.max_length,
                         long_text=long_text, chunk_stride=chunk_stride, max_rows=max_rows)
        self.classifier = classifier
        self._head: tuple[np.ndarray, np.ndarray] | None = None  # for chunk-and-pool

    @property
    def with_features(self) -> bool:
        """Whether :meth:`run`'s rows carry the pooled vectors (the classifier's detector
        reads them)."""
        ood = self.classifier.ood
        return ood is not None and ood.needs_features

    def head(self) -> tuple[np.ndarray, np.ndarray]:
        """The classification head's weight (intents, d) and bias (intents,), float64:
        what chunk-and-pool applies to a long text's mean pooled vector (read once)."""
        if self._head is None:
            head = self.classifier.model.classifier
            weight = head.weight.detach().double().cpu().numpy()
            bias = head.bias.detach().double().cpu().numpy() if head.bias is not None \
                else np.zeros(weight.shape[0])
            self._head = weight, bias
        return self._head

    @property
    def labels(self) -> list[str]:
        """Intent names, index = class id."""
        return self.classifier.labels

    @property
    def decision_scores(self) -> tuple[str, ...]:
        """The top probability (a request's ``threshold``, or no detector) and the
        classifier's out-of-scope detector, when it has one (:meth:`scores`)."""
        det = self.classifier.ood
        return (MAX_PROB,) if det is None else (MAX_PROB, det.name)

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
                weight, bias = self.head()
                vectors[j] = pooled[start:start + n].mean(0)
                out[j] = vectors[j] @ weight.T + bias
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
    def scores(self, texts: Sequence[str], probs: np.ndarray, logits: np.ndarray,
               pooled: np.ndarray | None, threshold: float | None) -> OutOfScopeScores:
        """The out-of-scope score that decides for each text: the classifier's detector's
        when it has one and ``threshold`` is None, else the top probability against
        ``threshold`` (default: the saved one).

        Args:
            texts: the texts (run again, truncated, when the detector reads pooled vectors
                and ``pooled`` is None: the explain endpoint's logits come alone).
            probs: calibrated probabilities (n, intents).
            logits: raw logits (n, intents).
            pooled: the pooled vectors (n, d) of the same pass, or None.
            threshold: the top-probability rule's threshold, replacing the saved rule.
        """
        clf = self.classifier
        det = clf.ood
        if det is None or threshold is not None:
            t = clf.threshold if threshold is None else float(threshold)
            return OutOfScopeScores.top_probability(probs, t)
        if det.needs_features and pooled is None:
            pooled = self.forward(self.encode_truncated(texts))[1]
        return OutOfScopeScores.of_detector(det, pooled, logits)

    def probs_and_scores(self, texts: Sequence[str], rows: Any, *,
                         threshold: float | None = None
                         ) -> tuple[np.ndarray, OutOfScopeScores]:
        """Calibrated probabilities (n, intents) and the deciding out-of-scope scores
        (:meth:`scores`) of texts from :meth:`run`'s rows (a list, or stacked: logits,
        followed by the pooled vector when the detector reads those)."""
        stacked = np.asarray(rows, dtype=np.float64)
        n_labels = len(self.labels)
        logits = stacked[:, :n_labels]
        pooled = stacked[:, n_labels:] if stacked.shape[1] > n_labels else None
        probs = calibrated_probs(logits, self.classifier.temperature)
        return probs, self.scores(texts, probs, logits, pooled, threshold)

    def decide(self, texts: Sequence[str], items: Sequence[EncodedText], rows: Any, *,
               top_k: int, threshold: float | None, **options: Any) -> list[Prediction]:
        """Single-label answers: the ``top_k`` intents, the top one answered unless
        :meth:`scores` rejects the text."""
        probs, scores = self.probs_and_scores(texts, rows, threshold=threshold)
        return answers_from_probs(texts, probs, self.labels, top_k=top_k, scores=scores)
