"""What the out-of-scope threshold's rule does to saved models: the library's reject budget
against the alternatives, chosen on the validation split and scored on the test split.

The library chooses an out-of-scope threshold on validation rows as the best balance of
in-scope accuracy (a rejected in-scope row counts as wrong) and out-of-scope recall, among
the thresholds whose in-scope reject rate has a one-sided 95 % Clopper-Pearson upper bound
within a 5 % budget (:mod:`headwise.intent.decision.oos`). On few in-scope validation rows
that bound allows almost no rejection (108 rows: one), and a weak model's budget counts the
rejection of a question it would have answered wrongly like the loss of a right answer.
This script measures, on models a user already has (``headwise demo`` writes them, with
their data), what these rules choose:

* ``reject``: the library's rule (budget on every in-scope row rejected, kept with 95 %
  confidence);
* ``reject-rate``: the same budget on the validation rate alone (``reject_confidence=None``);
* ``withheld``: the budget on the in-scope rows the model answers right that the threshold
  rejects (the loss of in-scope accuracy the threshold causes), kept with 95 % confidence;
* ``withheld-rate``: the same on the validation rate alone;
* ``none``: the balanced optimum without a budget.

For each rule, every detector of the recipe's ``"auto"`` (``AUTO_CANDIDATES``) is fitted on
the model's training rows and thresholded on the validation rows by the rule, and the one
with the best validation balance is kept (``select_detector``, as training does); the test
split is only scored: in-scope reject rate, right answers withheld, accuracy with the
threshold, out-of-scope recall, and the recall of the demo's near misses (template family
``oos_near``) and off-topic questions (``oos``) apart. Nothing is timed.

    ./run demo            # writes headwise-demo/ (models and data/)
    python benchmarks/oos_rules.py headwise-demo/bilstm headwise-demo/transformer \\
        headwise-demo/pretrained --data headwise-demo/data --out oos_rules.json
    python benchmarks/oos_rules.py MODEL --data DIR --smoke   # the first 200 rows a split

Network classifiers only (a TF-IDF model has only the top probability). The printed tables
are for a decision; they are not a BENCHMARKS section.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

#: the rules compared: name -> (what the budget counts, confidence; None: no budget)
RULES: dict[str, tuple[str, float | None] | None] = {
    "reject": ("rejected", 0.95), "reject-rate": ("rejected", None),
    "withheld": ("withheld", 0.95), "withheld-rate": ("withheld", None), "none": None}
#: the demo's out-of-scope template families: family -> group name
GROUPS = {"oos_near": "near_miss", "oos": "off_topic"}


def read_split(path: Path, index: dict[str, int], limit: int | None
               ) -> tuple[list[str], np.ndarray, list[str]]:
    """``(texts, gold, family)`` of a demo CSV (gold -1 out of scope, -2 an intent the
    model does not know; family: the template's, ``""`` without the column)."""
    from headwise.text.labels import is_oos_label

    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))[:limit]
    gold = np.array([-1 if is_oos_label(r["label"]) else index.get(r["label"], -2)
                     for r in rows], dtype=np.int64)
    family = [(r.get("template") or "").split(":")[0].split(".")[0] for r in rows]
    return [r["text"] for r in rows], gold, family


def choose(score: np.ndarray, correct: np.ndarray, oos: np.ndarray,
           rule: tuple[str, float | None] | None, budget: float) -> dict[str, Any]:
    """The threshold a rule chooses on validation rows, and its validation numbers."""
    from headwise.intent.decision.oos import (
        reject_upper_bound,
        score_thresholds,
        threshold_curve,
    )

    t = score_thresholds(score)
    c = threshold_curve(score, correct, oos, t)
    n = int((~oos).sum())
    acc, rec, rej = c["in_scope_accuracy"], c["oos_recall"], c["reject_rate"]
    balanced = (acc + rec) / 2
    if rule is not None:
        counts, confidence = rule
        k = np.rint((rej if counts == "rejected" else acc[0] - acc) * n)
        rate = k / n if confidence is None else reject_upper_bound(k, n, confidence)
        balanced = np.where((k == 0) | (rate <= budget + 1e-12), balanced, -np.inf)
    i = int(np.flatnonzero(balanced >= balanced.max() - 1e-12)[0])
    return {"threshold": float(t[i]), "in_scope_accuracy": float(acc[i]),
            "oos_recall": float(rec[i]), "reject_rate": float(rej[i]),
            "withheld": float(acc[0] - acc[i])}


