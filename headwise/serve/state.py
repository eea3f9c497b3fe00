"""What the service's endpoints share: the served model (swapped whole on a reload), its
metrics and readiness, the API keys and the rate limit (:class:`ServiceState`), and the
refusal every endpoint raises for a request it cannot answer (:class:`InputError`).

A reload (``POST /admin/reload``, SIGHUP) reads the key files again and loads the model
again, or a new one, beside the one in use; the new model is swapped in once it is loaded
and warmed up, and after a failure the old one keeps serving (:meth:`ServiceState.reload`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import os
import time
from typing import Any

from headwise.intent.inference.bucketing import EncodedText, LongTextError
from headwise.intent.inference.predictor import Predictor
from headwise.serve.auth import ApiKeys, KeyFileError
from headwise.serve.batching import BatcherClosed, MicroBatcher
from headwise.serve.config import ServeConfig
from headwise.serve.metrics import ServeMetrics
from headwise.serve.predict_api import PredictApi, api_for
from headwise.serve.ratelimit import RateLimiter
from headwise.serve.schemas import ReloadResponse
from headwise.serve.served import ServedModel
from headwise.serve.startup import load_served_predictor

__all__ = ["InputError", "ServiceState"]

log = logging.getLogger("headwise.serve")


class InputError(Exception):
    """A request the service refuses, with its status and message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


