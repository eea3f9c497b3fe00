"""``IntentClassifier``: a trained model, its tokenizer, its intents and its calibration.

This is what ``headwise train`` writes and ``eval`` / ``predict`` / ``serve`` read::

    clf = IntentClassifier.load("runs/intent")
    clf.predict(["我想提前还款，违约金怎么算？"], top_k=3)[0]
    # IntentPrediction(intent='early_repayment_penalty', confidence=0.93, ...)

A saved classifier is a directory written by :func:`headwise.save_pretrained` (model
config with the intent names, safetensors weights, tokenizer files) plus ``intent.json``
(temperature, out-of-scope threshold, maximum length, training summary). Loading never
unpickles anything.

:class:`ProbabilityClassifier` (``predict`` from ``predict_proba``) and
:class:`CalibratedClassifier` (``predict_proba`` from ``logits`` and a temperature) are the
answering logic that the TF-IDF model and ensembles share with it.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from headwise.intent.calibration import calibrated_probs
from headwise.loading import from_pretrained, save_pretrained
from headwise.models.io import write_json_atomically
from headwise.text.tokenizer import Tokenizer

INTENT_FILE = "intent.json"
#: what ``predict`` answers when the top confidence is below the threshold
OUT_OF_SCOPE = "out_of_scope"


@dataclass(frozen=True)
class IntentPrediction:
    """One answer of :meth:`IntentClassifier.predict`.

    Attributes:
        text: the input text.
        intent: the top intent, or :data:`OUT_OF_SCOPE` when below the threshold.
        confidence: calibrated probability of the top intent (even when out-of-scope).
        top_k: ``[(intent, probability), ...]`` best first.
        out_of_scope: whether the confidence fell below the threshold.
    """

    text: str
    intent: str
    confidence: float
    top_k: list[tuple[str, float]] = field(default_factory=list)
    out_of_scope: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``top_k`` as a list of ``{"intent", "confidence"}``)."""
        return {"text": self.text, "intent": self.intent,
                "confidence": round(self.confidence, 6), "out_of_scope": self.out_of_scope,
                "top_k": [{"intent": k, "confidence": round(p, 6)} for k, p in self.top_k]}


