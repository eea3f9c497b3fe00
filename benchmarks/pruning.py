"""Head pruning on BANKING77: accuracy as heads are removed, by importance and at random.

An 8-head Transformer intent classifier (the intent benchmark's ``transformer-concat-ln``
recipe: d_model 128, 2 layers, 8 heads, trained with ``headwise.intent.train_intent_classifier``;
or the classifier that benchmark kept, when ``--model`` or the default path holds one) is
pruned with :func:`headwise.inspect.pruning_curve`: the least important 10 % of the heads
at a time (gate-gradient importance, Michel et al. 2019, recomputed after each step on a
seeded sample of the training data), against random removal orders. Accuracy is measured
on the full test split. The section reports the largest fraction of heads removable
within 1 point of the full model's accuracy.

    python benchmarks/pruning.py              # train (or reuse the kept model), prune, write
    python benchmarks/pruning.py --quick      # a tenth of the data, a small model: smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402

KEPT = Path("/tmp/intent_models/banking77-transformer-concat-ln-0")
# the library's default before BENCHMARKS transformer_default:cpu (learned positions, no
# number- or negation-aware heads), pinned so that these records keep their meaning
RECIPE = {
    "architecture": {
        "type": "transformer",
        "position": "learned",
        "model_overrides": {},
        "d_model": 128,
        "num_layers": 2,
        "num_heads": 8,
        "d_ff": 512,
        "fusion": "concat",
        "norm": "layernorm",
        "dropout": 0.1,
        "attention_dropout": 0.1,
        "max_length": 64,
        "vocab_size": 8000,
    },
    "train": {"epochs": 20, "patience": 4, "lr": 1e-3, "warmup_ratio": 0.1, "progress": False},
    "levers": {"label_smoothing": 0.1},
}
QUICK = H.recipe_with(
    RECIPE, architecture={"d_model": 64, "num_layers": 1, "d_ff": 128}, train={"epochs": 2}
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data")
    p.add_argument("--model", type=Path, default=None,
                   help=f"a saved classifier to prune (default: {KEPT} if present, else train)")
    p.add_argument("--quick", action="store_true", help="a tenth of the data, a small model")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--importance-examples", type=int, default=500)
    p.add_argument("--random-repeats", type=int, default=3)
    p.add_argument("--step", type=float, default=0.1)
    p.add_argument("--md", type=Path, default=HERE.parent / "BENCHMARKS.md")
    p.add_argument("--no-write", action="store_true", help="print the section instead")
    return p.parse_args(argv)


def load_classifier(args: argparse.Namespace, train: Any, out: Path) -> tuple[Any, str]:
    from headwise.intent import IntentClassifier, IntentRecipe, train_intent_classifier

    path = args.model or (KEPT if KEPT.is_dir() and not args.quick else None)
    if path is not None:
        return IntentClassifier.load(path), f"the kept classifier {path}"
    recipe = IntentRecipe.from_dict(H.recipe_with(QUICK if args.quick else RECIPE,
                                                  train={"seed": args.seed}))
    start = time.perf_counter()
    trained = train_intent_classifier(train, None, recipe, out_dir=out)
    given = QUICK if args.quick else RECIPE  # the parts' fields the recipe sets, as set
    saved = recipe.to_dict()
    shown = {part: {k: saved[part][k] for k in fields if k != "progress"}
             for part, fields in given.items()}
    return trained.classifier, (f"trained here in {time.perf_counter() - start:.0f} s "
                                f"(recipe {json.dumps(shown)})")


def run(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import torch

    from headwise.inspect import label_ids, pruning_curve
    from headwise.text.readers import read_examples

    torch.set_num_threads(args.threads)
    root = args.data_dir / "banking77"
    train = read_examples(root / "train.csv", format="csv")
    test = read_examples(root / "test.csv", format="csv")
    if args.quick:
        train.examples[:] = train.examples[::10]
        test.examples[:] = test.examples[::10]
    start, prov = time.perf_counter(), H.collect_provenance(args.threads)
    with tempfile.TemporaryDirectory(prefix="headwise-pruning-") as tmp:
        clf, origin = load_classifier(args, train, Path(tmp) / "model")
        rng = np.random.default_rng(args.seed)
        imp = rng.choice(len(train), min(args.importance_examples, len(train)), replace=False)
        imp_texts = [train.texts[i] for i in imp]
        imp_gold = label_ids(clf, [train.labels[i] for i in imp])
        gold = label_ids(clf, test.labels)
        curve = pruning_curve(clf, test.texts, gold, importance_texts=imp_texts,
                              importance_gold=imp_gold, step=args.step,
                              random_repeats=args.random_repeats, seed=args.seed)
    meta = H.results_meta("cpu", args.threads, {k: str(v) for k, v in vars(args).items()})
    meta["wall_min"] = (time.perf_counter() - start) / 60
    meta["provenance"] = H.finish_provenance(prov)  # collected before the run
    return {"meta": meta, "model": origin, "test_examples": len(test),
            "importance_examples": len(imp), "curve": curve}


def section(result: dict[str, Any], png: Path, md_dir: Path) -> str:
    c = result["curve"]
    imp, rnd, best = c["importance"], c["random"], c["max_fraction_within"]
    rows = [[f"{f:.0%}", k, f"{100 * a:.2f}", f"{100 * m:.2f} ({100 * lo:.2f}-{100 * hi:.2f})"]
            for f, k, a, m, lo, hi in zip(imp["fraction"], imp["removed"], imp["accuracy"],
                                          rnd["accuracy"], rnd["min"], rnd["max"], strict=True)]
    lines = ["## Head pruning (BANKING77, CPU)", "", H.provenance(result["meta"]), "",
             f"Model: {result['model']}. {c['num_heads']} heads; accuracy on the "
             f"{result['test_examples']} test examples; importance (expected absolute gate "
             f"gradient, normalised per layer, recomputed after each step) on "
             f"{result['importance_examples']} training examples; random orders: "
             f"{len(rnd['runs'])}.", "",
             f"**Largest fraction of heads removable within 1 point of accuracy "
             f"({100 * c['base_accuracy']:.2f} %): {best['importance']:.0%} by importance, "
             f"{best['random']:.0%} in random order (mean curve).**", "",
             H.markdown_table(["heads removed", "count", "by importance: accuracy %",
                               "random: mean accuracy % (min-max)"], rows), "",
             *H.image_links([("pruning curve", png)], md_dir)]
    return H.with_machine_line("\n".join(lines), [result["meta"]])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    results_dir = Path(tempfile.gettempdir()) if args.quick else HERE / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    name = "pruning_quick" if args.quick else "pruning_cpu"
    (results_dir / f"{name}.json").write_text(json.dumps(result, indent=1))
    from headwise.inspect.figures import pruning_png

    png = pruning_png(result["curve"], results_dir / f"{name}.png")
    print(f"results: {results_dir / f'{name}.json'}, plot: {png}", file=sys.stderr)
    body = section(result, png, H.page_dir(args.md))
    if args.no_write or args.quick:  # a smoke run never lands in BENCHMARKS.md
        print(body)
    else:
        H.write_section(args.md, "pruning:cpu", body)
        print(f"wrote the pruning:cpu section of {args.md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
