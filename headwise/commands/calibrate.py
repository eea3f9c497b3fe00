"""``headwise calibrate``: fit a saved classifier's temperature and out-of-scope threshold
(and its out-of-scope detector's threshold, when it has one) on held-out labelled data."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from headwise.commands._common import add_data_options, format_threshold, read


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate", help="calibrate a saved classifier's confidence on held-out data",
        description="Fit the softmax temperature (temperature scaling, Guo et al. 2017) and "
        "choose the out-of-scope threshold of a saved classifier on labelled data it did not "
        "train on, and print what changed (negative log-likelihood, expected calibration "
        "error, threshold). For a model trained with --no-valid, a model soup, an ensemble "
        "(threshold only: its members are calibrated each) or any model once fresh traffic "
        "has been labelled. Predictions do not change; confidences and out-of-scope "
        "answers do. Rows labelled oos (or out_of_scope, none, other) tune the threshold. "
        "A classifier trained with an out-of-scope detector (recipe ood_detector: energy, "
        "mahalanobis, knn) has that detector's threshold chosen again on the same rows; "
        "the detector itself, fitted on the training rows, is kept.")
    p.add_argument("model", metavar="MODEL", help="directory saved by `headwise train`, "
                   "`headwise soup` or `headwise ensemble`")
    p.add_argument("--data", required=True, help="labelled held-out data file")
    p.add_argument("--out", help="write the calibrated classifier here (default: update "
                   "MODEL's metadata file in place, atomically; its weights are not rewritten)")
    p.add_argument("--max-reject", type=float, default=0.02,
                   help="without out-of-scope rows: the largest share of in-scope rows the "
                   "threshold may reject (default 0.02)")
    p.add_argument("--reject-budget", type=_budget, default=0.05,
                   help="with out-of-scope rows: the largest share of in-scope rows the "
                   "balanced threshold may reject; 'none' for no limit (default 0.05)")
    p.add_argument("--reject-confidence", type=_confidence, default=0.95,
                   help="the confidence the reject budget is kept with: a threshold is "
                   "allowed when the one-sided Clopper-Pearson upper bound of its in-scope "
                   "reject rate is within the budget; 'none' to compare the rate on these "
                   "rows itself (default 0.95)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_data_options(p)
    p.set_defaults(func=run)


def _budget(text: str) -> float | None:
    """``--reject-budget``: a share in [0, 1), or ``none``."""
    if text.strip().lower() == "none":
        return None
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1) or 'none', got {text}")
    return value


def _confidence(text: str) -> float | None:
    """``--reject-confidence``: a level in (0, 1), or ``none``."""
    if text.strip().lower() == "none":
        return None
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1) or 'none', got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    from headwise.commands.evaluate import model_oos_labels
    from headwise.intent.kinds import load_single_label
    from headwise.intent.posthoc.recalibration import recalibrate, save_calibration
    from headwise.text.labels import marked_oos

    clf = load_single_label(args.model, "calibrate")
    data = read(args.data, args)
    labels = marked_oos(data.labels, model_oos_labels(clf))
    r = recalibrate(clf, data.texts, labels, max_reject=args.max_reject,
                    reject_budget=args.reject_budget,
                    reject_confidence=args.reject_confidence)
    clf.info["calibration"] = {"data": str(args.data), **r.to_dict()}
    clf.info["oos_threshold"] = r.threshold.to_dict()
    if r.ood is not None:
        clf.info["ood"] = {**clf.info.get("ood", {}), "valid": r.ood.to_dict(),
                           "calibrated_on": str(args.data)}
    out = Path(args.out or args.model)
    if args.out:
        clf.save(out)
    else:
        save_calibration(clf, out)
    if args.json:
        print(json.dumps({**clf.info["calibration"], "saved_to": str(out)}, indent=2))
        return 0
    unknown = (f", {r.unknown_rows} with intents the model does not know (left out)"
               if r.unknown_rows else "")
    print(f"calibrated on {args.data}: {r.in_scope_rows} in-scope rows, {r.oos_rows} "
          f"out-of-scope{unknown}")
    print(f"closed-set accuracy {r.accuracy:.4f}, macro-F1 {r.macro_f1:.4f} (unchanged)")
    if r.temperature_before is not None:
        print(f"temperature {r.temperature_before:.3f} -> {r.temperature_after:.3f}")
    else:
        print("an ensemble: no temperature of its own (its members' are kept)")
    print(f"negative log-likelihood {r.nll_before:.4f} -> {r.nll_after:.4f}, expected "
          f"calibration error {r.ece_before:.4f} -> {r.ece_after:.4f} (on these rows, which "
          f"the fit has seen)")
    if r.ood is None:
        print(f"out-of-scope threshold {r.threshold_before:.3f} -> "
              f"{format_threshold(r.threshold)}")
    else:
        print(f"top-probability threshold {r.threshold_before:.3f} -> "
              f"{format_threshold(r.threshold)} (not used: the detector decides)")
        print(f"out-of-scope detector {clf.ood.describe()}: score threshold "
              f"{r.ood_threshold_before:.4g} -> {format_threshold(r.ood)}")
    print(f"saved to {out}")
    return 0