class ProbabilityClassifier(ABC):
    """What every single-label classifier shares (networks, TF-IDF models, ensembles):
    ``labels``, an out-of-scope ``threshold``, ``info``, and :meth:`predict` built on the
    subclass's :meth:`predict_proba` (an abstract base: it is not instantiated itself)."""

    labels: list[str]
    threshold: float
    info: dict[str, Any]

    @abstractmethod
    def predict_proba(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Calibrated probabilities (n, intents)."""

    def predict(self, texts: Sequence[str] | str, *, top_k: int = 3,
                threshold: float | None = None, batch_size: int = 64
                ) -> list[IntentPrediction]:
        """Top intents of each text, answering out-of-scope below the threshold.

        Args:
            texts: one text or a list.
            top_k: how many intents to list per text (capped at the number of intents).
            threshold: override the saved threshold (0 never answers out-of-scope).
            batch_size: texts per forward pass.

        Returns:
            One :class:`IntentPrediction` per text, in input order.

        Raises:
            ValueError: an empty list or text, ``top_k < 1``, a threshold outside [0, 1].
            TypeError: a non-string item.
        """
        texts = [texts] if isinstance(texts, str) else texts
        t = check_answer_options(top_k, self.threshold if threshold is None else threshold)
        probs = self.predict_proba(texts, batch_size=batch_size)
        return answers_from_probs(texts, probs, self.labels, top_k=top_k, threshold=t)


class CalibratedClassifier(ProbabilityClassifier):
    """A classifier with raw :meth:`logits` and a softmax ``temperature`` (calibration):
    :meth:`predict_proba` is ``softmax(logits / temperature)`` (abstract: subclasses give
    :meth:`logits`)."""

    temperature: float

    def _set_calibration(self, labels: Sequence[str], temperature: float,
                         threshold: float, info: dict[str, Any] | None) -> None:
        """Check and set ``labels`` (unique, as strings), ``temperature`` (> 0),
        ``threshold`` (in [0, 1]) and ``info``; ValueError otherwise."""
        labels = [str(x) for x in labels]
        if len(set(labels)) != len(labels):
            raise ValueError("intent labels must be unique")
        if not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        self.labels = labels
        self.temperature = float(temperature)
        self.threshold = float(threshold)
        self.info = dict(info or {})

    @abstractmethod
    def logits(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Raw (uncalibrated) logits (n, intents) as float64."""

    def predict_proba(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Calibrated probabilities (n, intents)."""
        return calibrated_probs(self.logits(texts, batch_size=batch_size), self.temperature)


class IntentClassifier(CalibratedClassifier):
    """A classifier model with its tokenizer, intent names, temperature and threshold.

    Args:
        model: an encoder classifier or BiLSTM classifier (``forward(input_ids,
            attention_mask)`` -> ``{"logits"}``).
        tokenizer: the tokenizer whose ids the model reads.
        labels: intent names, index = class id.
        temperature: logits are divided by it before the softmax (calibration).
        threshold: calibrated top probability below which the answer is out-of-scope
            (0 disables it).
        max_length: longest input in tokens (special tokens included); longer texts are
            truncated.
        info: free-form training summary stored in ``intent.json``.

    Raises:
        ValueError: labels that do not match the model's output size, duplicate labels,
            a non-positive temperature or a threshold outside [0, 1].
    """

    def __init__(self, model: nn.Module, tokenizer: Tokenizer, labels: Sequence[str], *,
                 temperature: float = 1.0, threshold: float = 0.0, max_length: int = 128,
                 info: dict[str, Any] | None = None) -> None:
        self._set_calibration(labels, temperature, threshold, info)
        head = _output_size(model)
        if head is not None and head != len(self.labels):
            raise ValueError(f"the model predicts {head} classes but {len(self.labels)} labels "
                             f"were given")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_length = int(max_length)

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

    # -- persistence -------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """Write model, tokenizer and ``intent.json`` into ``directory`` (created).

        ``intent.json`` is written last and atomically, so a directory that has it is
        complete.
        """
        directory = Path(directory)
        save_pretrained(self.model, self.tokenizer, directory)
        meta = {"format": "headwise-intent", "version": 1, "labels": self.labels,
                "temperature": self.temperature, "threshold": self.threshold,
                "max_length": self.max_length, "info": self.info}
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
            for marker, what in (("tfidf.json", "a TF-IDF classifier"),
                                 ("ensemble.json", "an ensemble")):
                if (directory / marker).is_file():
                    raise FileNotFoundError(
                        f"{directory} holds {what}, not a network: load it with "
                        f"headwise.intent.ensemble.load_classifier (`headwise predict`, "
                        f"`eval` and `serve` take it; ONNX export needs a network)")
            raise FileNotFoundError(f"{directory} has no {INTENT_FILE}: it is not an intent "
                                    f"classifier saved by `headwise train` (or the save was "
                                    f"interrupted)")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            labels = meta["labels"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{meta_path} is not a valid intent file: {e}") from e
        model, tokenizer = from_pretrained(directory)
        return cls(model, tokenizer, labels, temperature=meta.get("temperature", 1.0),
                   threshold=meta.get("threshold", 0.0), max_length=meta.get("max_length", 128),
                   info=meta.get("info"))

    def __repr__(self) -> str:
        return (f"IntentClassifier({type(self.model).__name__}, {len(self.labels)} intents, "
                f"T={self.temperature:.3g}, threshold={self.threshold:.3g})")


def check_answer_options(top_k: int, threshold: float) -> float:
    """The threshold as a float, after checking ``top_k >= 1`` and ``0 <= threshold <= 1``.

    Raises:
        ValueError: either out of range.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    t = float(threshold)
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {t}")
    return t


def answers_from_probs(texts: Sequence[str], probs: np.ndarray, labels: Sequence[str], *,
                       top_k: int, threshold: float) -> list[IntentPrediction]:
    """One :class:`IntentPrediction` per text from its calibrated probabilities (n, intents):
    the ``top_k`` intents best first, out-of-scope when the best is below ``threshold``."""
    k = min(top_k, len(labels))
    answers = []
    for text, p in zip(texts, probs, strict=True):
        best = np.argsort(-p, kind="stable")[:k]
        conf = float(p[best[0]])
        oos = conf < threshold
        answers.append(IntentPrediction(
            text=text, intent=OUT_OF_SCOPE if oos else labels[best[0]], confidence=conf,
            top_k=[(labels[j], float(p[j])) for j in best], out_of_scope=oos))
    return answers


def _output_size(model: nn.Module) -> int | None:
    head = getattr(model, "classifier", None)
    return head.out_features if isinstance(head, nn.Linear) else None


def check_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list, checked: not empty, every item a non-blank string.

    Raises:
        ValueError: no texts, or a blank text; TypeError: a non-string item.
    """
    texts = list(texts)
    if not texts:
        raise ValueError("no texts given")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, not str")
        if not t.strip():
            raise ValueError(f"texts[{i}] is empty")
    return texts
