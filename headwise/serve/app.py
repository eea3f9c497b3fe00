"""The FastAPI app of the intent service.

Endpoints: ``POST /v1/predict`` (top-k intents of one or many texts), ``POST /v1/explain``
(per-head attention and rollout of one text), ``GET /healthz`` (the process answers, with
the model and runtime it serves), ``GET /readyz`` (the model is loaded and warmed up),
``GET /metrics`` (Prometheus), ``GET /openapi.json`` (the schema, with this service's
limits on texts), and ``GET /docs`` and ``/redoc``, its pages, whose scripts are served
from the package ``fastapi-offline`` (no CDN: they work offline; without that package
there are no pages, and ``/openapi.json`` is the schema). Both text endpoints take
``text`` (one text) or ``texts`` (one text or a list).

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
Shutting down (SIGINT/SIGTERM under uvicorn) stops accepting connections, lets requests
in flight finish, then drains the batcher.

A well-formed ``/v1/predict`` request is answered ahead of FastAPI's per-request machinery
(:mod:`headwise.serve.fastpath`) by the same function as the endpoint; every other request,
bad ones included, goes through FastAPI, so answers and errors are the same either way.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import logging
import os
import re
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

from headwise.serve.batching import BatcherClosed, MicroBatcher
from headwise.serve.compound_engine import CompoundEngine
from headwise.serve.config import CONFIG_ENV, ServeConfig
from headwise.serve.engine import EncodedText, LongTextError
from headwise.serve.explain import NoAttentionError, attention_modules, explain_text
from headwise.serve.fastpath import FastRoute
from headwise.serve.metrics import ServeMetrics
from headwise.serve.middleware import BodyGuard, RequestMetrics, error_payload
from headwise.serve.schemas import (
    CompoundPredictRequest,
    CompoundPredictResponse,
    ErrorResponse,
    ExplainRequest,
    ExplainResponse,
    Health,
    PredictRequest,
    PredictResponse,
    declare_limits,
)
from headwise.serve.startup import Engine, load_engine

log = logging.getLogger("headwise.serve")
ENDPOINTS = ("/v1/predict", "/v1/explain", "/healthz", "/readyz", "/metrics")
#: texts of several lengths run once before the service reports ready
WARMUP_TEXTS = ("hello", "a short warm-up sentence for the model",
                "a longer warm-up text " * 12)
_UNION_TAG = re.compile(r"str|int|float|bool|none|list\[.*\]|dict\[.*\]")
_ERRORS = {code: {"model": ErrorResponse} for code in (400, 409, 413, 415, 422, 503)}
#: the endpoints that read a request body (the body guard checks only these)
BODY_ROUTES = (("POST", "/v1/predict"), ("POST", "/v1/explain"))
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
    """What the endpoints share: engine, batcher, metrics, readiness."""

    def __init__(self, engine: Engine, config: ServeConfig) -> None:
        self.engine = engine
        self.config = config
        self.compound = isinstance(engine, CompoundEngine)
        self.metrics = ServeMetrics()
        self.batcher: MicroBatcher[EncodedText, Any] = MicroBatcher(
            engine.run, max_batch_size=config.max_batch_size,
            max_wait_s=config.max_wait_ms / 1000.0, batching=config.batching,
            on_batch=self.metrics.observe_batch)
        self.ready = False
        self.stopping = False
        self.model_name = config.model_name or Path(config.model_dir or "model").name
        model = getattr(engine.classifier, "model", None)  # None: a TF-IDF model, an ensemble
        try:
            attention_modules(model)
            self.has_attention = True
        except NoAttentionError:
            self.has_attention = False

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
                    ) -> tuple[list[str], list[EncodedText], list]:
        """Check a request's texts, encode them and run them through the batcher.

        Args:
            field: the request's texts (one text or a list).
            name: the request field that held them (``text`` or ``texts``), for messages.

        Returns:
            ``(texts, encodings, results)``: the engine's :meth:`run` result per text.

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
        try:
            items = self.engine.encode(texts)
        except LongTextError as e:
            raise InputError(422, "text_too_long", str(e)) from None
        try:
            rows = await self.batcher.submit(items)
        except BatcherClosed:
            raise InputError(503, "stopping", "the service is shutting down") from None
        for item in items:
            self.metrics.count_text(item.policy)
        return texts, items, rows

    async def warm_up(self) -> None:
        try:
            if self.config.warmup:
                await self.batcher.run_in_thread(self.engine.warm_up, list(WARMUP_TEXTS))
            if self.config.freeze_gc:  # see ServeConfig.freeze_gc
                gc.collect()
                gc.freeze()
            self.ready = True
            self.metrics.ready.set(1)
        except Exception:  # the service stays unready; /readyz keeps saying so
            log.exception("warm-up failed")


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
        # a union's branches add the branch type to the location ("texts.list[str].0")
        loc = [p for p in d["loc"][1:] if not _UNION_TAG.fullmatch(p)] if d["loc"][:1] == \
            ["body"] else d["loc"]
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
        A FastAPI app wrapped in the metrics and body-guard middleware; its lifespan
        starts the batcher and warms the model up, and on shutdown drains the batcher.

    Raises:
        FileNotFoundError, ValueError: the model cannot be served (see :func:`load_engine`).
    """
    state = ServiceState(engine if engine is not None else load_engine(config), config)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.batcher.start()
        warm = asyncio.create_task(state.warm_up())
        try:
            yield
        finally:
            state.stopping = True
            state.ready = False
            state.metrics.ready.set(0)
            await asyncio.gather(warm, return_exceptions=True)
            await state.batcher.stop()

    about = ("Compound intent recognition: every intent a text expresses, with slot spans "
             "and normalised values." if state.compound else
             "Intent recognition with calibrated confidence, out-of-scope detection and "
             "per-head attention explanations.")
    app = FastAPI(title="headwise intent service", version="1", lifespan=lifespan,
                  description=about, docs_url=None, redoc_url=None)
    app.state.serve = state
    _add_docs(app)
    generate_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:  # FastAPI's, once, with this service's limits
            declare_limits(generate_openapi(), max_texts=config.max_texts,
                           max_text_chars=config.max_text_chars)
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
    request_model: type[BaseModel] = CompoundPredictRequest if state.compound \
        else PredictRequest
    response_model: type[BaseModel] = CompoundPredictResponse if state.compound \
        else PredictResponse

    async def answer_predict(body: PredictRequest | CompoundPredictRequest) -> Response:
        name, field = body.given()
        try:
            texts, items, rows = await state.infer(field, name)
        except InputError as e:
            return input_error_response(e)
        # a compound engine takes its rows as they come, and whether one intent is a must
        extra = {"at_least_one": body.at_least_one} if state.compound else {}
        answers = state.engine.answer(texts, items, rows if state.compound else np.stack(rows),
                                      top_k=body.top_k or config.top_k,
                                      threshold=body.threshold, **extra)
        return json_response(response_model(model=state.model_name,
                                            runtime=state.engine.runtime.name,
                                            predictions=answers))

    if state.compound:
        @app.post("/v1/predict", response_model=CompoundPredictResponse, responses=_ERRORS,
                  summary="Every intent and the slots of one or many texts")
        async def predict_compound(body: CompoundPredictRequest) -> Response:
            return await answer_predict(body)
    else:
        @app.post("/v1/predict", response_model=PredictResponse, responses=_ERRORS,
                  summary="Top-k intents of one or many texts")
        async def predict(body: PredictRequest) -> Response:
            return await answer_predict(body)

    @app.post("/v1/explain", response_model=ExplainResponse, responses=_ERRORS,
              summary="Per-head attention and attention rollout of one text",
              description="Not offered for a compound (multi-label + slots) classifier: "
                          "answered with 409 'unsupported_model'.")
    async def explain(body: ExplainRequest) -> ExplainResponse:
        if state.compound:
            raise InputError(409, "unsupported_model", "/v1/explain does not support a "
                             "compound (multi-label + slots) classifier; use /v1/predict for "
                             "its intents and slots")
        if not state.has_attention:
            clf = state.engine.classifier
            raise InputError(409, "no_attention", f"this model "
                             f"({type(getattr(clf, 'model', clf)).__name__}) has no "
                             f"attention heads to explain; /v1/explain needs a Transformer "
                             f"classifier")
        where, text = body.one_text()
        state.check_text(text, where)
        state.check_ready()
        try:
            ex = await state.batcher.run_in_thread(explain_text, state.engine.classifier,
                                                   text)
        except BatcherClosed:
            raise InputError(503, "stopping", "the service is shutting down") from None
        item = EncodedText(((0,) * min(ex.total_tokens, state.engine.max_length),),
                           ex.total_tokens, "truncated" if ex.truncated else None)
        prediction = state.engine.answer([text], [item], ex.logits[None],
                                         top_k=config.top_k)[0]
        real = [i for i, t in enumerate(ex.tokens) if not t[3]] or list(range(len(ex.tokens)))
        return ExplainResponse(
            model=state.model_name, prediction=prediction,
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

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response)
    async def metrics() -> Response:
        state.metrics.queue_depth.set(state.batcher.pending)
        return Response(state.metrics.render(), media_type=state.metrics.content_type)

    # the last added is outermost: metrics see every answer, the guard's refusals too; the
    # fast path sees only bodies the guard let through
    app.add_middleware(FastRoute, path="/v1/predict", request_model=request_model,
                       handler=answer_predict)
    app.add_middleware(BodyGuard, max_body_bytes=config.max_body_bytes, routes=BODY_ROUTES)
    app.add_middleware(RequestMetrics, metrics=state.metrics, endpoints=ENDPOINTS)
    return app


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
