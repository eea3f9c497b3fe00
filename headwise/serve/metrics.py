"""Prometheus metrics of the intent service, on a registry of its own.

``GET /metrics`` serves :meth:`ServeMetrics.render` in Prometheus' text format. Each
uvicorn worker process keeps its own counters (scrape the workers one by one, or run one
worker per container).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from headwise.intent.prediction import OUT_OF_SCOPE

#: request latency buckets (seconds): fine below 100 ms, where the service should answer
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1,
                   0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: texts per forward batch
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServeMetrics:
    """Request counts, latency, batch sizes and queue depth.

    Metrics (prefix ``headwise_``): ``requests_total{endpoint,method,status}``,
    ``request_latency_seconds{endpoint}``, ``texts_total{long_text}``,
    ``batch_size`` (texts per forward batch), ``batch_latency_seconds``,
    ``queue_depth`` (texts waiting or running), ``ready`` (1 once warmed up),
    ``reloads_total{what,result}`` (``what``: ``model`` or ``keys``; ``result``: ``ok`` or
    ``failed``), ``model_generation`` (1 for the model served at start, one more per
    reload that swapped a model in), ``answers_total{intent}`` (``/v1/predict``'s answers
    by answered intent: each intent of a multi-label answer, ``out_of_scope`` once for a
    rejected text) and ``out_of_scope_total{score}`` (rejected texts by the score that
    decided: ``max_prob``, a detector's name, ``intent_threshold``).

    The answer counters' labels are bounded: the intents and decision scores of the models
    served (:meth:`track_model`), never a text; a value outside them is not counted. Each
    known label is exported from the start, at 0. A reload adds the new model's labels and
    keeps the old ones' series at their counts, since a counter never goes back within a
    process (an intent both models answer keeps counting on the same series).
    """

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("headwise_requests", "HTTP requests answered",
                                ["endpoint", "method", "status"], registry=r)
        self.latency = Histogram("headwise_request_latency_seconds",
                                 "time from request to response", ["endpoint"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.texts = Counter("headwise_texts", "texts classified, by long-text handling",
                             ["long_text"], registry=r)
        self.batch_size = Histogram("headwise_batch_size", "texts per forward batch",
                                    buckets=BATCH_BUCKETS, registry=r)
        self.batch_latency = Histogram("headwise_batch_latency_seconds",
                                       "inference time of one batch", buckets=LATENCY_BUCKETS,
                                       registry=r)
        self.queue_depth = Gauge("headwise_queue_depth", "texts waiting or running",
                                 registry=r)
        self.ready = Gauge("headwise_ready", "1 once the model is loaded and warmed up",
                           registry=r)
        self.reloads = Counter("headwise_reloads", "reloads of the model or the API keys",
                               ["what", "result"], registry=r)
        self.generation = Gauge("headwise_model_generation", "1 for the model served at "
                                "start, one more per reload that swapped a model in",
                                registry=r)
        self.generation.set(1)
        self.answers = Counter("headwise_answers", "answers of /v1/predict by answered "
                               "intent (out_of_scope: a rejected text)", ["intent"], registry=r)
        self.out_of_scope = Counter("headwise_out_of_scope", "texts answered out of scope, "
                                    "by the score that decided", ["score"], registry=r)
        self._intents: set[str] = set()
        self._scores: set[str] = set()
        # labelled children by label values: ``labels()`` validates and locks on each call
        self._children: dict[tuple, Any] = {}

    def _child(self, metric: Counter | Histogram, *values: str) -> Any:
        key = (metric, *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def observe_request(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        """Count one answered request and its latency."""
        self._child(self.requests, endpoint, method, str(status)).inc()
        self._child(self.latency, endpoint).observe(seconds)

    def count_text(self, long_text: str | None) -> None:
        """Count one classified text by its long-text handling (None: within the limit)."""
        self._child(self.texts, long_text or "none").inc()

    def observe_batch(self, size: int, seconds: float) -> None:
        """Record one forward batch."""
        self.batch_size.observe(size)
        self.batch_latency.observe(seconds)

    def count_reload(self, what: str, ok: bool) -> None:
        """Count one reload of ``what`` (``model`` or ``keys``), done or failed."""
        self._child(self.reloads, what, "ok" if ok else "failed").inc()

    def track_model(self, intents: Iterable[str], scores: Iterable[str]) -> None:
        """Add a served model's intents (and ``out_of_scope``) and decision scores to the
        answer counters' label sets, each at 0 until answered; labels already known keep
        their counts."""
        for intent in [*intents, OUT_OF_SCOPE]:
            if intent not in self._intents:
                self._intents.add(intent)
                self._child(self.answers, intent)
        for score in scores:
            if score not in self._scores:
                self._scores.add(score)
                self._child(self.out_of_scope, score)

    def count_answers(self, answers: Sequence[Mapping[str, Any]]) -> None:
        """Count answers (:meth:`Prediction.to_dict
        <headwise.intent.prediction.Prediction.to_dict>` records): each answered intent,
        or ``out_of_scope`` and the deciding score for a rejected text. Labels outside
        those of :meth:`track_model` are not counted (they would make the label set
        unbounded)."""
        for answer in answers:
            if answer["out_of_scope"]:
                if OUT_OF_SCOPE in self._intents:
                    self._child(self.answers, OUT_OF_SCOPE).inc()
                decision = answer.get("decision")
                if decision is not None and decision["score"] in self._scores:
                    self._child(self.out_of_scope, decision["score"]).inc()
                continue
            for entry in answer["intents"]:
                if entry["intent"] in self._intents:
                    self._child(self.answers, entry["intent"]).inc()

    def render(self) -> bytes:
        """All metrics in Prometheus' text exposition format."""
        return generate_latest(self.registry)
