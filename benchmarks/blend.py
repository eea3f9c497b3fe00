"""The recipe field ``blend="tfidf"`` measured on kept classifiers: a fine-tuned network
and a TF-IDF model trained on the same rows with the same seed, blended with the TF-IDF
share chosen on the validation rows (``headwise.intent.training.blending.choose_blend_weight``),
then scored on the test split, beside each model alone and their equal-weight mean.

DataCLUE CIC: the models kept by ``benchmarks/intent.py --keep-models DIR`` (configurations
``e5-small-lpft-prior`` and ``tfidf-lr-prior``, seed s each); the validation rows are the
seeded 10 % of train + dev that both held out (rebuilt here exactly as training split them,
and checked against the network's saved validation score). The demo: a ``headwise demo``
output directory with ``pretrained/`` and ``tfidf/`` (held-out phrasing: its own validation
and test splits; in-scope rows only).

    python benchmarks/blend.py --models /tmp/intent_models --seeds 0,1,2 \\
        --demo /tmp/demo-e5

The choice sees only validation rows; the test split scores it once.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402
import _verdicts as V  # noqa: E402

SECTION = "blend"
RESULTS = HERE / "results" / "blend.jsonl"
NETWORK, TFIDF = "e5-small-lpft-prior", "tfidf-lr-prior"


def _scores(probs: Any, gold: Any) -> dict[str, float]:
    from sklearn.metrics import f1_score

    pred = probs.argmax(axis=1)
    return {"accuracy": float((pred == gold).mean()),
            "macro_f1": float(f1_score(gold, pred, average="macro", zero_division=0))}


def measure(network_dir: Path, tfidf_dir: Path, valid: tuple[list[str], list[str]],
            test: tuple[list[str], list[str]], metric: str) -> dict[str, Any]:
    """Choose the share on ``valid``, score every variant on ``test`` (in-scope rows)."""
    import numpy as np

    from headwise.intent.kinds import load_classifier
    from headwise.intent.training.blending import choose_blend_weight

    net, tf = load_classifier(network_dir), load_classifier(tfidf_dir)
    if net.labels != tf.labels:
        raise ValueError(f"{network_dir} and {tfidf_dir} have different intents")
    index = {y: i for i, y in enumerate(net.labels)}

    def rows(texts: list[str], labels: list[str]) -> tuple[list[str], Any]:
        keep = [i for i, y in enumerate(labels) if y in index]
        return [texts[i] for i in keep], np.array([index[labels[i]] for i in keep])

    (vt, vg), (tt, tg) = rows(*valid), rows(*test)
    start = time.perf_counter()
    pv_net, pv_tf = net.predict_proba(vt), tf.predict_proba(vt)
    pt_net, pt_tf = net.predict_proba(tt), tf.predict_proba(tt)
    seconds = time.perf_counter() - start
    choice = choose_blend_weight(pv_net, pv_tf, vg, metric=metric)
    w = choice.weight
    return {"valid_rows": len(vg), "test_rows": len(tg), "metric": metric,
            "chosen_share": w, "valid_scores": choice.scores,
            "best_share": choice.best_weight, "p_value": choice.p_value,
            "valid_network": _scores(pv_net, vg),
            "saved_valid_network": net.info.get("valid"),
            "test": {"network": _scores(pt_net, tg), "tfidf": _scores(pt_tf, tg),
                     "equal": _scores(0.5 * pt_net + 0.5 * pt_tf, tg),
                     "chosen": _scores((1 - w) * pt_net + w * pt_tf, tg)},
            "inference_seconds": round(seconds, 1)}


def cic_splits(data_dir: Path, seed: int) -> tuple[tuple[list[str], list[str]],
                                                   tuple[list[str], list[str]]]:
    """CIC's validation rows of seed ``seed`` (as training held them out) and its test."""
    from intent import DATASETS, load_split

    from headwise.intent.training.data import in_scope, validation_split
    from headwise.intent.training.recipe import IntentRecipe

    ds = DATASETS["dataclue_cic"]
    train = load_split(data_dir, ds, "train")
    texts, labels = in_scope(list(train.texts), list(train.labels), "training")
    _, v_texts, _, v_labels = validation_split(texts, labels, IntentRecipe().valid_fraction,
                                               seed)
    test = load_split(data_dir, ds, "test")
    return (list(v_texts), list(v_labels)), (list(test.texts), [str(y) for y in test.labels])


def demo_splits(demo: Path) -> tuple[tuple[list[str], list[str]], tuple[list[str], list[str]]]:
    """The validation and test rows of a ``headwise demo`` directory that its single-label
    models were trained and scored with: ``data/*.csv`` (``data/*.jsonl`` is the compound
    models' corpus, with joined several-intent questions added)."""
    from headwise.text.readers import read_examples

    out = []
    for part in ("valid", "test"):
        d = read_examples(demo / "data" / f"{part}.csv")
        out.append((list(d.texts), [str(y) for y in d.labels]))
    return out[0], out[1]


ROW = ("data", "seed")
"""A row of the section (one record each)."""


def records(path: Path) -> list[dict[str, Any]]:
    """The records of the results file, the last one per data and seed, in that order."""
    return sorted(H.done_runs(path, ("data", "seed")).values(),
                  key=lambda r: (r["data"], r["seed"]))


