"""Load generator of ``benchmarks/serve.py``: run in its own process, prints one JSON line.

    python benchmarks/_serve_load.py --url http://127.0.0.1:8000 --concurrency 32 \
        --duration 15 --max-requests 20000 --texts texts.json

``concurrency`` clients each send one ``POST /v1/predict`` (one text) at a time, back to
back, until ``duration`` seconds have passed or ``max-requests`` were sent (both bounds
always apply). Requests finished in the first ``--warmup`` seconds are not counted.
Only loopback URLs are accepted.

``--api-key-file FILE`` sends the file's first key (``Authorization: Bearer KEY``) with
every request; ``--timeline FILE`` writes every counted request as ``[start, end, outcome]``
(wall-clock seconds; the outcome is the HTTP status or the error's kind: ``closed`` for a
connection closed before its answer, ``ConnectionRefusedError``, ...) for the runs that
look at what happened around an event (a reload, a SIGTERM); ``--until-refused`` makes a
client stop at its first refused connection (the server is gone). SIGTERM ends the run
early, as if its duration were over: the requests under way finish, and the results are
printed.

Each client holds one keep-alive HTTP/1.1 connection and speaks to it over plain asyncio
streams, with every request's bytes built before the clock starts. The generator shares
the machine's cores with the server it measures, so it must cost little: httpx's
connection pool took ~6 ms of CPU per request at concurrency 32 (~20 times this client),
which throttled the server it was meant to load and, scheduling its 32 clients unevenly,
was most of the tail latency it reported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from urllib.parse import urlparse

import numpy as np

_TIMEOUT_S = 30.0


class _Closed(Exception):
    """The server closed the connection (or answered something that is not HTTP/1.1)."""


def _request(netloc: str, text: str, key: str | None = None) -> bytes:
    body = json.dumps({"texts": text}).encode()
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return (f"POST /v1/predict HTTP/1.1\r\nHost: {netloc}\r\n{auth}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"\r\n").encode("latin-1") + body


def first_key(path: str) -> str:
    """The first key of a key file (blank lines and # comments skipped)."""
    for line in open(path, encoding="utf-8"):
        if line.strip() and not line.strip().startswith("#"):
            return line.strip()
    raise SystemExit(f"{path}: no key")


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    request: bytes) -> tuple[int, bool]:
    """Send one request and read its answer: ``(status, keep_alive)``."""
    writer.write(request)
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        raise _Closed("connection closed before an answer") from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise _Closed(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    length, chunked, keep_alive = None, False, True
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding":
            chunked = "chunked" in value
        elif name == "connection":
            keep_alive = "close" not in value
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length is not None:
        await reader.readexactly(length)
    else:  # the body runs to the end of the connection
        await reader.read()
        keep_alive = False
    return int(parts[1]), keep_alive


async def _load(url: str, texts: list[str], concurrency: int, duration: float,
                max_requests: int, warmup: float, key: str | None = None,
                until_refused: bool = False) -> tuple[dict, list]:
    parsed = urlparse(url)
    host, port = parsed.hostname, parsed.port or 80
    requests = [_request(parsed.netloc, t, key) for t in texts]
    latencies: list[float] = []
    errors: list[str] = []
    timeline: list[tuple[float, float, int | str]] = []
    sent = 0
    start = time.perf_counter()
    counted_from = start + warmup
    end = counted_from + duration

    def stop() -> None:  # SIGTERM: the run is over
        nonlocal end
        end = min(end, time.perf_counter())

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop)

    async def worker(k: int) -> None:
        nonlocal sent
        i = k
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        while time.perf_counter() < end and sent < max_requests:
            sent += 1
            request = requests[i % len(requests)]
            i += concurrency
            t0, wall = time.perf_counter(), time.time()
            keep_alive = False
            outcome: int | str
            try:
                if conn is None:
                    conn = await asyncio.wait_for(asyncio.open_connection(host, port),
                                                  _TIMEOUT_S)
                status, keep_alive = await asyncio.wait_for(_exchange(*conn, request),
                                                            _TIMEOUT_S)
                ok, why, outcome = status == 200, f"HTTP {status}", status
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                    asyncio.LimitOverrunError, ValueError, _Closed) as e:
                ok = False
                why = outcome = "closed" if isinstance(e, _Closed | asyncio.IncompleteReadError) \
                    else type(e).__name__
            if not keep_alive and conn is not None:
                conn[1].close()
                conn = None
            t1 = time.perf_counter()
            if t1 >= counted_from:
                timeline.append((wall, wall + (t1 - t0), outcome))
                if ok:
                    latencies.append(t1 - t0)
                else:
                    errors.append(why)
            if until_refused and outcome == "ConnectionRefusedError":
                break
        if conn is not None:
            conn[1].close()

    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    elapsed = max(1e-9, min(time.perf_counter(), end) - counted_from)
    lat = np.array(latencies) * 1000 if latencies else np.array([np.nan])
    return {"concurrency": concurrency, "requests": len(latencies) + len(errors),
            "errors": len(errors), "error_kinds": sorted(set(errors))[:5],
            "seconds": elapsed, "throughput": len(latencies) / elapsed,
            "p50_ms": float(np.percentile(lat, 50)), "p90_ms": float(np.percentile(lat, 90)),
            "p99_ms": float(np.percentile(lat, 99)), "max_ms": float(lat.max())}, timeline


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True)
    p.add_argument("--texts", required=True, help="JSON file with a list of texts")
    p.add_argument("--concurrency", type=int, required=True)
    p.add_argument("--duration", type=float, required=True, help="seconds measured")
    p.add_argument("--max-requests", type=int, default=100_000)
    p.add_argument("--warmup", type=float, default=1.0, help="seconds not counted")
    p.add_argument("--api-key-file", help="send this file's first key with every request")
    p.add_argument("--timeline", help="write every counted request here (JSON)")
    p.add_argument("--until-refused", action="store_true",
                   help="a client stops at its first refused connection")
    args = p.parse_args()
    host = urlparse(args.url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"refusing to load {host}: loopback only", file=sys.stderr)
        return 2
    texts = json.loads(open(args.texts, encoding="utf-8").read())
    key = first_key(args.api_key_file) if args.api_key_file else None
    result, timeline = asyncio.run(_load(args.url, texts, args.concurrency, args.duration,
                                         args.max_requests, args.warmup, key,
                                         args.until_refused))
    if args.timeline:
        with open(args.timeline, "w", encoding="utf-8") as f:
            json.dump(timeline, f)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
