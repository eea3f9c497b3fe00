"""How well ``headwise doctor`` finds wrong labels: labels flipped on purpose, then the rows
it flags as ``label_issue`` against the rows that were flipped.

For each data set, share of flipped rows and kind of flip, over seeds:

* ``random``: a flipped row gets another intent drawn uniformly;
* ``confusable``: it gets the intent that the out-of-fold TF-IDF model confuses its own with
  most on the clean rows (the realistic kind: people mix up neighbouring intents), drawn
  in proportion to that confusion, uniformly where an intent is never confused.

Precision is the share of flagged rows that were flipped, recall the share of flipped rows
that were flagged; the suggested label is right when it is the row's original intent. The
confusion used to choose confusable flips is computed once per data set with a fold seed
that no measured run uses. Data: BANKING77's training split (``--data-dir``, default
``../shared/data``) and the demo corpus's training split (in-scope rows).

``--time-cic N``: the wall time of N whole ``headwise doctor`` runs on DataCLUE CIC's
training file with its dev file as ``--valid`` (a fresh process each, the report written),
as a user runs it; run it alone on the machine.

    python benchmarks/doctor.py --seeds 0,1,2
    python benchmarks/doctor.py --time-cic 3
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402
import _verdicts as V  # noqa: E402
from startup import headwise_command  # noqa: E402

SECTION = "doctor:cpu"
RESULTS = HERE / "results" / "doctor_runs.jsonl"
ROW = ("dataset", "kind", "rate", "seed")
DATASETS = ("banking77", "demo")
#: the fold seed of the clean confusion that confusable flips follow (no run uses it)
CONFUSION_SEED = 1000


def load(dataset: str, data_dir: Path) -> tuple[list[str], list[str]]:
    """The training rows of a data set: (texts, labels)."""
    if dataset == "banking77":
        with open(data_dir / "banking77" / "train.csv", newline="", encoding="utf-8") as f:
            rows = [(r["text"], r["category"]) for r in csv.DictReader(f)]
    elif dataset == "demo":
        from headwise.demo.corpus import generate_demo_corpus
        from headwise.text.labels import is_oos_label

        rows = [(e.text, e.label) for e in generate_demo_corpus(seed=0)["train"]
                if not is_oos_label(e.label)]
    else:
        raise ValueError(f"unknown data set {dataset!r}; known: {DATASETS}")
    return [t for t, _ in rows], [y for _, y in rows]


def confusion(texts: list[str], labels: list[str]) -> dict[str, dict[str, int]]:
    """label -> {intent the out-of-fold model predicted instead: rows} on the clean rows."""
    from headwise.intent.training.cleaning import out_of_fold_probs

    probs, intents = out_of_fold_probs(texts, labels, seed=CONFUSION_SEED)
    out: dict[str, dict[str, int]] = {}
    for y, p in zip(labels, probs.argmax(1), strict=True):
        if intents[p] != y:
            out.setdefault(y, {}).setdefault(intents[p], 0)
            out[y][intents[p]] += 1
    return out


def flip(labels: list[str], rate: float, kind: str, seed: int,
         confused: dict[str, dict[str, int]]) -> tuple[list[str], set[int]]:
    """``labels`` with a share ``rate`` of rows given another intent; the flipped rows."""
    import numpy as np

    rng = np.random.default_rng(seed)
    intents = sorted(set(labels))
    rows = rng.choice(len(labels), size=round(rate * len(labels)), replace=False)
    noisy = list(labels)
    for i in rows:
        y = labels[i]
        near = confused.get(y, {}) if kind == "confusable" else {}
        if near:
            names = sorted(near)
            weights = np.array([near[n] for n in names], dtype=float)
            noisy[i] = names[rng.choice(len(names), p=weights / weights.sum())]
        else:
            others = [k for k in intents if k != y]
            noisy[i] = others[rng.integers(len(others))]
    return noisy, {int(i) for i in rows}


def measure(texts: list[str], labels: list[str], noisy: list[str], flipped: set[int],
            seed: int) -> dict[str, Any]:
    """Run the doctor's examination on the noisy rows and score its label issues."""
    from headwise.intent.doctor import examine

    start = time.perf_counter()
    exam = examine(texts, noisy, list(range(len(texts))), seed=seed)
    seconds = time.perf_counter() - start
    flagged = {f.row: f.suggested_label for f in exam.findings if f.issue == "label_issue"}
    hits = [i for i in flagged if i in flipped]
    return {"status": "ok", "rows": len(texts), "flipped": len(flipped),
            "flagged": len(flagged), "hits": len(hits),
            "precision": len(hits) / len(flagged) if flagged else 0.0,
            "recall": len(hits) / len(flipped) if flipped else 0.0,
            "suggestion_right": (sum(flagged[i] == labels[i] for i in hits) / len(hits)
                                 if hits else 0.0),
            "seconds": round(seconds, 1)}


