"""Warm start against a full retrain: a model trained on most intents, then the rest added
with ``--init-from``.

For each data set and seed: the intents are split, with the seed, into the old ones and
``--new`` new ones (BANKING77: 67 + 10; the demo corpus: 23 + 4, about the same share).
Four runs train on the training split (their validation rows: the recipe's seeded,
stratified share of it, the only rows any choice is made on: early stopping, calibration):

* ``parent``: from scratch, on the old intents' rows;
* ``full``: from scratch, on every row (the retrain a warm start replaces);
* ``warm``: ``--init-from`` the parent, on every row, for a third of the parent's epochs
  (the default of a warm start, ``warm_epochs``; ``--warm-epochs`` names others), early
  stopping on validation as any run;
* ``warm-partial-replay``: the same with a ``--replay-share`` (0.3) of the old intents'
  rows: shorter epochs in which the new intents weigh more;
* ``warm-no-replay``: the same with ``replay`` 0: only the new intents' rows, to show what a
  network forgets without the old rows.

Each run is scored on the test split (never seen by a run): the accuracy of the top intent
(closed set, no out-of-scope threshold) on the old intents' rows and on the new intents'
rows, and its training time (the Trainer's, calibration excluded). The section gives the
mean over seeds with its 95 % t-interval, the paired difference from the full retrain
(mean and 95 % t-interval over seeds) and the time as a share of the full retrain's.
The model is ``--model`` (default: what ``headwise train`` picks for the data, network
alone, no TF-IDF blend). Data: BANKING77 (``--data-dir``, default ``../shared/data``) and
the demo corpus (in-scope rows).

    python benchmarks/warm_start.py --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import csv
import random
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

SECTION = "warm-start:cpu"
RESULTS = HERE / "results" / "warm_start_runs.jsonl"
ROW = ("dataset", "model", "seed", "run")
DATASETS = ("banking77", "demo")
RUNS = ("parent", "full", "warm", "warm-partial-replay", "warm-no-replay")
#: how many intents are new, per data set (about 13-15 % of them)
NEW = {"banking77": 10, "demo": 4}


def load(dataset: str, data_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """The training and test rows of a data set: ``{"train": [(text, label)], "test": ...}``
    (the demo corpus's in-scope rows)."""
    if dataset == "banking77":
        out = {}
        for split in ("train", "test"):
            with open(data_dir / "banking77" / f"{split}.csv", newline="",
                      encoding="utf-8") as f:
                out[split] = [(r["text"], r["category"]) for r in csv.DictReader(f)]
        return out
    if dataset == "demo":
        from headwise.demo.corpus import generate_demo_corpus
        from headwise.text.labels import is_oos_label

        corpus = generate_demo_corpus(seed=0)
        return {split: [(e.text, e.label) for e in corpus[split] if not is_oos_label(e.label)]
                for split in ("train", "test")}
    raise ValueError(f"unknown data set {dataset!r}; known: {DATASETS}")


def split_intents(labels: list[str], new: int, seed: int) -> tuple[list[str], list[str]]:
    """The old and the new intents: ``new`` of them drawn with ``seed``."""
    intents = sorted(set(labels))
    fresh = sorted(random.Random(seed).sample(intents, new))
    return [y for y in intents if y not in fresh], fresh


def recipe_for(model: str, texts: list[str], seed: int, epochs: int | None,
               valid_fraction: float, settings: list[str] | None = None
               ) -> tuple[str, dict[str, Any]]:
    """The model spec and the recipe data of the from-scratch runs: ``model`` (``default``:
    what ``headwise train`` picks for ``texts``), the network alone, the seed, and
    ``settings`` (``PART.FIELD=VALUE``, as ``headwise train --set``)."""
    import json

    from headwise.commands.train import set_path
    from headwise.intent.training.builders import default_model

    spec = default_model(texts)[0] if model == "default" else model
    kind, _, name = spec.partition(":")
    data: dict[str, Any] = {"architecture": {"type": kind, **({"name": name} if name else {})},
                            "train": {"seed": seed, "progress": False},
                            "levers": {"blend": "none"}, "valid_fraction": valid_fraction}
    if epochs is not None:
        data["train"]["epochs"] = epochs
    for item in settings or []:
        path, _, raw = item.partition("=")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        set_path(data, path.strip(), value)
    return spec, data


def score(clf: Any, test: list[tuple[str, str]], new: list[str]) -> dict[str, Any]:
    """Closed-set accuracy of the top intent on the old and the new intents' test rows."""
    preds = clf.predict([t for t, _ in test])
    fresh = set(new)
    hits = {"old": [], "new": []}
    for p, (_, y) in zip(preds, test, strict=True):
        hits["new" if y in fresh else "old"].append(p.top_k[0][0] == y)
    return {f"{k}_accuracy": sum(v) / len(v) if v else None for k, v in hits.items()} | {
        "old_rows": len(hits["old"]), "new_rows": len(hits["new"])}


def measure(dataset: str, model: str, seed: int, runs: list[str], args: argparse.Namespace,
            done: dict[tuple, dict[str, Any]]) -> None:
    """Train and score the runs of one data set and seed, appending a record for each (the
    parent is trained again when a warm run needs it and its directory is gone)."""
    from headwise.intent.training.pipeline import train_intent_classifier
    from headwise.intent.training.recipe import IntentRecipe
    from headwise.intent.training.warm_start import WarmStart, warm_recipe

    data = load(dataset, args.data_dir)
    old, new = split_intents([y for _, y in data["train"]], args.new or NEW[dataset], seed)
    model, base = recipe_for(model, [t for t, _ in data["train"]], seed, args.epochs,
                             args.valid_fraction, args.set)
    known = set(old)
    if args.work is None:
        work = Path(tempfile.mkdtemp(prefix=f"warm-{dataset}-{seed}-"))
    else:
        work = args.work / f"{dataset}-{model.replace(':', '-')}-{seed}"
        work.mkdir(parents=True, exist_ok=True)
    parent_dir = work / "parent"
    for run in runs:
        if (dataset, model, seed, run) in done and not args.rerun:
            continue
        start, prov = time.time(), H.collect_provenance(args.threads)
        if run != "parent" and not _saved(parent_dir) and run.startswith("warm"):
            shutil.rmtree(parent_dir, ignore_errors=True)  # a run killed while saving
            _train(train_intent_classifier, data["train"], known, IntentRecipe.from_dict(base),
                   parent_dir)
        if run == "parent":
            rows, recipe, init = [r for r in data["train"] if r[1] in known], base, None
        elif run == "full":
            rows, recipe, init = data["train"], base, None
        else:
            rows = data["train"]
            recipe = warm_recipe(parent_dir, {"train": {"epochs": args.warm_epochs}}
                                 if args.warm_epochs else {})
            replay = {"warm": 1.0, "warm-no-replay": 0.0}.get(run, args.replay_share)
            init = WarmStart(parent_dir, replay)
        out = parent_dir if run == "parent" else work / run
        result = train_intent_classifier(rows, None, IntentRecipe.from_dict(recipe),
                                         out_dir=out, init_from=init)
        rec = {"status": "ok", **score(result.classifier, data["test"], new),
               "train_seconds": round(result.train_seconds, 1),
               "epochs": result.classifier.info.get("epochs"),
               "train_rows": result.classifier.info.get("train_examples"),
               # what precision="auto" chose (its probe runs per run): like for like or not
               "precision": (result.classifier.info.get("precision") or {}).get("precision"),
               "intents_old": len(old), "intents_new": new,
               "replay": None if init is None else init.replay}
        rec = H.append_record(args.results, rec, start, provenance=prov, dataset=dataset,
                              model=model, seed=seed, run=run, threads=args.threads)
        print(f"{dataset} {model} seed {seed} {run}: old {rec['old_accuracy']} new "
              f"{rec['new_accuracy']} ({rec['train_seconds']} s)", file=sys.stderr, flush=True)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


def _saved(directory: Path) -> bool:
    """Whether ``directory`` holds a saved model (its metadata file is written last)."""
    from headwise.intent.kinds import kind_of

    try:
        kind_of(directory)
    except (FileNotFoundError, ValueError):
        return False
    return True


def _train(train_fn: Any, rows: list[tuple[str, str]], known: set[str], recipe: Any,
           out: Path) -> None:
    train_fn([r for r in rows if r[1] in known], None, recipe, out_dir=out)


#: the issue's targets for ``warm`` (every old row replayed, as ``headwise train
#: --init-from`` does without ``--replay``; a third of the parent's epochs) against the full
#: retrain
OLD_WITHIN = 0.01
NEW_WITHIN = 0.02
TIME_SHARE = 1 / 3


def _share(values: list[float]) -> str:
    """Per-seed accuracies: the mean and its 95 % t-interval over seeds (one seed: the
    mean alone)."""
    iv = V.mean_interval(values)
    if iv is None:
        return f"{100 * values[0]:.1f}"
    return V.Interval(iv.mean, max(0.0, iv.low), min(1.0, iv.high)).pct(1)


def _paired(a: list[float], b: list[float]) -> V.Interval | None:
    return V.seed_paired_difference(a, b) if len(a) >= 2 else None


def _pairs(by: dict[tuple, dict[str, Any]], ds: str, model: str, run: str
           ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """A run's records paired by seed with the full retrain's."""
    rs = [r for (d, m, _, u), r in sorted(by.items()) if (d, m, u) == (ds, model, run)]
    return [(r, by[(ds, model, r["seed"], "full")]) for r in rs
            if (ds, model, r["seed"], "full") in by]


def _verdicts(by: dict[tuple, dict[str, Any]], ds: str, model: str) -> list[list[str]]:
    """The targets' rows for one data set and model: ``warm`` against ``full``."""
    pairs = _pairs(by, ds, model, "warm")
    if len(pairs) < 2:
        return [[f"{ds}: warm start against the full retrain", "not judged",
                 f"{len(pairs)} paired seed(s); an interval needs two"]]
    d_old = V.seed_paired_difference([r["old_accuracy"] for r, _ in pairs],
                                     [f["old_accuracy"] for _, f in pairs])
    d_new = V.seed_paired_difference([r["new_accuracy"] for r, _ in pairs],
                                     [f["new_accuracy"] for _, f in pairs])
    share = V.ratio_interval([r["train_seconds"] for r, _ in pairs],
                             [f["train_seconds"] for _, f in pairs])
    seeds = f"paired by seed, t-interval over {len(pairs)} seeds"
    mixed = [r["seed"] for r, f in pairs if r.get("precision") != f.get("precision")]
    time_row = [f"{ds} ({model}): training time at most a third of the full retrain's",
                V.judge_at_most(share, TIME_SHARE),
                f"warm / full: {share.plain()} "
                f"(geometric mean of per-seed ratios, {seeds})"]
    if mixed:  # bf16 against fp32 is not like for like
        time_row[1:] = ["not judged", f"seed(s) {mixed}: warm and full trained in other "
                        f"precisions ({time_row[2]})"]
    return [
        [f"{ds} ({model}): old intents' accuracy within {100 * OLD_WITHIN:.0f} point of "
         "the full retrain", V.judge(d_old, -OLD_WITHIN),
         f"warm - full: {d_old.points(1)} points ({seeds})"],
        [f"{ds} ({model}): new intents' accuracy within {100 * NEW_WITHIN:.0f} points of "
         "the full retrain", V.judge(d_new, -NEW_WITHIN),
         f"warm - full: {d_new.points(1)} points ({seeds})"],
        time_row]


def render(records: list[dict[str, Any]]) -> str:
    """The ``warm-start:cpu`` section from its records."""
    ok = [r for r in records if r.get("status") == "ok"]
    by = {(r["dataset"], r["model"], r["seed"], r["run"]): r for r in ok}
    rows, verdicts = [], []
    for ds, model in sorted({(r["dataset"], r["model"]) for r in ok}):
        verdicts += _verdicts(by, ds, model)
        for run in RUNS:
            rs = [r for (d, m, _, u), r in sorted(by.items()) if (d, m, u) == (ds, model, run)]
            if not rs:
                continue
            pairs = _pairs(by, ds, model, run)
            d_old = _paired([r["old_accuracy"] for r, _ in pairs],
                            [f["old_accuracy"] for _, f in pairs])
            d_new = _paired([r["new_accuracy"] for r, _ in pairs
                             if r["new_accuracy"] is not None],
                            [f["new_accuracy"] for r, f in pairs
                             if r["new_accuracy"] is not None])
            ratio = [r["train_seconds"] / f["train_seconds"] for r, f in pairs
                     if f["train_seconds"]]
            new_acc = [r["new_accuracy"] for r in rs if r["new_accuracy"] is not None]
            precision = "/".join(sorted({str(r.get("precision") or "?") for r in rs}))
            rows.append([ds, model, run, str(len(rs)), precision,
                         _share([r["old_accuracy"] for r in rs]),
                         _share(new_acc) if new_acc else "-",
                         d_old.points(1) if run != "full" and d_old else "-",
                         d_new.points(1) if run not in ("full", "parent") and d_new
                         else "-",
                         f"{statistics.median(ratio):.2f}" if run != "full" and ratio
                         else "-",
                         f"{statistics.median(r['train_seconds'] for r in rs):.0f}"])
    lines = ["## Warm start against a full retrain (CPU)", "",
             "The intents split with each seed into old and new ones (BANKING77: 67 + 10, "
             "the demo corpus: 23 + 4); `parent` trained from scratch on the old intents' "
             "rows, `full` from scratch on all rows, `warm` with `--init-from` the parent on"
             " all rows (every old row replayed, as `headwise train --init-from` does "
             "without `--replay`) for a third of its epochs (a warm start's default without "
             "`--epochs`), `warm-partial-replay` the same with a share of the old "
             "intents' rows (`--replay-share`, recorded), `warm-no-replay` on the new "
             "intents' rows only (what a network forgets). Accuracy of the top intent "
             "(closed set) on the test split's old and new intents' rows: the mean over "
             "seeds with its 95 % t-interval; the difference from `full` paired by seed, "
             "with its t-interval; time: the Trainer's, as a share of `full`'s (median "
             "over seeds; the parent's own training is not counted: it was already there); "
             "precision: what `precision=\"auto\"` chose in each run (`?`: not recorded). "
             "All choices (early stopping, calibration) on validation rows held out of the "
             "training split; the test rows are read only to score.", ""]
    if verdicts:
        lines += [H.markdown_table(["target", "verdict", "measured"], verdicts, "lll"), ""]
    lines.append(H.markdown_table(
        ["data", "model", "run", "seeds", "precision", "old intents %", "new intents %",
         "old vs full, points", "new vs full, points", "time / full", "train s (median)"],
        rows, "lllrlrrrrrr")
        if rows else "(not measured: run `python benchmarks/warm_start.py --seeds 0,1,2`)")
    cmds = sorted({r["command"] for r in records if r.get("command")})
    if cmds:
        lines += ["", *(f"`{c}`" for c in cmds)]
    return "\n".join(lines)


def records(path: Path = RESULTS) -> list[dict[str, Any]]:
    """The kept records (the last of each data set, model, seed and run)."""
    return list(H.done_runs(path, ROW).values()) if path.is_file() else []


def section(path: Path = RESULTS) -> str:
    """The section as written and rendered (``benchmarks/render.py``)."""
    return H.render_records(render, records(path), ("dataset", "model", "run"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data")
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--runs", default=",".join(RUNS))
    p.add_argument("--model", default="default",
                   help="transformer, bilstm or pretrained:NAME (default: headwise train's "
                   "choice for the data)")
    p.add_argument("--epochs", type=int, help="the from-scratch runs' epochs (default: the "
                   "recipe's)")
    p.add_argument("--warm-epochs", type=int,
                   help="the warm runs' epochs (default: a warm start's, a third of the "
                   "parent's)")
    p.add_argument("--new", type=int, help="how many intents are new (default: 10 for "
                   "BANKING77, 4 for the demo corpus)")
    p.add_argument("--work", type=Path,
                   help="keep each data set's and seed's models here (default: a temporary "
                   "folder, removed after): a run stopped halfway resumes with the parent it "
                   "trained")
    p.add_argument("--valid-fraction", type=float, default=0.1)
    p.add_argument("--replay-share", type=float, default=0.3,
                   help="the share of the old intents' rows the warm-partial-replay run keeps")
    p.add_argument("--set", action="append", metavar="PART.FIELD=VALUE",
                   help="a recipe field of every run, as headwise train --set (repeatable)")
    H.add_record_args(p, RESULTS, HERE.parent / "BENCHMARKS.md", timeout_s=7200)
    args = p.parse_args(argv)
    if not args.render:
        import torch

        torch.set_num_threads(args.threads)
        done = H.done_runs(args.results, ROW) if args.results.is_file() else {}
        runs = [r for r in args.runs.split(",") if r]
        unknown = sorted(set(runs) - set(RUNS))
        if unknown:
            p.error(f"unknown runs {unknown}; known: {list(RUNS)}")
        for ds in args.datasets.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                measure(ds, args.model, seed, runs, args, done)
    H.print_or_write(args.md, SECTION, section(args.results), no_write=args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
