"""The FastAPI app of the intent service.

Endpoints: ``POST /v1/predict`` (top-k intents of one or many texts), ``POST /v1/explain``
(per-head attention and rollout of one text), ``GET /healthz`` (the process answers, with
the model and runtime it serves), ``GET /readyz`` (the model is loaded and warmed up),
``GET /metrics`` (Prometheus), ``GET /openapi.json`` (the schema, with this service's
limits on texts), and ``GET /docs`` and ``/redoc``, its pages, whose scripts are served
from the package ``fastapi-offline`` (no CDN: they work offline; without that package
there are no pages, and ``/openapi.json`` is the schema). Both text endpoints take
``text`` (one text) or ``texts`` (one text or a list). ``POST /admin/reload`` reads the
API key files again and swaps in the model (its directory read again, or a new one) once
it is loaded and warmed up beside the one in use; SIGHUP does the same
(:meth:`ServiceState.reload`).

With API keys (``api_key_file``, :mod:`headwise.serve.access`), every path but
``/healthz`` and ``/readyz`` (and ``/metrics`` when open) needs a key, or is answered 401;
over a key's rate limit 429 with ``Retry-After``; ``/admin/*`` is 403 without keys.

For a compound (multi-label + slots) classifier, ``/v1/predict`` takes
:class:`~headwise.serve.schemas.CompoundPredictRequest` (``threshold`` and
``at_least_one`` overrides) and answers every predicted intent and the slot spans with
their values (:class:`~headwise.serve.schemas.CompoundPredictResponse`); the OpenAPI
schema shows the kind being served. ``/v1/explain`` refuses a compound classifier (409).

Bad input is answered with a 4xx and a JSON ``{"error": {status, type, message}}``:
400 malformed JSON or invalid UTF-8, 413 an oversized body, 415 a body that is not JSON,
422 wrong types, unknown fields, both or neither of ``text`` and ``texts``, empty texts,
too many texts, a text over the character limit (or over the token limit under the
``reject`` policy), 409 ``/v1/explain`` on a model without attention heads or on a
compound classifier, 503 before the model is ready or while shutting down; 404 an unknown
path, 405 a method the path does not take (``PUT /healthz``: the body checks apply only
to the endpoints that read a body).
Shutting down (SIGINT/SIGTERM under uvicorn) closes the listening socket at once (new
connections are refused), closes idle keep-alive connections, lets requests in flight
finish (answered with ``Connection: close``, for up to the graceful timeout), then drains
the batcher.

A well-formed ``/v1/predict`` request is answered ahead of FastAPI's per-request machinery
(:mod:`headwise.serve.fastpath`) by the same function as the endpoint; every other request,
bad ones included, goes through FastAPI, so answers and errors are the same either way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import importlib.util
import inspect
import logging
import os
import re
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from headwise.serve.access import ADMIN_PREFIX, OPEN_PATHS, AccessGuard
from headwise.serve.auth import ApiKeys, KeyFileError
from headwise.serve.batching import BatcherClosed, MicroBatcher
from headwise.serve.config import CONFIG_ENV, ServeConfig
from headwise.serve.engine import EncodedText, LongTextError
from headwise.serve.explain import explain_text
from headwise.serve.fastpath import FastRoute
from headwise.serve.metrics import ServeMetrics
from headwise.serve.middleware import BodyGuard, RequestMetrics, error_payload
from headwise.serve.predict_api import PredictApi, api_for
from headwise.serve.ratelimit import RateLimiter
from headwise.serve.schemas import (
    CompoundPredictRequest,
    ErrorResponse,
    ExplainRequest,
    ExplainResponse,
    Health,
    PredictRequest,
    ReloadRequest,
    ReloadResponse,
    declare_limits,
)
from headwise.serve.served import ServedModel
from headwise.serve.startup import Engine, load_engine

log = logging.getLogger("headwise.serve")
ENDPOINTS = ("/v1/predict", "/v1/explain", "/healthz", "/readyz", "/metrics",
             "/admin/reload")
_UNION_TAG = re.compile(r"str|int|float|bool|none|list\[.*\]|dict\[.*\]")
#: 401 and 429 come from the access guard, when the service has API keys
_ERRORS = {code: {"model": ErrorResponse} for code in (400, 401, 409, 413, 415, 422, 429,
                                                      503)}
#: the refusals of the access guard, declared on the other endpoints it guards
_ACCESS_ERRORS = {code: {"model": ErrorResponse} for code in (401, 429)}
#: the endpoints that read a request body (the body guard checks only these)
BODY_ROUTES = (("POST", "/v1/predict"), ("POST", "/v1/explain"), ("POST", "/admin/reload"))
#: those whose body may be left out
OPTIONAL_BODY_ROUTES = (("POST", "/admin/reload"),)
#: the documentation pages' files, served at /docs/assets/NAME (from fastapi-offline)
DOCS_ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def docs_assets() -> Path | None:
    """The folder holding :data:`DOCS_ASSETS`: the ``static`` folder of the package
    ``fastapi-offline`` (a dependency of headwise), or None when it is not installed."""
    spec = importlib.util.find_spec("fastapi_offline")
    for root in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(root) / "static"
        if all((folder / name).is_file() for name in DOCS_ASSETS):
            return folder
    return None


def docs_available() -> bool:
    """Whether the service has its ``/docs`` and ``/redoc`` pages (:func:`docs_assets`)."""
    return docs_assets() is not None


class InputError(Exception):
    """A request the service refuses, with its status and message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def input_error_response(exc: InputError) -> JSONResponse:
    """The answer to a refused request: its status, the error body, and ``Retry-After``
    on a 503."""
    headers = {"Retry-After": "1"} if exc.status == 503 else None
    return JSONResponse(error_payload(exc.status, exc.kind, exc.message),
                        status_code=exc.status, headers=headers)


