"""ASGI middleware of the service: request metrics, and the body guard.

:class:`BodyGuard` checks a request body before FastAPI parses it: its size (413 beyond
the limit, from ``Content-Length`` or while reading), its media type (415 unless JSON)
and its encoding (400 unless valid UTF-8), each with a message that says what was wrong.
It checks only the routes that read a body, so that any other request is routed as it
comes (``PUT /healthz`` is FastAPI's 405, an unknown path its 404); on a route whose body
is optional (``POST /admin/reload``) an empty body passes whatever its content type.
:class:`RequestMetrics` times every request and counts its status.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any

from starlette.responses import JSONResponse

from headwise.serve.metrics import ServeMetrics

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_BODY_METHODS = {"POST", "PUT", "PATCH"}


def error_payload(status: int, kind: str, message: str,
                  details: list[dict] | None = None) -> dict[str, Any]:
    """The JSON body of every error answer (``schemas.ErrorResponse``)."""
    body: dict[str, Any] = {"status": status, "type": kind, "message": message}
    if details is not None:
        body["details"] = details
    return {"error": body}


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class BodyGuard:
    """Refuse oversized, non-JSON or non-UTF-8 request bodies before the app sees them.

    Args:
        app: the wrapped ASGI app.
        max_body_bytes: the largest body accepted.
        routes: the ``(method, path)`` pairs whose bodies are checked, those of the
            endpoints that read one; any other request goes to the app unchecked, to be
            routed (404, 405) or answered. None: every POST, PUT and PATCH.
        optional_body: the ``(method, path)`` pairs (among ``routes``) whose body may be
            left out: an empty body passes whatever its content type; a body that is not
            empty is checked as any other.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int,
                 routes: Iterable[tuple[str, str]] | None = None,
                 optional_body: Iterable[tuple[str, str]] = ()) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.routes = None if routes is None else {(m.upper(), p) for m, p in routes}
        self.optional = {(m.upper(), p) for m, p in optional_body}

    def _checks(self, scope: Scope) -> bool:
        method = scope.get("method")
        if self.routes is None:
            return method in _BODY_METHODS
        return (method, scope.get("path")) in self.routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._checks(scope):
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        length = _header(scope, b"content-length")
        if length is not None:
            if not length.strip().isdigit():
                await self._refuse(scope, receive, send, 400, "bad_request",
                                   f"invalid Content-Length header {length!r}")
                return
            if int(length) > limit:
                await self._refuse(scope, receive, send, 413, "payload_too_large",
                                   f"request body of {int(length)} bytes is over the limit "
                                   f"of {limit} bytes")
                return
        media = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
        json_body = media == "application/json" or media.endswith("+json")
        optional = (scope.get("method"), scope.get("path")) in self.optional
        if not json_body and not optional:
            await self._refuse_media(scope, receive, send, media)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._refuse(scope, receive, send, 413, "payload_too_large",
                                   f"request body is over the limit of {limit} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if not json_body and body:  # an optional body that was given must be JSON
            await self._refuse_media(scope, receive, send, media)
            return
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as e:
            await self._refuse(scope, receive, send, 400, "invalid_utf8",
                               f"request body is not valid UTF-8: byte 0x{body[e.start]:02x} "
                               f"at offset {e.start} ({e.reason})")
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @classmethod
    async def _refuse_media(cls, scope: Scope, receive: Receive, send: Send, media: str
                            ) -> None:
        await cls._refuse(scope, receive, send, 415, "unsupported_media_type",
                          f"send the body as JSON with 'Content-Type: application/json' "
                          f"(got {media or 'no content type'!r})")

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, kind: str,
                      message: str) -> None:
        response = JSONResponse(error_payload(status, kind, message), status_code=status,
                                headers={"Connection": "close"} if status == 413 else None)
        await response(scope, receive, send)


class RequestMetrics:
    """Count and time every HTTP request by endpoint and status.

    Args:
        app: the wrapped ASGI app.
        metrics: where to record.
        endpoints: the paths recorded by name; any other path is recorded as ``other``
            (so random URLs cannot blow up the number of series).
    """

    def __init__(self, app: ASGIApp, *, metrics: ServeMetrics,
                 endpoints: Collection[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.endpoints = set(endpoints)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            path = scope.get("path", "")
            endpoint = path if path in self.endpoints else "other"
            self.metrics.observe_request(endpoint, scope.get("method", ""), status,
                                         time.perf_counter() - start)
