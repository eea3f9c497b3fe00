"""One loaded model as the service runs it: its predictor, its own micro-batcher, its name.

The service holds one :class:`ServedModel` at a time and swaps it whole on a reload
(:meth:`headwise.serve.state.ServiceState.reload`): the new one is loaded, started and warmed
up beside the old, then a single reference is replaced. A request takes the current
``ServedModel`` once, at its start, and encodes, batches and answers with that one only, so
its answer comes entirely from one model; its batcher runs only that model's batches, so a
gathered batch never mixes the two. The old one's batcher then finishes what was submitted
to it and stops.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from headwise.intent.inference.bucketing import EncodedText
from headwise.intent.inference.predictor import Predictor
from headwise.serve.batching import MicroBatcher
from headwise.serve.config import ServeConfig
from headwise.serve.predict_api import api_for

#: texts of several lengths run once before a model is reported ready (or swapped in)
WARMUP_TEXTS = ("hello", "a short warm-up sentence for the model",
                "a longer warm-up text " * 12)


class ServedModel:
    """A model, its micro-batcher and how the service names it.

    Args:
        predictor: the predictor that answers
            (:class:`~headwise.intent.inference.predictor.Predictor`).
        config: the settings it was loaded with (``model_dir``, ``model_name``, batching).
        on_batch: the batcher's per-batch callback (the metrics).
        generation: 1 for the model the service started with, one more per reload.
    """

    def __init__(self, predictor: Predictor, config: ServeConfig, *,
                 on_batch: Callable[[int, float], Any] | None = None,
                 generation: int = 1) -> None:
        self.predictor = predictor
        self.config = config
        self.generation = generation
        self.api = api_for(predictor)  # what /v1/predict takes and answers for it
        self.name = config.model_name or Path(config.model_dir or "model").name
        self.batcher: MicroBatcher[EncodedText, Any] = MicroBatcher(
            predictor.run, max_batch_size=config.max_batch_size,
            max_wait_s=config.max_wait_ms / 1000.0, batching=config.batching,
            on_batch=on_batch)

    async def start(self) -> None:
        """Start the batcher (its inference thread)."""
        await self.batcher.start()

    async def warm_up(self) -> None:
        """Run :data:`WARMUP_TEXTS` once on the inference thread (when the config says
        ``warmup``), so the first real request does not pay for lazy initialisation."""
        if self.config.warmup:
            await self.batcher.run_in_thread(self.predictor.warm_up, list(WARMUP_TEXTS))

    async def stop(self) -> None:
        """Finish everything submitted to the batcher, then stop it."""
        await self.batcher.stop()