def json_response(model: BaseModel) -> Response:
    """A response model as JSON, serialised as FastAPI serialises a ``response_model``
    (so an endpoint can hand over the finished answer, skipping FastAPI's re-validation)."""
    return Response(model.model_dump_json(by_alias=True), media_type="application/json")


class ServiceState:
    """What the endpoints share: the served model (swapped whole on a reload), metrics,
    readiness, the API keys and the rate limit.

    Args:
        engine: the engine of the model to serve first.
        config: the settings.

    Raises:
        KeyFileError, OSError: a key file that cannot be used
            (:class:`~headwise.serve.auth.ApiKeys`).
    """

    def __init__(self, engine: Engine, config: ServeConfig) -> None:
        self.config = config
        self.metrics = ServeMetrics()
        self.served = ServedModel(engine, config, on_batch=self.metrics.observe_batch)
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
    def engine(self) -> Engine:
        return self.served.engine

    @property
    def batcher(self) -> MicroBatcher[EncodedText, Any]:
        return self.served.batcher

    @property
    def api(self) -> PredictApi:
        """What ``/v1/predict`` takes and answers for the served engine's kind."""
        return self.served.api

    @property
    def model_name(self) -> str:
        return self.served.name

    @property
    def has_attention(self) -> bool:
        return self.served.has_attention

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
            engine's :meth:`run` result per text.

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
            items = served.engine.encode(texts)
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
                              runtime=served.engine.runtime.name,
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
            engine = await asyncio.to_thread(
                load_engine, config, report=lambda line: log.warning("reload: %s", line))
            api = api_for(engine)
            if api is not old.api:
                raise ValueError(f"it holds {api.kind} classifier and the "
                                 f"service serves {old.api.kind} one, whose requests and "
                                 f"answers differ; start a new service for it")
            new = ServedModel(engine, config, on_batch=self.metrics.observe_batch,
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
        self.served = new  # the swap: requests from now on take the new model
        self.config = config
        self.metrics.count_reload("model", ok=True)
        self.metrics.generation.set(new.generation)
        log.info("reloaded the model: serving %s (%s, %d intents, runtime %s, generation "
                 "%d) instead of %s, loaded and warmed up in %.2f s", new.name, target,
                 len(engine.labels), engine.runtime.name, new.generation, old.name, seconds)
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


def _validation_message(errors: list[dict]) -> tuple[int, str, str, list[dict]]:
    details = [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")),
                "type": str(e.get("type", ""))} for e in errors]
    for e in errors:
        if e.get("type") == "json_invalid":
            ctx = e.get("ctx") or {}
            return 400, "malformed_json", f"request body is not valid JSON: " \
                f"{ctx.get('error', e.get('msg'))} (at character {e.get('loc', [0, 0])[-1]})", \
                details
    merged: dict[str, list[str]] = {}
    for d in details:
        # a union's branches add the branch type to the location ("texts.list[str].0"),
        # after the field's name (which is kept whatever it is: an unknown field "str")
        loc = d["loc"][1:2] + [p for p in d["loc"][2:] if not _UNION_TAG.fullmatch(p)] \
            if d["loc"][:1] == ["body"] else d["loc"]
        msgs = merged.setdefault(".".join(loc) or "body", [])
        if d["msg"] not in msgs:
            msgs.append(d["msg"])
    parts = [f"{loc}: {' or '.join(msgs)}" for loc, msgs in list(merged.items())[:5]]
    more = f" (and {len(merged) - 5} more)" if len(merged) > 5 else ""
    return 422, "validation_error", "; ".join(parts) + more, details


