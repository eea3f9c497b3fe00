"""Access control of the service: API keys and the per-key rate limit, checked before
anything reads the request.

:class:`AccessGuard` is the outermost check after the metrics: a request to a path that
needs a key and carries no valid one is answered 401, whatever its body, with the same body
for a missing and for a wrong key and a ``WWW-Authenticate: Bearer`` header; then the key's
token bucket (:class:`~headwise.serve.ratelimit.RateLimiter`) answers 429 with
``Retry-After`` when it is empty. Default deny: every path needs a key except the open ones
(``/healthz``, ``/readyz``, and ``/metrics`` when told), so an unknown path is a 401, not a
404 that maps the service. ``/admin/*`` takes the admin keys when there are some, else the
API keys, and is refused (403) when the service has no keys at all.

A method the path does not take (``TRACE /admin/reload``) is the router's 405 with
``Allow`` wherever the service's map is public: on the open paths, and everywhere when the
service has no keys (so ``/admin/*``'s 403 answers only the methods its endpoints take).
With keys, a request without a valid one learns nothing of the map: 401, as for an unknown
path; with a valid key, the router answers 405 (or 404).

A key travels as ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``; a request is let in
when it carries a key and every key it carries is valid (one wrong key, beside a valid one
in the other header, is a 401: :meth:`~headwise.serve.auth.ApiKeys.identify`). Keys are
never logged: refusals are logged (at debug level) with the path and the client's address
only.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from starlette.responses import JSONResponse

from headwise.serve.auth import ApiKeys
from headwise.serve.middleware import ASGIApp, Receive, Scope, Send, error_payload
from headwise.serve.ratelimit import RateLimiter

log = logging.getLogger("headwise.serve")

#: paths that never need a key: a load balancer's probes
OPEN_PATHS = ("/healthz", "/readyz")
#: the admin endpoints' prefix
ADMIN_PREFIX = "/admin/"
#: the answer to a request without a valid key, the same for a missing and a wrong key
UNAUTHORIZED = ("this endpoint needs a valid API key: send it as 'Authorization: Bearer KEY' "
                "or 'X-API-Key: KEY'")
#: the answer to ``/admin/*`` when the service has no keys
ADMIN_DISABLED = ("the admin endpoints need API keys: start the service with --api-key-file "
                  "(and optionally --admin-key-file)")


def presented_keys(scope: Scope) -> list[str]:
    """The keys a request carries, one per ``Authorization`` and ``X-API-Key`` header: the
    token of ``Authorization: Bearer TOKEN`` (the scheme in any case) and the value of
    ``X-API-Key``, stripped. A header that carries no key (an empty one, an
    ``Authorization`` of another scheme or without one) is presented as ``""``, which is
    never a key: like a wrong key, it gets the request refused
    (:meth:`~headwise.serve.auth.ApiKeys.identify` lets a request in only when every key it
    presents is valid)."""
    keys = []
    for name, value in scope.get("headers", ()):
        name = name.lower()
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            keys.append(token.strip() if scheme.lower() == "bearer" else "")
        elif name == b"x-api-key":
            keys.append(value.decode("latin-1").strip())
    return keys


def _route(scope: Scope) -> str:
    """The request's path below the app's root path."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


class AccessGuard:
    """Refuse requests without a valid API key (401), over their key's rate (429), and to
    ``/admin/*`` when there are no keys (403, to the methods its endpoints take).

    Args:
        app: the wrapped ASGI app.
        keys: the API keys; None: every path but ``/admin/*`` is open.
        admin_keys: the keys ``/admin/*`` takes instead of ``keys`` (None: ``keys``).
        limiter: the per-key rate limit (None: no limit).
        open_paths: the paths that never need a key.
        methods: the methods each of the app's paths takes: without keys, a request to
            one of these paths with another method goes to the app (the router's 405 with
            ``Allow``) instead of ``/admin/*``'s 403. A path not in it: 403.
    """

    def __init__(self, app: ASGIApp, *, keys: ApiKeys | None, admin_keys: ApiKeys | None = None,
                 limiter: RateLimiter | None = None,
                 open_paths: Collection[str] = OPEN_PATHS,
                 methods: Mapping[str, Collection[str]] | None = None) -> None:
        self.app = app
        self.keys = keys
        self.admin_keys = admin_keys
        self.limiter = limiter
        self.open_paths = frozenset(open_paths)
        self.methods = {path: frozenset(m.upper() for m in ms)
                        for path, ms in (methods or {}).items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and self.keys is not None:
            # the service has no WebSocket endpoint; with keys, none is let in without one
            self.keys.refresh()
            if self.keys.identify(presented_keys(scope)) is None:
                await send({"type": "websocket.close", "code": 1008})
                return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = _route(scope)
        if route in self.open_paths:
            await self.app(scope, receive, send)
            return
        admin = route.startswith(ADMIN_PREFIX)
        keys = (self.admin_keys or self.keys) if admin else self.keys
        if keys is None:
            taken = self.methods.get(route)
            if admin and (taken is None or scope.get("method") in taken):
                await _refuse(scope, receive, send, 403, "admin_disabled", ADMIN_DISABLED)
            else:
                await self.app(scope, receive, send)
            return
        keys.refresh()
        who = keys.identify(presented_keys(scope))
        if who is None:
            client = scope.get("client") or ("?", 0)
            log.debug("refused %s %s from %s: no valid API key", scope.get("method"), route,
                      client[0])
            await _refuse(scope, receive, send, 401, "unauthorized", UNAUTHORIZED,
                          headers={"WWW-Authenticate": 'Bearer realm="headwise"'})
            return
        if self.limiter is not None:
            wait = self.limiter.take(who)
            if wait > 0:
                seconds = RateLimiter.retry_after(wait)
                rate, burst = self.limiter.rate, self.limiter.burst
                await _refuse(scope, receive, send, 429, "rate_limited",
                              f"rate limit of {rate:g} requests/s per API key (burst "
                              f"{burst}) reached; retry in {seconds} s",
                              headers={"Retry-After": str(seconds)},
                              details=[{"limit_per_s": rate, "burst": burst,
                                        "retry_after_s": seconds}])
                return
        await self.app(scope, receive, send)


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, kind: str,
                  message: str, *, headers: dict[str, str] | None = None,
                  details: list[dict[str, Any]] | None = None) -> None:
    response = JSONResponse(error_payload(status, kind, message, details), status_code=status,
                            headers=headers)
    await response(scope, receive, send)
