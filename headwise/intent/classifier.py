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
passed to :meth:`~ProbabilityClassifier.predict` always means the top-probability rule
at that threshold (0: never out-of-scope).

:class:`~headwise.intent.answering.ProbabilityClassifier` (``predict`` from
``predict_proba``) and :class:`~headwise.intent.answering.CalibratedClassifier`
(``predict_proba`` from ``logits`` and a temperature), the answering logic that the TF-IDF
model and ensembles share with it, are :mod:`headwise.intent.answering`'s (and still
importable from here).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from headwise.intent.answering import (
    CalibratedClassifier,
    check_texts,
)
from headwise.intent.decision.ood import OodDetector, load_detector, remove_detector, save_detector
from headwise.intent.decision.temperature import calibrated_probs
from headwise.intent.kinds import NETWORK, kind_of
from headwise.intent.prediction import OutOfScopeScores
from headwise.loading import from_pretrained, save_pretrained
from headwise.models.io import write_json_atomically
from headwise.text.tokenizer import Tokenizer

__all__ = ["INTENT_FILE", "IntentClassifier", "check_detector", "pooled_vectors"]

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
        max_length: longest input in tokens (special tokens included); longer texts are
            truncated.
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
    @torch.inference_mode()
    def logits(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Raw (uncalibrated) logits (n, intents) as float64, batched by length.

        Raises:
            ValueError: an empty list; TypeError: a non-string item.
        """
        texts = check_texts(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), len(self.labels)), dtype=np.float64)
        device = next(self.model.parameters()).device
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            batch = self.tokenizer([texts[i] for i in idx], max_length=self.max_length)
            logits = self.model(input_ids=batch["input_ids"].to(device),
                                attention_mask=batch["attention_mask"].bool().to(device))["logits"]
            out[idx] = logits.double().cpu().numpy()
        return out

    @torch.inference_mode()
    def features_and_logits(self, texts: Sequence[str], *, batch_size: int = 64
                            ) -> tuple[np.ndarray, np.ndarray]:
        """The pooled vectors the head reads (n, d) and the raw logits (n, intents), both
        float64, from one forward pass batched by length (what out-of-scope detectors
        read).

        Raises:
            ValueError: an empty list; TypeError: a non-string item or a model without
                pooled vectors.
        """
        texts = check_texts(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        logits = np.empty((len(texts), len(self.labels)), dtype=np.float64)
        features: np.ndarray | None = None
        device = next(self.model.parameters()).device
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            batch = self.tokenizer([texts[i] for i in idx], max_length=self.max_length)
            pooled = pooled_vectors(self.model, batch["input_ids"].to(device),
                                    batch["attention_mask"].bool().to(device))
            if features is None:
                features = np.empty((len(texts), pooled.shape[1]), dtype=np.float64)
            features[idx] = pooled.double().cpu().numpy()
            logits[idx] = self.model.classifier(pooled).double().cpu().numpy()
        return features, logits

    def predict_proba_and_scores(self, texts: Sequence[str], *,
                                 threshold: float | None = None, batch_size: int = 64
                                 ) -> tuple[np.ndarray, OutOfScopeScores]:
        """Calibrated probabilities (n, intents) and the out-of-scope score that decides
        for each text: the detector's when there is one and ``threshold`` is None,
        otherwise the top probability against ``threshold`` (default: the saved one).

        Raises:
            ValueError: a threshold outside [0, 1], an empty list or text; TypeError: a
                non-string item.
        """
        det = self.ood
        if det is None or threshold is not None:
            return super().predict_proba_and_scores(texts, threshold=threshold,
                                                    batch_size=batch_size)
        if det.needs_features:
            features, logits = self.features_and_logits(texts, batch_size=batch_size)
        else:
            features, logits = None, self.logits(texts, batch_size=batch_size)
        return calibrated_probs(logits, self.temperature), OutOfScopeScores.of_detector(
            det, features, logits)

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


def pooled_vectors(model: nn.Module, input_ids: torch.Tensor,
                   attention_mask: torch.Tensor) -> torch.Tensor:
    """The vectors a classifier's head reads: (batch, d) before dropout and the head.

    Args:
        model: an ``EncoderClassifier`` (``encode`` + ``pool``) or a ``BiLSTMClassifier``
            (``pooled``).
        input_ids: (batch, seq) token ids.
        attention_mask: (batch, seq) boolean, True on real tokens.

    Raises:
        TypeError: a model with neither interface.
    """
    if hasattr(model, "encode") and hasattr(model, "pool"):
        return model.pool(model.encode(input_ids, attention_mask), attention_mask)
    if hasattr(model, "pooled"):
        return model.pooled(input_ids, attention_mask)
    raise TypeError(f"{type(model).__name__} has neither encode/pool nor pooled")


def _output_size(model: nn.Module) -> int | None:
    head = getattr(model, "classifier", None)
    return head.out_features if isinstance(head, nn.Linear) else None