def create_app(config: ServeConfig, engine: Engine | None = None) -> FastAPI:
    """The service's ASGI app.

    Args:
        config: the settings.
        engine: an inference engine already loaded (default: :func:`load_engine`); a
            :class:`CompoundEngine` makes ``/v1/predict`` take and answer the compound
            schemas; a ``ProbabilityEngine`` serves a TF-IDF model or an ensemble.

    Returns:
        A FastAPI app wrapped in the metrics, access (API keys, rate limit) and body-guard
        middleware; its lifespan starts the batcher and warms the model up (and, with
        ``sighup_reload``, reloads on SIGHUP), and on shutdown drains the batcher.

    Raises:
        FileNotFoundError, ValueError: the model cannot be served (see :func:`load_engine`),
            or a key file cannot be used (``KeyFileError``, a ValueError).
    """
    state = ServiceState(engine if engine is not None else load_engine(config), config)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.batcher.start()
        warm = asyncio.create_task(state.warm_up())
        hup = _catch_sighup(state) if config.sighup_reload else False
        try:
            yield
        finally:
            if hup:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            state.stopping = True
            state.ready = False
            state.metrics.ready.set(0)
            await asyncio.gather(warm, *state._signal_tasks, return_exceptions=True)
            await state.batcher.stop()

    api = state.api  # the kind of the engine served (a reload keeps it)
    app = FastAPI(title="headwise intent service", version="1", lifespan=lifespan,
                  description=api.about, docs_url=None, redoc_url=None)
    app.state.serve = state
    _add_docs(app)
    generate_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:  # FastAPI's, once, with this service's limits
            declare_limits(generate_openapi(), max_texts=config.max_texts,
                           max_text_chars=config.max_text_chars)
            _declare_security(app.openapi_schema, state, config)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, kind, message, details = _validation_message(list(exc.errors()))
        return JSONResponse(error_payload(status, kind, message, details), status_code=status)

    @app.exception_handler(InputError)
    async def on_input(request: Request, exc: InputError) -> JSONResponse:
        return input_error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(error_payload(exc.status_code, kind, str(exc.detail)),
                            status_code=exc.status_code, headers=exc.headers)

    # /v1/predict is answered by answer_predict, from the FastAPI endpoint (which also
    # gives the OpenAPI schema) or, for a well-formed request, from the fast path
    request_model: type[BaseModel] = api.request
    response_model: type[BaseModel] = api.response

    async def answer_predict(body: PredictRequest | CompoundPredictRequest) -> Response:
        name, field = body.given()
        try:
            served, texts, items, rows = await state.infer(field, name)
        except InputError as e:
            return input_error_response(e)
        answers = served.api.answer(served.engine, body, texts, items, rows,
                                    top_k=body.top_k or config.top_k)
        return json_response(response_model(model=served.name,
                                            runtime=served.engine.runtime.name,
                                            predictions=answers))

    async def predict(body: BaseModel) -> Response:
        return await answer_predict(body)

    # the body's model is the engine kind's, which FastAPI reads from the signature
    predict.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                           annotation=request_model)], return_annotation=Response)
    predict.__name__ = api.operation
    app.post("/v1/predict", response_model=response_model, responses=_ERRORS,
             summary=api.summary)(predict)

    @app.post("/v1/explain", response_model=ExplainResponse, responses=_ERRORS,
              summary="Per-head attention and attention rollout of one text",
              description="Not offered for a compound (multi-label + slots) classifier: "
                          "answered with 409 'unsupported_model'.")
    async def explain(body: ExplainRequest) -> ExplainResponse:
        served = state.served  # one model for the whole answer, as /v1/predict
        if not served.api.explains:
            raise InputError(409, "unsupported_model", f"/v1/explain does not support "
                             f"{served.api.kind} classifier; use /v1/predict for its intents "
                             f"and slots")
        if not served.has_attention:
            clf = served.engine.classifier
            raise InputError(409, "no_attention", f"this model "
                             f"({type(getattr(clf, 'model', clf)).__name__}) has no "
                             f"attention heads to explain; /v1/explain needs a Transformer "
                             f"classifier")
        where, text = body.one_text()
        state.check_text(text, where)
        state.check_ready()
        try:
            ex = await served.batcher.run_in_thread(explain_text, served.engine.classifier,
                                                    text)
        except BatcherClosed:
            raise InputError(503, "stopping", "the service is shutting down") from None
        item = EncodedText(((0,) * min(ex.total_tokens, served.engine.max_length),),
                           ex.total_tokens, "truncated" if ex.truncated else None)
        prediction = served.engine.answer([text], [item], ex.logits[None],
                                          top_k=config.top_k)[0]
        real = [i for i, t in enumerate(ex.tokens) if not t[3]] or list(range(len(ex.tokens)))
        return ExplainResponse(
            model=served.name, prediction=prediction,
            tokens=[{"token": t, "start": s, "end": e, "special": sp}
                    for t, s, e, sp in ex.tokens],
            num_layers=ex.attention.shape[0], num_heads=ex.attention.shape[1],
            attention=np.round(ex.attention.numpy().astype(np.float64), 6).tolist(),
            rollout={"cls": np.round(ex.rollout[0].numpy(), 6).tolist(),
                     "mean": np.round(ex.rollout[real].mean(0).numpy(), 6).tolist()})

    @app.get("/healthz", response_model=Health,
             summary="The process is up, and the model and runtime it serves")
    async def healthz() -> Health:
        return Health(status="ok", model=state.model_name, runtime=state.engine.runtime.name)

    @app.get("/readyz", response_model=Health, responses={503: {"model": Health}},
             summary="The model is loaded and warmed up")
    async def readyz() -> Response:
        if state.ready and not state.stopping:
            return JSONResponse(Health(status="ready", model=state.model_name,
                                       runtime=state.engine.runtime.name).model_dump())
        status = "stopping" if state.stopping else "starting"
        return JSONResponse(Health(status=status, model=state.model_name,
                                   runtime=state.engine.runtime.name).model_dump(),
                            status_code=503)

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response,
             responses={} if config.open_metrics else _ACCESS_ERRORS)
    async def metrics() -> Response:
        state.metrics.queue_depth.set(state.batcher.pending)
        return Response(state.metrics.render(), media_type=state.metrics.content_type)

    @app.post("/admin/reload", response_model=ReloadResponse,
              responses={**_ERRORS, 403: {"model": ErrorResponse}},
              summary="Reload the API keys and the model (or serve a new one)",
              description="Needs an admin key (the --admin-key-file keys, else the "
                          "--api-key-file ones; 403 when the service has no keys). The key "
                          "files are read again first, then the model is loaded and warmed "
                          "up beside the one in use and swapped in; requests in flight finish "
                          "on the old model, and every answer comes from one model. A model "
                          "or key file that cannot be used is answered 422 'reload_failed' "
                          "and what is in use keeps serving; 409 while another reload runs "
                          "or with several workers (send SIGHUP to the main process). "
                          "SIGHUP does the same as an empty body.")
    async def admin_reload(body: ReloadRequest | None = None) -> ReloadResponse:
        body = body or ReloadRequest()
        return await state.reload(body.model_dir, model=body.model, keys=body.keys)

    # the last added is outermost: metrics see every answer, the refusals of the access and
    # body guards too; the access guard answers before any body is read; the fast path sees
    # only requests both guards let through
    app.add_middleware(FastRoute, path="/v1/predict", request_model=request_model,
                       handler=answer_predict)
    app.add_middleware(BodyGuard, max_body_bytes=config.max_body_bytes, routes=BODY_ROUTES,
                       optional_body=OPTIONAL_BODY_ROUTES)
    app.add_middleware(AccessGuard, keys=state.keys, admin_keys=state.admin_keys,
                       limiter=state.limiter,
                       open_paths=OPEN_PATHS + (("/metrics",) if config.open_metrics else ()))
    app.add_middleware(RequestMetrics, metrics=state.metrics, endpoints=ENDPOINTS)
    return app


