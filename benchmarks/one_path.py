"""One path from text to answer: what the library, the service and the file stream cost
when they all run the same predictor (``headwise.intent.inference``).

    python benchmarks/one_path.py                             # measure, write the section
    python benchmarks/one_path.py --quick --no-write          # smoke run (tiny sizes)

A tiny classifier is trained by ``headwise train`` on generated banking queries (five
intents, templated English; a 1-layer, 32-wide Transformer, a few seconds), then, each in
its own process (``_harness.record_run``, so one measurement does not warm the next):

* ``library``: single-query latency of ``load_classifier(MODEL).predict([text])``
  (tokenize, forward on PyTorch, calibrate, decide), after warm-up queries;
* ``service``: single-query latency of ``POST /v1/predict`` with one text, in process
  (fastapi's ``TestClient`` on ``headwise.serve.create_app``, micro-batching on, no
  network);
* ``stream``: texts/s of ``headwise predict MODEL --data in.csv --out out.jsonl`` (the
  whole command, loading the model included, over ``--texts`` texts).

Each run appends one record (its provenance included) to ``results/one_path_cpu.jsonl``;
the section ``one_path:cpu`` is rendered from those records alone. Run it before and after
a change on a quiet machine and compare the rows of the two commits.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402

SECTION = "one_path:cpu"
RESULTS = HERE / "results" / "one_path_cpu.jsonl"
KINDS = ("library", "service", "stream")
ROW = ("kind", "threads")
"""A row of the section (the last record of each kind and thread count)."""
INTENTS = {
    "card_lost": ["i lost my card", "my card was stolen", "block my card please",
                  "i can't find my debit card", "someone took my credit card"],
    "transfer": ["send money to my friend", "transfer fifty pounds to savings",
                 "wire money abroad", "make a payment to my landlord", "move money to my wife"],
    "balance": ["how much money do i have", "what is my balance", "check my account balance",
                "show my current balance", "how much is left in my account"],
    "refund": ["i want a refund", "refund my last purchase", "give me my money back",
               "the shop owes me a refund", "how do i get refunded"],
    "pin": ["change my pin", "i forgot my pin", "reset the pin of my card",
            "my pin is blocked", "how do i set a new pin"],
}
PREFIXES = ["", "hello ", "please ", "hi there, "]
SUFFIXES = ["", " today", " as soon as possible", " because it is urgent and i am travelling"]
#: the recipe of the tiny model: trains in seconds
#: (a plain Transformer: learned positions, no number- or negation-aware heads, as measured)
RECIPE = {"architecture": {"type": "transformer", "d_model": 32, "num_layers": 1,
                          "num_heads": 4, "d_ff": 64, "vocab_size": 300, "max_length": 32,
                          "position": "learned", "model_overrides": {}},
          "train": {"epochs": 4, "batch_size": 16, "lr": 3e-3}}


def queries(n: int, seed: int = 0) -> list[str]:
    """``n`` deterministic queries: a template of an intent with a prefix and a suffix."""
    import numpy as np

    rng = np.random.default_rng(seed)
    texts = [t for ts in INTENTS.values() for t in ts]
    return [f"{PREFIXES[rng.integers(len(PREFIXES))]}{texts[rng.integers(len(texts))]}"
            f"{SUFFIXES[rng.integers(len(SUFFIXES))]}" for _ in range(n)]


def train_model(folder: Path) -> Path:
    """Train the tiny classifier with ``headwise train`` into ``folder/model``."""
    from headwise.cli import main

    folder.mkdir(parents=True, exist_ok=True)
    rows = [(f"{p}{t}{s}", k) for k, ts in INTENTS.items() for t in ts for p in PREFIXES
            for s in SUFFIXES]
    with (folder / "train.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows(rows)
    (folder / "recipe.json").write_text(json.dumps(RECIPE), encoding="utf-8")
    out = folder / "model"
    code = main(["train", "--data", str(folder / "train.csv"), "--config",
                 str(folder / "recipe.json"), "--out", str(out), "--quiet", "--model",
                 "transformer", "--seed", "0"])
    if code != 0:
        raise SystemExit(f"headwise train failed (exit {code})")
    return out


# -- workers: one measurement per process --------------------------------------------------
def _latency(call: Any, texts: list[str], warmup: int) -> dict[str, float]:
    for t in texts[:warmup]:
        call(t)
    times = []
    for t in texts[warmup:]:
        t0 = time.perf_counter()
        call(t)
        times.append(time.perf_counter() - t0)
    ms = sorted(1e3 * t for t in times)
    return {"p50_ms": H.summarize(ms)["median"],
            "p99_ms": ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))], "queries": len(ms)}


def library(spec: dict[str, Any]) -> dict[str, Any]:
    """Single-query latency of the library's ``predict``."""
    from headwise.intent.kinds import load_classifier

    clf = load_classifier(spec["model"])
    return _latency(lambda t: clf.predict([t]), queries(spec["queries"] + spec["warmup"]),
                    spec["warmup"])


