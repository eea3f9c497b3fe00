"""``headwise soup``: several fine-tuned classifiers' weights averaged into one model."""

from __future__ import annotations

import argparse
from pathlib import Path

from headwise.commands._common import (
    add_combination_arguments,
    check_combination,
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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from headwise.intent import IntentClassifier
    from headwise.intent.soup import uniform_soup

    check_combination(args.out, args.models, "a soup")
    members = [IntentClassifier.load(m) for m in args.models]
    soup = uniform_soup(members, info={"soup_of": [str(Path(m).resolve())
                                                   for m in args.models]})
    save_and_score(soup, members, args, "soup")
    return 0
