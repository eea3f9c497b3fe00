"""The TF-IDF + linear model floor of the intent benchmark (scikit-learn).

The configurations of ``../shared/data/README.md``'s reference points:

* English (BANKING77): word 1-2-grams + character 2-5-grams (within word boundaries),
  sublinear TF, LinearSVC — measured there at 91.2 % accuracy;
* Chinese (DataCLUE CIC): character 1-3-grams, logistic regression — measured there at
  macro-F1 75.2 %.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np


def build_floor(language: str) -> Any:
    """The scikit-learn pipeline for ``"en"`` or ``"zh"`` (features: the ones label cleaning
    uses, ``headwise.intent.training.cleaning.tfidf_features``)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import LinearSVC

    from headwise.intent.training.cleaning import tfidf_features

    if language == "zh":
        return make_pipeline(tfidf_features(True), LogisticRegression(C=10.0, max_iter=2000))
    return make_pipeline(tfidf_features(False), LinearSVC(C=1.0))


def run_floor(language: str, train: tuple[Sequence[str], Sequence[str]],
              test: tuple[Sequence[str], Sequence[str]], *, queries: int = 200,
              batch_size: int = 32, batches: int = 20) -> dict[str, Any]:
    """Fit on train, score on test, and time single queries and batches."""
    from sklearn.metrics import accuracy_score, f1_score

    model = build_floor(language)
    start = time.perf_counter()
    model.fit(list(train[0]), list(train[1]))
    fit_s = time.perf_counter() - start
    texts, gold = list(test[0]), list(test[1])
    pred = model.predict(texts)
    times = []
    for i in range(queries):
        t0 = time.perf_counter()
        model.predict([texts[i % len(texts)]])
        times.append((time.perf_counter() - t0) * 1e3)
    per_batch = []
    for b in range(batches):
        chunk = [texts[(b * batch_size + j) % len(texts)] for j in range(batch_size)]
        t0 = time.perf_counter()
        model.predict(chunk)
        per_batch.append(time.perf_counter() - t0)
    return {"accuracy": float(accuracy_score(gold, pred)),
            # per test row, 1 when right: paired intervals (benchmarks/_verdicts.py)
            "test_correct": "".join("1" if p == g else "0" for p, g in zip(pred, gold,
                                                                            strict=True)),
            "macro_f1": float(f1_score(gold, pred, average="macro", zero_division=0)),
            "train_seconds": fit_s, "parameters": None,
            "latency": {"p50_ms": float(np.median(times)),
                        "p99_ms": float(np.percentile(times, 99)),
                        "throughput_per_s": batch_size / float(np.median(per_batch)),
                        "batch_size": batch_size, "queries": queries}}
