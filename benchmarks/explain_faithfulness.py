"""Which explanation points at what the decision depends on: deletion curves of integrated
gradients, attention rollout, the last layer's mean attention and a random ranking.

For each model and held-out text, the top-ranked tokens by each method are masked out
(``ceil(f * tokens)`` for f = 10 %, 20 %, ..., 50 %; out of the attention and the pooling,
positions unchanged) and the predicted intent's probability is read again
(:func:`headwise.inspect.deletion_curves`). The area over the curve is the mean drop of that
probability over the fractions: the higher, the more the method's top tokens carry the
decision. Each explanation's completeness error (integrated gradients' sum against the
logit's change from the baseline) is recorded beside it.

Models and data:

* ``demo``: the Transformer and the BiLSTM of ``headwise demo`` (its recipes, one seed a
  record: each seed generates its own corpus and split), on the in-scope rows of the
  held-out test split;
* ``banking77``: the demo's Transformer and BiLSTM recipes (word pieces instead of
  characters: English) trained on BANKING77's training split (``--data-dir``, default
  ``../shared/data``), one seed a record, on its test split.

Each record holds every text's area per method; the table shows the mean over all texts of
a model's seeds with its 95 % interval (a bootstrap over texts, resampled within seeds), and
names the most faithful method when its lead over each other one, paired text by text, has
an interval above zero.

    python benchmarks/explain_faithfulness.py --seeds 0,1,2 --texts 200
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402

SECTION = "explain_faithfulness:cpu"
RESULTS = HERE / "results" / "explain_faithfulness_runs.jsonl"
ROW = ("dataset", "model", "seed")
DATASETS = ("demo", "banking77")
MODELS = ("transformer", "bilstm")
METHODS = ("ig", "rollout", "attention", "random")
#: bootstrap resamples of the interval
RESAMPLES = 2000


def _texts(rows: list[tuple[str, str]], count: int, seed: int) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(seed)
    keep = rng.permutation(len(rows))[:count]
    return [rows[i][0] for i in sorted(keep)]


def _demo(spec: dict[str, Any], out: Path) -> dict[str, tuple[Path, list[str]]]:
    """Train the demo's models for a seed; the model directories and the held-out texts."""
    from headwise.demo.corpus import read_demo_jsonl
    from headwise.demo.runner import DemoSettings, run_demo
    from headwise.text.labels import is_oos_label

    s = DemoSettings.quick(spec["seed"]) if spec["quick"] else DemoSettings(seed=spec["seed"])
    run_demo(out, s, echo=lambda _line: None)
    test = [(e.text, e.label) for e in read_demo_jsonl(out / "data" / "test.jsonl")
            if not is_oos_label(e.label)]
    texts = _texts(test, spec["texts"], spec["seed"])
    return {m: (out / m, texts) for m in MODELS if m in spec["models"]}