class ServiceState:
    """What the endpoints share: the served model (swapped whole on a reload), metrics,
    readiness, the API keys and the rate limit.

    Args:
        predictor: the predictor of the model to serve first.
        config: the settings.

    Raises:
        KeyFileError, OSError: a key file that cannot be used
            (:class:`~headwise.serve.auth.ApiKeys`).
    """

    def __init__(self, predictor: Predictor, config: ServeConfig) -> None:
        self.config = config
        self.metrics = ServeMetrics()
        self.served = ServedModel(predictor, config, on_batch=self.metrics.observe_batch)
        self.metrics.track_model(predictor.labels, predictor.decision_scores)
        self.ready = False
        self.stopping = False
        self.keys = ApiKeys(config.api_key_file) if config.api_key_file else None
        self.admin_keys = ApiKeys(config.admin_key_file) if config.admin_key_file else None
        self.limiter = RateLimiter(config.rate_limit, config.bucket_size) \
            if config.rate_limit is not None else None
        self.reloading = False
        #: set by a host that runs several copies of the app (Ray Serve's replicas): why
        #: ``/admin/reload`` cannot work there, answered with 409 instead of reloading one
        self.reload_refusal: str | None = None
        self._signal_tasks: set[asyncio.Task] = set()

    # the served model's parts, as they are now (a request takes ``served`` once instead)
    @property
    def predictor(self) -> Predictor:
        return self.served.predictor

    @property
    def batcher(self) -> MicroBatcher[EncodedText, Any]:
        return self.served.batcher

    @property
    def api(self) -> PredictApi:
        """What ``/v1/predict`` takes and answers for the served predictor's task."""
        return self.served.api

    @property
    def model_name(self) -> str:
        return self.served.name

    def check_ready(self) -> None:
        if self.stopping:
            raise InputError(503, "stopping", "the service is shutting down")
        if not self.ready:
            raise InputError(503, "not_ready", "the model is still warming up; retry shortly")

    def check_text(self, text: str, where: str) -> None:
        """Refuse empty, over-long or non-Unicode texts (422)."""
        if not text.strip():
            raise InputError(422, "empty_text", f"{where} is empty (or only whitespace)")
        limit = self.config.max_text_chars
        if len(text) > limit:
            raise InputError(422, "text_too_long", f"{where} has {len(text)} characters, over "
                             f"the limit of {limit}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InputError(422, "invalid_text", f"{where} holds an unpaired surrogate "
                             f"(\\u{ord(text[e.start]):04x} at character {e.start}), which "
                             f"is not valid Unicode") from None

    async def infer(self, field: str | list[str], name: str = "texts"
                    ) -> tuple[ServedModel, list[str], list[EncodedText], list]:
        """Check a request's texts, encode them and run them through the batcher of the
        model served when the request came (taken once: a reload meanwhile does not mix
        models in one answer).

        Args:
            field: the request's texts (one text or a list).
            name: the request field that held them (``text`` or ``texts``), for messages.

        Returns:
            ``(served, texts, encodings, results)``: the model that ran them, and its
            predictor's :meth:`run` result per text.

        Raises:
            InputError: too many texts, a bad text (422), a text over the token limit
                under ``reject`` (422), not ready or shutting down (503).
        """
        texts = [field] if isinstance(field, str) else list(field)
        if len(texts) > self.config.max_texts:
            raise InputError(422, "too_many_texts", f"{len(texts)} texts in one request, over "
                             f"the limit of {self.config.max_texts}")
        for i, text in enumerate(texts):
            self.check_text(text, name if isinstance(field, str) else f"{name}[{i}]")
        self.check_ready()
        # from here to the batcher's queue nothing awaits: a swap cannot come in between,
        # and the old model's batcher runs everything queued on it before it stops
        served = self.served
        try:
            items = served.predictor.encode(texts)
        except LongTextError as e:
            raise InputError(422, "text_too_long", str(e)) from None
        try:
            rows = await served.batcher.submit(items)
        except BatcherClosed:
            raise InputError(503, "stopping", "the service is shutting down") from None
        for item in items:
            self.metrics.count_text(item.policy)
        return served, texts, items, rows

    async def warm_up(self) -> None:
        try:
            await self.served.warm_up()
            if self.config.freeze_gc:  # see ServeConfig.freeze_gc
                gc.collect()
                gc.freeze()
            self.ready = True
            self.metrics.ready.set(1)
        except Exception:  # the service stays unready; /readyz keeps saying so
            log.exception("warm-up failed")

    # -- reloads ---------------------------------------------------------------------------
    async def reload(self, model_dir: str | None = None, *, model: bool = True,
                     keys: bool = True) -> ReloadResponse:
        """Read the key files again and load the model again (or a new one), swapping it
        in once it is loaded and warmed up; the model in use keeps serving meanwhile, and
        after a failure.

        Args:
            model_dir: a new model directory (default: the one being served).
            model: reload the model.
            keys: reload the key files (when the service has some).

        Returns:
            What is served now.

        Raises:
            InputError: 409 with several workers or replicas (one would reload, not the
                others; :attr:`reload_refusal`) or while another reload runs; 503 while
                shutting down or before the first model is ready; 422 a key file or model
                that cannot be used (what is in use is kept; the message says why).
        """
        if self.reload_refusal is not None:
            raise InputError(409, "reload_unsupported", self.reload_refusal)
        if self.config.workers > 1:
            raise InputError(409, "reload_unsupported", f"the service runs "
                             f"{self.config.workers} worker processes and this request "
                             f"reaches one of them; send SIGHUP to the main process "
                             f"(pid {os.getppid()}), which replaces the workers one by one, "
                             f"each loading {self.config.model_dir} and the key files again")
        if self.reloading:
            raise InputError(409, "reload_in_progress", "a reload is already in progress; "
                             "retry when it is done")
        self.check_ready()
        self.reloading = True
        try:
            if keys:
                self._reload_keys()
            load_seconds, previous = None, None
            if model:
                previous = self.served.name
                load_seconds = await self._reload_model(model_dir)
        finally:
            self.reloading = False
        served = self.served
        return ReloadResponse(model=served.name, model_dir=served.config.model_dir,
                              runtime=served.predictor.runtime.name,
                              generation=served.generation, reloaded_model=model,
                              previous_model=previous, load_seconds=load_seconds,
                              api_keys=None if self.keys is None else len(self.keys),
                              admin_keys=None if self.admin_keys is None else
                              len(self.admin_keys))

    def _reload_keys(self) -> None:
        for keys in (self.keys, self.admin_keys):
            if keys is None:
                continue
            try:
                n = keys.reload()
            except (KeyFileError, OSError) as e:
                self.metrics.count_reload("keys", ok=False)
                log.error("could not reload the API keys, keeping the %d in use: %s",
                          len(keys), e)
                raise InputError(422, "reload_failed", f"could not reload the API keys, "
                                 f"keeping the {len(keys)} in use: {e}") from None
            self.metrics.count_reload("keys", ok=True)
            log.info("reloaded %d API keys from %s", n, keys.path)

    async def _reload_model(self, model_dir: str | None) -> float:
        """Load, start and warm up the model beside the one in use, then swap; the
        seconds it took."""
        old = self.served
        target = model_dir or old.config.model_dir
        same = target == old.config.model_dir
        config = dataclasses.replace(old.config, model_dir=target,
                                     onnx_path=old.config.onnx_path if same else None,
                                     model_name=old.config.model_name if same else None)
        start = time.perf_counter()
        new: ServedModel | None = None
        try:
            predictor = await asyncio.to_thread(
                load_served_predictor, config, report=lambda line: log.warning("reload: %s", line))
            api = api_for(predictor)
            if api is not old.api:
                raise ValueError(f"it holds {api.described} classifier and the "
                                 f"service serves {old.api.described} one, whose requests and "
                                 f"answers differ; start a new service for it")
            new = ServedModel(predictor, config, on_batch=self.metrics.observe_batch,
                              generation=old.generation + 1)
            await new.start()
            await new.warm_up()
        except Exception as e:  # whatever keeps the new model from serving: keep the old
            if new is not None:
                await new.stop()
            self.metrics.count_reload("model", ok=False)
            reason = " ".join(str(e).split()) or type(e).__name__
            log.error("model reload failed, still serving %s: could not load %s: %s",
                      old.name, target, reason)
            raise InputError(422, "reload_failed", f"could not load {target}: {reason}; "
                             f"still serving {old.name}") from None
        seconds = time.perf_counter() - start
        self.metrics.track_model(predictor.labels, predictor.decision_scores)
        self.served = new  # the swap: requests from now on take the new model
        self.config = config
        self.metrics.count_reload("model", ok=True)
        self.metrics.generation.set(new.generation)
        log.info("reloaded the model: serving %s (%s, %d intents, runtime %s, generation "
                 "%d) instead of %s, loaded and warmed up in %.2f s", new.name, target,
                 len(predictor.labels), predictor.runtime.name, new.generation, old.name, seconds)
        await old.stop()  # runs what was queued on the old model, then ends its thread
        del old
        if self.config.freeze_gc:  # let the old model's cycles be collected, then refreeze
            await asyncio.sleep(0)  # requests answered by the old model finish first
            gc.unfreeze()
            gc.collect()
            gc.freeze()
        return seconds

    def on_sighup(self) -> None:
        """SIGHUP: reload the key files and the model from its directory (logged)."""
        if self.reloading:
            log.warning("SIGHUP ignored: a reload is already in progress")
            return
        log.info("SIGHUP: reloading the API keys and the model")

        async def reload() -> None:
            try:
                await self.reload()
            except InputError as e:  # failures are logged where they happen
                if e.kind != "reload_failed":
                    log.error("SIGHUP reload refused: %s", e.message)

        task = asyncio.ensure_future(reload())
        self._signal_tasks.add(task)
        task.add_done_callback(self._signal_tasks.discard)
