"""The per-key token bucket, against hand-computed refills, and the service's 429s, with a
stepped clock instead of sleeps."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from serve_helpers import wait_ready

from headwise.serve import ServeConfig, create_app
from headwise.serve.ratelimit import RateLimiter

KEY_A = "rate-key-A-0123456789abcdef"
KEY_B = "rate-key-B-0123456789abcdef"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_bucket_by_hand():
    clock = Clock()
    limiter = RateLimiter(2.0, 3, clock=clock)  # 2 tokens/s, 3 at most
    assert [limiter.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]  # starts full
    assert limiter.take("a") == pytest.approx(0.5)  # empty: one token in 1/2 s
    assert limiter.take("b") == 0.0  # another key has its own bucket
    clock.now += 0.25  # half a token
    assert limiter.take("a") == pytest.approx(0.25)  # a refusal spends nothing
    clock.now += 0.25
    assert limiter.take("a") == 0.0 and limiter.take("a") == pytest.approx(0.5)
    clock.now += 60  # refills up to the burst, not beyond
    assert [limiter.take("a") for _ in range(4)][-1] == pytest.approx(0.5)
    assert RateLimiter.retry_after(0.01) == 1 and RateLimiter.retry_after(1.0) == 1
    assert RateLimiter.retry_after(1.2) == 2 and RateLimiter.retry_after(2.0) == 2
    with pytest.raises(ValueError, match="rate"):
        RateLimiter(0, 1)
    with pytest.raises(ValueError, match="burst"):
        RateLimiter(1.0, 0)


@given(rate=st.floats(0.1, 50), burst=st.integers(1, 20),
       steps=st.lists(st.floats(0, 2), min_size=1, max_size=60))
def test_never_more_than_burst_plus_rate_times_t(rate, burst, steps):
    clock = Clock()
    start = clock.now
    limiter = RateLimiter(rate, burst, clock=clock)
    allowed = 0
    for dt in steps:
        clock.now += dt
        wait = limiter.take("k")
        allowed += wait == 0.0
        if wait:  # a request after the wait it was told is answered
            clock.now += wait
            assert limiter.take("k") == 0.0
            allowed += 1
        assert allowed <= burst + rate * (clock.now - start) + 1e-6


@pytest.fixture(scope="module")
def limited(encoder_dir, tmp_path_factory):
    keys = tmp_path_factory.mktemp("rate") / "keys.txt"
    keys.write_text(f"{KEY_A}\n{KEY_B}\n")
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(keys),
                                 rate_limit=0.4, burst=2))
    clock = Clock()
    app.state.serve.limiter.clock = clock
    with TestClient(app) as c:
        wait_ready(c)
        yield c, clock


def test_over_the_limit_is_429_with_retry_after_and_the_limit(limited):
    c, clock = limited
    a, b = {"X-API-Key": KEY_A}, {"Authorization": f"Bearer {KEY_B}"}
    assert [c.post("/v1/predict", json={"texts": "hi"}, headers=a).status_code
            for _ in range(2)] == [200, 200]
    r = c.post("/v1/predict", json={"texts": "hi"}, headers=a)
    assert r.status_code == 429
    assert r.headers["retry-after"] == "3"  # 1 token at 0.4/s: 2.5 s, rounded up
    err = r.json()["error"]
    assert err["type"] == "rate_limited"
    assert "0.4 requests/s per API key (burst 2)" in err["message"]
    assert err["details"] == [{"limit_per_s": 0.4, "burst": 2, "retry_after_s": 3}]
    # every path behind the key counts; the probes and other keys do not
    assert c.get("/metrics", headers=a).status_code == 429
    assert c.get("/healthz").status_code == 200
    assert c.post("/v1/predict", json={"texts": "hi"}, headers=b).status_code == 200
    # nor a request without a valid key: refused before its key's bucket is looked at
    assert c.post("/v1/predict", json={"texts": "hi"}).status_code == 401
    clock.now += 2.0  # 0.8 token: not yet
    r = c.post("/v1/predict", json={"texts": "hi"}, headers=a)
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    clock.now += 0.5
    assert c.post("/v1/predict", json={"texts": "hi"}, headers=a).status_code == 200
    metrics = c.get("/metrics", headers=b).text
    assert 'headwise_requests_total{endpoint="/v1/predict",method="POST",status="429"} 2.0' \
        in metrics
