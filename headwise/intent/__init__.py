"""The intent-recognition system: train, calibrate, evaluate and predict.

* :class:`Prediction` — the one answer of every classifier kind: the answered intents
  with calibrated confidences, the out-of-scope decision and the score that made it, the
  slots with normalised values;
* :class:`IntentClassifier` — a model, its tokenizer, intents, temperature and
  out-of-scope threshold; ``predict``, ``save``, ``load``;
* :func:`train_intent_classifier` with an :class:`IntentRecipe` — the whole training job
  behind ``headwise train``;
* :func:`evaluate`, :func:`format_report`, :func:`measure_latency` — what ``headwise eval``
  reports, for every kind, from the predictor's answers;
* :func:`fit_temperature`, :func:`choose_threshold` — calibration and out-of-scope;
  :func:`recalibrate` — both again on held-out data, for a saved model (``headwise
  calibrate``);
* :func:`make_detector` (:mod:`headwise.intent.decision.ood`: max_prob, energy, Mahalanobis, kNN),
  :func:`fit_ood_detector`, :func:`choose_score_threshold` — out-of-scope scores beyond
  the top probability (recipe ``decision.ood_detector``);
* :func:`apply_prior_correction`, :func:`choose_tau` — logit adjustment towards rare
  intents, for macro-F1 (recipe ``decision.prior_correction``);
* :func:`tune_thresholds`, :func:`decide`, :func:`multilabel_metrics`, :func:`span_f1` —
  multi-label (compound) intents and slot filling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwise._lazy import lazy_names

if TYPE_CHECKING:
    from headwise.intent.classifier import IntentClassifier
    from headwise.intent.compound.thresholds import (
        Thresholds,
        decide,
        multilabel_metrics,
        span_f1,
        tune_thresholds,
    )
    from headwise.intent.decision.ood import (
        OodDetector,
        load_detector,
        make_detector,
        save_detector,
    )
    from headwise.intent.decision.oos import (
        ThresholdChoice,
        choose_score_threshold,
        choose_threshold,
        score_thresholds,
        threshold_curve,
    )
    from headwise.intent.decision.temperature import calibrated_probs, fit_temperature
    from headwise.intent.evaluation import evaluate, format_report
    from headwise.intent.latency import measure_latency
    from headwise.intent.posthoc.prior import apply_prior_correction, choose_tau
    from headwise.intent.posthoc.recalibration import Recalibration, fit_ood_detector, recalibrate
    from headwise.intent.prediction import (
        OUT_OF_SCOPE,
        OutOfScopeDecision,
        OutOfScopeScores,
        Prediction,
    )
    from headwise.intent.soup import greedy_soup, uniform_soup
    from headwise.intent.training.distillation import distill
    from headwise.intent.training.pipeline import train_intent_classifier
    from headwise.intent.training.recipe import IntentRecipe
    from headwise.intent.training.result import TrainedIntent

#: public name -> the module that defines it, imported on first use (PEP 562), so that
#: importing one module of this package (a saved classifier's loader, the tokenizer)
#: does not import every other one and its libraries
_LAZY: dict[str, str] = {
    "calibrated_probs": "headwise.intent.decision.temperature",
    "fit_temperature": "headwise.intent.decision.temperature",
    "OUT_OF_SCOPE": "headwise.intent.prediction",
    "OutOfScopeDecision": "headwise.intent.prediction",
    "OutOfScopeScores": "headwise.intent.prediction",
    "Prediction": "headwise.intent.prediction",
    "IntentClassifier": "headwise.intent.classifier",
    "distill": "headwise.intent.training.distillation",
    "evaluate": "headwise.intent.evaluation",
    "format_report": "headwise.intent.evaluation",
    "measure_latency": "headwise.intent.latency",
    "Thresholds": "headwise.intent.compound.thresholds",
    "decide": "headwise.intent.compound.thresholds",
    "multilabel_metrics": "headwise.intent.compound.thresholds",
    "span_f1": "headwise.intent.compound.thresholds",
    "tune_thresholds": "headwise.intent.compound.thresholds",
    "OodDetector": "headwise.intent.decision.ood",
    "load_detector": "headwise.intent.decision.ood",
    "make_detector": "headwise.intent.decision.ood",
    "save_detector": "headwise.intent.decision.ood",
    "ThresholdChoice": "headwise.intent.decision.oos",
    "choose_score_threshold": "headwise.intent.decision.oos",
    "choose_threshold": "headwise.intent.decision.oos",
    "score_thresholds": "headwise.intent.decision.oos",
    "threshold_curve": "headwise.intent.decision.oos",
    "apply_prior_correction": "headwise.intent.posthoc.prior",
    "choose_tau": "headwise.intent.posthoc.prior",
    "Recalibration": "headwise.intent.posthoc.recalibration",
    "fit_ood_detector": "headwise.intent.posthoc.recalibration",
    "recalibrate": "headwise.intent.posthoc.recalibration",
    "IntentRecipe": "headwise.intent.training.recipe",
    "TrainedIntent": "headwise.intent.training.result",
    "train_intent_classifier": "headwise.intent.training.pipeline",
    "greedy_soup": "headwise.intent.soup",
    "uniform_soup": "headwise.intent.soup",
}

__all__ = [
    "OUT_OF_SCOPE",
    "IntentClassifier",
    "OutOfScopeDecision",
    "OutOfScopeScores",
    "Prediction",
    "IntentRecipe",
    "OodDetector",
    "Recalibration",
    "ThresholdChoice",
    "Thresholds",
    "TrainedIntent",
    "apply_prior_correction",
    "calibrated_probs",
    "choose_tau",
    "choose_score_threshold",
    "choose_threshold",
    "decide",
    "distill",
    "evaluate",
    "fit_ood_detector",
    "fit_temperature",
    "format_report",
    "load_detector",
    "make_detector",
    "measure_latency",
    "recalibrate",
    "multilabel_metrics",
    "save_detector",
    "score_thresholds",
    "span_f1",
    "threshold_curve",
    "train_intent_classifier",
    "tune_thresholds",
    "greedy_soup",
    "uniform_soup",
]

__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)
