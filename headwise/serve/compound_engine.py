"""The compound engine: every intent of a text and its slots, batched like intents.

:class:`CompoundEngine` serves a :class:`~headwise.intent.compound.classifier.CompoundClassifier`
(a joint intent + slot model): one forward pass gives the intent logits and one BIO tag
per token; the tags are decoded into character spans and their values normalised.
Its answers are those of :meth:`CompoundClassifier.predict
<headwise.intent.compound.classifier.CompoundClassifier.predict>` (the fields of ``to_dict()``, with
probabilities not rounded), whatever the other rows of the batch: tokenizing, bucketing
and padding are those of the intent engine
(:class:`~headwise.serve.bucketing.BucketedEngine`).

A text over the maximum length is truncated (as ``predict`` does; slots past the cut are
not found) or refused; chunk-and-pool is not offered, since slot spans cannot be pooled
over windows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np
import torch

from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.compound.thresholds import Thresholds
from headwise.serve.bucketing import BucketedEngine, EncodedText
from headwise.serve.runtime import TorchRuntime
from headwise.text.bio import tags_to_spans, token_offsets


@dataclass(frozen=True)
class JointRow:
    """The model's output for one text.

    Attributes:
        logits: (intents,) float64 intent logits.
        tags: (tokens,) int64 best tag id of each of the text's tokens (special tokens
            included, padding excluded); empty for a model without a slot tagger.
    """

    logits: np.ndarray
    tags: np.ndarray


class CompoundEngine(BucketedEngine):
    """Turn texts into compound answers (intents, top-k, slots) with the torch runtime.

    Args:
        classifier: the loaded compound classifier.
        runtime: a :class:`TorchRuntime` of its model (the ONNX path does not carry the
            tag logits).
        long_text: ``"truncate"`` or ``"reject"``.
        max_rows: most rows in one forward pass.

    Raises:
        ValueError: ``long_text="chunk"`` or an unknown policy.
        TypeError: a runtime without :meth:`TorchRuntime.forward_joint`.
    """

    kind = "compound"

    def __init__(self, classifier: CompoundClassifier, runtime: TorchRuntime, *,
                 long_text: str = "truncate", max_rows: int = 64) -> None:
        if long_text == "chunk":
            raise ValueError("long_text 'chunk' is not supported for a compound (multi-label "
                             "+ slots) classifier: slot spans cannot be pooled over windows; "
                             "use 'truncate' or 'reject'")
        if not hasattr(runtime, "forward_joint"):
            raise TypeError(f"the {getattr(runtime, 'name', type(runtime).__name__)} runtime "
                            f"cannot serve a compound classifier; use the torch runtime")
        super().__init__(classifier.tokenizer, runtime, max_length=classifier.max_length,
                         long_text=long_text, max_rows=max_rows)
        self.classifier = classifier

    @property
    def labels(self) -> list[str]:
        """Intent names, index = output of the intent head."""
        return self.classifier.intents

    # -- windows -> model outputs --------------------------------------------------------
    def run(self, items: Sequence[EncodedText]) -> list[JointRow]:
        """Intent logits and per-token tags of encoded texts, in length-bucketed batches:
        the micro-batcher's call.

        Args:
            items: encoded texts (one window each).

        Returns:
            One :class:`JointRow` per text.

        Raises:
            ValueError: a text encoded as several windows.
        """
        rows = []
        for item in items:
            if len(item.chunks) != 1:
                raise ValueError("a compound classifier reads one window per text")
            rows.append(item.chunks[0])
        found: dict[int, JointRow] = {}
        for group, ids, mask in self.padded_batches(rows):
            logits, tag_logits = self.runtime.forward_joint(ids, mask)
            best = None if tag_logits is None else tag_logits.argmax(-1)
            for r, i in enumerate(group):
                tags = np.zeros(0, dtype=np.int64) if best is None else \
                    best[r, :len(rows[i])].astype(np.int64)
                found[i] = JointRow(logits[r].astype(np.float64), tags)
        return [found[i] for i in range(len(rows))]

    def probabilities(self, rows: Sequence[JointRow]) -> np.ndarray:
        """Intent probabilities (n, intents) float64: a sigmoid per intent for a
        multi-label head, else a softmax."""
        logits = torch.from_numpy(np.stack([r.logits for r in rows]))
        probs = torch.sigmoid(logits) if self.classifier.model.multi_label \
            else torch.softmax(logits, -1)
        return probs.numpy()

    # -- model outputs -> answers --------------------------------------------------------
    def answer(self, texts: Sequence[str], items: Sequence[EncodedText],
               rows: Sequence[JointRow], *, top_k: int, threshold: float | None = None,
               at_least_one: bool = False, reference_date: date | None = None) -> list[dict]:
        """The response records (``schemas.Prediction`` fields) of texts.

        Args:
            texts: the texts.
            items: their encodings (for the long-text note).
            rows: their outputs, from :meth:`run`.
            top_k: most probable intents listed per text.
            threshold: one threshold for every intent, replacing the saved (possibly
                per-intent) ones.
            at_least_one: answer the most probable intent when none passes.
            reference_date: "today" for relative dates in the slot values; None: the
                classifier's saved one, else today's date.

        Returns:
            One dict per text: :meth:`Prediction.to_dict
            <headwise.intent.prediction.Prediction.to_dict>` (probabilities not rounded, so
            batched and unbatched answers agree to float precision) plus ``long_text``.

        Raises:
            RuntimeError: tags that do not line up with the text's tokens.
        """
        clf = self.classifier
        probs = self.probabilities(rows)
        offsets = token_offsets(clf.tokenizer, list(texts), max_length=self.max_length)
        names = clf.slot_tags
        spans = []
        for text, row, off in zip(texts, rows, offsets, strict=True):
            found = []
            if names and len(row.tags):
                if len(row.tags) != len(off):
                    raise RuntimeError(f"{len(row.tags)} tags for {len(off)} tokens of "
                                       f"{text[:40]!r}")
                found = tags_to_spans(row.tags.tolist(), off, text, names)
            spans.append(found)
        answers = clf.answers(texts, probs, spans, top_k=top_k,
                              thresholds=None if threshold is None else Thresholds(
                                  float(threshold)),
                              at_least_one=at_least_one, reference_date=reference_date)
        out = []
        for answer, item in zip(answers, items, strict=True):
            out.append({**answer.to_dict(digits=None), "long_text": self.long_text_note(item)})
        return out

    def predict(self, texts: Sequence[str], *, top_k: int = 3, threshold: float | None = None,
                at_least_one: bool = False, reference_date: date | None = None) -> list[dict]:
        """Encode, run and answer in one call (unbatched inference)."""
        items = self.encode(texts)
        return self.answer(texts, items, self.run(items), top_k=top_k, threshold=threshold,
                           at_least_one=at_least_one, reference_date=reference_date)
