"""Graceful shutdown on a real uvicorn server: requests in flight finish with 200."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
import uvicorn
from serve_helpers import TEXTS

from headwise.serve import ServeConfig, create_app


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_in_flight_requests_finish_on_shutdown(encoder_dir):
    app = create_app(ServeConfig(model_dir=str(encoder_dir), max_wait_ms=50))
    runtime = app.state.serve.engine.runtime
    forward = runtime.forward

    def slow_forward(ids, mask):  # a slow model, so requests are in flight at shutdown
        time.sleep(0.4)
        return forward(ids, mask)

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", timeout_graceful_shutdown=10))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    runtime.forward = slow_forward
    results: list = []

    def call(texts):
        try:
            results.append(httpx.post(f"{url}/v1/predict", json={"texts": texts}, timeout=10))
        except httpx.HTTPError as e:  # pragma: no cover - the failure being tested for
            results.append(e)

    callers = [threading.Thread(target=call, args=([t],)) for t in TEXTS[:4]]
    for c in callers:
        c.start()
    time.sleep(0.2)  # the requests are now waiting on the slow forward pass
    server.should_exit = True
    for c in callers:
        c.join(timeout=15)
    thread.join(timeout=15)
    assert not thread.is_alive()
    assert len(results) == 4
    assert all(isinstance(r, httpx.Response) and r.status_code == 200 for r in results), results
    assert app.state.serve.stopping
    with pytest.raises(httpx.TransportError):  # and the server is gone
        httpx.get(f"{url}/healthz", timeout=1)
