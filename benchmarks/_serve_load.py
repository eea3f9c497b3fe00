"""Load generator of ``benchmarks/serve.py``: run in its own process, prints one JSON line.

    python benchmarks/_serve_load.py --url http://127.0.0.1:8000 --concurrency 32 \
        --duration 15 --max-requests 20000 --texts texts.json

``concurrency`` clients each send one ``POST /v1/predict`` (one text) at a time, back to
back, until ``duration`` seconds have passed or ``max-requests`` were sent (both bounds
always apply). Requests finished in the first ``--warmup`` seconds are not counted.
Only loopback URLs are accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from urllib.parse import urlparse

import httpx
import numpy as np


async def _load(url: str, texts: list[str], concurrency: int, duration: float,
                max_requests: int, warmup: float) -> dict:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    errors: list[str] = []
    sent = 0
    start = time.perf_counter()
    counted_from = start + warmup
    end = counted_from + duration

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30.0) as client:
        async def worker(k: int) -> None:
            nonlocal sent
            i = k
            while time.perf_counter() < end and sent < max_requests:
                sent += 1
                text = texts[i % len(texts)]
                i += concurrency
                t0 = time.perf_counter()
                try:
                    r = await client.post("/v1/predict", json={"texts": text})
                    ok = r.status_code == 200
                    why = f"HTTP {r.status_code}"
                except httpx.HTTPError as e:
                    ok, why = False, type(e).__name__
                t1 = time.perf_counter()
                if t1 < counted_from:
                    continue
                if ok:
                    latencies.append(t1 - t0)
                else:
                    errors.append(why)

        await asyncio.gather(*(worker(k) for k in range(concurrency)))
    elapsed = max(1e-9, min(time.perf_counter(), end) - counted_from)
    lat = np.array(latencies) * 1000 if latencies else np.array([np.nan])
    return {"concurrency": concurrency, "requests": len(latencies) + len(errors),
            "errors": len(errors), "error_kinds": sorted(set(errors))[:5],
            "seconds": elapsed, "throughput": len(latencies) / elapsed,
            "p50_ms": float(np.percentile(lat, 50)), "p90_ms": float(np.percentile(lat, 90)),
            "p99_ms": float(np.percentile(lat, 99)), "max_ms": float(lat.max())}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True)
    p.add_argument("--texts", required=True, help="JSON file with a list of texts")
    p.add_argument("--concurrency", type=int, required=True)
    p.add_argument("--duration", type=float, required=True, help="seconds measured")
    p.add_argument("--max-requests", type=int, default=100_000)
    p.add_argument("--warmup", type=float, default=1.0, help="seconds not counted")
    args = p.parse_args()
    host = urlparse(args.url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"refusing to load {host}: loopback only", file=sys.stderr)
        return 2
    texts = json.loads(open(args.texts, encoding="utf-8").read())
    result = asyncio.run(_load(args.url, texts, args.concurrency, args.duration,
                               args.max_requests, args.warmup))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
