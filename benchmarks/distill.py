"""Distillation: small students of a fine-tuned teacher, against the teacher, on DataCLUE CIC,
the demo corpus's held-out phrasing and BANKING77.

Every (student, data, seed) distils the teacher model directory given by ``--teacher`` (a
classifier saved by ``headwise train``, e.g. multilingual-e5-small fine-tuned on CIC as
``benchmarks/intent.py --configs e5-small-lpft-prior --keep-models DIR`` keeps it) with
:func:`headwise.intent.distill` in its own process, is scored on test_public.json, and has
its single-query latency (PyTorch, and the fused ONNX export ``headwise serve`` runs) and
its batch-32 throughput measured on CPU; the teacher is measured the same way once. Each
student's accuracy, macro-F1, p50 and throughput are reported as a share of the teacher's.

Datasets (``--dataset``) and their splits:

* ``dataclue_cic`` (as ``benchmarks/intent.py``): train.json + dev.json (noisy by design)
  minus a seeded, stratified 10 % validation split; test_public.json (clean) is never
  trained on;
* ``demo``: the folder ``headwise demo --out DIR`` writes as ``DIR/data`` (``--data``):
  train.csv, and valid.csv / test.csv, whose template families (phrasing) no training
  question shares; the teacher is that run's ``DIR/pretrained`` (fine-tuned
  multilingual-e5-small), so the students are scored on phrasing neither saw;
* ``banking77``: train.csv minus a seeded, stratified 10 % validation split; test.csv.

Data variants (``--variants``):

* ``all``: every training row labelled;
* ``alone``: the control: the same student (architecture, recipe, seed, rows as ``all``)
  trained on the labels alone, the teacher's soft targets weighted 0 (``alpha=0``): what
  the teacher adds over training the student without it. A ``truncate:K`` student keeps
  its start from the teacher's first K layers here, so its control isolates the soft
  targets;
* ``half``: a seeded, stratified half of the training rows labelled, the other half unused;
* ``half+unl``: the same labelled half, and the other half's texts as unlabelled texts (their
  labels hidden): what the unlabelled texts add to the transfer. The teacher itself was
  trained on all the labels, so this measures the student's use of unlabelled texts, not
  semi-supervised learning from scratch.

Every student's process also measures the teacher's latency right after its own (the same
queries, the same load), so each seed's latency share is paired; a single teacher
measurement moved by a quarter between runs of the same model.

Target: one student at most 1/4 of the teacher's serving p50 (ONNX where the model exports;
PyTorch for the BiLSTM and for ensembles, which ``headwise serve`` runs on PyTorch) with at
least 97 % of the teacher's macro-F1 (data ``all``): the share of the p50 judged on the
geometric mean of the per-seed paired shares and its 95 % interval, the macro-F1 share on
the students' mean over seeds and its t-interval over the teacher's score. Beside it, each
student against its control (``all`` - ``alone``, macro-F1 paired by seed). The teacher is
the strongest model available on the data: on CIC, multilingual-e5-small blended with the
TF-IDF floor (``benchmarks/intent.py``'s ``e5-small-lpft-prior-blend``, BENCHMARKS
``blend``).

    python benchmarks/distill.py --teacher /tmp/intent_models/dataclue_cic-e5-small-lpft-prior-0
    python benchmarks/distill.py --dataset demo --teacher /tmp/demo/pretrained \
        --data /tmp/demo/data --students transformer,bilstm,truncate:2 --variants all
    python benchmarks/distill.py --teacher DIR --students truncate:2 --seeds 0
    python benchmarks/distill.py --teacher DIR --quick     # a smoke test: a 20th of the data
    python benchmarks/distill.py --render                  # the section from the results file
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402
import _verdicts as V  # noqa: E402

RESULTS = HERE / "results" / "distill_runs.jsonl"
KEY = ("dataset", "teacher_sha256", "student", "data", "seed")
DATASETS = ("dataclue_cic", "demo", "banking77")
#: the student's recipe by part, per kind (``truncate:K`` takes the "truncate" entry)
RECIPES: dict[str, dict[str, Any]] = {
    # benchmarks/intent.py's transformer-concat-ln-rope, its best from-scratch Transformer
    "transformer": {"architecture": {"d_model": 128, "num_layers": 2, "num_heads": 8,
                                     "d_ff": 512, "position": "rope", "dropout": 0.1,
                                     "attention_dropout": 0.1, "max_length": 64,
                                     "model_overrides": {}},
                    "train": {"epochs": 10, "patience": 3, "lr": 1e-3, "warmup_ratio": 0.1},
                    "levers": {"label_smoothing": 0.1}, "task": {"select_on": "macro_f1"}},
    # benchmarks/intent.py's bilstm
    "bilstm": {"architecture": {"lstm_embed_dim": 200, "lstm_hidden": 200,
                                "lstm_pooling": "max", "dropout": 0.3, "max_length": 64},
               "train": {"epochs": 10, "patience": 3, "lr": 2e-3},
               "levers": {"label_smoothing": 0.1}, "task": {"select_on": "macro_f1"}},
    # the teacher's first K layers fine-tune as a pretrained encoder does, a little faster
    "truncate": {"architecture": {"max_length": 64},
                 "train": {"epochs": 4, "patience": 2, "lr": 1e-4, "warmup_ratio": 0.1},
                 "levers": {"label_smoothing": 0.1}, "task": {"select_on": "macro_f1"}},
}
STUDENTS = ("transformer", "bilstm", "truncate:2", "truncate:4")
VARIANTS = ("all", "alone", "half", "half+unl")
TARGET_P50_SHARE, TARGET_F1_SHARE = 0.25, 0.97


# --- one run per process -----------------------------------------------------------------------
def load_data(dataset: str, root: Path, quick: bool) -> tuple[Any, Any, Any]:
    """``(train, valid, test)`` readers' Datasets of ``dataset`` (:data:`DATASETS`; ``valid``
    None where the benchmark carves it from ``train``)."""
    from headwise.text.readers import read_examples

    valid = None
    if dataset == "dataclue_cic":
        train = read_examples(root / "train.json", format="clue")
        train.examples.extend(read_examples(root / "dev.json", format="clue").examples)
        test = read_examples(root / "test_public.json", format="clue")
    elif dataset == "demo":
        train, valid, test = (read_examples(root / f"{s}.csv", format="csv")
                              for s in ("train", "valid", "test"))
    elif dataset == "banking77":
        train = read_examples(root / "train.csv", format="csv")
        test = read_examples(root / "test.csv", format="csv")
    else:
        raise ValueError(f"unknown dataset {dataset!r}; known: {DATASETS}")
    if quick:
        for part in (train, valid, test):
            if part is not None:
                part.examples[:] = part.examples[::20]
    return train, valid, test


def split_variant(texts: list[str], labels: list[str], variant: str, seed: int
                  ) -> tuple[list[tuple[str, str]], list[str]]:
    """The labelled rows and the unlabelled texts of a data variant (:data:`VARIANTS`)."""
    from headwise.intent.training.data import validation_split

    if variant in ("all", "alone"):
        return list(zip(texts, labels, strict=True)), []
    kept, hidden, kept_y, _ = validation_split(texts, labels, 0.5, seed)
    return list(zip(kept, kept_y, strict=True)), (hidden if variant == "half+unl" else [])


def measure(clf: Any, texts: list[str], quick: bool) -> dict[str, Any]:
    """Single-query p50/p99 and batch-32 throughput on PyTorch, and the ONNX p50 (None for
    a model without an ONNX export: the BiLSTM is served on PyTorch)."""
    from intent import onnx_latency

    from headwise.intent import measure_latency
    from headwise.models.encoder import EncoderClassifier

    load = os.getloadavg()[0]
    latency = measure_latency(clf, texts, queries=30 if quick else 200,
                              batches=3 if quick else 20)
    onnx = onnx_latency(clf, texts, queries=30 if quick else 200) \
        if isinstance(getattr(clf, "model", None), EncoderClassifier) else None
    return {**latency, "loadavg": load, "onnx": onnx}


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Distil, test and time one (student, data, seed) in this process; or the teacher."""
    import torch

    from headwise.intent import distill, evaluate
    from headwise.intent.training.data import in_scope, validation_split
    from headwise.intent.training.distillation import parse_student
    from headwise.intent.training.teacher import TARGETS_FILE, TARGETS_WEIGHTS, load_teacher

    torch.set_num_threads(spec["threads"])
    train, valid, test = load_data(spec["dataset"], Path(spec["data_dir"]), spec["quick"])
    if spec["student"] == "teacher":
        clf = load_teacher(spec["teacher"])
        report = evaluate(clf, test.texts, test.labels)
        return {"status": "ok", "accuracy": report["accuracy"], "macro_f1": report["macro_f1"],
                "oos_recall": report.get("oos_recall"),
                "latency": measure(clf, test.texts, spec["quick"]),
                "parameters": sum(p.numel() for p in clf.model.parameters())
                if hasattr(clf, "model") else None}
    kind, _ = parse_student(spec["student"])
    recipe = H.recipe_with(RECIPES[kind], train={
        "seed": spec["seed"], "progress": False, **({"epochs": 1} if spec["quick"] else {})})
    texts, labels = in_scope(list(train.texts), list(train.labels), "training")
    if valid is None:
        texts, v_texts, labels, v_labels = validation_split(texts, labels, 0.1, spec["seed"])
    else:  # the dataset's own (held-out phrasing, out-of-scope rows included)
        v_texts, v_labels = list(valid.texts), list(valid.labels)
    rows, unlabelled = split_variant(texts, labels, spec["variant"], spec["seed"])
    out = Path(tempfile.mkdtemp(prefix="headwise-distill-"))
    # the teacher's soft targets are shared by the runs (keyed by text and by the teacher's
    # fingerprint; distill computes only the texts the copy lacks)
    shared = Path(tempfile.gettempdir()) / f"headwise-distill-targets-{spec['sha256'][:16]}"
    for name in (TARGETS_WEIGHTS, TARGETS_FILE):
        if (shared / name).is_file():
            shutil.copy2(shared / name, out / name)
    try:
        run = distill(spec["teacher"], rows, list(zip(v_texts, v_labels, strict=True)),
                      out_dir=out, student=spec["student"], recipe=recipe,
                      temperature=spec["temperature"],
                      alpha=0.0 if spec["variant"] == "alone" else spec["alpha"],
                      unlabelled=unlabelled, augment=spec["augment"])
        shared.mkdir(exist_ok=True)
        for name in (TARGETS_WEIGHTS, TARGETS_FILE):  # the index last: a reader sees both
            shutil.copy2(out / name, shared / f".{name}.tmp")
            os.replace(shared / f".{name}.tmp", shared / name)
        clf = run.classifier
        report = evaluate(clf, test.texts, test.labels)
        info = clf.info["distill"]
        return {"status": "ok", "accuracy": report["accuracy"], "macro_f1": report["macro_f1"],
                "oos_recall": report.get("oos_recall"), "valid": run.valid_metrics,
                "train_seconds": run.train_seconds,
                "soft_target_seconds": info["soft_targets"]["seconds"],
                "epochs": clf.info["epochs"], "stopped_early": clf.info["stopped_early"],
                "labelled": info["labelled"], "unlabelled": info["unlabelled"],
                "augmented": (info["augmentation"] or {}).get("rows", 0),
                "teacher_sha256": info["teacher"]["sha256"],
                "parameters": sum(p.numel() for p in clf.model.parameters()),
                "latency": measure(clf, test.texts, spec["quick"]),
                # the teacher in the same process right after: a paired latency share
                "teacher_latency": measure(load_teacher(spec["teacher"]), test.texts,
                                           spec["quick"])}
    finally:
        shutil.rmtree(out, ignore_errors=True)


