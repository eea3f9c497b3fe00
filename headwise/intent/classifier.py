"""``IntentClassifier``: a trained model, its tokenizer, its intents and its calibration.

This is what ``headwise train`` writes and ``eval`` / ``predict`` / ``serve`` read::

    clf = IntentClassifier.load("runs/intent")
    clf.predict(["我想提前还款，违约金怎么算？"], top_k=3)[0]
    # Prediction(intents=[('early_repayment_penalty', 0.93)], out_of_scope=False, ...)

A saved classifier is a directory written by :func:`headwise.save_pretrained` (model
config with the intent names, safetensors weights, tokenizer files) plus ``intent.json``
(temperature, out-of-scope threshold, maximum length, training summary) and, for a
classifier with an out-of-scope detector other than the top probability
(:mod:`headwise.intent.decision.ood`: energy, Mahalanobis, k-nearest neighbours), ``ood.json`` +
``ood.safetensors``. Loading never unpickles anything.

Out-of-scope answers: without a detector, a text is out-of-scope when its calibrated top
probability is below ``threshold`` (as always); with one (``IntentClassifier.ood``), when
the detector's score is below the detector's own threshold. An explicit ``threshold=``
passed to :meth:`~IntentClassifier.predict` always means the top-probability rule at
that threshold (0: never out-of-scope).

:class:`~headwise.intent.answering.ProbabilityClassifier` (``predict`` from
``predict_proba``) and :class:`~headwise.intent.answering.CalibratedClassifier`
(``predict_proba`` from ``logits`` and a temperature), the answering logic that the TF-IDF
model and ensembles share with it, are :mod:`headwise.intent.answering`'s. A network's
inference is its predictor (:meth:`IntentClassifier.predictor`,
:mod:`headwise.intent.inference`): the one path that ``headwise predict``, the file stream
and the service run too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from headwise.intent.answering import CalibratedClassifier
from headwise.intent.decision.ood import OodDetector, load_detector, remove_detector, save_detector
from headwise.intent.inference.runtime import TorchRuntime
from headwise.intent.inference.single import SingleLabelPredictor
from headwise.intent.kinds import NETWORK, kind_of
from headwise.intent.prediction import (
    OutOfScopeScores,
    Prediction,
    check_answer_options,
    check_texts,
)
from headwise.loading import from_pretrained, save_pretrained
from headwise.models.io import write_json_atomically
from headwise.text.tokenizer import Tokenizer

__all__ = ["INTENT_FILE", "IntentClassifier", "check_detector"]

INTENT_FILE = NETWORK.marker  # "intent.json"


class IntentClassifier(CalibratedClassifier):
    """A classifier model with its tokenizer, intent names, temperature and threshold.

    Args:
        model: an encoder classifier or BiLSTM classifier (``forward(input_ids,
            attention_mask)`` -> ``{"logits"}``).
        tokenizer: the tokenizer whose ids the model reads.
        labels: intent names, index = class id.
        temperature: logits are divided by it before the softmax (calibration).
        threshold: calibrated top probability below which the answer is out-of-scope
            (0 disables it); not used while ``ood`` is set.
        max_length: longest input in tokens (special tokens included); :meth:`predict`
            reads a longer text in windows, one answering (the long-text policy
            ``"auto"``: the architecture's,
            :data:`~headwise.intent.inference.bucketing.DEFAULT_LONG_TEXT`); :meth:`logits` and
            :meth:`features_and_logits` truncate it.
        info: free-form training summary stored in ``intent.json``.
        ood: an out-of-scope detector (:mod:`headwise.intent.decision.ood`), fitted and with its
            threshold chosen, that decides out-of-scope answers instead of ``threshold``;
            None: the top-probability rule.

    Raises:
        ValueError: labels that do not match the model's output size, duplicate labels,
            a non-positive temperature, a threshold outside [0, 1], or a detector that is
            not fitted, has no threshold or was fitted on another number of intents.
    """

    def __init__(self, model: nn.Module, tokenizer: Tokenizer, labels: Sequence[str], *,
                 temperature: float = 1.0, threshold: float = 0.0, max_length: int = 128,
                 info: dict[str, Any] | None = None, ood: OodDetector | None = None) -> None:
        self._set_calibration(labels, temperature, threshold, info)
        head = _output_size(model)
        if head is not None and head != len(self.labels):
            raise ValueError(f"the model predicts {head} classes but {len(self.labels)} labels "
                             f"were given")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.ood = ood

    @property
    def ood(self) -> OodDetector | None:
        """The out-of-scope detector (None: the top-probability rule); set it to a fitted
        detector with a threshold (checked: ValueError otherwise)."""
        return self._ood

    @ood.setter
    def ood(self, detector: OodDetector | None) -> None:
        self._ood = check_detector(detector, len(self.labels))

    # -- inference ---------------------------------------------------------------------
    def predictor(self, *, batch_size: int = 64) -> SingleLabelPredictor:
        """This classifier's predictor on the PyTorch runtime, with the default long-text
        policy (``"auto"``: the architecture's chunked one): what :meth:`predict`,
        :meth:`logits` and
        :meth:`features_and_logits` (these two on truncated texts) run (the service and
        ``headwise predict`` run the same predictor, on the runtime they pick).

        Args:
            batch_size: most texts in one forward pass.

        Raises:
            ValueError: ``batch_size < 1``.
        """
        return SingleLabelPredictor(self, TorchRuntime(self.model), max_rows=batch_size)

    def predict(self, texts: Sequence[str] | str, *, top_k: int = 3,
                threshold: float | None = None, batch_size: int = 64) -> list[Prediction]:
        """Top intents of each text, out of scope where the saved rule (the detector, or
        the top probability below the threshold) rejects it: :meth:`predictor`'s answers.

        Args:
            texts: one text or a list.
            top_k: how many intents to list per text (capped at the number of intents).
            threshold: decide out-of-scope by the top probability at this threshold
                instead of the saved rule (0 never answers out-of-scope); each answer's
                ``decision`` names the score that decided.
            batch_size: most texts in one forward pass (an answer does not depend on it
                beyond float rounding).

        Returns:
            One :class:`~headwise.intent.prediction.Prediction` per text, in input order.

        Raises:
            ValueError: an empty list or text, ``top_k < 1``, a threshold outside [0, 1].
            TypeError: a non-string item.
        """
        return self.predictor(batch_size=batch_size).predictions(
            texts, top_k=top_k, threshold=threshold)[0]

    def logits(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Raw (uncalibrated) logits (n, intents) as float64 of texts truncated to the
        maximum length, batched by length (:meth:`predictor`).

        Raises:
            ValueError: an empty list; TypeError: a non-string item.
        """
        return self.features_and_logits(texts, batch_size=batch_size)[1]

    def features_and_logits(self, texts: Sequence[str], *, batch_size: int = 64
                            ) -> tuple[np.ndarray, np.ndarray]:
        """The pooled vectors the head reads (n, d) and the raw logits (n, intents), both
        float64, of texts truncated to the maximum length, from one forward pass batched by
        length (what out-of-scope detectors read; :meth:`predictor`).

        Raises:
            ValueError: an empty list; TypeError: a non-string item or a model without
                pooled vectors.
        """
        predictor = self.predictor(batch_size=batch_size)
        logits, features = predictor.forward(predictor.encode_truncated(check_texts(texts)))
        return features, logits

    def predict_proba_and_scores(self, texts: Sequence[str], *,
                                 threshold: float | None = None, batch_size: int = 64
                                 ) -> tuple[np.ndarray, OutOfScopeScores]:
        """Calibrated probabilities (n, intents) and the out-of-scope score that decides
        for each text (:meth:`SingleLabelPredictor.scores
        <headwise.intent.inference.single.SingleLabelPredictor.scores>`: the detector's
        when there is one and ``threshold`` is None, otherwise the top probability against
        ``threshold``, default the saved one).

        Raises:
            ValueError: a threshold outside [0, 1], an empty list or text; TypeError: a
                non-string item.
        """
        check_answer_options(1, self.threshold if threshold is None else threshold)
        texts = check_texts(texts)
        predictor = self.predictor(batch_size=batch_size)
        items = predictor.encode_truncated(texts)
        return predictor.probs_and_scores(texts, predictor.run(items), threshold=threshold)

    # -- persistence -------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """Write model, tokenizer, the out-of-scope detector (``ood.json`` +
        ``ood.safetensors``, when there is one; an older save's are removed otherwise) and
        ``intent.json`` into ``directory`` (created).

        ``intent.json`` is written last and atomically, so a directory that has it is
        complete; it names the detector (``ood_detector``) when there is one.
        """
        directory = Path(directory)
        save_pretrained(self.model, self.tokenizer, directory)
        meta = {"format": "headwise-intent", "version": 1, "labels": self.labels,
                "temperature": self.temperature, "threshold": self.threshold,
                "max_length": self.max_length, "info": self.info}
        if self.ood is not None:
            save_detector(self.ood, directory)
            meta["ood_detector"] = self.ood.name
        else:
            remove_detector(directory)
        write_json_atomically(directory / INTENT_FILE, meta)
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> IntentClassifier:
        """Load a directory written by :meth:`save`.

        Raises:
            FileNotFoundError: no such directory, or no ``intent.json`` in it (the
                message says what the directory looks like instead).
            ValueError: an ``intent.json`` that is not valid or does not match the model.
            UnsafeCheckpointError: pickle files where safetensors should be.
        """
        directory = Path(directory)
        meta_path = directory / INTENT_FILE
        if not directory.is_dir():
            raise FileNotFoundError(f"no model directory at {directory}")
        if not meta_path.is_file():
            try:
                kind = kind_of(directory)
            except (FileNotFoundError, ValueError):
                kind = None
            if kind is not None:
                raise FileNotFoundError(
                    f"{directory} holds {kind.description}, not a network: load it with "
                    f"headwise.intent.kinds.load_classifier (`headwise predict`, `eval` and "
                    f"`serve` take it; ONNX export needs a network)")
            raise FileNotFoundError(f"{directory} has no {INTENT_FILE}: it is not an intent "
                                    f"classifier saved by `headwise train` (or the save was "
                                    f"interrupted)")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            labels = meta["labels"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{meta_path} is not a valid intent file: {e}") from e
        ood = None
        if meta.get("ood_detector"):
            ood = load_detector(directory)
            if ood.name != meta["ood_detector"]:
                raise ValueError(f"{meta_path} names the {meta['ood_detector']} detector but "
                                 f"the saved one is {ood.name}")
        model, tokenizer = from_pretrained(directory)
        return cls(model, tokenizer, labels, temperature=meta.get("temperature", 1.0),
                   threshold=meta.get("threshold", 0.0), max_length=meta.get("max_length", 128),
                   info=meta.get("info"), ood=ood)

    def __repr__(self) -> str:
        ood = "" if self.ood is None else f", ood={self.ood.describe()}"
        return (f"IntentClassifier({type(self.model).__name__}, {len(self.labels)} intents, "
                f"T={self.temperature:.3g}, threshold={self.threshold:.3g}{ood})")


def check_detector(detector: OodDetector | None, num_labels: int) -> OodDetector | None:
    """``detector`` if a classifier of ``num_labels`` intents can use it (None passes).

    Raises:
        TypeError: not an :class:`~headwise.intent.decision.ood.OodDetector`.
        ValueError: not fitted, no threshold, or fitted on another number of intents.
    """
    if detector is None:
        return None
    if not isinstance(detector, OodDetector):
        raise TypeError(f"ood must be an OodDetector, got {type(detector).__name__}")
    if not detector.fitted or detector.threshold is None:
        raise ValueError(f"the {detector.name} detector must be fitted and have a threshold "
                         f"before a classifier uses it")
    if detector.num_classes is not None and detector.num_classes != num_labels:
        raise ValueError(f"the {detector.name} detector was fitted on {detector.num_classes} "
                         f"intents, the classifier has {num_labels}")
    classes = getattr(detector, "classes", None)
    if classes is not None and len(classes) and int(np.max(classes)) >= num_labels:
        raise ValueError(f"the {detector.name} detector has class ids beyond the "
                         f"classifier's {num_labels} intents")
    return detector


def _output_size(model: nn.Module) -> int | None:
    head = getattr(model, "classifier", None)
    return head.out_features if isinstance(head, nn.Linear) else None
