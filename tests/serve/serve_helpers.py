"""Helpers of the serve tests' clients (the tiny models they serve are in
``tiny_models``: the service's behaviour does not need training)."""

from __future__ import annotations


def wait_ready(client, timeout: float = 10.0) -> None:
    """Poll /readyz until the warm-up is done."""
    import time

    deadline = time.monotonic() + timeout
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "the service did not become ready"
        time.sleep(0.01)


def post_concurrently(app, requests: list[list[str]]) -> tuple[list, str]:
    """POST every ``{"texts": ...}`` request to ``/v1/predict`` at once (in-process ASGI,
    after the warm-up); return the responses and the ``/metrics`` text afterwards."""
    import asyncio

    import httpx

    async def run():
        async with app.router.lifespan_context(app):
            while not app.state.serve.ready:
                await asyncio.sleep(0.01)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                rs = await asyncio.gather(*(c.post("/v1/predict", json={"texts": t})
                                            for t in requests))
                metrics = (await c.get("/metrics")).text
        return rs, metrics

    return asyncio.run(run())


def start_server_process(cmd: list[str]):
    """Run ``cmd`` (a ``headwise serve ... --port 0`` command line) and wait for its banner
    and ``/readyz``: ``(process, URL, its stderr lines)``; the pipe is kept drained."""
    import re
    import subprocess
    import threading
    import time

    import httpx
    import pytest

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    announced = threading.Event()

    def read() -> None:  # keep the pipe drained; the banner names the port
        for line in proc.stderr:
            lines.append(line)
            if "http://127.0.0.1:" in line:
                announced.set()

    threading.Thread(target=read, daemon=True).start()
    if not announced.wait(120):
        proc.kill()
        pytest.fail(f"no banner: {''.join(lines)[-2000:]}")
    url = re.search(r"http://127\.0\.0\.1:\d+", next(x for x in lines if "http://" in x))[0]
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return proc, url, lines
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
        time.sleep(0.05)
