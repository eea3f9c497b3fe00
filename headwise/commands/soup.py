"""``headwise soup``: several fine-tuned classifiers' weights averaged into one model."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from headwise.commands._common import (
    add_combination_arguments,
    check_combination,
    read,
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
        "whether the soup is better before you use it.")
    add_combination_arguments(p, "soup")
    p.add_argument("--greedy", metavar="FILE",
                   help="make a greedy soup instead: members are tried best first on this "
                        "labelled held-out file (one that no member trained on) and kept "
                        "only when the soup's accuracy on it does not drop")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from headwise.intent import IntentClassifier
    from headwise.intent.kinds import kind_of
    from headwise.intent.soup import greedy_soup, uniform_soup

    check_combination(args.out, args.models, "a soup")
    for m in args.models:
        kind_of(m).require("soup", m)
    members = [IntentClassifier.load(m) for m in args.models]
    info = {"soup_of": [str(Path(m).resolve()) for m in args.models]}
    if args.greedy:
        held_out = read(args.greedy, args)
        soup = greedy_soup(members, held_out.texts, held_out.labels, info=info)
        g = soup.info["soup"]["greedy"]
        for i in g["order"]:
            print(f"{args.models[i]}: {100 * g['member_accuracy'][i]:.2f}% alone on "
                  f"{args.greedy}, {'kept' if i in g['kept'] else 'left out'}",
                  file=sys.stderr)
        print(f"greedy soup: {len(g['kept'])} of {len(members)} members, "
              f"{100 * g['accuracy']:.2f}% on {args.greedy}", file=sys.stderr)
        members = [members[i] for i in g["kept"]]
        args.models = [args.models[i] for i in g["kept"]]
    else:
        soup = uniform_soup(members, info=info)
    save_and_score(soup, members, args, "soup")
    return 0