def service(spec: dict[str, Any]) -> dict[str, Any]:
    """Single-query latency of ``POST /v1/predict`` in process."""
    from fastapi.testclient import TestClient

    from headwise.serve import ServeConfig, create_app

    app = create_app(ServeConfig(model_dir=spec["model"], threads=spec["threads"]))
    with TestClient(app) as client:
        deadline = time.monotonic() + 60
        while client.get("/readyz").status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("the service did not become ready in 60 s")
            time.sleep(0.01)

        def ask(text: str) -> None:
            r = client.post("/v1/predict", json={"texts": [text]})
            if r.status_code != 200:
                raise RuntimeError(f"/v1/predict answered {r.status_code}: {r.text[:200]}")

        return _latency(ask, queries(spec["queries"] + spec["warmup"]), spec["warmup"])


def stream(spec: dict[str, Any]) -> dict[str, Any]:
    """Texts/s of the whole ``headwise predict --data`` command (model loading included)."""
    from headwise.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "in.csv", Path(tmp) / "out.jsonl"
        with data.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["id", "text"])
            w.writerows(enumerate(queries(spec["texts"], seed=1)))
        t0 = time.perf_counter()
        code = main(["predict", spec["model"], "--data", str(data), "--out", str(out),
                     "--quiet", "--threads", str(spec["threads"])])
        seconds = time.perf_counter() - t0
        if code != 0:
            raise RuntimeError(f"headwise predict --data failed (exit {code})")
        written = sum(1 for _ in out.open(encoding="utf-8"))
    return {"texts": written, "seconds": seconds, "texts_per_s": written / seconds}


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement (the ``--worker`` path)."""
    import torch

    torch.set_num_threads(spec["threads"])
    try:
        return {"status": "ok", **{"library": library, "service": service,
                                   "stream": stream}[spec["kind"]](spec)}
    except Exception as e:  # noqa: BLE001 - every failure becomes a record
        return {"status": "error", "detail": f"{type(e).__name__}: {e}"[:300]}


# -- the section ----------------------------------------------------------------------------
def records(path: Path) -> list[dict[str, Any]]:
    """The records of the results file, the last one per kind and thread count."""
    return sorted(H.done_runs(path, ROW).values(),
                  key=lambda r: (KINDS.index(r["kind"]), r["threads"]))


def render(records: list[dict[str, Any]]) -> str:
    """The ``one_path:cpu`` section from its records."""
    lines = [
        "## One path from text to answer (CPU)", "",
        "The library's `predict`, `/v1/predict` and `headwise predict --data` run the same "
        "predictor (`headwise.intent.inference`). A tiny classifier trained by `headwise "
        "train` (5 intents, a 1-layer, 32-wide Transformer): single-query latency of "
        "`predict([text])` and of `POST /v1/predict` with one text (in process, fastapi's "
        "TestClient, micro-batching on: a request waits up to 5 ms for others), after "
        "warm-up queries; texts/s of the whole "
        "`headwise predict MODEL --data in.csv --out out.jsonl` command, loading the model "
        "included. Each row is one run in its own process.", ""]
    ok = [r for r in records if r.get("status") == "ok"]
    rows = []
    for r in ok:
        if r["kind"] == "stream":
            rows.append([r["kind"], r["threads"], "-", "-", f"{r['texts']:,}",
                         H.fmt(r["texts_per_s"])])
        else:
            rows.append([r["kind"], r["threads"], f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}",
                         f"{r['queries']:,}", "-"])
    lines.append(H.markdown_table(["path", "threads", "p50 ms", "p99 ms", "queries / texts",
                                   "texts/s"], rows, "lrrrrr")
                 if rows else "(not measured: run `python benchmarks/one_path.py`)")
    failed = H.not_measured(records, lambda r: f"{r['kind']} ({r['threads']} threads)")
    if failed:
        lines += ["", "Not measured:", *failed]
    cmds = sorted({r["command"] for r in records if r.get("command")})
    if cmds:
        lines += ["", *(f"`{c}`" for c in cmds)]
    return "\n".join(lines)


def comparison(path: Path = RESULTS) -> str | None:
    """Every run of each commit in the results file, path by path: the median and the range
    of its runs (interleaved runs of two commits on one machine), and the later commit
    against the earliest: "faster" or "slower" only where the two commits' runs do not
    overlap at all, "within noise" otherwise. None with fewer than two commits measured."""
    import statistics

    if not path.is_file():
        return None
    runs = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    runs = [r for r in runs if r.get("status") == "ok" and r.get("provenance")]
    commits: dict[str, str] = {}
    for r in sorted(runs, key=lambda r: r["provenance"].get("date", "")):
        prov = r["provenance"]
        commits.setdefault(prov["commit"], prov.get("date", ""))
    machines = {(r["provenance"].get("cpu"), r["provenance"].get("cores")) for r in runs}
    if len(commits) < 2 or len(machines) != 1:
        return None
    order = list(commits)
    rows = []
    for kind in KINDS:
        key = "texts_per_s" if kind == "stream" else "p50_ms"
        by = {c: [r[key] for r in runs if r["kind"] == kind and r["provenance"]["commit"] == c]
              for c in order}
        first = by[order[0]]
        for c in order:
            vals = by[c]
            if not vals:
                continue
            if c == order[0] or not first:
                verdict = "(reference)" if c == order[0] else "-"
            else:
                above, below = min(vals) > max(first), max(vals) < min(first)
                higher_is_faster = kind == "stream"
                verdict = ("faster" if (above if higher_is_faster else below) else
                           "slower" if (below if higher_is_faster else above) else
                           "within noise")
            unit = "texts/s" if kind == "stream" else "p50 ms"
            rows.append([kind, c[:10], str(len(vals)), unit,
                         H.fmt(statistics.median(vals)),
                         f"{H.fmt(min(vals))} - {H.fmt(max(vals))}", verdict])
    table = H.markdown_table(["path", "commit", "runs", "figure", "median", "range",
                              f"against {order[0][:10]}"], rows, "llrlrrl")
    return ("### Before and after, interleaved on one machine\n\n"
            "Each commit's runs alternated with the other's in one session. With three runs "
            "a side there is no interval to speak of: a difference is called only where "
            "every run of one commit is better than every run of the other.\n\n" + table)


def section(path: Path = RESULTS) -> str:
    """The section as written and rendered (``benchmarks/render.py``): :func:`render` of
    the kept records with the machine line, then :func:`comparison` of every commit
    measured; before any run, it says how to measure."""
    body = H.render_records(render, records(path), ROW)
    extra = comparison(path)
    return body if extra is None else body + "\n\n" + extra


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    H.add_record_args(p, RESULTS, ROOT / "BENCHMARKS.md", timeout_s=600.0)
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes for a smoke run (not published: use with --no-write)")
    p.add_argument("--kinds", default=",".join(KINDS),
                   help=f"what to measure, of {', '.join(KINDS)}")
    p.add_argument("--queries", type=int, default=None,
                   help="single queries timed (default 500; 20 with --quick)")
    p.add_argument("--texts", type=int, default=None,
                   help="texts of the streamed file (default 20000; 300 with --quick)")
    p.add_argument("--model-dir", type=Path, default=None,
                   help="where the tiny model is trained (default: a temporary folder)")
    args = p.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(json.loads(args.worker))), flush=True)
        return 0
    if args.quick and not args.no_write:
        raise SystemExit("--quick numbers are not published; add --no-write")
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise SystemExit(f"--kinds: unknown {unknown}; known: {', '.join(KINDS)}")
    results = args.results
    if not args.render:
        n_queries = args.queries or (20 if args.quick else 500)
        n_texts = args.texts or (300 if args.quick else 20_000)
        folder = args.model_dir or Path(tempfile.mkdtemp(prefix="headwise-one-path-"))
        if args.no_write:  # a smoke run leaves the project's records alone
            results = folder / RESULTS.name
        try:
            model = folder / "model"
            if not (model / "intent.json").is_file():
                print(f"training the tiny model in {folder} ...", file=sys.stderr)
                model = train_model(folder)
            for kind in kinds:
                spec = {"kind": kind, "model": str(model), "threads": args.threads,
                        "queries": n_queries, "warmup": max(5, n_queries // 10),
                        "texts": n_texts}
                rec = H.record_run(Path(__file__), spec, results, args.timeout, kind=kind,
                                   threads=args.threads)
                print(json.dumps({k: v for k, v in rec.items() if k != "provenance"}),
                      file=sys.stderr)
            body = section(results)
        finally:
            if args.model_dir is None:
                shutil.rmtree(folder, ignore_errors=True)
    else:
        body = section(results)
    H.print_or_write(args.md, SECTION, body, no_write=args.no_write)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