def score_test(score: np.ndarray, threshold: float, correct: np.ndarray, gold: np.ndarray,
               family: list[str]) -> dict[str, Any]:
    """A threshold's numbers on the test rows (in-scope rows the model does not know are
    left out)."""
    keep = gold >= -1
    s, ok, g = score[keep], correct[keep], gold[keep]
    fam = [f for f, k in zip(family, keep, strict=True) if k]
    kept, oos = s >= threshold, g < 0
    ins = ~oos
    out = {"reject_rate": float((~kept & ins).mean() / ins.mean()),
           "withheld": float((~kept & ok & ins).sum() / ins.sum()),
           "accuracy": float((ok & ins).sum() / ins.sum()),
           "accuracy_with_threshold": float((kept & ok & ins).sum() / ins.sum()),
           "oos_recall": float((~kept & oos).sum() / max(int(oos.sum()), 1))}
    for prefix, name in GROUPS.items():
        m = np.array([f == prefix for f in fam]) & oos
        out[f"{name}_recall"] = float((~kept & m).sum() / m.sum()) if m.any() else None
    return out


def measure(model_dir: Path, data: Path, limit: int | None, budget: float) -> dict[str, Any]:
    """Every rule on one saved network classifier."""
    from headwise.intent import IntentClassifier
    from headwise.intent.decision.ood import make_detector
    from headwise.intent.decision.ood.selection import AUTO_CANDIDATES, select_detector
    from headwise.intent.decision.temperature import calibrated_probs

    clf = IntentClassifier.load(model_dir)
    index = {name: i for i, name in enumerate(clf.labels)}
    split = {s: read_split(data / f"{s}.csv", index, limit) for s in ("train", "valid", "test")}
    tr_texts, tr_gold, _ = split["train"]
    tr = [i for i, g in enumerate(tr_gold) if g >= 0]
    tr_f, tr_l = clf.features_and_logits([tr_texts[i] for i in tr])
    scores: dict[str, dict[str, np.ndarray]] = {}
    out_rows: dict[str, tuple[np.ndarray, np.ndarray, list[str]]] = {}
    forward = {}
    for s in ("valid", "test"):
        texts, gold, family = split[s]
        if not (gold == -1).any():
            raise SystemExit(f"{data / s}.csv has no out-of-scope row (label oos): the rules "
                             f"balance in-scope accuracy against out-of-scope recall")
        f, lg = forward[s] = clf.features_and_logits(texts)
        out_rows[s] = (lg.argmax(1) == gold, gold, family)
        scores[s] = {"max_prob": calibrated_probs(lg, clf.temperature).max(1)}
    for spec in AUTO_CANDIDATES:
        if spec == "max_prob":
            continue
        det = make_detector(spec).fit(tr_f, tr_l, tr_gold[tr])
        for s in ("valid", "test"):
            scores[s][spec] = det.score(*forward[s])
    v_ok, v_gold, _ = out_rows["valid"]
    v_keep = v_gold >= -1
    result: dict[str, Any] = {"model": str(model_dir), "rows": {
        s: int((split[s][1] >= -1).sum()) for s in split},
        "valid_in_scope": int((v_gold >= 0).sum()), "rules": {}}
    for name, rule in RULES.items():
        choices = {spec: choose(sc[v_keep], v_ok[v_keep], v_gold[v_keep] < 0, rule, budget)
                   for spec, sc in scores["valid"].items()}
        best = select_detector(choices)
        t_ok, t_gold, t_family = out_rows["test"]
        result["rules"][name] = {"detector": best, "valid": choices[best],
                                 "test": score_test(scores["test"][best],
                                                    choices[best]["threshold"], t_ok, t_gold,
                                                    t_family)}
    return result


def table(result: dict[str, Any]) -> str:
    """One model's rules as a markdown table (%)."""
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    lines = [f"{result['model']}: {result['valid_in_scope']} in-scope validation rows; "
             f"test rows {result['rows']['test']}",
             "| rule | detector | valid reject | valid withheld | valid OOS recall | "
             "test reject | test withheld | test acc with threshold | test OOS recall | "
             "near miss | off-topic |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in result["rules"].items():
        v, t = r["valid"], r["test"]
        lines.append(f"| {name} | {r['detector']} | {pct(v['reject_rate'])} | "
                     f"{pct(v['withheld'])} | {pct(v['oos_recall'])} | {pct(t['reject_rate'])}"
                     f" | {pct(t['withheld'])} | {pct(t['accuracy_with_threshold'])} | "
                     f"{pct(t['oos_recall'])} | {pct(t['near_miss_recall'])} | "
                     f"{pct(t['off_topic_recall'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="+", type=Path, help="saved network classifiers")
    p.add_argument("--data", type=Path, required=True,
                   help="folder with train.csv, valid.csv and test.csv (the demo's data/)")
    p.add_argument("--budget", type=float, default=0.05, help="the reject budget (5 %%)")
    p.add_argument("--smoke", action="store_true",
                   help="the first 200 rows of each split: checks that the script runs")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    args = p.parse_args(argv)
    results = [measure(m, args.data, 200 if args.smoke else None, args.budget)
               for m in args.models]
    for r in results:
        print(table(r) + "\n")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