#: a timing record's ``kind`` (its ``seed`` is the repeat)
CLI_TIME = "cli-time"


def time_cli(data_dir: Path) -> dict[str, Any]:
    """One ``headwise doctor`` run on DataCLUE CIC (train.json, ``--valid`` dev.json) in a
    fresh process, the report written to a temporary directory: its wall time, and the
    rows, findings and per-step seconds of the report's ``summary.json``."""
    cic = data_dir / "dataclue_cic"
    out = Path(tempfile.mkdtemp(prefix="headwise-doctor-time-"))
    try:
        start = time.perf_counter()
        subprocess.run(headwise_command() + [
            "doctor", str(cic / "train.json"), "--valid", str(cic / "dev.json"),
            "--format", "clue", "--out", str(out)], check=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env={**os.environ, "TQDM_DISABLE": "1"})
        wall = time.perf_counter() - start
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"status": "ok", "wall_s": round(wall, 2), "rows": summary["rows"],
            "issues": summary["issues"], "steps": summary["steps"],
            "examine_s": summary["seconds"]}


def render_time(records: list[dict[str, Any]]) -> list[str]:
    """The lines on a doctor run's time on CIC (empty without timing records)."""
    runs = [r for r in records if r.get("status") == "ok" and r["kind"] == CLI_TIME]
    if not runs:
        return []
    walls = [r["wall_s"] for r in runs]
    iv = V.mean_interval(walls)
    steps = sorted(runs[0]["steps"])
    table = H.markdown_table(
        ["step", "seconds (median over runs)"],
        [[k, f"{statistics.median(r['steps'][k] for r in runs):.1f}"] for k in steps]
        + [["examination (all steps)", f"{statistics.median(r['examine_s'] for r in runs):.1f}"],
           ["`headwise doctor` process (wall)", f"{statistics.median(walls):.1f}"]], "lr")
    loads = ", ".join(f"{r['provenance']['loadavg_before']:.2f}" for r in runs)
    return ["", "### Time of a doctor run on DataCLUE CIC", "",
            f"`headwise doctor train.json --valid dev.json --format clue --out DIR` on CIC "
            f"({runs[0]['rows']} training rows), each run a fresh process that writes the "
            f"report, the default TF-IDF out-of-fold model (5 folds); {len(runs)} runs: mean "
            f"wall time "
            + (f"{iv.mean:.1f} s [{iv.low:.1f}, {iv.high:.1f}] (95 % t-interval over the "
               f"runs)" if iv else f"{walls[0]:.1f} s (one run)")
            + f", median {statistics.median(walls):.1f} s. The 1-minute load average at "
            f"each start: {loads} (on {runs[0]['provenance']['cores']} logical CPUs; it "
            f"counts what ran in the minute before, this benchmark's previous run "
            f"included).", "", table]