def _over_seeds(data: str, rs: list[dict[str, Any]]) -> list[str]:
    """Each model's mean over seeds with its 95 % interval (accuracy: over seeds and the
    test rows; macro-F1: over seeds), and the chosen blend against the network alone and
    against the equal mean, paired by seed (the same seed's network on both sides)."""
    rows_n = rs[0].get("test_rows")
    names = {"network": "network", "tfidf": "TF-IDF", "equal": "equal mean",
             "chosen": "chosen blend"}
    table = [[label, V.score_interval([r["test"][k]["macro_f1"] for r in rs], None).pct(),
              V.score_interval([r["test"][k]["accuracy"] for r in rs], rows_n).pct()]
             for k, label in names.items()]
    out = [f"{data}, {len(rs)} seeds (mean [95 % interval]):", "",
           H.markdown_table(["model", "macro-F1 %", "accuracy %"], table, "lrr"), ""]
    diffs = []
    for other in ("network", "equal"):
        iv = V.seed_paired_difference([r["test"]["chosen"]["macro_f1"] for r in rs],
                                      [r["test"][other]["macro_f1"] for r in rs])
        word = {"PASS": "BETTER", "FAIL": "WORSE"}.get(V.judge(iv, 0.0, strictly=True),
                                                       "within noise")
        diffs.append([f"chosen blend - {names[other]}, macro-F1", word,
                      f"{iv.points()} points"])
    out.append(H.markdown_table(["comparison (paired by seed)", "verdict",
                                 "difference [95 %]"], diffs, "lll"))
    return out


def render(records: list[dict[str, Any]]) -> str:
    def pct(x: float) -> str:
        return f"{100 * x:.2f}"

    lines = [
        "## Blending the TF-IDF floor into a fine-tuned network (`blend=\"tfidf\"`)", "",
        "The recipe field `blend=\"tfidf\"` (`headwise train --set levers.blend=tfidf`) on kept "
        "classifiers: the TF-IDF share chosen on the validation rows by the recipe's "
        "`select_on` metric (grid 0-0.9, the smallest share winning a tie) and kept only when "
        "its gain over the network alone is significant on those rows (one-sided paired "
        "bootstrap, p < 0.05; else the network alone), then scored once "
        "on the test split beside each model alone and the equal-weight mean (`ens-tfidf-e5` "
        "of the intent:cpu section). In-scope test rows; macro-F1 / accuracy in %.", ""]
    rows = []
    for r in records:
        t = r["test"]
        rows.append([r["data"], r["seed"], r["metric"],
                     f"{r['chosen_share']:g} (best {r['best_share']:g}, p {r['p_value']:.3f})",
                     *(f"{pct(t[k]['macro_f1'])} / {pct(t[k]['accuracy'])}"
                       for k in ("network", "tfidf", "equal", "chosen"))])
    lines.append(H.markdown_table(  # the kept share's test score is "chosen blend"
        ["data", "seed", "chosen by", "TF-IDF share kept (best on validation, bootstrap p)",
         "network", "TF-IDF", "equal mean",
         "chosen blend"], rows, "llllrrrr"))
    for data in sorted({r["data"] for r in records}):
        rs = [r for r in records if r["data"] == data]
        if len(rs) > 1:
            lines += ["", *_over_seeds(data, rs)]
    cmds = sorted({r["command"] for r in records})
    lines += ["", "Network: multilingual-e5-small fine-tuned with LP-FT (CIC: "
              "`e5-small-lpft-prior`; the demo: its `pretrained` model). The demo row is one "
              "seed of held-out phrasing, where TF-IDF is far weaker than the network.", "",
              *(f"`{c}`" for c in cmds)]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=Path, default=Path("/tmp/intent_models"),
                   help="the --keep-models directory of benchmarks/intent.py")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data")
    p.add_argument("--demo", type=Path, help="a headwise demo output directory")
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--md", type=Path, default=HERE.parent / "BENCHMARKS.md")
    p.add_argument("--render", action="store_true", help="only rebuild the section")
    p.add_argument("--no-write", action="store_true", help="print the section instead")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    if not args.render:
        import torch

        torch.set_num_threads(args.threads)
        jobs: list[tuple[str, int, Path, Path, Any]] = []
        for s in (int(x) for x in args.seeds.split(",") if x):
            net = args.models / f"dataclue_cic-{NETWORK}-{s}"
            tf = args.models / f"dataclue_cic-{TFIDF}-{s}"
            if net.is_dir() and tf.is_dir():
                jobs.append(("dataclue_cic", s, net, tf, lambda s=s: cic_splits(args.data_dir, s)))
            else:
                print(f"seed {s}: {net} or {tf} missing; skipped", file=sys.stderr)
        if args.demo:
            seed = json.loads((args.demo / "summary.json").read_text())["settings"]["seed"]
            jobs.append(("demo", seed, args.demo / "pretrained", args.demo / "tfidf",
                         lambda: demo_splits(args.demo)))
        args.results.parent.mkdir(parents=True, exist_ok=True)
        for data, seed, net, tf, splits in jobs:
            from headwise.intent.kinds import load_classifier

            recipe = load_classifier(net).info.get("recipe", {})
            metric = recipe.get("task", {}).get("select_on", "accuracy")
            valid, test = splits()
            start, prov = time.time(), H.collect_provenance(args.threads)
            rec = measure(net, tf, valid, test, metric)
            saved = (rec["saved_valid_network"] or {}).get("accuracy")
            if saved is not None and abs(saved - rec["valid_network"]["accuracy"]) > 1e-6:
                raise SystemExit(f"{data} seed {seed}: the rebuilt validation rows score "
                                 f"accuracy {rec['valid_network']['accuracy']:.6f}, the "
                                 f"network saved {saved:.6f}: not the rows it was "
                                 f"calibrated on")
            H.append_record(args.results, rec, start, data=data, seed=seed,
                            network_dir=str(net), tfidf_dir=str(tf), provenance=prov)
            print(json.dumps({k: rec[k] for k in ("data", "seed", "chosen_share", "test")}),
                  file=sys.stderr)
    H.print_or_write(args.md, SECTION, H.render_records(render, records(args.results), ROW),
                     no_write=args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
