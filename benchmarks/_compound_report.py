"""The BENCHMARKS.md section of ``benchmarks/compound.py``: tables and a plot from the runs."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import _harness as H

ORDER = ("tfidf", "scratch", "scratch-num", "minilm", "minilm-num")
LABEL = {"tfidf": "TF-IDF + one-vs-rest LR (floor)", "scratch": "from-scratch joint Transformer",
         "scratch-num": "from-scratch + number-aware heads",
         "minilm": "MiniLM-L6 import, joint heads", "minilm-num": "MiniLM-L6 + number-aware heads"}
METRICS = ("micro_f1", "macro_f1", "exact_match", "span_f1")


def _ok(runs: list[dict[str, Any]], setting: str, config: str) -> list[dict[str, Any]]:
    return sorted((r for r in runs if r["setting"] == setting and r["config"] == config
                   and r.get("status") == "ok"), key=lambda r: r["seed"])


def _cell(values: list[float]) -> str:
    if not values:
        return "-"
    mean = 100 * statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {100 * statistics.stdev(values):.2f}"


def setting_table(runs: list[dict[str, Any]], setting: str) -> str:
    """One row per configuration: mean ± std over seeds of each metric."""
    rows = []
    for c in ORDER:
        rs = _ok(runs, setting, c)
        if not rs:
            continue
        cells = [_cell([r[m] for r in rs if r.get(m) is not None]) for m in METRICS]
        train_s = statistics.median(r["train_seconds"] for r in rs)
        rows.append([LABEL[c], len(rs), *cells, f"{train_s:.0f}"])
    return H.markdown_table(["configuration", "seeds", "intent micro-F1 %", "macro-F1 %",
                             "exact match %", "slot span F1 %", "train s (median)"], rows)


def number_effect(runs: list[dict[str, Any]]) -> str:
    """Paired differences (with - without number-aware heads), same setting and seed."""
    rows = []
    for setting in ("nlupp-full", "nlupp-low", "demo"):
        for base in ("scratch", "minilm"):
            plain = {r["seed"]: r for r in _ok(runs, setting, base)}
            num = {r["seed"]: r for r in _ok(runs, setting, f"{base}-num")}
            seeds = sorted(set(plain) & set(num))
            if not seeds:
                continue
            cells = []
            for m in ("micro_f1", "exact_match", "span_f1"):
                d = [num[s][m] - plain[s][m] for s in seeds
                     if num[s].get(m) is not None and plain[s].get(m) is not None]
                cells.append("-" if not d else
                             f"{100 * statistics.fmean(d):+.2f} ({sum(x > 0 for x in d)}/{len(d)}"
                             f" seeds up)")
            rows.append([setting, base, len(seeds), *cells])
    if not rows:
        return "(no paired runs yet)"
    return H.markdown_table(["setting", "model", "paired seeds", "Δ micro-F1 pts",
                             "Δ exact match pts", "Δ span F1 pts"], rows)


def value_table(runs: list[dict[str, Any]]) -> str:
    """Demo corpus: normalised-value accuracy per slot type, end to end and normaliser."""
    by_config = {c: _ok(runs, "demo", c) for c in ("scratch", "scratch-num")}
    slots = sorted({s for rs in by_config.values() for r in rs for s in r.get("values", {})})
    if not slots:
        return "(no demo runs yet)"
    rows = []
    for s in slots:
        cells = []
        n = norm = None
        for rs in by_config.values():
            vals = [r["values"][s] for r in rs if s in r.get("values", {})]
            cells.append(_cell([v["end_to_end"] for v in vals]))
            if vals:
                n, norm = vals[0]["n"], vals[0]["normaliser"]
        rows.append([s, n, f"{100 * norm:.2f}" if norm is not None else "-", *cells])
    return H.markdown_table(["slot", "gold slots in test", "normaliser on gold spans %",
                             "end to end, scratch %", "end to end, scratch + number heads %"],
                            rows)


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Grouped bars: intent micro-F1 and span F1 per configuration, per NLU++ setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = ("nlupp-full", "nlupp-low")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, metric, title in zip(axes, ("micro_f1", "span_f1"),
                                 ("intent micro-F1", "slot span F1"), strict=True):
        configs = [c for c in ORDER if any(_ok(runs, s, c) for s in settings)
                   and not (metric == "span_f1" and c == "tfidf")]
        width = 0.8 / max(1, len(configs))
        for j, c in enumerate(configs):
            means = []
            for s in settings:
                v = [r[metric] for r in _ok(runs, s, c) if r.get(metric) is not None]
                means.append(100 * statistics.fmean(v) if v else 0.0)
            ax.bar([i + j * width for i in range(len(settings))], means, width,
                   label=c, color=f"C{ORDER.index(c)}")
        ax.set_xticks([i + width * (len(configs) - 1) / 2 for i in range(len(settings))],
                      ["folds 0-8 -> 9", "fold 0 -> 1-9"])
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("%")
    axes[0].legend(fontsize=8, loc="upper right")  # the left panel has every configuration
    fig.suptitle("NLU++ banking: compound intents and slots (mean over seeds)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(runs: list[dict[str, Any]], results_dir: Path, md_dir: Path, draw: bool = True
           ) -> str:
    """The whole section; the plot is redrawn into ``results_dir`` unless ``draw`` is
    False."""
    ok = [r for r in runs if r.get("status") == "ok"]
    good = [r for r in ok if not r.get("quick")] or ok  # smoke runs only when nothing else
    png = results_dir / "compound_cpu.png"
    if good and draw:
        plot(good, png)
    dates = sorted(r["date"] for r in good)
    commands = sorted({r["command"] for r in good})
    failed = [f"{r['setting']} {r['config']} seed {r['seed']}: {r['status']} "
              f"({r.get('detail', '')})" for r in runs if r.get("status") != "ok"]
    parts = [
        "## Compound intents and slots on cpu: NLU++ banking and the demo corpus",
        "",
        f"Produced by {', '.join(f'`{c}`' for c in commands) or '(nothing yet)'}"
        + (f", runs from {dates[0]} to {dates[-1]}" if dates else "") + ". Each run in its own "
        "process (2 threads) on the 2-core machine, recorded in "
        "`benchmarks/results/compound_runs.jsonl`.",
        "",
        "Protocol: NLU++ banking (half of it, 10 folds, 48 intents, several per text). "
        "**full**: train folds 0-8, test fold 9. **low-data**: train fold 0, test folds 1-9. "
        "Every model holds out a seeded 10 % of its training data for early stopping and the "
        "decision threshold (one global threshold, maximising validation micro-F1). Intent "
        "micro/macro-F1 and exact match (the whole intent set right) on the test fold(s); slot "
        "span F1 = exact (name, start, end) matches, CoNLL style. Number-aware heads: heads 0 "
        "and 1 of every layer get one learned bias each towards number-token keys "
        "(`NumberKeyBias`).",
        "",
        "### NLU++ banking, full (folds 0-8 -> 9)",
        "",
        setting_table(good, "nlupp-full"),
        "",
        "### NLU++ banking, low data (fold 0 -> folds 1-9)",
        "",
        setting_table(good, "nlupp-low"),
        "",
        *H.image_links([("NLU++ results", png)], md_dir),
        "",
        "### Effect of the number-aware heads (paired by seed)",
        "",
        number_effect(good),
        "",
        "### Demo corpus: normalised values per slot type",
        "",
        "Built-in Chinese banking corpus (seed 0, its own train/valid/test). *Normaliser on "
        "gold spans*: `normalize_slot(name, gold text)` equals the generator's value. *End to "
        "end*: the predicted span is exact and its normalised value equals the gold value, over "
        "all gold slots of that type.",
        "",
        value_table(good),
        "",
        "Demo corpus intents and spans:",
        "",
        setting_table(good, "demo"),
    ]
    if failed:
        parts += ["", "Runs that did not finish: " + "; ".join(failed)]
    return "\n".join(parts)