def _banking77(spec: dict[str, Any], out: Path) -> dict[str, tuple[Path, list[str]]]:
    """Train the demo's recipes on BANKING77's training split for a seed."""
    import dataclasses

    from headwise.demo.runner import DemoSettings, demo_recipes
    from headwise.intent.training.pipeline import train_intent_classifier
    from headwise.text.readers import read_examples

    data = Path(spec["data_dir"]) / "banking77"
    train = read_examples(data / "train.csv")
    test = read_examples(data / "test.csv")
    settings = DemoSettings.quick(spec["seed"]) if spec["quick"] else \
        DemoSettings(seed=spec["seed"])
    if spec["quick"]:  # a smoke check: a few hundred rows
        train = list(zip(train.texts, train.labels, strict=True))[::10]
    recipes = demo_recipes(settings)
    found = {}
    for name in MODELS:
        if name not in spec["models"]:
            continue
        recipe = recipes[name]  # English: word pieces instead of the demo's characters
        recipe = dataclasses.replace(
            recipe, architecture=dataclasses.replace(recipe.architecture,
                                                     tokenizer="wordpiece"),
            train=dataclasses.replace(recipe.train, progress=False))
        train_intent_classifier(train, None, recipe, out_dir=out / name)
        found[name] = (out / name, _texts(list(zip(test.texts, test.labels, strict=True)),
                                          spec["texts"], spec["seed"]))
    return found


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One data set and seed: train its models, then their deletion curves."""
    import numpy as np
    import torch

    from headwise.inspect import deletion_curves
    from headwise.intent.classifier import IntentClassifier

    torch.set_num_threads(spec["threads"])
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        build = _demo if spec["dataset"] == "demo" else _banking77
        models = build(spec, Path(tmp))
        train_s = time.perf_counter() - start
        out = {}
        for name, (directory, texts) in models.items():
            clf = IntentClassifier.load(directory)
            start = time.perf_counter()
            curves = deletion_curves(clf, texts, seed=spec["seed"])
            out[name] = {"texts": len(texts), "fractions": curves["fractions"],
                         "area": {m: [round(float(x), 6) for x in v]
                                  for m, v in curves["area"].items()},
                         "curve": {m: [round(float(x), 6) for x in v.mean(0)]
                                   for m, v in curves["curves"].items()},
                         "completeness": {
                             "median_relative_error": float(np.median(curves["completeness"])),
                             "max_relative_error": float(curves["completeness"].max()),
                             "within_tolerance": float((curves["completeness"]
                                                        <= spec["tolerance"]).mean())},
                         "explain_seconds": round(time.perf_counter() - start, 1)}
    return {"status": "ok", "models": out, "train_seconds": round(train_s, 1)}


def render(records: list[dict[str, Any]]) -> str:
    """The ``explain_faithfulness:cpu`` section from its records (one per data set, model
    and seed)."""
    from headwise.inspect import rank_methods

    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        if r.get("status") == "ok" and not r.get("quick"):
            groups.setdefault((r["dataset"], r["model"]), []).append(r)
    rows = []
    for (ds, model), rs in sorted(groups.items()):
        present = [m for m in METHODS if all(r["result"]["area"].get(m) for r in rs)]
        cells, best = ["-"] * len(METHODS), None
        if present:
            # the mean over all texts with a bootstrap interval (texts resampled within each
            # seed), and the most faithful only when its lead over every other method,
            # paired text by text, has a 95 % interval above zero: the rule of the report
            ranking = rank_methods({m: [r["result"]["area"][m] for r in rs] for m in present},
                                   resamples=RESAMPLES)
            for row in ranking["methods"]:
                cells[METHODS.index(row["method"])] = (f"{row['area']:.3f} [{row['low']:.3f}, "
                                                       f"{row['high']:.3f}]")
            best = ranking["most_faithful"] or f"{ranking['leader']} (within noise)"
        within = [r["result"]["completeness"]["within_tolerance"] for r in rs]
        rows.append([ds, model, ",".join(str(r["seed"]) for r in sorted(rs, key=lambda r:
                                                                          r["seed"])),
                     str(sum(r["result"]["texts"] for r in rs)), *cells, best or "-",
                     f"{100 * min(within):.0f}"])
    lines = ["## Explanation faithfulness: deletion curves (CPU)", "",
             "For each held-out text, the top-ranked tokens by each method are masked out "
             "(10 % to 50 % of the text's tokens, out of the attention and the pooling) and "
             "the predicted intent's probability is read again; the number is the area over "
             "that curve (the mean drop of the probability over the five fractions: higher "
             "is more faithful). ig: integrated gradients over the token embeddings "
             "(Captum); rollout: attention rollout of the pooled token; attention: the last "
             "layer's head-averaged attention of the pooled token; random: a random order. "
             "Mean over all texts of the seeds with its 95 % bootstrap interval (texts "
             "resampled within each seed). Most faithful: the method with the largest area, "
             "when its lead over each other method (paired, text by text) has a 95 % "
             "interval above zero. Completeness: the share of "
             "explanations (worst seed) whose attributions sum to the logit's change from "
             "the baseline within the tolerance (`headwise.inspect.COMPLETENESS_TOLERANCE`). "
             "The BiLSTM has no attention heads. demo: `headwise demo`'s models and "
             "held-out test split (each seed its own corpus); banking77: the demo's recipes "
             "trained on BANKING77's training split, on its test split.", ""]
    lines.append(H.markdown_table(
        ["data", "model", "seeds", "texts", "ig", "rollout", "attention", "random",
         "most faithful", "completeness ok %"], rows, "lllrrrrrlr")
        if rows else "(not measured: run `python benchmarks/explain_faithfulness.py`)")
    cmds = sorted({r["command"] for r in records if r.get("command")})
    if cmds:
        lines += ["", *(f"`{c}`" for c in cmds)]
    return "\n".join(lines)


def records(path: Path = RESULTS) -> list[dict[str, Any]]:
    """The kept records (the last of each data set, model and seed)."""
    return list(H.done_runs(path, ROW).values())


def section(path: Path = RESULTS) -> str:
    """The section as written and rendered (``benchmarks/render.py``)."""
    return H.render_records(render, records(path), ("dataset", "model"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data")
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--texts", type=int, default=200, help="held-out texts explained per seed")
    p.add_argument("--quick", action="store_true",
                   help="a smoke check: small models and data; its records are never shown "
                        "(needs --no-write and --results)")
    H.add_record_args(p, RESULTS, HERE.parent / "BENCHMARKS.md", timeout_s=7200)
    args = p.parse_args(argv)
    if H.answered_as_worker(args, worker):
        return 0
    if args.quick and (not args.no_write or args.results == RESULTS):
        p.error("--quick records are smoke checks: give --no-write and another --results")
    if not args.render:
        from headwise.inspect import COMPLETENESS_TOLERANCE

        done = H.done_runs(args.results, ROW)
        models = args.models.split(",")
        for ds in args.datasets.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                todo = [m for m in models if (ds, m, seed) not in done or args.rerun]
                if not todo:
                    continue
                print(f"{ds} seed {seed}: {', '.join(todo)} ...", file=sys.stderr, flush=True)
                spec = {"dataset": ds, "seed": seed, "models": todo, "texts": args.texts,
                        "data_dir": str(args.data_dir), "threads": args.threads,
                        "tolerance": COMPLETENESS_TOLERANCE, "quick": args.quick}
                start, prov = time.time(), H.collect_provenance(args.threads)
                rec = H.run_worker(Path(__file__), spec, args.timeout)
                if rec.get("status") != "ok":
                    for m in todo:
                        H.append_record(args.results, dict(rec), start, provenance=prov,
                                        dataset=ds, model=m, seed=seed, threads=args.threads,
                                        quick=args.quick)
                    continue
                for m, result in rec["models"].items():
                    H.append_record(args.results, {"status": "ok", "result": result,
                                                   "train_seconds": rec["train_seconds"]},
                                    start, provenance=dict(prov), dataset=ds, model=m,
                                    seed=seed, threads=args.threads, quick=args.quick)
                    areas = {k: sum(v) / len(v) for k, v in result["area"].items()}
                    print(f"  {m}: " + "  ".join(f"{k} {v:.3f}" for k, v in areas.items()),
                          file=sys.stderr, flush=True)
    H.print_or_write(args.md, SECTION, section(args.results), no_write=args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
