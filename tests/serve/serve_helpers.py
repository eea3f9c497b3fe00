"""Helpers of the serve tests: a tiny corpus, tokenizer and random-weight models (the
service's behaviour does not need training)."""

from __future__ import annotations

import torch
from tiny_corpus import INTENTS

from headwise.models import EncoderClassifier, ModelConfig
from headwise.text.tokenizer import Tokenizer

TEXTS = [t for ts in INTENTS.values() for t in ts]
#: short enough that ordinary sentences overflow it (long-text handling)
MAX_LENGTH = 12


def tiny_tokenizer() -> Tokenizer:
    return Tokenizer.train_wordpiece(TEXTS * 3, 120, min_frequency=1)


def tiny_encoder(tok: Tokenizer, seed: int = 0, **overrides) -> EncoderClassifier:
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=32, num_layers=2, num_heads=4,
                      d_ff=64, num_labels=len(INTENTS), labels=list(INTENTS),
                      max_position=64, pad_token_id=tok.pad_token_id, dropout=0.0,
                      **overrides)
    model = EncoderClassifier(cfg).eval()
    with torch.no_grad():  # a larger head so the probabilities are not all ~1/3
        model.classifier.weight.normal_(0, 1.0)
    return model


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
