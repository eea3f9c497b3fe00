"""The compound predictor: every intent of a text and its slots, batched like intents.

:class:`CompoundPredictor` is how a
:class:`~headwise.intent.compound.classifier.CompoundClassifier` (a joint intent + slot
model) answers, in the library (``CompoundClassifier.predict``), ``headwise predict``, the
file stream and the service: one forward pass gives the intent logits and one BIO tag per
token; the tags are decoded into character spans, and the classifier's
:meth:`~headwise.intent.compound.classifier.CompoundClassifier.answers` applies its
thresholds and normalises the slot values; a classifier blended with a TF-IDF model
(``levers.blend="tfidf"``) mixes that model's probabilities into the network's here, on
either runtime. Tokenizing, bucketing and padding are those of
the single-label predictor (:class:`~headwise.intent.inference.bucketing.BucketedPredictor`),
so an answer does not depend on the other rows of the batch.

A text over the maximum length is truncated (slots past the cut are not found; what
``"auto"`` gives) or refused; the policies that read other windows are not offered, since
slot spans are decoded on one window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from functools import partial
from typing import Any

import numpy as np
import torch

from headwise.intent.compound.thresholds import Thresholds
from headwise.intent.inference.bucketing import CHUNK_POOLING, BucketedPredictor, EncodedText
from headwise.intent.inference.runtime import OnnxRuntime, TorchRuntime
from headwise.intent.prediction import INTENT_THRESHOLD, Prediction
from headwise.text.bio import tags_to_spans, token_offsets

__all__ = ["CompoundPredictor", "JointRow"]


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


class CompoundPredictor(BucketedPredictor):
    """Turn texts into compound answers (intents, top-k, slots) on PyTorch or onnxruntime.

    Args:
        classifier: a :class:`~headwise.intent.compound.classifier.CompoundClassifier`.
        runtime: a :class:`TorchRuntime` of its model, or an :class:`OnnxRuntime` of its
            export (whose ``tag_logits`` output carries the slot tags), checked against it
            (:func:`~headwise.intent.inference.load.check_onnx`).
        long_text: ``"truncate"`` (also what ``"auto"`` gives) or ``"reject"``.
        max_rows: most rows in one forward pass.

    Raises:
        ValueError: a policy that reads more than the first window (``"head_tail"`` and
            the chunked ones, :data:`~headwise.intent.inference.bucketing.CHUNK_POOLING`)
            or an unknown one.
        TypeError: a runtime without :meth:`TorchRuntime.forward_joint`.
    """

    task = "multi_label"
    options = ("at_least_one", "reference_date", "thresholds")

    def __init__(self, classifier: Any, runtime: TorchRuntime | OnnxRuntime, *,
                 long_text: str = "truncate", max_rows: int = 64) -> None:
        long_text = "truncate" if long_text == "auto" else long_text
        if long_text == "head_tail" or long_text in CHUNK_POOLING:
            raise ValueError(f"long_text {long_text!r} is not supported for a compound "
                             f"(multi-label + slots) classifier: slot spans are read on the "
                             f"text's first window only; use 'truncate' or 'reject'")
        if not hasattr(runtime, "forward_joint"):
            raise TypeError(f"the {getattr(runtime, 'name', type(runtime).__name__)} runtime "
                            f"cannot serve a compound classifier (it has no forward_joint); "
                            f"use the torch or the onnx runtime")
        super().__init__(classifier.tokenizer, runtime, max_length=classifier.max_length,
                         long_text=long_text, max_rows=max_rows)
        self.classifier = classifier

    @property
    def labels(self) -> list[str]:
        """Intent names, index = output of the intent head."""
        return self.classifier.intents

    @property
    def decision_scores(self) -> tuple[str, ...]:
        """The intents' own thresholds: the only score that rejects a text."""
        return (INTENT_THRESHOLD,)

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

    def probabilities(self, texts: Sequence[str], rows: Sequence[JointRow]) -> np.ndarray:
        """Intent probabilities (n, intents) float64 of texts from their :meth:`run` rows: a
        sigmoid per intent for a multi-label head, else a softmax; with the classifier's
        blended TF-IDF model (share ``w``), ``(1 - w) * p_network + w * p_tfidf`` per
        intent, the TF-IDF part read on the whole texts.

        Raises:
            ValueError: texts and rows of different lengths.
        """
        if len(texts) != len(rows):
            raise ValueError(f"{len(texts)} texts for {len(rows)} rows")
        logits = torch.from_numpy(np.stack([r.logits for r in rows]))
        probs = torch.sigmoid(logits) if self.classifier.model.multi_label \
            else torch.softmax(logits, -1)
        probs = probs.numpy()
        tfidf, share = self.classifier.tfidf, self.classifier.tfidf_share
        if tfidf is None:
            return probs
        return (1.0 - share) * probs + share * tfidf.probabilities(list(texts))

    def spans(self, texts: Sequence[str], rows: Sequence[JointRow], *,
              reference_date: date | None = None) -> list[list[Any]]:
        """The slot spans (without values) of each text, decoded from its tags; a span whose
        boundary falls inside a token is cut there to the value of its slot
        (:meth:`CompoundClassifier.fits <headwise.intent.compound.classifier.
        CompoundClassifier.fits>`, dates read against ``reference_date`` as the answers'
        values are).

        Raises:
            RuntimeError: tags that do not line up with the text's tokens.
        """
        names = self.classifier.slot_tags
        if not names:
            return [[] for _ in texts]
        fits = partial(self.classifier.fits, reference=self.classifier.reference(reference_date))
        offsets = token_offsets(self.tokenizer, list(texts), max_length=self.max_length)
        out = []
        for text, row, off in zip(texts, rows, offsets, strict=True):
            found = []
            if len(row.tags):
                if len(row.tags) != len(off):
                    raise RuntimeError(f"{len(row.tags)} tags for {len(off)} tokens of "
                                       f"{text[:40]!r}")
                found = tags_to_spans(row.tags.tolist(), off, text, names, fits=fits)
            out.append(found)
        return out

    # -- model outputs -> answers --------------------------------------------------------
    def decide(self, texts: Sequence[str], items: Sequence[EncodedText],
               rows: Sequence[JointRow], *, top_k: int, threshold: float | None,
               at_least_one: bool = False, reference_date: date | None = None,
               thresholds: Thresholds | None = None) -> list[Prediction]:
        """Compound answers: every intent over its threshold (``thresholds`` replace the
        saved, possibly per-intent, ones; ``threshold``: one for every intent;
        ``at_least_one``: the most probable when none passes), the slots with values
        normalised against ``reference_date`` (None: the classifier's saved one, else
        today's date).

        Raises:
            ValueError: both ``threshold`` and ``thresholds``.
        """
        if threshold is not None:
            if thresholds is not None:
                raise ValueError("give threshold (one for every intent) or thresholds, "
                                 "not both")
            thresholds = Thresholds(float(threshold))
        return self.classifier.answers(
            texts, self.probabilities(texts, rows),
            self.spans(texts, rows, reference_date=reference_date), top_k=top_k,
            thresholds=thresholds, at_least_one=at_least_one, reference_date=reference_date)
