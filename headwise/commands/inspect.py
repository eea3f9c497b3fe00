"""``headwise inspect``: the head analysis of a trained Transformer classifier (single-label
or compound), as an offline HTML report, PNG figures and JSON statistics."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from headwise.commands._common import (
    add_data_options,
    check_out_dir,
    read,
    read_compound,
    settings_of,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect", help="analyse a Transformer classifier's attention heads (HTML report)",
        description="Per-layer, per-head attention statistics at word level (entropy, "
        "distance, previous/next mass, special tokens, negation/number/domain lift), head "
        "importance, single-head ablation and pruning curves, attention rollout, a "
        "faithfulness check, head roles and bad cases (per slice when the data names "
        "slices). A compound (multi-label) model is scored by exact match of its intent "
        "sets and gets two more categories: the words joining its requests and the numbers "
        "of its second request. Writes OUT/index.html (one self-contained file that works "
        "offline), OUT/figures/*.png and OUT/stats.json.")
    p.add_argument("model", metavar="MODEL", help="directory saved by `headwise train`")
    p.add_argument("--data", required=True, metavar="FILE",
                   help="data file (CSV, JSON lines, BANKING77, CLUE; the demo corpus's "
                        "*.jsonl with its category spans)")
    p.add_argument("--out", required=True, help="report directory (created when missing)")
    p.add_argument("--lexicon", metavar="FILE",
                   help="JSON file of category lexicons: {category: [words] | "
                        "{\"words\": [...], \"pattern\": regex}}; a \"join\" category "
                        "gives a compound model's join words")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE",
                   help="a setting of the analysis (InspectOptions), VALUE as JSON; "
                   "repeatable: max_examples (a seeded sample; default every text), "
                   "show_examples (12), importance_examples (500), faithfulness_examples "
                   "(100), deletion_examples (50), ablation_examples (2000), ablation "
                   "(true), pruning (true), pruning_step (0.1), random_repeats (3), "
                   "attribution_cases (20), "
                   "agreement_examples (50), batch_size (32), seed (0), "
                   "view_units (64), embed_bytes; e.g. --set pruning=false")
    add_data_options(p)
    p.set_defaults(func=run)


def _is_demo_jsonl(path: Path) -> bool:
    if path.suffix != ".jsonl" or not path.is_file():
        return False
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                try:
                    return "spans" in json.loads(line)
                except json.JSONDecodeError:
                    return False
    return False


def run(args: argparse.Namespace) -> int:
    from headwise.demo.corpus import read_demo_jsonl
    from headwise.inspect import CategoryLexicon, InspectOptions, inspect_classifier, write_report
    from headwise.intent.kinds import kind_of

    check_out_dir(args.out)
    settings_of(InspectOptions, args.set)  # a bad setting: refused before any work
    kind = kind_of(args.model)
    kind.require("heads", args.model)
    clf = kind.load(args.model)
    path = Path(args.data)
    spans = slices = None
    if _is_demo_jsonl(path):
        examples = read_demo_jsonl(path)
        texts = [e.text for e in examples]
        labels = [e.intents if kind.multi_label else e.label for e in examples]
        spans = [[(s.start, s.end, s.category) for s in e.spans] for e in examples]
        slices = [e.slices for e in examples]
    elif kind.multi_label:
        annotated = read_compound(args.data, args)
        texts, labels = [e.text for e in annotated], [e.intents for e in annotated]
    else:
        data = read(args.data, args, require_labels=False)
        texts, labels, slices = data.texts, data.labels, data.slices
        if all(y is None for y in labels):
            labels = None
    if slices is not None and not any(slices):
        slices = None
    lexicon = CategoryLexicon.from_json(args.lexicon) if args.lexicon else None
    if lexicon is not None:
        spans = None  # an explicit lexicon wins over the corpus's spans
    options = InspectOptions(**settings_of(InspectOptions, args.set))
    analysis = inspect_classifier(clf, texts, labels, spans=spans, lexicon=lexicon,
                                  slices=slices, options=options, echo=print)
    analysis["data"]["source"] = str(path)
    paths = write_report(analysis, args.out, title=f"Head analysis: {Path(args.model).name}")
    summarize(analysis, print)
    print(f"report: {paths['html']}  (statistics: {paths['json']}, figures: "
          f"{paths['html'].parent / 'figures'})")
    return 0


def summarize(analysis: dict, echo) -> None:
    """Print the head roles, the negation heads' agreement with the attribution, a
    compound model's join and number-in-second heads, the bad cases per slice, the
    explanation methods ranked by their deletion curves and the pruning result in a few
    lines."""
    for layer, row in enumerate(analysis["roles"]):
        cells = [f"H{h}:{'/'.join(r['role'] for r in roles) or '-'}"
                 for h, roles in enumerate(row)]
        echo(f"layer {layer}: " + "  ".join(cells))
    compound = analysis.get("compound")
    if compound:
        def heads(pairs: list) -> str:
            return ", ".join(f"L{layer}H{head}" for layer, head in pairs) or "none"

        echo(f"compound model: heads on join words {heads(compound['join_heads'])} "
             f"({compound['texts_with_join']} texts with one); on numbers of the second "
             f"request {heads(compound['number_in_second_heads'])} "
             f"({compound['texts_with_number_in_second']} texts with one)")
    by_slice = (analysis.get("bad_cases") or {}).get("by_slice")
    if by_slice:
        echo(f"bad cases ({analysis.get('score', 'accuracy')} missed) per slice: " + ", ".join(
            f"{r['slice']} {r['bad']}/{r['examples']}" for r in by_slice))
    agreement = analysis.get("negation_agreement")
    if agreement and agreement["share"] is not None:
        low, high = agreement["interval"]
        echo(f"negation heads vs attribution on {agreement['texts']} negated texts: "
             f"{agreement['verdict']} (more rollout on the deciding tokens than the other "
             f"heads on {agreement['share']:.0%} [{low:.0%}, {high:.0%}])")
    elif agreement:
        echo(f"negation heads vs attribution: {agreement['verdict']}")
    methods = analysis.get("methods")
    if methods:
        order = " > ".join(f"{r['method']} {r['area']:.3f}" for r in methods["methods"])
        best = (f"most faithful: {methods['most_faithful']}" if methods["most_faithful"]
                else f"{methods['leader']} leads within noise")
        echo(f"explanation methods by deletion-curve area on {methods['texts']} texts: "
             f"{order} ({best})")
    if analysis.get("pruning"):
        p = analysis["pruning"]
        echo(f"pruning: up to {p['max_fraction_within']['importance']:.0%} of the heads "
             f"removable within 1 point of {analysis.get('score', 'accuracy')} "
             f"{p['base_accuracy']:.4f} "
             f"(random order: {p['max_fraction_within']['random']:.0%})")
