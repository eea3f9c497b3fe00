"""The ``decision`` part of a recipe: how answers are decided once the model is trained."""

from __future__ import annotations

from dataclasses import dataclass, field

from headwise.intent.decision.ood import check_ood_setting
from headwise.intent.decision.oos import REJECT_CONFIDENCE, check_reject_confidence
from headwise.intent.training.recipe.fields import check_types

__all__ = ["Decision"]


@dataclass
class Decision:
    """How answers are decided once the model is trained, on the validation rows
    (single-label; the temperature is always fitted there).

    Attributes:
        prior_correction: logit adjustment towards rare intents, for macro-F1
            (:mod:`headwise.intent.posthoc.prior`): ``"none"``, a fixed ``tau >= 0``, or
            ``"auto"``: ``tau`` chosen by macro-F1 (out-of-fold for a TF-IDF model, on the
            validation data for a network).
        max_reject: out-of-scope threshold without out-of-scope validation examples: the
            largest share of in-scope validation queries it may reject.
        reject_budget: out-of-scope threshold with out-of-scope validation examples: the
            best balance of in-scope accuracy and out-of-scope recall among the thresholds
            that reject at most this share of the in-scope validation queries (None: no
            limit; BENCHMARKS ``demo:heldout``).
        reject_confidence: the confidence the reject budget is kept with (the one-sided
            Clopper-Pearson upper bound of the in-scope reject rate,
            :func:`~headwise.intent.decision.oos.reject_upper_bound`; None: the validation
            rate alone; BENCHMARKS ``demo:heldout``).
        ood_detector: the out-of-scope score (:mod:`headwise.intent.decision.ood`):
            ``"auto"`` (the detector with the best balance of in-scope accuracy and
            out-of-scope recall on the validation rows), ``"max_prob"``, ``"energy"``,
            ``"mahalanobis"``, ``"mahalanobis:ledoit_wolf"``, ``"knn"`` or ``"knn:K"``
            (networks; BENCHMARKS ``demo:ood`` and ``oos:cpu``).
        oos_labels: the data's own out-of-scope label (``"其他"``) or labels (a list),
            besides :data:`~headwise.text.labels.OOS_LABELS` (``oos``, ``out_of_scope``,
            ``none``, ``other`` ...). Rows so labelled are no intent: their texts choose the
            out-of-scope threshold and detector, beside the validation rows (or, with
            ``levers.outlier_exposure``, train the network instead).
    """

    prior_correction: str | float = "none"
    max_reject: float = 0.02
    reject_budget: float | None = 0.05
    reject_confidence: float | None = REJECT_CONFIDENCE
    ood_detector: str = "auto"
    oos_labels: str | list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_types(self, "decision")
        if any(not x.strip() for x in self.oos_label_names):
            raise ValueError(f"decision.oos_labels names an empty label: {self.oos_labels!r}")
        pc = self.prior_correction
        if pc not in ("none", "auto") and not (not isinstance(pc, str) and pc >= 0):
            raise ValueError(f"decision.prior_correction must be none, auto or a number >= 0, "
                             f"got {pc!r}")
        if not 0.0 <= self.max_reject < 1.0 or (
                self.reject_budget is not None and not 0.0 <= self.reject_budget < 1.0):
            raise ValueError(f"decision.max_reject and decision.reject_budget must be in "
                             f"[0, 1), got {self.max_reject}, {self.reject_budget}")
        check_reject_confidence(self.reject_confidence)
        check_ood_setting(self.ood_detector)

    @property
    def oos_label_names(self) -> list[str]:
        """:attr:`oos_labels` as a list (one string is one label)."""
        return [self.oos_labels] if isinstance(self.oos_labels, str) else list(self.oos_labels)
