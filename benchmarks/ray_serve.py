"""What Ray Serve costs: ``headwise serve --ray`` against ``headwise serve``, same model.

    python benchmarks/ray_serve.py                        # full run (~6 min), BENCHMARKS.md
    python benchmarks/ray_serve.py --quick --no-write     # smoke run (~2 min), prints it

Both services are the ``headwise`` command in a subprocess, on the same model directory,
PyTorch with the same ``--threads`` (``headwise serve --set threads=N``: the inference
threads; Ray reserves as many CPUs for the replica), batching on: ``headwise serve MODEL``
(uvicorn) and ``headwise serve MODEL --ray --replicas 1`` (a local Ray instance started by
the command; Serve's HTTP proxy in its own process forwards each request to the replica's
process). The model is
all-MiniLM-L6-v2 with a random 10-intent head (``benchmarks/serve.py``'s; ``--quick``: a
tiny random 2-layer Transformer, so that the proxy's cost is most of what is measured).

The load generator (``_serve_load.py``: keep-alive connections, loopback only) sends one
text per request at concurrency 1 against each service in turn, in interleaved rounds
(the one to go first alternating), so that a change in the machine's load hits both
alike; the proxy's cost is the median over rounds of the p50 difference. Then one point
at concurrency 32 each (throughput, p50, p99), and each service's start-up time (command
to ``/readyz`` answering 200: Ray's start and the replica's included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402

SECTION = "ray-serve:cpu"
RESULTS = HERE / "results" / "ray_serve_cpu.json"


def tiny_model(out: Path, texts: list[str]) -> Path:
    """A 2-layer, 32-wide Transformer with random weights on 10 intents (``--quick``)."""
    import torch
    from _queries import INTENTS

    from headwise.intent.classifier import IntentClassifier
    from headwise.models import EncoderClassifier, ModelConfig
    from headwise.text.tokenizer import Tokenizer

    tok = Tokenizer.train_wordpiece(texts, 300, min_frequency=1)
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=32, num_layers=2, num_heads=4,
                      d_ff=64, num_labels=len(INTENTS), labels=INTENTS, max_position=128,
                      pad_token_id=tok.pad_token_id, dropout=0.0)
    IntentClassifier(EncoderClassifier(cfg).eval(), tok, INTENTS, max_length=64).save(out)
    return out


def start(model_dir: Path, args: argparse.Namespace, ray: bool) -> tuple[Any, str, float]:
    """``headwise serve`` (``ray``: ``--ray --replicas 1``) on a free port; the process,
    its URL and the seconds until ``/readyz`` answered 200."""
    from serve import start_server

    extra = ("--set", f"threads={args.threads}")
    if ray:
        extra += ("--ray", "--replicas", "1")
    t0 = time.perf_counter()
    proc, url = start_server(model_dir, True, args, "torch", extra=extra)
    return proc, url, time.perf_counter() - t0


def run(args: argparse.Namespace) -> dict[str, Any]:
    from _queries import bench_texts
    from serve import build_model, load, stop_server

    q = args.quick
    rounds, point_s = (2, 1.0) if q else (6, 10.0)
    texts = bench_texts()
    out: dict[str, Any] = {"settings": {"quick": q, "rounds": rounds, "point_s": point_s,
                                        "threads": args.threads,
                                        "max_batch_size": args.max_batch_size,
                                        "max_wait_ms": args.max_wait_ms}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model_dir = tmp / "intent"
        if q:
            tiny_model(model_dir, texts)
            out["model"] = "a tiny random 2-layer Transformer, d_model 32"
        else:
            build_model(model_dir)
            out["model"] = "all-MiniLM-L6-v2, random 10-intent head"
        texts_file = tmp / "texts.json"
        texts_file.write_text(json.dumps(texts))
        names = ("headwise serve", "headwise serve --ray")
        servers, startup = {}, {}
        try:
            for name in names:
                print(f"starting {name} ...", file=sys.stderr)
                proc, url, seconds = start(model_dir, args, ray=name.endswith("--ray"))
                servers[name], startup[name] = (proc, url), seconds
            p50s: dict[str, list[float]] = {name: [] for name in names}
            single: dict[str, list[dict]] = {name: [] for name in names}
            for r in range(rounds):
                for name in names if r % 2 == 0 else names[::-1]:
                    print(f"{name}: concurrency 1, round {r + 1}/{rounds} ...",
                          file=sys.stderr)
                    x = load(servers[name][1], texts_file, 1, point_s, int(2000 * point_s),
                             warmup=0.5)
                    if x["errors"]:
                        raise RuntimeError(f"{name}: {x['errors']} errors {x['error_kinds']}")
                    p50s[name].append(x["p50_ms"])
                    single[name].append(x)
            loaded = {}
            for name in names:
                print(f"{name}: concurrency 32 ...", file=sys.stderr)
                loaded[name] = load(servers[name][1], texts_file, 32, point_s,
                                    int(2000 * point_s), warmup=0.5)
        finally:
            for proc, _ in servers.values():
                stop_server(proc)
    out["startup_s"] = startup
    out["single"] = {name: {"p50_ms": statistics.median(p50s[name]), "rounds": single[name]}
                     for name in names}
    out["proxy_ms"] = statistics.median(b - a for a, b in zip(*p50s.values(), strict=True))
    out["concurrency_32"] = loaded
    return out


def section(data: dict[str, Any]) -> str:
    """The ``ray-serve:cpu`` section of BENCHMARKS.md."""
    r, s = data["results"], data["results"]["settings"]
    rows = []
    for name, one in r["single"].items():
        c1 = one["rounds"]
        c32 = r["concurrency_32"][name]
        rows.append([f"`{name}`", H.fmt(one["p50_ms"]),
                     H.fmt(statistics.median(x["p99_ms"] for x in c1)),
                     H.fmt(statistics.median(x["throughput"] for x in c1)),
                     H.fmt(c32["throughput"]), H.fmt(c32["p50_ms"]), H.fmt(c32["p99_ms"]),
                     f"{c32['errors']}", H.fmt(r["startup_s"][name])])
    table = H.markdown_table(["service", "p50 ms (c=1)", "p99 ms (c=1)", "req/s (c=1)",
                              "req/s (c=32)", "p50 ms (c=32)", "p99 ms (c=32)",
                              "errors (c=32)", "start-up s"], rows)
    base = r["single"]["headwise serve"]["p50_ms"]
    return "\n".join([
        "## Ray Serve: `headwise serve --ray` against `headwise serve` (CPU)",
        "",
        H.provenance(data["meta"]),
        "",
        f"The same model ({r['model']}), PyTorch with {s['threads']} inference threads, "
        f"batching on (up to {s['max_batch_size']} texts, {s['max_wait_ms']:g} ms); Ray "
        f"Serve with one replica on a local Ray instance the command started. One text per "
        f"request; concurrency 1 in {s['rounds']} interleaved rounds of {s['point_s']:g} s "
        f"per service (the p50 is the median of the rounds'), then {s['point_s']:g} s at "
        f"concurrency 32. Start-up: from the command to `/readyz` answering 200.",
        "",
        table,
        "",
        f"Ray Serve's proxy adds {H.fmt(r['proxy_ms'])} ms to the single-query p50 (median "
        f"of the per-round differences; {H.fmt(base)} ms without it): the request goes "
        f"to the proxy's process, then over Ray to the replica's, and the answer back.",
    ])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="a tiny model, 2 rounds of 1 s (a smoke test, never published)")
    p.add_argument("--threads", type=int, default=1,
                   help="inference threads of both services (default 1)")
    p.add_argument("--max-batch-size", type=int, default=32)
    p.add_argument("--max-wait-ms", type=float, default=2.0)
    p.add_argument("--md", type=Path, default=ROOT / "BENCHMARKS.md",
                   help="the summary markdown file; the section goes into its page "
                        "docs/benchmarks/serving.md beside it (default BENCHMARKS.md)")
    p.add_argument("--json", type=Path, help=f"where to save the results (default {RESULTS} "
                   f"for a full run, none for --quick)")
    p.add_argument("--no-write", action="store_true",
                   help="print the section, leave the markdown file alone")
    args = p.parse_args()
    if args.threads < 1:
        p.error("--threads must be at least 1")
    if args.quick and not args.no_write and args.md == ROOT / "BENCHMARKS.md":
        p.error("--quick numbers are not published: add --no-write or --md ANOTHER.md")
    started = time.perf_counter()
    meta = H.results_meta("cpu", args.threads, {"quick": args.quick})
    results = run(args)
    meta["wall_min"] = (time.perf_counter() - started) / 60
    data = {"meta": meta, "results": results}
    path = args.json or (None if args.quick else RESULTS)
    H.publish(path, data, None if args.no_write else args.md, SECTION,
              lambda _: section(data))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
