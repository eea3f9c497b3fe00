"""The ``task`` part of a recipe, a tagged choice: :class:`SingleLabel` (one intent per
text, or out of scope) or :class:`MultiLabel` (several intents per text, and slots)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from headwise.intent.training.recipe.fields import check_choice, check_types

__all__ = ["MAX_COMPOUND_JOINS", "TASKS", "MultiLabel", "SingleLabel", "Task"]


@dataclass
class SingleLabel:
    """One intent per text (or out-of-scope).

    Attributes:
        select_on: the validation metric that picks the best epoch and stops early:
            ``"accuracy"`` or ``"macro_f1"``.
    """

    NAME: ClassVar[str] = "single_label"
    select_on: str = "accuracy"

    def __post_init__(self) -> None:
        check_types(self, "task")
        check_choice("task.select_on", self.select_on, ("accuracy", "macro_f1"))


#: the most joined rows ``task.compound_joins`` may add, as a share of the training rows
MAX_COMPOUND_JOINS = 4.0


@dataclass
class MultiLabel:
    """Several intents per text (one sigmoid each) and slot spans: the
    :class:`~headwise.intent.compound.classifier.CompoundClassifier`, selected on the mean of
    intent micro-F1 and slot-token F1.

    Attributes:
        slots: train the slot tagger when the data has slots.
        per_intent_thresholds: tune one threshold per intent on validation (else one for
            all).
        threshold_metric: what the thresholds maximise on validation: ``"micro_f1"`` (one
            threshold, or one per intent) or ``"exact_match"`` (the whole intent set right:
            one threshold for the most probable intent and one for the others,
            :func:`~headwise.intent.compound.thresholds.tune_thresholds`); exact match with
            per-intent thresholds is refused.
        number_dropout: the share of the training rows' whole-number tokens replaced by
            ``[NUM]`` (seeded, training rows only), so that the placeholder an unseen
            number is read as at prediction time is trained; a tokenizer without ``[NUM]``
            (WordPiece, a pretrained checkpoint's) has none to replace. 0 turns it off.
            See :func:`~headwise.intent.training.compound.drop_numbers`.
        compound_joins: rows made by joining two training rows (texts joined by
            punctuation, intents united, slots moved), added to training as a share of the
            training rows: 0 adds none, 0.5 half as many again, null the architecture's
            share (``DEFAULT_COMPOUND_JOINS``). See :mod:`~headwise.intent.training.joins`.
            The architecture's share
            (:data:`~headwise.intent.training.defaults.DEFAULT_COMPOUND_JOINS`) was chosen on
            validation exact match of the demo corpus with compound questions for each
            network family (BENCHMARKS.md, ``compound:cpu``) and is recorded as used.
    """

    NAME: ClassVar[str] = "multi_label"
    slots: bool = True
    per_intent_thresholds: bool = False
    threshold_metric: str = "micro_f1"
    number_dropout: float = 0.15
    compound_joins: float | None = None

    def __post_init__(self) -> None:
        check_types(self, "task")
        check_choice("task.threshold_metric", self.threshold_metric,
                      ("micro_f1", "exact_match"))
        if self.per_intent_thresholds and self.threshold_metric == "exact_match":
            raise ValueError("task.per_intent_thresholds maximise each intent's F1; "
                             "task.threshold_metric exact_match chooses one threshold for the "
                             "most probable intent and one for the others: use one of the two")
        if not 0.0 <= self.number_dropout < 1.0:
            raise ValueError(f"task.number_dropout must be in [0, 1), got "
                             f"{self.number_dropout}")
        if self.compound_joins is not None and \
                not 0.0 <= self.compound_joins <= MAX_COMPOUND_JOINS:
            raise ValueError(f"task.compound_joins must be in [0, {MAX_COMPOUND_JOINS}], got "
                             f"{self.compound_joins}")


Task = SingleLabel | MultiLabel
#: the tasks by the name a recipe file's ``task.type`` gives
TASKS: dict[str, type] = {c.NAME: c for c in (SingleLabel, MultiLabel)}