def _interval(values: list[float]) -> str:
    """The mean and its 95 % t-interval over seeds, in percent."""
    from scipy import stats

    m = statistics.mean(values)
    if len(values) < 2:
        return f"{100 * m:.1f}"
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    low, high = max(0.0, m - half), min(1.0, m + half)  # a share stays in [0, 1]
    return f"{100 * m:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def render(records: list[dict[str, Any]]) -> str:
    """The ``doctor:cpu`` section from its records."""
    ok = [r for r in records if r.get("status") == "ok" and r["kind"] != CLI_TIME]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in ok:
        groups.setdefault((r["dataset"], r["kind"], r["rate"]), []).append(r)
    rows = []
    for (ds, kind, rate), rs in sorted(groups.items()):
        rows.append([ds, kind, f"{100 * rate:.0f} %", str(len(rs)), str(rs[0]["rows"]),
                     _interval([r["precision"] for r in rs]),
                     _interval([r["recall"] for r in rs]),
                     _interval([r["suggestion_right"] for r in rs])])
    lines = ["## Finding wrong labels: `headwise doctor` (CPU)", "",
             "Labels flipped on purpose in the training split (random: another intent drawn "
             "uniformly; confusable: the intent the out-of-fold TF-IDF model confuses the "
             "row's own with most on the clean rows), then the rows `headwise doctor` flags "
             "as `label_issue` (cleanlab's `find_label_issues` on 5-fold out-of-fold TF-IDF "
             "probabilities) against the flipped rows. Mean over seeds (each seed flips other "
             "rows and folds differently) with its 95 % t-interval; suggestion right: the "
             "share of correctly flagged rows whose suggested label is the original intent. "
             "Each record keeps the examination's wall time, not shown: these runs may share "
             "the machine with other work (a doctor run's time, measured alone, is the CIC "
             "timing below). What training on the rows the doctor keeps does to a model: "
             "DataCLUE CIC's fine-tuned multilingual-e5-small on the rows `--fix drop` keeps "
             "against the raw rows and the TF-IDF floor, `intent:cpu` "
             "([Targets](intent.md#targets), `e5-small-lpft-prior-doctor`).", ""]
    lines.append(H.markdown_table(
        ["data", "flips", "rate", "seeds", "rows", "precision %", "recall %",
         "suggestion right %"], rows, "llrrrrrr")
        if rows else "(not measured: run `python benchmarks/doctor.py`)")
    lines += render_time(records)
    cmds = sorted({r["command"] for r in records if r.get("command")})
    if cmds:
        lines += ["", *(f"`{c}`" for c in cmds)]
    return "\n".join(lines)


def records(path: Path = RESULTS) -> list[dict[str, Any]]:
    """The kept records (the last of each data set, kind, rate and seed)."""
    return list(H.done_runs(path, ROW).values())


def section(path: Path = RESULTS) -> str:
    """The section as written and rendered (``benchmarks/render.py``)."""
    return H.render_records(render, records(path), ("dataset", "kind", "rate"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data")
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--rates", default="0.1,0.3")
    p.add_argument("--kinds", default="random,confusable")
    p.add_argument("--time-cic", type=int, metavar="N", default=0,
                   help="instead: time N whole `headwise doctor` runs on DataCLUE CIC")
    H.add_record_args(p, RESULTS, HERE.parent / "BENCHMARKS.md", timeout_s=1800)
    args = p.parse_args(argv)
    if args.time_cic and not args.render:
        for repeat in range(args.time_cic):
            start, prov = time.time(), H.collect_provenance(args.threads)
            rec = H.append_record(args.results, time_cli(args.data_dir), start,
                                  provenance=prov, dataset="dataclue_cic", kind=CLI_TIME,
                                  rate=0.0, seed=repeat, threads=args.threads)
            print(f"doctor on CIC, run {repeat}: {rec['wall_s']} s", file=sys.stderr,
                  flush=True)
    elif not args.render:
        import torch

        torch.set_num_threads(args.threads)
        done = H.done_runs(args.results, ROW)
        for ds in args.datasets.split(","):
            texts, labels = load(ds, args.data_dir)
            confused = confusion(texts, labels)
            for kind in args.kinds.split(","):
                for rate in (float(x) for x in args.rates.split(",")):
                    for seed in (int(s) for s in args.seeds.split(",")):
                        if (ds, kind, rate, seed) in done and not args.rerun:
                            continue
                        start, prov = time.time(), H.collect_provenance(args.threads)
                        noisy, flipped = flip(labels, rate, kind, seed, confused)
                        rec = measure(texts, labels, noisy, flipped, seed)
                        rec = H.append_record(args.results, rec, start, provenance=prov,
                                              dataset=ds, kind=kind, rate=rate, seed=seed,
                                              threads=args.threads)
                        print(f"{ds} {kind} {rate} seed {seed}: precision "
                              f"{rec['precision']:.3f} recall {rec['recall']:.3f} "
                              f"({rec['seconds']} s)", file=sys.stderr, flush=True)
    H.print_or_write(args.md, SECTION, section(args.results), no_write=args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
