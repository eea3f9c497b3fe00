"""``headwise soup``: several fine-tuned classifiers' weights averaged into one model."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from headwise.commands._common import (
    add_combination_arguments,
    check_combination,
    read,
    read_compound,
    save_and_score,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "soup", help="average fine-tuned classifiers' weights into one model",
        description="Write the uniform model soup of several classifiers (Wortsman et al. "
        "2022): every weight is the mean of the members' weights, so the result is one "
        "model with one member's size and latency. It helps when the members were "
        "fine-tuned from the same pretrained model (`headwise train --model pretrained:DIR`, "
        "different --seed); classifiers trained from scratch do not average well. With "
        "--data, the members and the soup are scored on a labelled file, so you see "
        "whether the soup is better before you use it. Compound (multi-label + slots) "
        "models make a compound soup when they share architecture, tokenizer, intents and "
        "slot tags; their files (--data, --greedy) are annotated examples, scored on exact "
        "match, and a greedy soup's thresholds are tuned on the --greedy file.")
    add_combination_arguments(p, "soup")
    p.add_argument("--greedy", metavar="FILE",
                   help="make a greedy soup instead: members are tried best first on this "
                        "labelled held-out file (one that no member trained on) and kept "
                        "only when the soup's accuracy on it does not drop (compound "
                        "models: an annotated file, exact match, the soup's thresholds "
                        "tuned on it)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from headwise.intent.kinds import kind_of
    from headwise.intent.soup import greedy_soup, uniform_soup

    check_combination(args.out, args.models, "a soup")
    kinds = [kind_of(m) for m in args.models]
    for m, kind in zip(args.models, kinds, strict=True):
        kind.require("soup", m)
    if len({k.name for k in kinds}) > 1:
        raise ValueError("a soup averages networks of one kind: "
                         + ", ".join(f"{m} is {k.description}"
                                     for m, k in zip(args.models, kinds, strict=True)))
    members = [k.load(m) for m, k in zip(args.models, kinds, strict=True)]
    compound = kinds[0].multi_label
    info = {"soup_of": [str(Path(m).resolve()) for m in args.models]}
    if args.greedy:
        if compound:
            examples = read_compound(args.greedy, args).examples
            texts, labels = [e.text for e in examples], [list(e.intents) for e in examples]
        else:
            held_out = read(args.greedy, args)
            texts, labels = held_out.texts, held_out.labels
        soup = greedy_soup(members, texts, labels, info=info)
        g = soup.info["soup"]["greedy"]
        what = "exact match" if compound else "accuracy"
        alone = g["member_exact_match"] if compound else g["member_accuracy"]
        for i in g["order"]:
            print(f"{args.models[i]}: {100 * alone[i]:.2f}% {what} alone on {args.greedy}, "
                  f"{'kept' if i in g['kept'] else 'left out'}", file=sys.stderr)
        score = g["exact_match"] if compound else g["accuracy"]
        print(f"greedy soup: {len(g['kept'])} of {len(members)} members, "
              f"{100 * score:.2f}% {what} on {args.greedy}"
              + (" (thresholds tuned there)" if compound else ""), file=sys.stderr)
        members = [members[i] for i in g["kept"]]
        args.models = [args.models[i] for i in g["kept"]]
    else:
        soup = uniform_soup(members, info=info)
    save_and_score(soup, members, args, "soup")
    return 0
