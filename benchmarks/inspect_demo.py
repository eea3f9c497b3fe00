"""Acceptance check of the head analysis on the demo corpus (not part of the test suite).

Trains the demo's 8-head Transformer (``headwise demo``'s recipe: d_model 128, 2 layers,
20 epochs) unless ``--model`` names one (e.g. ``OUT/transformer`` of ``headwise demo``),
analyses it on the held-out split with the generator's negation/number spans, and checks:

* the report names at least one ``negation`` head and one ``number`` head, each with a
  lift >= 2 over its category's share of the keys;
* the statistics of a few examples match a float64 recomputation done one row at a time
  (from a float64 copy of the model, with plain Python loops).

    python benchmarks/inspect_demo.py --model /tmp/demo/transformer --out /tmp/demo-report
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
from pathlib import Path


def reference_lifts(clf, examples, category: str) -> dict[tuple[int, int], float]:
    """Words-view lift of ``category`` per head, recomputed row by row in float64."""
    import torch

    from headwise.attention import capture_attention
    from headwise.inspect.forward import attention_layers

    model = copy.deepcopy(clf.model).double().eval()
    layers = attention_layers(model)
    mass: dict = {}
    share: dict = {}
    for ex in examples:
        batch = clf.tokenizer([ex.text], max_length=clf.max_length)
        with torch.no_grad(), capture_attention(layers) as cap:
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        n = batch["input_ids"].shape[1]
        offs = clf.tokenizer.offsets(ex.text)[:n - 2]
        flags = [any(s < sp.end and sp.start < e for sp in ex.spans if sp.category == category)
                 for s, e in offs]
        for li, m in enumerate(layers):
            w = cap[m][0][0].tolist()
            for h, rows in enumerate(w):
                for q in range(1, n - 1):
                    row = rows[q][1:n - 1]
                    total = math.fsum(row)
                    mass[li, h] = mass.get((li, h), 0.0) + math.fsum(
                        x / total for x, f in zip(row, flags, strict=True) if f)
                    share[li, h] = share.get((li, h), 0.0) + sum(flags) / len(row)
    return {k: mass[k] / share[k] for k in mass if share[k] > 0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, help="a trained demo Transformer (default: train one)")
    p.add_argument("--work", type=Path, default=Path("/tmp/headwise-inspect-demo"))
    p.add_argument("--out", type=Path, default=None, help="report directory")
    args = p.parse_args(argv)
    from headwise.inspect import inspect_classifier, write_report
    from headwise.inspect.roles import heads_with_role
    from headwise.intent import IntentClassifier, IntentRecipe, train_intent_classifier
    from headwise.intent.demo import DemoSettings, demo_recipes
    from headwise.text.demo_corpus import generate_demo_corpus

    s = DemoSettings()
    corpus = generate_demo_corpus(seed=s.seed, per_intent=s.per_intent)
    if args.model is None:
        recipe = IntentRecipe.from_dict({**demo_recipes(s)["transformer"].to_dict(),
                                         "progress": False})
        train_intent_classifier([(e.text, e.label) for e in corpus["train"]],
                                [(e.text, e.label) for e in corpus["valid"]], recipe,
                                out_dir=args.work / "transformer")
        args.model = args.work / "transformer"
    clf = IntentClassifier.load(args.model)
    test = corpus["test"]
    spans = [[(x.start, x.end, x.category) for x in e.spans] for e in test]
    analysis = inspect_classifier(clf, [e.text for e in test], [e.label for e in test],
                                  spans=spans, echo=print)
    paths = write_report(analysis, args.out or args.work / "report")
    print(f"report: {paths['html']}; accuracy {analysis['accuracy']:.4f}")
    words = analysis["stats"]["views"]["words"]["categories"]
    ok = True
    few = [e for e in test if any(x.category in ("negation", "number") for x in e.spans)][:8]
    for cat in ("negation", "number"):
        heads = heads_with_role(analysis["roles"], cat)
        lifts = {(la, h): words[cat]["lift"][la][h] for la, h in heads}
        print(f"{cat} heads: " + (", ".join(f"L{la}H{h} lift {v:.2f} (mass "
                                            f"{words[cat]['mass'][la][h]:.3f}, share "
                                            f"{words[cat]['share'][la][h]:.3f})"
                                            for (la, h), v in lifts.items()) or "none"))
        ok &= any(v >= 2 for v in lifts.values())
        sub = inspect_classifier(clf, [e.text for e in few],
                                 spans=[[(x.start, x.end, x.category) for x in e.spans]
                                        for e in few])
        ref = reference_lifts(clf, few, cat)
        got = sub["stats"]["views"]["words"]["categories"][cat]["lift"]
        worst = max(abs(got[la][h] - v) / v for (la, h), v in ref.items())
        print(f"  float64 recomputation on {len(few)} examples: largest relative difference "
              f"of the {cat} lift {worst:.2e}")
        ok &= worst < 1e-5
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
