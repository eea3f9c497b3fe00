"""How fast a classifier answers: single-query latency and batched throughput, measured
on its ``predict`` or on a predictor's answers (what ``headwise demo`` and the benchmarks
report beside accuracy, :mod:`headwise.intent.evaluation`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from headwise.intent.classifier import IntentClassifier
from headwise.intent.inference.predictor import Predictor

__all__ = ["measure_latency"]


@torch.inference_mode()
def measure_latency(model: IntentClassifier | Predictor, texts: Sequence[str], *,
                    queries: int = 200, batch_size: int = 32, batches: int = 20,
                    warmup: int = 10) -> dict[str, float]:
    """Single-query latency and batched throughput of a classifier's ``predict`` or of a
    predictor's answers.

    Single queries cycle through ``texts`` one at a time (tokenisation, forward,
    softmax and top-k included, as a service would run them). Throughput runs
    ``batches`` batches of ``batch_size`` texts.

    Args:
        model: a classifier (its ``predict``: the PyTorch path) or a
            :class:`~headwise.intent.inference.predictor.Predictor` (from
            :func:`~headwise.intent.inference.load.load_predictor`: the runtime
            ``headwise serve`` runs; its ``max_rows`` caps the rows of one forward pass).
        texts: the queries.
        queries: single queries timed.
        batch_size: texts per timed batch.
        batches: batches timed.
        warmup: untimed single queries first.

    Returns:
        ``{"p50_ms", "p99_ms", "mean_ms", "throughput_per_s", "batch_size",
        "queries"}``.

    Raises:
        ValueError: no texts.
    """
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError("measure_latency needs texts")
    if isinstance(model, Predictor):
        predict = model.predictions
    else:
        def predict(chunk: str | list[str]) -> Any:
            return model.predict(chunk, batch_size=batch_size)
    for i in range(warmup):
        predict(texts[i % len(texts)])
    times = []
    for i in range(queries):
        start = time.perf_counter()
        predict(texts[i % len(texts)])
        times.append((time.perf_counter() - start) * 1e3)
    per_batch = []
    for b in range(batches):
        chunk = [texts[(b * batch_size + j) % len(texts)] for j in range(batch_size)]
        start = time.perf_counter()
        predict(chunk)
        per_batch.append(time.perf_counter() - start)
    return {"p50_ms": statistics.median(times), "p99_ms": float(np.percentile(times, 99)),
            "mean_ms": statistics.fmean(times),
            "throughput_per_s": batch_size / statistics.median(per_batch),
            "batch_size": batch_size, "queries": queries}
