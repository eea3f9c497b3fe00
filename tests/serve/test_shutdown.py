"""Graceful shutdown on a real uvicorn server: requests in flight finish with 200; and the
`headwise serve` command in a subprocess: SIGHUP reloads, SIGTERM drains and exits 0."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
import uvicorn
from serve_helpers import start_server_process
from tiny_models import TEXTS

from headwise.serve import ServeConfig, create_app


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_in_flight_requests_finish_on_shutdown(encoder_dir):
    app = create_app(ServeConfig(model_dir=str(encoder_dir), max_wait_ms=50))
    runtime = app.state.serve.predictor.runtime
    forward = runtime.forward

    def slow_forward(ids, mask):  # a slow model, so requests are in flight at shutdown
        time.sleep(0.3)
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
    deadline = time.monotonic() + 20  # until the 4 wait on the slow forward pass (a fixed
    while app.state.serve.batcher.pending < 4:  # sleep was too short on a busy machine)
        assert time.monotonic() < deadline, "the requests did not arrive"
        time.sleep(0.01)
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


# --- the real command in a subprocess: SIGHUP reloads, SIGTERM drains and exits 0 ---------
#: `headwise serve` itself (the console script's main), with a model whose forward pass
#: waits while a flag file exists (at most 60 s), so that requests are held in flight when
#: the signal comes, however slowly they arrive
SLOW_SERVE = """
import os, sys, time
from headwise.intent.inference import runtime
forward = runtime.TorchRuntime.forward
def slow(self, ids, mask):
    deadline = time.monotonic() + 60
    while os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.01)
    return forward(self, ids, mask)
runtime.TorchRuntime.forward = slow
from headwise.cli import main
sys.exit(main(sys.argv[2:]))
"""
KEY_1 = "shutdown-key-1-0123456789abcdef"
KEY_2 = "shutdown-key-2-0123456789abcdef"


def _start_serve(args: list[str], flag) -> tuple[subprocess.Popen, str, list[str]]:
    return start_server_process([sys.executable, "-c", SLOW_SERVE, str(flag), "serve", *args])


def _metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return float(next(ln.split()[-1] for ln in text.splitlines() if ln.startswith(name + " ")))


def test_serve_reloads_on_sighup_and_drains_on_sigterm(encoder_dir, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text(KEY_1 + "\n")
    flag = tmp_path / "slow"
    proc, url, lines = _start_serve(
        [str(encoder_dir), "--port", "0", "--runtime", "torch", "--api-key-file", str(keys),
         "--set", "open_metrics=true", "--set", "batching=false", "--set",
         "graceful_timeout=20"], flag)
    try:
        # SIGHUP: the key files and the model are read again, the model swapped in
        keys.write_text(KEY_2 + "\n")
        proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while _metric(url, "headwise_model_generation") < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
            time.sleep(0.05)
        predict = f"{url}/v1/predict"
        assert httpx.post(predict, json={"texts": "hi"}, headers={"X-API-Key": KEY_1}
                          ).status_code == 401
        assert httpx.post(predict, json={"texts": "hi"}, headers={"X-API-Key": KEY_2}
                          ).status_code == 200

        # SIGTERM under load: 4 requests in flight, held in the model's forward pass (a fixed
        # 0.3 s per request let the first finish before the fourth arrived on a busy machine)
        flag.touch()
        results: list = []

        def call(text: str) -> None:
            try:
                results.append(httpx.post(predict, json={"texts": text}, timeout=30,
                                          headers={"Authorization": f"Bearer {KEY_2}"}))
            except httpx.HTTPError as e:  # pragma: no cover - the failure being tested for
                results.append(e)

        callers = [threading.Thread(target=call, args=(t,)) for t in TEXTS[:4]]
        for c in callers:
            c.start()
        deadline = time.monotonic() + 20
        while _metric(url, "headwise_queue_depth") < 4:
            assert time.monotonic() < deadline, "the requests did not arrive"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # uvicorn looks at its exit flag every 0.1 s, then closes the socket
        with pytest.raises(httpx.ConnectError):  # new connections are refused
            httpx.post(predict, json={"texts": "hi"}, headers={"X-API-Key": KEY_2}, timeout=5)
        assert proc.poll() is None  # still draining the 4 held requests
        flag.unlink()  # the model answers them now
        for c in callers:
            c.join(timeout=30)
        assert proc.wait(timeout=30) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert len(results) == 4
    assert all(isinstance(r, httpx.Response) and r.status_code == 200 for r in results), results
    assert sorted(r.json()["predictions"][0]["text"] for r in results) == sorted(TEXTS[:4])
    log = "".join(lines)
    assert "INFO:     SIGHUP: reloading the API keys and the model" in log, log
    assert "INFO:     reloaded the model: serving encoder" in log, log
    assert "Traceback" not in log and KEY_1 not in log and KEY_2 not in log, log