# --- the report --------------------------------------------------------------------------------
def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def serving_p50(rec: dict[str, Any]) -> float | None:
    """The p50 of the path ``headwise serve`` runs: ONNX when exported, else PyTorch."""
    lat = rec.get("latency") or {}
    return (lat.get("onnx") or {}).get("p50_ms") or lat.get("p50_ms")


def summarise(runs: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The teacher's record and one row per (student, data): means over seeds, and shares
    of the teacher's."""
    ok = [r for r in runs if r.get("status") == "ok"]
    teacher = next((r for r in ok if r["student"] == "teacher"), None)
    rows = []
    for student, data in dict.fromkeys((r["student"], r["data"]) for r in ok
                                       if r["student"] != "teacher"):
        rs = [r for r in ok if r["student"] == student and r["data"] == data]
        row: dict[str, Any] = {
            "student": student, "data": data, "seeds": sorted(r["seed"] for r in rs),
            "accuracy": _mean([r["accuracy"] for r in rs]),
            "macro_f1": _mean([r["macro_f1"] for r in rs]),
            "f1_std": statistics.stdev([r["macro_f1"] for r in rs]) if len(rs) > 1 else 0.0,
            "p50_ms": _mean([r["latency"]["p50_ms"] for r in rs]),
            "onnx_p50_ms": _mean([r["latency"]["onnx"]["p50_ms"] for r in rs
                                  if r["latency"].get("onnx")]),
            "serve_p50_ms": _mean([serving_p50(r) for r in rs]),
            "throughput": _mean([r["latency"]["throughput_per_s"] for r in rs]),
            "parameters": _mean([r["parameters"] for r in rs]),
            "unlabelled": _mean([r["unlabelled"] for r in rs]),
            "labelled": _mean([r["labelled"] for r in rs]),
            "train_seconds": _mean([r["train_seconds"] for r in rs]),
            "f1_by_seed": {r["seed"]: r["macro_f1"] for r in rs},
            # each seed's serving p50 over the teacher's measured in the same process
            # (records before that pairing: over the teacher's one measurement)
            "serve_pairs": [(serving_p50(r), serving_p50({"latency": r["teacher_latency"]})
                             if r.get("teacher_latency") else
                             serving_p50(teacher) if teacher else None) for r in rs],
            "paired": all(r.get("teacher_latency") for r in rs)}
        if teacher is not None:
            t = teacher
            row.update(
                acc_share=row["accuracy"] / t["accuracy"],
                f1_share=row["macro_f1"] / t["macro_f1"],
                p50_share=row["p50_ms"] / t["latency"]["p50_ms"],
                onnx_share=None if row["onnx_p50_ms"] is None or not t["latency"].get("onnx")
                else row["onnx_p50_ms"] / t["latency"]["onnx"]["p50_ms"],
                serve_share=row["serve_p50_ms"] / serving_p50(t),
                throughput_x=row["throughput"] / t["latency"]["throughput_per_s"])
        rows.append(row)
    return teacher, rows


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


#: how each dataset's subsection names its data and test split
_ABOUT = {
    "dataclue_cic": "DataCLUE CIC: train + dev minus a 10 % validation split; test_public "
                    "(clean labels)",
    "demo": "the demo corpus (`headwise demo`'s data, seed 0): validation and test share no "
            "template family with training; the teacher is that run's fine-tuned "
            "multilingual-e5-small; accuracy and macro-F1 on the in-scope test questions",
    "banking77": "BANKING77: train.csv minus a 10 % validation split; test.csv",
}


def render(runs: list[dict[str, Any]]) -> str:
    """The BENCHMARKS.md section: one subsection per dataset."""
    parts = ["## Distillation on cpu: students of a fine-tuned teacher", "",
             "Per-run records in `benchmarks/results/distill_runs.jsonl` (one process per run; "
             "`python benchmarks/distill.py --render` rebuilds this section). The target "
             "(the issue's) is judged on DataCLUE CIC; the other datasets show how the "
             "transfer holds on phrasing the teacher never saw (the demo) and on English "
             "(BANKING77)."]
    for dataset in DATASETS:
        subset = [r for r in runs if r.get("dataset", "dataclue_cic") == dataset]
        teachers = list(dict.fromkeys(r.get("teacher_sha256") for r in subset))
        for sha in teachers:  # one subsection per teacher, in the order first measured
            own = [r for r in subset if r.get("teacher_sha256") == sha]
            title = dataset if len(teachers) == 1 else \
                f"{dataset}, teacher `{Path(own[0]['teacher']).name}`"
            # an earlier teacher measured before records kept provenance (its model gone)
            # shows its rows but judges nothing: a later teacher of the dataset is judged
            superseded = sha != teachers[-1] and not any(r.get("provenance") for r in own)
            parts += ["", render_dataset(dataset, own, title, judge=not superseded)]
    return "\n".join(parts)


def render_dataset(dataset: str, runs: list[dict[str, Any]], title: str | None = None,
                   judge: bool = True) -> str:
    """One dataset's subsection (``title``: its heading, default the dataset's name);
    ``judge=False`` (an earlier teacher whose records predate provenance) leaves out the
    target's verdict and the distilled-against-alone comparison and says why."""
    title = title or dataset
    teacher, rows = summarise(runs)
    if teacher is None:
        return f"### {title}\n\nThe teacher has not been measured yet."
    commands = sorted({r.get("command", "") for r in runs})
    dates = sorted(r["date"] for r in runs if r.get("date"))
    t = teacher
    lines = [
        f"### {title}",
        "",
        f"{_ABOUT[dataset]}. Produced by {', '.join(f'`{c}`' for c in commands)} between "
        f"{dates[0]} and {dates[-1]}. Teacher: "
        f"`{t['teacher']}` (SHA-256 `{(t.get('teacher_sha256') or '')[:12]}`): test accuracy "
        f"{100 * t['accuracy']:.2f} %, macro-F1 {100 * t['macro_f1']:.2f} %, single-query p50 "
        f"{t['latency']['p50_ms']:.2f} ms (PyTorch), "
        + (f"{t['latency']['onnx']['p50_ms']:.2f} ms (ONNX), " if t["latency"].get("onnx")
           else "") + f"{t['latency']['throughput_per_s']:.0f} texts/s at batch 32, on "
        f"{t.get('threads', 2)} threads. Data `all`: every training row labelled; `alone`: "
        f"the same student on the same rows without the teacher (its soft targets weighted "
        f"0); `half`: a seeded stratified half labelled; `half+unl`: that half plus the other "
        f"half's texts unlabelled (the teacher saw all labels). The serving p50 share is "
        f"paired by seed (the teacher timed in each student's process; `unpaired`: against "
        f"the teacher's one measurement, records before the pairing).",
        "",
    ]
    table = []
    for r in rows:
        f1 = V.mean_interval(list(r["f1_by_seed"].values()))
        share = _p50_share(r)
        table.append([f"`{r['student']}`", r["data"], ",".join(map(str, r["seeds"])),
                      f"{100 * r['accuracy']:.2f} ({_pct(r.get('acc_share'))})",
                      (f"{100 * r['macro_f1']:.2f}" if f1 is None else f1.pct())
                      + f" ({_pct(r.get('f1_share'))})",
                      "-" if share is None else share.plain() + ("" if r["paired"]
                                                                 else " (unpaired)"),
                      f"{r['p50_ms']:.2f}",
                      "-" if r["onnx_p50_ms"] is None else f"{r['onnx_p50_ms']:.2f}",
                      f"{r['throughput']:.0f} ({r.get('throughput_x', 0):.1f}x)",
                      f"{r['parameters'] / 1e6:.2f} M", f"{r['unlabelled']:.0f}",
                      f"{r['train_seconds']:.0f}"])
    lines.append(H.markdown_table(
        ["student", "data", "seeds", "accuracy % (of teacher)",
         "macro-F1 % [95 %] (of teacher)", "serving p50 / teacher's [95 %]",
         "p50 ms PyTorch", "p50 ms ONNX", "texts/s b32 (x teacher)", "parameters",
         "unlabelled", "train s"], table))
    if not judge:
        lines += ["", "No verdict: these records predate provenance (no commit or machine "
                  "recorded) and their teacher's directory is gone; the target is judged on this "
                  "dataset's later teacher below, with each student's control."]
        return "\n".join(lines)
    judged = [r for r in rows if r["data"] == "all"]
    checks = {r["student"]: _target_checks(r, t) for r in judged}
    per_student = {name: V.combined([v for v, _ in c]) if c else "NOT MEASURED"
                   for name, c in checks.items()}
    if not judged:
        verdict, evidence = "NOT MEASURED", "no student measured on data `all`"
    else:
        order = ("PASS", "within noise", "FAIL", "NOT MEASURED")
        best = min(judged, key=lambda r: (order.index(per_student[r["student"]]),
                                          -(r.get("f1_share") or 0.0)))
        verdict = per_student[best["student"]]
        evidence = (f"`{best['student']}`: "
                    + "; ".join(e for _, e in checks[best["student"]])
                    if checks[best["student"]] else
                    f"`{best['student']}`: fewer than two seeds, no interval")
    what = (f"a student at <= {TARGET_P50_SHARE:.0%} of the teacher's serving p50 with >= "
            f"{TARGET_F1_SHARE:.0%} of its macro-F1")
    if dataset != "dataclue_cic":
        what += " (for comparison; the target is CIC's)"
    lines += ["", H.markdown_table(["target", "verdict", "evidence"], [[what, verdict, evidence]],
                                   "lll")]
    controls = []
    for r in judged:
        alone = next((c for c in rows if c["student"] == r["student"]
                      and c["data"] == "alone"), None)
        seeds = sorted(set(r["f1_by_seed"]) & set(alone["f1_by_seed"])) if alone else []
        if len(seeds) >= 2:
            iv = V.seed_paired_difference([r["f1_by_seed"][k] for k in seeds],
                                          [alone["f1_by_seed"][k] for k in seeds])
            word = "BETTER" if iv.low > 0 else "WORSE" if iv.high < 0 else "within noise"
            controls.append([f"`{r['student']}`", ",".join(map(str, seeds)), word,
                             f"{iv.points()} points"])
    if controls:
        lines += ["", "Each student distilled (`all`) against the same student trained on the "
                  "same rows without the teacher (`alone`), macro-F1 paired by seed:", "",
                  H.markdown_table(["student", "seeds", "distilled - alone", "macro-F1 "
                                    "difference [95 %]"], controls, "llll")]
    bad = H.not_measured(runs, lambda r: f"{r['student']} {r['data']} seed {r['seed']}")
    if bad:
        lines += ["", "Not measured:", *bad]
    return "\n".join(lines)


def _p50_share(row: dict[str, Any]) -> Any:
    """A row's serving p50 over the teacher's: the geometric mean of its seeds' shares and its
    95 % interval (:func:`_verdicts.ratio_interval`), None with fewer than two measured."""
    pairs = [(a, b) for a, b in row["serve_pairs"] if a and b]
    if len(pairs) < 2:
        return None
    return V.ratio_interval([a for a, _ in pairs], [b for _, b in pairs])


def _target_checks(row: dict[str, Any], teacher: dict[str, Any]) -> list[tuple[str, str]]:
    """The two checks of the target for one student on data ``all``, each ``(verdict,
    evidence)``: its serving p50 share (paired by seed) at most :data:`TARGET_P50_SHARE`, and
    its macro-F1 (mean over seeds, t-interval) at least :data:`TARGET_F1_SHARE` of the
    teacher's; none with fewer than two seeds."""
    share = _p50_share(row)
    f1 = V.mean_interval(list(row["f1_by_seed"].values()))
    if share is None or f1 is None:
        return []
    tf = teacher["macro_f1"]
    f1_share = V.Interval(f1.mean / tf, f1.low / tf, f1.high / tf)
    return [(V.judge_at_most(share, TARGET_P50_SHARE),
             f"serving p50 {share.plain()} of the teacher's"),
            (V.judge(f1_share, TARGET_F1_SHARE),
             f"macro-F1 {f1_share.plain()} of the teacher's")]


# --- driver ------------------------------------------------------------------------------------
def load_runs(path: Path) -> dict[tuple, dict[str, Any]]:
    """The records of the results file by :data:`KEY`, the last one of a key winning (the
    records from before the datasets were added are CIC's)."""
    runs: dict[tuple, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                r.setdefault("dataset", "dataclue_cic")
                runs[tuple(r.get(k) for k in KEY)] = r
    return runs


ROW = ("dataset", "teacher_sha256", "student", "data")
"""A row of the section (one teacher's student on one data variant): its seeds' records
share one commit and machine (H.unmixed); another teacher's rows are other rows."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--teacher", type=Path, help="the teacher's model directory")
    p.add_argument("--dataset", choices=DATASETS, default="dataclue_cic")
    p.add_argument("--data", type=Path, default=None,
                   help="the dataset's folder (default: ../shared/data/DATASET from the repo "
                        "root; for demo, the data folder a `headwise demo --out DIR` run "
                        "wrote, DIR/data)")
    p.add_argument("--students", default=",".join(STUDENTS))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--temperature", type=float, default=2.0)
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--augment", default="", help="augmentation kinds, comma-separated")
    H.add_record_args(p, RESULTS, HERE.parent / "BENCHMARKS.md", timeout_s=7200.0,
                      unit="run")
    p.add_argument("--quick", action="store_true",
                   help="a smoke test: a 20th of the data, 1 epoch, short timings; results "
                   "in a temporary file, BENCHMARKS.md untouched")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if H.answered_as_worker(args, worker):
        return 0
    H.divert_smoke_runs(args, RESULTS)
    if not args.render:
        if args.teacher is None or not args.teacher.is_dir():
            sys.exit(f"--teacher must name the teacher's model directory, got {args.teacher}")
        from headwise.intent.training.teacher import directory_fingerprint

        if args.data is None:
            if args.dataset == "demo":
                sys.exit("--dataset demo needs --data DIR/data of a `headwise demo --out DIR` "
                         "run (its DIR/pretrained is the teacher)")
            args.data = HERE.parent.parent / "shared" / "data" / args.dataset
        sha = directory_fingerprint(args.teacher)
        done = {} if args.rerun else {k: r for k, r in load_runs(args.results).items()
                                      if r.get("teacher_sha256") == sha
                                      and r.get("status") == "ok"}  # failures are retried
        plan = [(args.dataset, sha, "teacher", "all", 0)] + [
            (args.dataset, sha, st, v, int(s)) for s in args.seeds.split(",")
            for st in args.students.split(",") for v in args.variants.split(",")]
        todo = [k for k in plan if k not in done]
        print(f"{len(plan)} runs planned, {len(plan) - len(todo)} already measured",
              file=sys.stderr)
        args.results.parent.mkdir(parents=True, exist_ok=True)
        for i, (dataset, _, student, variant, seed) in enumerate(todo, 1):
            print(f"[{i}/{len(todo)}] {dataset} {student} {variant} seed {seed} ...",
                  file=sys.stderr, flush=True)
            spec = {"dataset": dataset, "student": student, "variant": variant, "seed": seed,
                    "teacher": str(args.teacher), "data_dir": str(args.data),
                    "quick": args.quick, "threads": args.threads, "sha256": sha,
                    "temperature": args.temperature, "alpha": args.alpha,
                    "augment": [k for k in args.augment.split(",") if k]}
            rec = H.record_run(Path(__file__), spec, args.results, args.timeout,
                               dataset=dataset, student=student, data=variant, seed=seed,
                               quick=args.quick, teacher=str(args.teacher),
                               teacher_sha256=sha, threads=args.threads,
                               temperature=args.temperature, alpha=args.alpha,
                               augment=spec["augment"])
            f1 = rec.get("macro_f1")
            print(f"    {rec['status']}: macro-F1 {f1 if f1 is None else round(f1, 4)}, "
                  f"{rec['wall_s']:.0f} s" + (f" ({rec.get('detail')})"
                                               if rec["status"] != "ok" else ""),
                  file=sys.stderr, flush=True)
    if not args.results.is_file():
        sys.exit(f"no results in {args.results}: run the benchmark first")
    body = H.render_records(render, list(load_runs(args.results).values()), ROW)
    H.print_or_write(args.md, "distill:cpu", body, no_write=args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