def _catch_sighup(state: ServiceState) -> bool:
    """Reload on SIGHUP (:meth:`ServiceState.on_sighup`); False when the event loop cannot
    take signals (not in the main thread, or no such signal), said in the log."""
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, state.on_sighup)
    except (AttributeError, NotImplementedError, RuntimeError, ValueError) as e:
        log.warning("SIGHUP will not reload the service (%s); use POST /admin/reload", e)
        return False
    return True


def _declare_security(openapi: dict[str, Any], state: ServiceState, config: ServeConfig
                      ) -> None:
    """Declare the API keys in an OpenAPI document: both ways of sending one, needed on
    every operation but the open ones (as :class:`AccessGuard` enforces)."""
    if state.keys is None:
        return
    openapi.setdefault("components", {})["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer",
                   "description": "Authorization: Bearer KEY"},
        "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}
    open_paths = set(OPEN_PATHS) | ({"/metrics"} if config.open_metrics else set())
    for path, operations in openapi.get("paths", {}).items():
        if path in open_paths:
            continue
        for operation in operations.values():
            if isinstance(operation, dict):
                operation["security"] = [{"bearer": []}, {"apiKey": []}]
                if path.startswith(ADMIN_PREFIX) and state.admin_keys is not None:
                    operation["description"] = (operation.get("description", "") +
                                                " Takes the admin keys only.").strip()


