"""A fast path for the service's hot route: answer a well-formed JSON ``POST`` straight from
ASGI, and hand every other request to the FastAPI app unchanged.

Under load, FastAPI's per-request machinery (routing through its middleware stack,
reading the body into a ``Request``, solving the endpoint's dependencies, validating and
serialising the response model) cost more CPU than the rest of a ``/v1/predict`` request
on the event loop. :class:`FastRoute` takes such a request before that machinery: it
parses the JSON body, validates it as the route's request model, and awaits the route's
handler, which returns the finished :class:`~starlette.responses.Response` (the same
handler the FastAPI endpoint calls, so both paths answer with the same bytes).

Exactness is kept by declining instead of imitating: a request whose path, method or
content type is not the plain case, whose body is not JSON, or whose JSON does not validate
goes on to the FastAPI app with its body replayed, and is answered (and its error worded)
exactly as without the fast path. The route stays declared on the app, which also keeps
the OpenAPI schema.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel
from starlette.responses import Response

from headwise.serve.middleware import ASGIApp, Receive, Scope, Send

#: a route's handler: the validated request body -> the answer
Handler = Callable[[Any], Awaitable[Response]]


def _is_plain_json(scope: Scope) -> bool:
    """The first ``Content-Type`` header is ``application/json`` (parameters allowed):
    a body FastAPI also parses as JSON."""
    for key, value in scope.get("headers", ()):
        if key.lower() == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


class FastRoute:
    """Serve one JSON ``POST`` route without FastAPI's per-request machinery.

    Args:
        app: the wrapped ASGI app (the FastAPI app's inner stack); it answers every request
            this route declines.
        path: the route's path, e.g. ``"/v1/predict"``.
        request_model: the pydantic model of the request body (validated as FastAPI does:
            ``json.loads`` then :meth:`BaseModel.model_validate`).
        handler: awaited with the validated body; returns the response to send. An
            exception it raises propagates as it would from the FastAPI endpoint.
    """

    def __init__(self, app: ASGIApp, *, path: str, request_model: type[BaseModel],
                 handler: Handler) -> None:
        self.app = app
        self.path = path
        self.request_model = request_model
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope.get("method") != "POST"
                or scope.get("path") != self.path or scope.get("root_path")
                or not _is_plain_json(scope)):
            await self.app(scope, receive, send)
            return
        messages: list[dict[str, Any]] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        if messages[-1]["type"] != "http.request":  # the client left: as the app would
            await self.app(scope, _replay(messages, receive), send)
            return
        body = b"".join(m.get("body", b"") for m in messages)
        try:
            request = self.request_model.model_validate(json.loads(body))
        except Exception:  # not JSON, or not a valid request: FastAPI words the error
            await self.app(scope, _replay(messages, receive), send)
            return
        response = await self.handler(request)
        await response(scope, receive, send)


def _replay(messages: list[dict[str, Any]], receive: Receive) -> Receive:
    """A ``receive`` that gives ``messages`` again, then carries on with ``receive``."""
    pending = list(messages)

    async def replay() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
