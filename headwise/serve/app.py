"""The FastAPI app of the intent service.

Endpoints: ``POST /v1/predict`` (top-k intents of one or many texts), ``POST /v1/explain``
(one text's token attribution with its completeness error, and per-head attention and
rollout where the model has heads), ``GET /healthz`` (the process answers, with
the model and runtime it serves), ``GET /readyz`` (the model is loaded and warmed up),
``GET /metrics`` (Prometheus), ``GET /openapi.json`` (the schema, with this service's
limits on texts), and ``GET /docs`` and ``/redoc``, its pages, whose scripts are served
from the package ``fastapi-offline`` (no CDN: they work offline; without that package
there are no pages, and ``/openapi.json`` is the schema), and ``GET /playground``, a page
that explains messages in a browser through the two text endpoints
(:mod:`headwise.serve.playground`; off with ``playground=False``). Both text endpoints take
``text`` (one text) or ``texts`` (one text or a list). ``POST /admin/reload`` reads the
API key files again and swaps in the model (its directory read again, or a new one) once
it is loaded and warmed up beside the one in use; SIGHUP does the same
(:meth:`ServiceState.reload`).

With API keys (``api_key_file``, :mod:`headwise.serve.access`), every path but
``/healthz`` and ``/readyz`` (and ``/metrics`` when open, and the playground's static page
and files) needs a key, or is answered 401;
over a key's rate limit 429 with ``Retry-After``; ``/admin/*`` is 403 without keys.

For a compound (multi-label + slots) classifier, ``/v1/predict`` takes
:class:`~headwise.serve.schemas.CompoundPredictRequest` (``threshold`` and
``at_least_one`` overrides). Every kind answers with
:class:`~headwise.serve.schemas.PredictResponse`: the answered intents, the out-of-scope
decision and the score that made it, and the slot spans with their values (empty for a
single-label model); the OpenAPI schema shows the request of the kind being served.
``/v1/explain`` answers every kind the kind registry can explain
(:func:`headwise.inspect.explain`: a Transformer, a pretrained encoder, a BiLSTM without
attention fields, a compound model per answered intent, a TF-IDF model by its features'
weights) and refuses an ensemble (409) with the registry's reason. It explains what
``/v1/predict`` answers: a text over the model's maximum length as the service's long-text
policy read it (under ``chunk_span``, the span read again whose answer was kept; under
``chunk_max``, the window whose answer was kept), with the tokens'
offsets in the whole text and ``window``, the characters explained; a text the ``chunk``
policy answered from the mean of its windows is refused (409 ``unexplained_long_text``).

Bad input is answered with a 4xx and a JSON ``{"error": {status, type, message}}``: 400
malformed JSON or invalid UTF-8, 413 an oversized body, 415 a body that is not JSON, 422
wrong types, unknown fields, both or neither of ``text`` and ``texts`` (or one of them
null), empty texts, too many texts, a text over the character limit (or over the token
limit under the ``reject`` policy), 409 ``/v1/explain`` on a kind that cannot be explained
(an ensemble) or a long text answered by the ``chunk`` policy, 503 before the model is
ready or while shutting down; 404 an unknown path, 405 with ``Allow`` a method the path
does not take (``PUT /healthz``, ``TRACE /admin/reload``: the body checks apply only to the
endpoints that read a body, and ``/admin/*``'s 403 only to its methods; with keys, on a
path that needs one, only once a valid key comes with it: a 401 before). The OpenAPI schema
states exactly what is accepted: one of ``text`` and ``texts`` (``oneOf``), neither null.
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
import functools
import inspect
import logging
import os
import re
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from headwise.inspect import attribution
from headwise.intent.inference.predictor import Predictor
from headwise.intent.kinds import kind_of_classifier
from headwise.serve.access import ADMIN_PREFIX, OPEN_PATHS, AccessGuard
from headwise.serve.batching import BatcherClosed
from headwise.serve.config import CONFIG_ENV, ServeConfig
from headwise.serve.docs_pages import add_docs
from headwise.serve.fastpath import FastRoute
from headwise.serve.middleware import BodyGuard, RequestMetrics, error_payload
from headwise.serve.playground import PLAYGROUND_OPEN_PATHS, add_playground
from headwise.serve.schemas import (
    CharSpan,
    CompoundPredictRequest,
    ErrorResponse,
    ExplainedWindow,
    ExplainRequest,
    ExplainResponse,
    Health,
    PredictRequest,
    ReloadRequest,
    ReloadResponse,
    declare_limits,
)
from headwise.serve.startup import load_served_predictor
from headwise.serve.state import InputError, ServiceState

__all__ = ["ENDPOINTS", "app_from_environment", "create_app", "input_error_response",
           "json_response"]

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


def create_app(config: ServeConfig, predictor: Predictor | None = None) -> FastAPI:
    """The service's ASGI app.

    Args:
        config: the settings.
        predictor: a predictor already loaded (default: :func:`load_served_predictor`); a
            :class:`~headwise.intent.inference.compound.CompoundPredictor` makes
            ``/v1/predict`` take and answer the compound schemas; a
            ``ProbabilityPredictor`` serves a TF-IDF model or an ensemble.

    Returns:
        A FastAPI app wrapped in the metrics, access (API keys, rate limit) and body-guard
        middleware; its lifespan starts the batcher and warms the model up (and, with
        ``sighup_reload``, reloads on SIGHUP), and on shutdown drains the batcher.

    Raises:
        FileNotFoundError, ValueError: the model cannot be served (see
            :func:`load_served_predictor`), or a key file cannot be used
            (``KeyFileError``, a ValueError).
    """
    if predictor is None:
        predictor = load_served_predictor(config)
    state = ServiceState(predictor, config)

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

    api = state.api  # the kind of the predictor served (a reload keeps it)
    app = FastAPI(title="headwise intent service", version="1", lifespan=lifespan,
                  description=api.about, docs_url=None, redoc_url=None)
    app.state.serve = state
    add_docs(app)
    if config.playground:
        add_playground(app, state, analysis_roles=config.playground_roles)
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
        message = str(exc.detail)
        if exc.status_code == 405 and exc.headers and exc.headers.get("Allow"):
            message = (f"{request.method} is not a method of {request.url.path}; it takes "
                       f"{exc.headers['Allow']}")
        return JSONResponse(error_payload(exc.status_code, kind, message),
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
        answers = served.api.answer(served.predictor, body, texts, items, rows,
                                    top_k=body.top_k or config.top_k)
        state.metrics.count_answers(answers)
        return json_response(response_model(model=served.name,
                                            runtime=served.predictor.runtime.name,
                                            predictions=answers))

    async def predict(body: BaseModel) -> Response:
        return await answer_predict(body)

    # the body's model is the served task's, which FastAPI reads from the signature
    predict.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                           annotation=request_model)], return_annotation=Response)
    predict.__name__ = api.operation
    app.post("/v1/predict", response_model=response_model, responses=_ERRORS,
             summary=api.summary)(predict)

    @app.post("/v1/explain", response_model=ExplainResponse, responses=_ERRORS,
              summary="Token attribution, per-head attention and rollout of one text",
              description="The prediction (as /v1/predict answers it), each token's "
                          "attribution to the answered intent (integrated gradients; a "
                          "TF-IDF model's feature weights) with its completeness error, "
                          "and, where the model has attention heads, their weights and "
                          "rollout (null for a BiLSTM or a TF-IDF model). A compound "
                          "(multi-label + slots) classifier explains each intent it "
                          "answers. A text over the model's maximum length is explained as "
                          "the service's long-text policy read it (chunk_span: the span, "
                          "chunk_max: the window whose answer was kept; window says which "
                          "characters). An "
                          "ensemble is answered with 409 'unsupported_model', a long text "
                          "under the chunk policy (the mean of its windows) with 409 "
                          "'unexplained_long_text'.")
    async def explain(body: ExplainRequest) -> ExplainResponse:
        served = state.served  # one model for the whole answer, as /v1/predict
        classifier = served.predictor.classifier
        kind = kind_of_classifier(classifier)
        if not kind.supports("explain"):
            try:
                kind.require("explain", "the served model")
            except ValueError as e:
                raise InputError(409, "unsupported_model", str(e)) from None
        where, text = body.one_text()
        served, texts, items, rows = await state.infer(text, where)
        prediction = served.predictor.answer(
            texts, items, np.stack(rows) if served.api.stack_rows else rows,
            top_k=config.top_k)[0]
        try:
            # the window explained is the one whose answer the prediction kept
            ex = await served.batcher.run_in_thread(functools.partial(
                attribution.explain, served.predictor, text, answered=(items[0], rows[0])))
        except BatcherClosed:
            raise InputError(503, "stopping", "the service is shutting down") from None
        except attribution.LongTextNotExplained as e:
            raise InputError(409, "unexplained_long_text", str(e)) from None
        first = ex.attributions[0]
        explained = [{"intent": a.intent,
                      "attribution": [None if t[3] else float(v)
                                      for t, v in zip(ex.tokens, a.scores, strict=True)],
                      "completeness": a.completeness()} for a in ex.attributions]
        attention = rollout = None
        if ex.attention is not None:
            matrix = ex.rollout()
            real = [i for i, t in enumerate(ex.tokens) if not t[3]] or \
                list(range(len(ex.tokens)))
            attention = np.round(ex.attention.astype(np.float64), 6).tolist()
            rollout = {"cls": np.round(matrix[0], 6).tolist(),
                       "mean": np.round(matrix[real].mean(0), 6).tolist()}
        return ExplainResponse(
            model=served.name, prediction=prediction,
            tokens=[{"token": t, "start": s, "end": e, "special": sp, "attribution": v}
                    for (t, s, e, sp), v in zip(ex.tokens, explained[0]["attribution"],
                                                strict=True)],
            completeness=first.completeness(), explained=explained,
            window=None if ex.window is None else ExplainedWindow(
                start=ex.window[0], end=ex.window[1],
                skipped=None if ex.skipped is None else CharSpan(start=ex.skipped[0],
                                                                 end=ex.skipped[1])),
            num_layers=None if ex.attention is None else ex.attention.shape[0],
            num_heads=None if ex.attention is None else ex.attention.shape[1],
            tfidf_share=ex.tfidf_share, attention=attention, rollout=rollout)

    @app.get("/healthz", response_model=Health,
             summary="The process is up, and the model and runtime it serves")
    async def healthz() -> Health:
        return Health(status="ok", model=state.model_name, runtime=state.predictor.runtime.name)

    @app.get("/readyz", response_model=Health, responses={503: {"model": Health}},
             summary="The model is loaded and warmed up")
    async def readyz() -> Response:
        if state.ready and not state.stopping:
            return JSONResponse(Health(status="ready", model=state.model_name,
                                       runtime=state.predictor.runtime.name).model_dump())
        status = "stopping" if state.stopping else "starting"
        return JSONResponse(Health(status=status, model=state.model_name,
                                   runtime=state.predictor.runtime.name).model_dump(),
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
                       open_paths=OPEN_PATHS + (("/metrics",) if config.open_metrics else ())
                       + (PLAYGROUND_OPEN_PATHS if config.playground else ()),
                       methods={route.path: route.methods for route in app.routes
                                if getattr(route, "methods", None)})
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


def app_from_environment() -> FastAPI:
    """The app a uvicorn worker builds (``--workers N``): the config comes as JSON in the
    ``HEADWISE_SERVE_CONFIG`` environment variable."""
    text = os.environ.get(CONFIG_ENV)
    if not text:
        raise RuntimeError(f"{CONFIG_ENV} is not set; start the service with `headwise serve`")
    return create_app(ServeConfig.from_json(text))