def _add_docs(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` with their scripts served from the package
    (:func:`docs_assets`), never from a CDN; none when the files are not installed."""
    folder = docs_assets()
    if folder is None:
        return
    title = f"{app.title} - docs"

    def asset(request: Request, name: str) -> str:
        return f"{request.scope.get('root_path', '').rstrip('/')}/docs/assets/{name}"

    def schema(request: Request) -> str:
        return f"{request.scope.get('root_path', '').rstrip('/')}{app.openapi_url}"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=schema(request), title=title,
                                   swagger_js_url=asset(request, "swagger-ui-bundle.js"),
                                   swagger_css_url=asset(request, "swagger-ui.css"),
                                   swagger_favicon_url=asset(request, "favicon.png"))

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(openapi_url=schema(request), title=title,
                              redoc_js_url=asset(request, "redoc.standalone.js"),
                              redoc_favicon_url=asset(request, "favicon.png"),
                              with_google_fonts=False)

    @app.get("/docs/assets/{name}", include_in_schema=False)
    async def docs_asset(name: str) -> Response:
        if name not in DOCS_ASSETS:
            raise StarletteHTTPException(404, f"no such file: /docs/assets/{name}")
        return FileResponse(folder / name, headers={"Cache-Control": "max-age=86400"})


def app_from_environment() -> FastAPI:
    """The app a uvicorn worker builds (``--workers N``): the config comes as JSON in the
    ``HEADWISE_SERVE_CONFIG`` environment variable."""
    text = os.environ.get(CONFIG_ENV)
    if not text:
        raise RuntimeError(f"{CONFIG_ENV} is not set; start the service with `headwise serve`")
    return create_app(ServeConfig.from_json(text))
