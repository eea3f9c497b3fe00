"""The inference engine: texts -> token windows -> length-bucketed padded batches -> answers.

:class:`InferenceEngine` is what the service runs, batched or not; its answers are those
of :meth:`IntentClassifier.predict <headwise.intent.classifier.IntentClassifier.predict>`
for texts within the maximum length. A longer text is truncated (as ``predict`` does), or
split into overlapping windows (:func:`headwise.models.chunked.split_into_chunks`) whose
pooled vectors are averaged before the classification head ("chunk and pool", as
:class:`~headwise.models.chunked.HierarchicalEncoder` with mean pooling), or refused.

Padding never changes an answer: rows of one batch are independent under the padding
mask. Batches are bucketed by length (the longest row at most doubles the shortest one's
bucket), so a short text never pays for a long neighbour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from headwise.intent.calibration import calibrated_probs
from headwise.intent.classifier import OUT_OF_SCOPE, IntentClassifier
from headwise.models.chunked import split_into_chunks
from headwise.serve.runtime import OnnxRuntime, TorchRuntime

#: smallest length bucket (tokens); buckets are powers of two from here
MIN_BUCKET = 8


class LongTextError(ValueError):
    """A text over the maximum length under the ``"reject"`` policy."""


@dataclass(frozen=True)
class EncodedText:
    """One text as the windows the model reads.

    Attributes:
        chunks: token ids of each window, special tokens included (one window unless
            chunked).
        tokens: tokens of the whole text, special tokens included.
        policy: None (within the limit), ``"truncated"`` or ``"chunked"``.
    """

    chunks: tuple[tuple[int, ...], ...]
    tokens: int
    policy: str | None = None


def length_bucket(n: int) -> int:
    """The bucket of a row of ``n`` tokens: the smallest power of two >= n (>= 8)."""
    return max(MIN_BUCKET, 1 << max(0, n - 1).bit_length())


class InferenceEngine:
    """Turn texts into calibrated answers with a runtime.

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

    def __init__(self, classifier: IntentClassifier, runtime: TorchRuntime | OnnxRuntime, *,
                 long_text: str = "truncate", chunk_stride: int | None = None,
                 max_rows: int = 64) -> None:
        if long_text not in ("truncate", "chunk", "reject"):
            raise ValueError(f"long_text must be truncate, chunk or reject, got {long_text!r}")
        self.classifier = classifier
        self.runtime = runtime
        self.long_text = long_text
        self.max_length = classifier.max_length
        tok = classifier.tokenizer
        self.cls_id, self.sep_id, self.pad_id = tok.cls_token_id, tok.sep_token_id, \
            tok.pad_token_id
        body = self.max_length - (self.cls_id is not None) - (self.sep_id is not None)
        self.chunk_stride = chunk_stride if chunk_stride is not None else max(1, body // 2)
        if not 1 <= self.chunk_stride <= body:
            raise ValueError(f"chunk_stride must be in [1, {body}], got {self.chunk_stride}")
        self.max_rows = max_rows
        head = classifier.model.classifier
        self._weight = head.weight.detach().double().cpu().numpy()
        self._bias = head.bias.detach().double().cpu().numpy() if head.bias is not None \
            else np.zeros(self._weight.shape[0])

    @property
    def labels(self) -> list[str]:
        """Intent names, index = class id."""
        return self.classifier.labels

    # -- texts -> windows ----------------------------------------------------------------
    def encode(self, texts: Sequence[str]) -> list[EncodedText]:
        """Tokenize texts and apply the long-text policy.

        Raises:
            LongTextError: a text over the maximum length under ``"reject"`` (the message
                names its index and length).
        """
        tok = self.classifier.tokenizer
        full = tok(list(texts), max_length=None)
        lengths = full["attention_mask"].sum(1).tolist()
        rows = full["input_ids"].tolist()
        out = []
        for i, (text, row, n) in enumerate(zip(texts, rows, lengths, strict=True)):
            row = row[:n]
            if n <= self.max_length:
                out.append(EncodedText((tuple(row),), n))
            elif self.long_text == "reject":
                raise LongTextError(f"texts[{i}] has {n} tokens, over the model's maximum "
                                    f"length of {self.max_length}")
            elif self.long_text == "truncate":
                ids = tok([text], max_length=self.max_length)["input_ids"][0].tolist()
                out.append(EncodedText((tuple(ids),), n, "truncated"))
            else:
                out.append(EncodedText(self._windows(row), n, "chunked"))
        return out

    def _windows(self, row: list[int]) -> tuple[tuple[int, ...], ...]:
        body = row
        if self.cls_id is not None and body and body[0] == self.cls_id:
            body = body[1:]
        if self.sep_id is not None and body and body[-1] == self.sep_id:
            body = body[:-1]
        chunks, mask, _ = split_into_chunks(body, chunk_len=self.max_length,
                                            stride=self.chunk_stride, cls_id=self.cls_id,
                                            sep_id=self.sep_id, pad_id=self.pad_id)
        return tuple(tuple(c[m].tolist()) for c, m in zip(chunks, mask, strict=True))

    # -- windows -> logits ---------------------------------------------------------------
    def buckets(self, rows: Sequence[Sequence[int]]) -> list[list[int]]:
        """Row indices grouped into forward passes: by length bucket, at most
        ``max_rows`` each, shortest first."""
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        groups: list[list[int]] = []
        for i in order:
            if (groups and len(groups[-1]) < self.max_rows
                    and length_bucket(len(rows[groups[-1][0]])) == length_bucket(len(rows[i]))):
                groups[-1].append(i)
            else:
                groups.append([i])
        return groups

    def logits(self, items: Sequence[EncodedText]) -> np.ndarray:
        """Uncalibrated logits (n, intents) float64 of encoded texts, in one go.

        All windows of all texts are padded into length-bucketed batches; a chunked
        text's logits are the head applied to the mean of its windows' pooled vectors.
        """
        rows = [c for item in items for c in item.chunks]
        logits = np.empty((len(rows), len(self.labels)), dtype=np.float64)
        pooled: np.ndarray | None = None
        chunked = any(len(item.chunks) > 1 for item in items)
        for group in self.buckets(rows):
            width = max(len(rows[i]) for i in group)
            ids = np.full((len(group), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(group), width), dtype=np.int64)
            for r, i in enumerate(group):
                ids[r, :len(rows[i])] = rows[i]
                mask[r, :len(rows[i])] = 1
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
        """
        clf = self.classifier
        t = clf.threshold if threshold is None else float(threshold)
        probs = calibrated_probs(logits, clf.temperature)
        k = min(top_k, len(self.labels))
        out = []
        for text, item, p in zip(texts, items, probs, strict=True):
            best = np.argsort(-p, kind="stable")[:k]
            conf = float(p[best[0]])
            oos = conf < t
            long_text = None if item.policy is None else {
                "policy": item.policy, "tokens": item.tokens, "max_length": self.max_length,
                "chunks": len(item.chunks)}
            out.append({"text": text, "intent": OUT_OF_SCOPE if oos else self.labels[best[0]],
                        "confidence": conf, "out_of_scope": oos,
                        "top_k": [{"intent": self.labels[j], "confidence": float(p[j])}
                                  for j in best],
                        "long_text": long_text})
        return out

    def warm_up(self, texts: Sequence[str]) -> None:
        """Run texts (truncated, whatever the policy) through the runtime once, so the
        first real request does not pay for lazy initialisation."""
        batch = self.classifier.tokenizer(list(texts), max_length=self.max_length)
        lengths = batch["attention_mask"].sum(1).tolist()
        rows = batch["input_ids"].tolist()
        self.logits([EncodedText((tuple(r[:n]),), n) for r, n in zip(rows, lengths, strict=True)])

    def predict(self, texts: Sequence[str], *, top_k: int = 3,
                threshold: float | None = None) -> list[dict]:
        """Encode, run and answer in one call (unbatched inference)."""
        items = self.encode(texts)
        return self.answer(texts, items, self.logits(items), top_k=top_k, threshold=threshold)
