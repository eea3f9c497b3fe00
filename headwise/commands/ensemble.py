"""``headwise ensemble``: several classifiers' calibrated probabilities averaged."""

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
        "ensemble", help="average several classifiers' calibrated probabilities",
        description="Write an ensemble of saved classifiers over the same intents: its answer "
        "is the mean of the members' calibrated probabilities. The members may be of "
        "different kinds (`headwise train --model transformer|bilstm|tfidf|pretrained:DIR`), "
        "whose mistakes differ most; each query costs one forward pass per member. "
        "`headwise predict` and `headwise eval` take the result like a single model. With "
        "--data, the members and the ensemble are scored side by side.")
    add_combination_arguments(p, "ensemble")
    p.add_argument("--threshold", type=float,
                   help="out-of-scope threshold (default: the members' mean)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from headwise.intent.ensemble import EnsembleClassifier
    from headwise.intent.kinds import load_single_label

    check_combination(args.out, args.models, "an ensemble")
    members = [load_single_label(m) for m in args.models]
    if any(isinstance(m, EnsembleClassifier) for m in members):
        raise ValueError("a member is itself an ensemble; list its members instead")
    ens = EnsembleClassifier(members, threshold=args.threshold,
                             info={"members": [str(Path(m).resolve()) for m in args.models]})
    save_and_score(ens, members, args, "ensemble")
    return 0
