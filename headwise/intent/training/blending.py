"""A network blended with a TF-IDF model, its share chosen on validation data.

A linear model on character n-grams and a network make different mistakes: on DataCLUE
CIC (noisy labels) the equal-weight mean of fine-tuned multilingual-e5-small and TF-IDF
scored well above e5 alone, while on the demo's held-out phrasing TF-IDF is far weaker
than the network and the mean lost to it (BENCHMARKS ``blend``). So the share is not fixed:
the recipe's ``levers.blend="tfidf"`` fits a TF-IDF model on the network's training rows and
chooses, on the in-scope validation rows, the TF-IDF share ``w`` of

    p = (1 - w) * p_network + w * p_tfidf

among :data:`BLEND_WEIGHTS` (0 to 0.9: the network is what was asked for, so it always
keeps a share) by the recipe's ``task.select_on`` metric, the smallest share winning a tie. The
best share is kept only when its gain over the network alone is significant on those rows:
a one-sided paired bootstrap (Berg-Kirkpatrick et al., 2012) over the validation rows,
p below :data:`ALPHA`. A gain of a row or two out of hundreds is noise (on the demo's
held-out phrasing the best share won a couple of validation rows and lost on the test
split: BENCHMARKS ``blend``). ``w = 0`` keeps the network alone (no second model to run
per query); any other share saves an :class:`~headwise.intent.ensemble.EnsembleClassifier`
of the two with those weights, whose out-of-scope threshold is then chosen on the same
validation rows.

A compound (multi-label + slots) model blends the same way, intent by intent
(:func:`blend_compound`): a one-vs-rest TF-IDF model
(:class:`~headwise.intent.tfidf.TfidfOneVsRest`) is fitted on the training rows' intents, and
each intent's probability is ``(1 - w) * p_network + w * p_tfidf`` (both sigmoids). The
multi-label task has no ``select_on``: the share is chosen by validation exact match (every
intent right, nothing extra; a row with no intent is right when none passes), each candidate
share scored at the thresholds tuned on its own blended validation probabilities
(:func:`~headwise.intent.compound.thresholds.tune_thresholds`, per intent when
``task.per_intent_thresholds``), the smallest share winning a tie and kept only when the
same paired bootstrap, over the rows' exact-match outcomes, finds its gain significant. The
thresholds are then tuned again on the blended validation probabilities; the slots stay the
network's. A kept share saves the TF-IDF model inside the compound model directory
(BENCHMARKS ``compound:cpu``: on NLU++ the TF-IDF floor beats the joint networks on
intents).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.metrics import f1_score

from headwise.intent.classifier import IntentClassifier
from headwise.intent.compound.thresholds import decide, tune_thresholds
from headwise.intent.ensemble import EnsembleClassifier
from headwise.intent.posthoc.recalibration import calibrate_on_validation
from headwise.intent.tfidf import TfidfClassifier, TfidfOneVsRest
from headwise.intent.training.tfidf_selection import fit_tfidf

if TYPE_CHECKING:
    from headwise.intent.compound.classifier import CompoundClassifier
    from headwise.intent.training.recipe import IntentRecipe

__all__ = ["ALPHA", "BLEND_WEIGHTS", "BlendChoice", "blend_compound", "blend_with_tfidf",
           "choose_blend_weight", "choose_compound_blend", "paired_bootstrap_p"]

#: how :class:`BlendChoice` names each metric
_METRIC_NAMES = {"accuracy": "accuracy", "macro_f1": "macro-F1", "exact_match": "exact match"}

#: the candidate TF-IDF shares of the blend (0: the network alone)
BLEND_WEIGHTS: tuple[float, ...] = tuple(i / 10 for i in range(10))
#: the largest bootstrap p-value at which the best share's gain is kept
ALPHA = 0.05
#: bootstrap resamples of the significance test
RESAMPLES = 2000


@dataclass(frozen=True)
class BlendChoice:
    """The TF-IDF share chosen on validation data, and what each candidate scored.

    Attributes:
        weight: the TF-IDF model's share kept (0: the network alone): ``best_weight`` when
            its gain is significant (``p_value`` below ``alpha``), else 0.
        metric: ``"accuracy"`` or ``"macro_f1"`` (the recipe's ``select_on``), or
            ``"exact_match"`` (a compound model's).
        scores: the validation score of each candidate share, as ``[share, score]`` pairs.
        tfidf_score: the TF-IDF model's score alone, on the same rows.
        rows: the validation rows the choice was made on (a single-label model's
            in-scope ones; a compound model's all, with or without intents).
        best_weight: the share that scored best (the smallest of a tie).
        p_value: the paired bootstrap's p-value of its gain over the network alone (1.0
            when the best share is 0).
        alpha: the significance level applied.
    """

    weight: float
    metric: str
    scores: list[list[float]]
    tfidf_score: float
    rows: int
    best_weight: float = 0.0
    p_value: float = 1.0
    alpha: float = ALPHA

    @property
    def network_score(self) -> float:
        """The network's score alone (share 0)."""
        return self.scores[0][1]

    @property
    def blend_score(self) -> float:
        """The score at the kept share."""
        return dict((w, s) for w, s in self.scores)[self.weight]

    @property
    def best_score(self) -> float:
        """The score at the best share."""
        return dict((w, s) for w, s in self.scores)[self.best_weight]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return asdict(self)

    def describe(self) -> str:
        """One line for ``headwise train``."""
        name = _METRIC_NAMES[self.metric]
        if self.weight == 0.0:
            why = "no share scored higher" if self.best_weight == 0.0 else (
                f"the best, share {self.best_weight:g} at {self.best_score:.4f}, is not a "
                f"significant gain: bootstrap p {self.p_value:.3f} >= {self.alpha:g}")
            return (f"blend: the network alone on {self.rows} validation rows ({name} "
                    f"{self.network_score:.4f}; TF-IDF alone {self.tfidf_score:.4f}; {why}): "
                    f"the network is saved alone")
        return (f"blend: TF-IDF share {self.weight:g} chosen on {self.rows} validation rows "
                f"({name}: network {self.network_score:.4f}, TF-IDF {self.tfidf_score:.4f}, "
                f"blend {self.blend_score:.4f}, bootstrap p {self.p_value:.3f}); each query "
                f"runs both models")


def _score(probs: np.ndarray, gold: np.ndarray, metric: str) -> float:
    pred = probs.argmax(axis=1)
    if metric == "accuracy":
        return float((pred == gold).mean())
    return float(f1_score(gold, pred, average="macro", labels=np.unique(gold),
                          zero_division=0))


def _resampled_scores(pred: np.ndarray, gold: np.ndarray, picks: np.ndarray, metric: str,
                      classes: int) -> np.ndarray:
    """The metric on each resample (rows ``picks[b]``), by counts: macro-F1 over the
    intents present in each resample's gold labels."""
    p, g = pred[picks], gold[picks]  # (B, n)
    if metric == "accuracy":
        return (p == g).mean(axis=1)
    offs = np.arange(len(picks))[:, None] * classes
    count = len(picks) * classes

    def counts(ids: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
        w = None if where is None else where.ravel().astype(np.float64)
        return np.bincount((ids + offs).ravel(), weights=w, minlength=count).reshape(
            len(picks), classes)

    tp = counts(g, p == g)
    support, predicted = counts(g), counts(p)
    denom = support + predicted
    f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    present = support > 0
    return (f1 * present).sum(axis=1) / present.sum(axis=1)


def paired_bootstrap_p(base_pred: np.ndarray, new_pred: np.ndarray, gold: np.ndarray, *,
                       metric: str = "accuracy", resamples: int = RESAMPLES,
                       seed: int = 0) -> float:
    """The one-sided paired bootstrap p-value that ``new_pred`` is no better than
    ``base_pred`` on these rows: the share of resamples (rows drawn with replacement, the
    same draw for both) where the new predictions' score does not exceed the base's.

    Args:
        base_pred, new_pred: predicted intent ids of the same rows.
        gold: their true intent ids.
        metric: ``"accuracy"`` or ``"macro_f1"`` (over the intents present in each
            resample, as :func:`sklearn.metrics.f1_score` with those labels).
        resamples: bootstrap draws.
        seed: the draws' seed (the test is reproducible).

    Raises:
        ValueError: no rows, lengths that differ, or fewer than one resample.
    """
    base, new, gold = (np.asarray(x, dtype=np.int64) for x in (base_pred, new_pred, gold))
    if not len(gold) or base.shape != gold.shape or new.shape != gold.shape:
        raise ValueError(f"need predictions for the same n >= 1 rows, got {base.shape}, "
                         f"{new.shape} and {gold.shape}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    classes = int(max(base.max(), new.max(), gold.max())) + 1
    picks = np.random.default_rng(seed).integers(0, len(gold), size=(resamples, len(gold)))
    diff = (_resampled_scores(new, gold, picks, metric, classes)
            - _resampled_scores(base, gold, picks, metric, classes))
    return float((diff <= 0).mean())


def choose_blend_weight(network_probs: np.ndarray, tfidf_probs: np.ndarray,
                        gold: Sequence[int] | np.ndarray, *, metric: str = "accuracy",
                        weights: Sequence[float] = BLEND_WEIGHTS,
                        alpha: float = ALPHA) -> BlendChoice:
    """The TF-IDF share of the blend that scores best on labelled rows.

    Args:
        network_probs, tfidf_probs: the two models' calibrated probabilities (n, intents)
            over the same intents in the same order.
        gold: the rows' intent ids.
        metric: ``"accuracy"`` or ``"macro_f1"`` (over the intents present in ``gold``).
        weights: candidate shares in [0, 1].
        alpha: the best share is kept only when :func:`paired_bootstrap_p` of its gain over
            share 0 is below this; 1.0 keeps the best share whatever its p-value.

    Returns:
        The :class:`BlendChoice`; of shares that tie, the smallest.

    Raises:
        ValueError: no rows, shapes that differ, an unknown metric, or a share outside
            [0, 1].
    """
    a, b = np.asarray(network_probs, np.float64), np.asarray(tfidf_probs, np.float64)
    gold = np.asarray(gold, dtype=np.int64)
    if a.ndim != 2 or a.shape != b.shape or a.shape[0] != len(gold) or not len(gold):
        raise ValueError(f"need equal (n, intents) probabilities for n >= 1 labelled rows, "
                         f"got {a.shape}, {b.shape} and {len(gold)} labels")
    if metric not in ("accuracy", "macro_f1"):
        raise ValueError(f"metric must be accuracy or macro_f1, got {metric!r}")
    shares = sorted(float(w) for w in weights)
    if not shares or shares[0] < 0.0 or shares[-1] > 1.0:
        raise ValueError(f"blend shares must be in [0, 1], got {list(weights)}")
    if shares[0] != 0.0:
        shares.insert(0, 0.0)  # the network alone is always a candidate: the baseline
    scores = [[w, _score((1.0 - w) * a + w * b, gold, metric)] for w in shares]
    best = max(s for _, s in scores)
    best_weight = next(w for w, s in scores if s == best)
    p = 1.0 if best_weight == 0.0 else paired_bootstrap_p(
        a.argmax(axis=1), ((1.0 - best_weight) * a + best_weight * b).argmax(axis=1), gold,
        metric=metric)
    return BlendChoice(weight=best_weight if p < alpha or alpha >= 1.0 else 0.0, metric=metric,
                       scores=scores, tfidf_score=_score(b, gold, metric), rows=len(gold),
                       best_weight=best_weight, p_value=p, alpha=alpha)


def blend_with_tfidf(network: IntentClassifier, texts: list[str], labels: list[str],
                     v_texts: Sequence[str], v_labels: Sequence[str | None], recipe: IntentRecipe
                     ) -> tuple[IntentClassifier | EnsembleClassifier, BlendChoice,
                                TfidfClassifier, float]:
    """Fit a TF-IDF model on the network's training rows and blend the two.

    Args:
        network: the trained, calibrated network.
        texts, labels: its training rows (after any label cleaning).
        v_texts, v_labels: the validation rows (out-of-scope ones are used for the blend's
            threshold only).
        recipe: the :class:`~headwise.intent.training.recipe.IntentRecipe`: its
            ``levers.blend_c`` and ``levers.class_weighting``, ``train.seed``,
            ``task.select_on`` and its ``decision``.

    Returns:
        ``(classifier, choice, tfidf, seconds)``: the network itself when the chosen share
        is 0, else the weighted :class:`~headwise.intent.ensemble.EnsembleClassifier`
        (threshold chosen on the validation rows); the :class:`BlendChoice`; the TF-IDF
        model; the seconds its fit took.

    Raises:
        ValueError: no validation row of an intent the network knows.
    """
    index = {name: i for i, name in enumerate(network.labels)}
    known = [i for i, y in enumerate(v_labels) if y in index]
    if not known:
        raise ValueError("blend='tfidf' chooses the TF-IDF share on validation data: give "
                         "validation rows of the training intents (--valid or a "
                         "valid_fraction above 0)")
    start = time.perf_counter()
    decision = recipe.decision
    tfidf = fit_tfidf(texts, labels, c=recipe.levers.blend_c, seed=recipe.train.seed,
                      prior_correction=decision.prior_correction, progress=recipe.train.progress,
                      class_weight=None if recipe.levers.class_weighting == "none"
                      else "balanced")
    seconds = time.perf_counter() - start
    if tfidf.labels != network.labels:
        raise ValueError("the TF-IDF model's intents differ from the network's; blend needs "
                         "the same training intents for both")
    calibrate_on_validation(tfidf, list(v_texts), list(v_labels), decision.max_reject,
                            decision.reject_budget, decision.reject_confidence)
    rows = [v_texts[i] for i in known]
    gold = np.array([index[v_labels[i]] for i in known])  # type: ignore[index]
    choice = choose_blend_weight(network.predict_proba(rows), tfidf.predict_proba(rows), gold,
                                 metric=recipe.task.select_on, alpha=ALPHA)
    if choice.weight == 0.0:
        return network, choice, tfidf, seconds
    blend = EnsembleClassifier([network, tfidf], weights=[1.0 - choice.weight, choice.weight])
    return blend, choice, tfidf, seconds


def choose_compound_blend(network_probs: np.ndarray, tfidf_probs: np.ndarray,
                          gold: np.ndarray, *, per_intent: bool = False,
                          weights: Sequence[float] = BLEND_WEIGHTS,
                          alpha: float = ALPHA, metric: str = "micro_f1") -> BlendChoice:
    """The TF-IDF share of a multi-label blend that scores the best exact match on
    labelled rows.

    Each candidate share ``w`` mixes every intent's probabilities, ``(1 - w) * network +
    w * tfidf``; its thresholds are tuned on those mixed probabilities
    (:func:`~headwise.intent.compound.thresholds.tune_thresholds`) and its score is the share
    of rows whose decided intents equal the gold ones. The best share (the smallest of a
    tie) is kept when :func:`paired_bootstrap_p` over the rows' exact-match outcomes finds
    its gain over share 0 significant (p below ``alpha``).

    Args:
        network_probs, tfidf_probs: the two models' probabilities (n, intents), a sigmoid
            per intent, over the same intents in the same order.
        gold: (n, intents) 0/1 or bool: the rows' intents (a row may have none).
        per_intent: tune one threshold per intent (``task.per_intent_thresholds``).
        weights: candidate shares in [0, 1] (0, the network alone, is always one).
        alpha: the significance level; 1.0 keeps the best share whatever its p-value.
        metric: what each share's thresholds maximise (``task.threshold_metric``).

    Returns:
        The :class:`BlendChoice` (``metric`` ``"exact_match"``; ``tfidf_score``: the TF-IDF
        model alone at its own tuned thresholds).

    Raises:
        ValueError: no rows, shapes that differ, or a share outside [0, 1].
    """
    a, b = np.asarray(network_probs, np.float64), np.asarray(tfidf_probs, np.float64)
    gold = np.asarray(gold).astype(bool)
    if a.ndim != 2 or a.shape != b.shape or a.shape != gold.shape or not len(gold):
        raise ValueError(f"need equal (n, intents) probabilities and gold intents for n >= 1 "
                         f"rows, got {a.shape}, {b.shape} and {gold.shape}")
    shares = sorted(float(w) for w in weights)
    if not shares or shares[0] < 0.0 or shares[-1] > 1.0:
        raise ValueError(f"blend shares must be in [0, 1], got {list(weights)}")
    if shares[0] != 0.0:
        shares.insert(0, 0.0)  # the network alone is always a candidate: the baseline

    def exact(probs: np.ndarray) -> np.ndarray:
        """Each row's exact-match outcome at the thresholds tuned on these probabilities."""
        chosen = decide(probs, tune_thresholds(probs, gold, per_intent=per_intent,
                                               metric=metric))
        return (chosen == gold).all(axis=1)

    outcomes = {w: exact((1.0 - w) * a + w * b) for w in shares}
    scores = [[w, float(outcomes[w].mean())] for w in shares]
    best = max(score for _, score in scores)
    best_weight = next(w for w, score in scores if score == best)
    # exact match as the accuracy of "right" (0) against gold 0: the paired test of the rows
    p = 1.0 if best_weight == 0.0 else paired_bootstrap_p(
        (~outcomes[0.0]).astype(np.int64), (~outcomes[best_weight]).astype(np.int64),
        np.zeros(len(gold), np.int64), metric="accuracy")
    return BlendChoice(weight=best_weight if p < alpha or alpha >= 1.0 else 0.0,
                       metric="exact_match", scores=scores, tfidf_score=float(exact(b).mean()),
                       rows=len(gold), best_weight=best_weight, p_value=p, alpha=alpha)


def blend_compound(classifier: CompoundClassifier, texts: Sequence[str], targets: np.ndarray,
                   v_texts: Sequence[str], v_gold: np.ndarray, recipe: IntentRecipe
                   ) -> tuple[BlendChoice, TfidfOneVsRest, float]:
    """Fit a one-vs-rest TF-IDF model on a compound model's training rows and blend it
    into the classifier at the share validation chooses (:func:`choose_compound_blend`).

    With a share above 0 the classifier keeps the TF-IDF model and its share (its
    predictor mixes them from then on); with share 0 it is left as it was. Its thresholds
    are the caller's to tune again on the blended validation probabilities.

    Args:
        classifier: the trained compound classifier (its thresholds are not read).
        texts, targets: the training rows and their (n, intents) intents.
        v_texts, v_gold: the validation rows and their (n, intents) intents.
        recipe: its ``levers.blend_c`` (one C) and ``levers.class_weighting``, and
            ``task.per_intent_thresholds`` and ``task.threshold_metric``.

    Returns:
        ``(choice, tfidf, seconds)``: the :class:`BlendChoice`, the TF-IDF model (kept by
        the classifier only when the share is above 0) and the seconds its fit took.

    Raises:
        ValueError: no validation rows, a classifier blended already, or several
            ``blend_c`` candidates.
    """
    if not len(v_texts):
        raise ValueError("blend='tfidf' chooses the TF-IDF share on validation data: give "
                         "validation rows (--valid or a valid_fraction above 0)")
    if classifier.tfidf is not None:
        raise ValueError("the compound classifier is blended already")
    c = recipe.levers.blend_c
    if isinstance(c, list):
        raise ValueError("levers.blend_c: a compound model's blend fits one C (candidates "
                         "are chosen by single-label cross-validation)")
    start = time.perf_counter()
    tfidf = TfidfOneVsRest.fit(list(texts), targets, classifier.intents, c=float(c),
                               class_weight=None if recipe.levers.class_weighting == "none"
                               else "balanced")
    seconds = time.perf_counter() - start
    network, _ = classifier.analyse(list(v_texts))
    per_intent = bool(getattr(recipe.task, "per_intent_thresholds", False))
    choice = choose_compound_blend(network, tfidf.probabilities(list(v_texts)), v_gold,
                                   per_intent=per_intent, alpha=ALPHA,
                                   metric=getattr(recipe.task, "threshold_metric", "micro_f1"))
    if choice.weight > 0.0:
        classifier.tfidf, classifier.tfidf_share = tfidf, choice.weight
    return choice, tfidf, seconds
