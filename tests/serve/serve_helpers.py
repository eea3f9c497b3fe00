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
