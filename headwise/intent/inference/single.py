"""The single-label predictor: texts -> token windows -> length-bucketed padded batches
-> calibrated answers.

:class:`SingleLabelPredictor` is how a network (an encoder or a BiLSTM) answers, batched or
not: in the library (``IntentClassifier.predict``, on PyTorch), ``headwise predict``, the
file stream and the service (on PyTorch or onnxruntime). A text longer than the maximum
length (:data:`~headwise.intent.inference.bucketing.LONG_TEXT_POLICIES`) is truncated,
read as its head and tail in one window, split into overlapping windows
(:func:`headwise.models.chunked.split_into_chunks`; as wide as the maximum length, or
narrower with ``chunk_length``) whose pooled vectors are averaged before
the classification head (``"chunk"``: "chunk and pool", as
:class:`~headwise.models.chunked.HierarchicalEncoder` with mean pooling), split into
windows that are each answered, one window deciding (a request anywhere in a long message
is read whole in some window, and chatter around it does not dilute it): the most confident
in-scope window (``"chunk_max"``) or the window the out-of-scope score finds most in scope
(``"chunk_in_scope"``: a window of chatter can be confidently one intent, but the model's
detector sees it is unlike any question it was trained on), split into narrow windows that
locate the request, the run of in-scope windows around the most confident one then read
again as one window (``"chunk_span"``: a narrow window can cut a request in two, and a
fragment can be confidently the wrong intent), or refused. ``"auto"`` is the
one chosen on validation rows for the classifier's architecture
(:data:`~headwise.intent.inference.bucketing.DEFAULT_LONG_TEXT`).

Tokenizing, the long-text policy, bucketing and padding are shared with the compound
predictor (:mod:`headwise.intent.inference.bucketing`).

Out-of-scope answers follow the classifier (:meth:`SingleLabelPredictor.scores`, the one
place that rule is written): its out-of-scope detector (:mod:`headwise.intent.decision.ood`)
when it has one and no threshold is given, else the top probability against the threshold
(default: the saved one). A detector that reads the pooled vectors (Mahalanobis, k-nearest
neighbours) gets them from the same forward pass (both runtimes return them; a chunked
text's are its windows' mean, the vector its head reads, or when one window decides its
deciding window's), so :meth:`SingleLabelPredictor.run`'s rows then carry each text's logits
followed by its pooled vector. Every row ends with the index of the window whose answer it
is (0 unless one window decides), which the ``long_text`` note reports. The answers keep
their shape either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from headwise.intent.decision.temperature import calibrated_probs
from headwise.intent.inference.bucketing import (
    ONE_WINDOW_POLICIES,
    SPAN_MARGIN,
    BucketedPredictor,
    EncodedText,
    architecture_of,
    default_chunk_stride,
    default_long_text,
)
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
        long_text: one of :data:`~headwise.intent.inference.bucketing.LONG_TEXT_POLICIES`;
            ``"auto"`` is the classifier's architecture's
            (:func:`~headwise.intent.inference.bucketing.default_long_text`).
        chunk_length: the width of the chunked policies' windows: a fraction of the
            maximum length (a float in (0, 1]) or tokens (an int); None:
            :data:`~headwise.intent.inference.bucketing.DEFAULT_CHUNK_LENGTH`
            (:func:`~headwise.intent.inference.bucketing.window_length`).
        chunk_stride: tokens between window starts, or
            :data:`~headwise.intent.inference.bucketing.SENTENCE_STRIDE`: windows that
            start at the text's sentences; None: under ``"auto"`` the architecture's
            (:func:`~headwise.intent.inference.bucketing.default_chunk_stride`), else half
            a window's body.
        max_rows: most rows in one forward pass (a gathered batch is split beyond it).

    Raises:
        ValueError: an unknown policy, a window width refused, or given with a policy
            that does not chunk, or a stride too large for the window.
    """

    task = "single_label"

    def __init__(self, classifier: Any, runtime: TorchRuntime | OnnxRuntime, *,
                 long_text: str = "auto", chunk_length: float | int | None = None,
                 chunk_stride: int | str | None = None, max_rows: int = 64) -> None:
        if long_text == "auto":
            architecture = architecture_of(classifier)
            long_text = default_long_text(architecture)
            if chunk_stride is None:
                chunk_stride = default_chunk_stride(architecture)
        super().__init__(classifier.tokenizer, runtime, max_length=classifier.max_length,
                         long_text=long_text, chunk_length=chunk_length,
                         chunk_stride=chunk_stride, max_rows=max_rows)
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
        texts, in one go (:meth:`forward_windows` without the windows)."""
        logits, pooled, _, _ = self.forward_windows(items)
        return logits, pooled

    def _forward_rows(self, rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Logits (rows, intents) and pooled vectors (rows, d), float64, of token rows,
        padded into length-bucketed batches."""
        logits = np.empty((len(rows), len(self.labels)), dtype=np.float64)
        pooled: np.ndarray | None = None
        for group, ids, mask in self.padded_batches(rows):
            lg, pl = self.runtime.forward(ids, mask)
            logits[group] = lg
            if pooled is None:
                pooled = np.empty((len(rows), pl.shape[1]), dtype=np.float64)
            pooled[group] = pl
        assert pooled is not None  # every text has a window
        return logits, pooled

    def forward_windows(self, items: Sequence[EncodedText]
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Uncalibrated logits (n, intents), pooled vectors (n, d), float64, the window
        (n,) int64 whose answer each text's is and the span (n, 2) int64 read again whose
        answer it is (``-1`` where none), in one go.

        All windows of all texts are padded into length-bucketed batches. A chunked
        text's pooled vector is, under ``"chunk"``, the mean of its windows' and its
        logits the head applied to that mean (window 0); under ``"chunk_max"`` and
        ``"chunk_in_scope"``, those of the window :meth:`deciding_window` picks; under
        ``"chunk_span"``, those of its :meth:`in_scope_span` read again as one window (a
        second pass, one row per text), or of the ``"chunk_max"`` window when the
        out-of-scope rule rejects that span or there is none.
        """
        rows = [c for item in items for c in item.chunks]
        logits, pooled = self._forward_rows(rows)
        out = np.empty((len(items), len(self.labels)), dtype=np.float64)
        vectors = np.empty((len(items), pooled.shape[1]), dtype=np.float64)
        windows = np.zeros(len(items), dtype=np.int64)
        spans = np.full((len(items), 2), -1, dtype=np.int64)
        located: list[tuple[int, tuple[int, int]]] = []
        start = 0
        for j, item in enumerate(items):
            n = len(item.chunks)
            if n == 1:
                out[j], vectors[j] = logits[start], pooled[start]
            elif self.long_text in ONE_WINDOW_POLICIES:
                lg, pl = logits[start:start + n], pooled[start:start + n]
                probs, values, kept = self._window_scores(lg, pl)
                w = self._decide(probs, values, kept)
                out[j], vectors[j], windows[j] = lg[w], pl[w], w
                if self.long_text == "chunk_span":
                    span = self.in_scope_span(item, w, kept)
                    if span is not None:
                        located.append((j, span))
            else:
                weight, bias = self.head()
                vectors[j] = pooled[start:start + n].mean(0)
                out[j] = vectors[j] @ weight.T + bias
            start += n
        if located:
            lg, pl = self._forward_rows([self.span_window(items[j], a, b)[0]
                                         for j, (a, b) in located])
            kept = self._window_scores(lg, pl)[2]
            for (j, span), logit, vector, keep in zip(located, lg, pl, kept, strict=True):
                if keep:
                    out[j], vectors[j], spans[j] = logit, vector, span
        return out, vectors, windows, spans

    def _window_scores(self, logits: np.ndarray, pooled: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Calibrated probabilities, the saved out-of-scope rule's scores and whether it
        keeps each window in scope (:meth:`scores` with no threshold)."""
        probs = calibrated_probs(logits, self.classifier.temperature)
        scores = self.scores([], probs, logits, pooled, None)
        return probs, np.asarray(scores.values), ~np.asarray(scores.rejected)

    def deciding_window(self, logits: np.ndarray, pooled: np.ndarray) -> int:
        """The window of a long text whose answer is the text's under ``"chunk_max"`` or
        ``"chunk_in_scope"`` (and the window ``"chunk_span"`` locates the request by).

        Each window is scored by the saved out-of-scope rule (:meth:`scores` with no
        threshold: the classifier's detector, else the top probability at the saved
        threshold).

        * ``"chunk_in_scope"``: the window of the highest score decides, the one the rule
          finds most like the in-scope questions it was fitted on. Confidence alone is
          fooled by chatter: a window of small talk can be confidently one intent, while a
          detector that reads the pooled vectors (Mahalanobis, nearest neighbours) or all
          the logits (energy) scores it far from every intent; the window holding the
          request scores nearest. It is out of scope when the rule rejects that window,
          hence only when it rejects every window.
        * ``"chunk_max"`` and ``"chunk_span"``: among the windows the rule keeps in scope,
          the one with the highest calibrated top probability; when it rejects every
          window, the one with the highest score, which the rule then rejects.

        Under the top-probability rule (no detector) the first two agree: the window of
        highest top probability, whatever the threshold, so a request's ``threshold``
        rejects the text exactly when it rejects every window. Which policy a network
        answers with by default is chosen on validation rows (BENCHMARKS.md,
        ``demo:long_text``).

        Args:
            logits: (windows, intents) uncalibrated logits of one text's windows.
            pooled: (windows, d) their pooled vectors.

        Returns:
            The window's index (from 0).
        """
        return self._decide(*self._window_scores(logits, pooled))

    def _decide(self, probs: np.ndarray, values: np.ndarray, kept: np.ndarray) -> int:
        """:meth:`deciding_window` from the windows' :meth:`_window_scores`."""
        if self.long_text != "chunk_in_scope" and kept.any():
            top = np.where(kept, probs.max(1), -np.inf)
            return int(top.argmax())
        return int(values.argmax())

    def in_scope_span(self, item: EncodedText, window: int, kept: np.ndarray
                      ) -> tuple[int, int] | None:
        """Where ``"chunk_span"`` reads a long text again: the run of consecutive windows
        around ``window`` that the out-of-scope rule keeps (``kept``, one flag per window),
        widened by :data:`~headwise.intent.inference.bucketing.SPAN_MARGIN` tokens on each
        side, as ``(start, end)`` among the text's tokens without special tokens; when
        wider than one window's body, the body's width centred on ``window``. None when
        the rule rejects ``window`` itself (then every window: nothing to read again).

        A narrow window cuts a request in two, and a fragment ("加上这个保险" without the
        "别给我" before it) can be confidently the opposite intent; chatter windows are
        rejected, so the run of kept windows is where the request is, read whole here.
        """
        if not kept[window]:
            return None
        lo = hi = window
        while lo > 0 and kept[lo - 1]:
            lo -= 1
        while hi < len(kept) - 1 and kept[hi + 1]:
            hi += 1
        placed = [self.window_tokens(item, k) for k in range(lo, hi + 1)]
        total = self.window_tokens(item, len(kept) - 1)[-1] + 1  # the last window ends it
        a = max(0, min(p[0] for p in placed) - SPAN_MARGIN)
        b = min(total, max(p[-1] for p in placed) + 1 + SPAN_MARGIN)
        if b - a > self.body:
            mine = self.window_tokens(item, window)
            centre = (mine[0] + mine[-1] + 1) // 2
            a = max(a, min(centre - self.body // 2, b - self.body))
            b = a + self.body
        return a, b

    def logits(self, items: Sequence[EncodedText]) -> np.ndarray:
        """Uncalibrated logits (n, intents) float64 of encoded texts (see :meth:`forward`)."""
        return self.forward(items)[0]

    def run(self, items: Sequence[EncodedText]) -> list[np.ndarray]:
        """The micro-batcher's call: one row per encoded text: its logits (intents,), then
        its pooled vector (d,) when the classifier's out-of-scope detector reads pooled
        vectors (:attr:`with_features`), then under ``"chunk_span"`` the span read again
        (start, end; ``-1`` where none), then the index of the window whose answer it is
        (:meth:`forward_windows`)."""
        logits, pooled, windows, spans = self.forward_windows(items)
        parts = [logits, pooled] if self.with_features else [logits]
        if self.long_text == "chunk_span":
            parts.append(spans)
        return list(np.hstack([*parts, windows[:, None]]))

    def split_rows(self, rows: Any) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None,
                                             np.ndarray | None]:
        """:meth:`run`'s rows (a list, or stacked) as logits (n, intents), pooled vectors
        (n, d) or None, deciding windows (n,) or None and spans read again (n, 2) or None
        (``"chunk_span"`` only). Rows of logits alone (the explain endpoint's) have
        neither."""
        stacked = np.asarray(rows, dtype=np.float64)
        n_labels = len(self.labels)
        logits = stacked[:, :n_labels]
        if stacked.shape[1] == n_labels:
            return logits, None, None, None
        tail = 3 if self.long_text == "chunk_span" else 1
        pooled = stacked[:, n_labels:-tail] if stacked.shape[1] > n_labels + tail else None
        spans = stacked[:, -3:-1].astype(np.int64) if tail == 3 else None
        return logits, pooled, stacked[:, -1].astype(np.int64), spans

    def note(self, item: EncodedText, row: Any = None) -> dict[str, Any] | None:
        """The ``long_text`` note of an encoded text (None within the limit); when one
        window decides (``"chunk_max"``, ``"chunk_in_scope"``, ``"chunk_span"``), ``chunk``
        is the window (from 1) of ``row`` (its :meth:`run` row) whose answer is the text's
        and, under ``"chunk_span"``, ``span`` the tokens read again whose answer it is."""
        note = super().note(item)
        if note is not None and self.long_text in ONE_WINDOW_POLICIES and row is not None \
                and item.policy == "chunked":
            _, _, window, spans = self.split_rows(np.asarray(row, dtype=np.float64)[None])
            if window is not None:
                span = None if spans is None or spans[0, 0] < 0 else \
                    [int(spans[0, 0]), int(spans[0, 1])]
                note = {**note, "chunk": int(window[0]) + 1, "span": span}
        return note

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
        (:meth:`scores`) of texts from :meth:`run`'s rows (:meth:`split_rows`)."""
        logits, pooled, _, _ = self.split_rows(rows)
        probs = calibrated_probs(logits, self.classifier.temperature)
        return probs, self.scores(texts, probs, logits, pooled, threshold)

    def decide(self, texts: Sequence[str], items: Sequence[EncodedText], rows: Any, *,
               top_k: int, threshold: float | None, **options: Any) -> list[Prediction]:
        """Single-label answers: the ``top_k`` intents, the top one answered unless
        :meth:`scores` rejects the text."""
        probs, scores = self.probs_and_scores(texts, rows, threshold=threshold)
        return answers_from_probs(texts, probs, self.labels, top_k=top_k, scores=scores)
