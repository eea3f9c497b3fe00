"""``headwise ensemble``: several classifiers' calibrated probabilities averaged."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from headwise.commands._common import add_data_options, check_combination, score_side_by_side


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ensemble", help="average several classifiers' calibrated probabilities",
        description="Write an ensemble of saved classifiers over the same intents: its answer "
        "is the mean of the members' calibrated probabilities. The members may be of "
        "different kinds (`headwise train --model transformer|bilstm|tfidf|pretrained:DIR`), "
        "whose mistakes differ most; each query costs one forward pass per member. "
        "`headwise predict` and `headwise eval` take the result like a single model. With "
        "--data, the members and the ensemble are scored side by side.")
    p.add_argument("out", metavar="OUT", help="directory to write the ensemble to")
    p.add_argument("models", metavar="MODEL", nargs="+",
                   help="two or more directories saved by `headwise train`")
    p.add_argument("--threshold", type=float,
                   help="out-of-scope threshold (default: the members' mean)")
    p.add_argument("--data", metavar="FILE",
                   help="labelled data to score members and ensemble on")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    add_data_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from headwise.intent.ensemble import EnsembleClassifier, load_classifier

    out = check_combination(args.out, args.models, "an ensemble")
    members = [load_classifier(m) for m in args.models]
    if any(isinstance(m, EnsembleClassifier) for m in members):
        raise ValueError("a member is itself an ensemble; list its members instead")
    ens = EnsembleClassifier(members, threshold=args.threshold,
                             info={"members": [str(Path(m).resolve()) for m in args.models]})
    ens.save(out)
    print(f"wrote the ensemble of {len(members)} models to {out}", file=sys.stderr)
    if args.data:
        score_side_by_side({**dict(zip(args.models, members, strict=True)), "ensemble": ens},
                           args.data, args)
    return 0
