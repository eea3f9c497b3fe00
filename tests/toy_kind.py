"""A classifier kind that headwise does not ship, registered by tests/intent/test_kinds.py
to check that ``predict``, ``eval``, ``calibrate`` and ``serve`` take a new kind with no
other change (importable from every test folder: tests/conftest.py puts this folder on
sys.path)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from headwise.intent.answering import ProbabilityClassifier
from headwise.intent.kinds import ModelKind

MARKER = "keywords.json"
FORMAT = "headwise-test-keywords"


class KeywordClassifier(ProbabilityClassifier):
    """Each intent has keywords; a text's probabilities are the softmax of how many of each
    intent's keywords it contains."""

    def __init__(self, keywords: dict[str, list[str]], *, threshold: float = 0.0,
                 info: dict[str, Any] | None = None) -> None:
        self.keywords = {k: list(v) for k, v in keywords.items()}
        self.labels = sorted(self.keywords)
        self.threshold = threshold
        self.info = dict(info or {})

    def predict_proba(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        counts = np.array([[sum(w in t.lower().split() for w in self.keywords[y])
                            for y in self.labels] for t in texts], dtype=np.float64)
        z = np.exp(2.0 * (counts - counts.max(axis=1, keepdims=True)))
        return z / z.sum(axis=1, keepdims=True)

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / MARKER).write_text(json.dumps({
            "format": FORMAT, "keywords": self.keywords, "threshold": self.threshold,
            "info": self.info}))
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> KeywordClassifier:
        meta = json.loads((Path(directory) / MARKER).read_text())
        return cls(meta["keywords"], threshold=meta["threshold"], info=meta["info"])


KIND = ModelKind("keywords", MARKER, FORMAT, "toy_kind:KeywordClassifier",
                 "a keyword classifier (a test kind)",
                 missing={"onnx": "it has no network", "chunk": "it has no network",
                          "reject": "it has no network",
                          "explain": "it has no network or features to attribute to",
                          "heads": "it has no heads",
                          "soup": "it has no weights", "teacher": "not tested"})
