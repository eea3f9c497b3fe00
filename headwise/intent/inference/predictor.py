"""The one way from texts to answers: :class:`Predictor`.

Every classifier kind answers through a predictor: a network
(:class:`~headwise.intent.inference.single.SingleLabelPredictor`, on PyTorch or
onnxruntime), a compound model
(:class:`~headwise.intent.inference.compound.CompoundPredictor`) and a TF-IDF model or an
ensemble (:class:`~headwise.intent.inference.proba.ProbabilityPredictor`). A prediction
is three steps, each a method:

1. :meth:`Predictor.encode`: tokenize the texts once and apply the long-text policy;
2. :meth:`Predictor.run`: the forward passes (length-bucketed batches); the service's
   micro-batcher calls it on the encodings of several requests at once;
3. :meth:`Predictor.answers`: calibrate, decide out-of-scope, decode the slots, and give
   one :class:`~headwise.intent.prediction.Prediction` per text.

The library's ``predict`` (``IntentClassifier.predict``, ``CompoundClassifier.predict``),
``headwise predict``, the file stream (:mod:`headwise.intent.batch`), Ray and the
service's ``/v1/predict`` all run these three, so they answer the same.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from headwise.intent.prediction import MAX_PROB, Prediction, check_answer_options, check_texts

__all__ = ["Predictor"]


class Predictor(ABC):
    """Encode, run, answer: what every classifier kind's inference shares (an abstract
    base; the kinds define :meth:`encode`, :meth:`run`, :meth:`note` and
    :meth:`decide`).

    Attributes:
        task: ``"single_label"`` (one intent per text) or ``"multi_label"`` (several
            intents and slots), as the recipe's task names it.
        runtime: what runs the model; its ``name`` is what the service reports.
        classifier: the classifier whose calibration and decisions are applied.
    """

    task = ""
    runtime: Any
    classifier: Any
    #: the keyword options :meth:`answers` takes beyond ``top_k`` and ``threshold`` (a
    #: compound model's: ``at_least_one``, ``reference_date``, ``thresholds``)
    options: tuple[str, ...] = ()

    @property
    @abstractmethod
    def labels(self) -> list[str]:
        """The intents the model answers, index = output of its head."""

    @property
    def decision_scores(self) -> tuple[str, ...]:
        """The names of the scores that may decide out-of-scope in this predictor's answers
        (:attr:`OutOfScopeDecision.score <headwise.intent.prediction.OutOfScopeDecision.score>`):
        here the top probability's, which a request's ``threshold`` applies."""
        return (MAX_PROB,)

    @abstractmethod
    def encode(self, texts: Sequence[str]) -> list[Any]:
        """The texts as the items :meth:`run` reads (tokenized once, long-text policy
        applied)."""

    @abstractmethod
    def run(self, items: Sequence[Any]) -> list[Any]:
        """One row of model outputs per item, in order: the micro-batcher's call."""

    @abstractmethod
    def note(self, item: Any, row: Any = None) -> dict[str, Any] | None:
        """The ``long_text`` note of an item: how a text over the maximum length was read
        (None within it); ``row``, its :meth:`run` row, says which window answered where
        the policy picks one (``"chunk_max"``)."""

    @abstractmethod
    def decide(self, texts: Sequence[str], items: Sequence[Any], rows: Any, *, top_k: int,
               threshold: float | None, **options: Any) -> list[Prediction]:
        """The kind's answers from :meth:`run`'s rows (see :meth:`answers`)."""

    def answers(self, texts: Sequence[str], items: Sequence[Any], rows: Any, *,
                top_k: int = 3, threshold: float | None = None, **options: Any
                ) -> list[Prediction]:
        """The answers to texts from their encodings and :meth:`run`'s rows: every path
        from a text to an answer ends here.

        Args:
            texts: the texts.
            items: their encodings (:meth:`encode`).
            rows: :meth:`run`'s rows for them (a list, or stacked into one array).
            top_k: intents listed per text.
            threshold: the out-of-scope threshold, replacing the saved rule (a network:
                the top-probability rule at it, even with a detector; a compound model: one
                threshold for every intent).
            options: the kind's own (:attr:`options`), e.g. a compound model's
                ``at_least_one`` (its most probable intent when none passes),
                ``reference_date`` ("today" for relative dates in slot values) and
                ``thresholds`` (replacing the saved ones); None or False means not given.

        Returns:
            One :class:`~headwise.intent.prediction.Prediction` per text.

        Raises:
            ValueError: ``top_k < 1``, a threshold outside [0, 1], or an option this kind
                does not take (``reference_date`` for a single-label model, say, which
                answers no slots).
        """
        check_answer_options(top_k, 0.0 if threshold is None else threshold)
        given = {k: v for k, v in options.items() if v is not None and v is not False}
        refused = sorted(set(given) - set(self.options))
        if refused:
            raise ValueError(f"{', '.join(refused)}: not an option of {type(self).__name__} "
                             f"(it takes {', '.join(self.options) or 'only top_k and threshold'}"
                             f"); at_least_one, reference_date and thresholds are for "
                             f"compound (intents + slots) models")
        return self.decide(texts, items, rows, top_k=top_k, threshold=threshold, **given)

    def answer(self, texts: Sequence[str], items: Sequence[Any], rows: Any, *,
               top_k: int = 3, threshold: float | None = None, **options: Any
               ) -> list[dict[str, Any]]:
        """The response records of texts (``/v1/predict``'s and the file stream's):
        :meth:`Prediction.to_dict <headwise.intent.prediction.Prediction.to_dict>` of each
        of :meth:`answers` (probabilities not rounded, so batched and unbatched answers
        agree to float precision) plus its ``long_text`` note."""
        found = self.answers(texts, items, rows, top_k=top_k, threshold=threshold, **options)
        return [{**a.to_dict(digits=None), "long_text": self.note(item, row)}
                for a, item, row in zip(found, items, rows, strict=True)]

    def predictions(self, texts: Sequence[str] | str, *, top_k: int = 3,
                    threshold: float | None = None, **options: Any
                    ) -> tuple[list[Prediction], list[dict[str, Any] | None]]:
        """Encode, run and answer in one call: the answers and the ``long_text`` note of
        each text (from the same encoding).

        Raises:
            ValueError: an empty list or text, bad options (:meth:`answers`), or a text
                over the maximum length under the ``"reject"`` policy.
            TypeError: a non-string item.
        """
        texts = check_texts([texts] if isinstance(texts, str) else texts)
        items = self.encode(texts)
        rows = self.run(items)
        found = self.answers(texts, items, rows, top_k=top_k, threshold=threshold, **options)
        return found, [self.note(item, row) for item, row in zip(items, rows, strict=True)]

    def predict(self, texts: Sequence[str], *, top_k: int = 3,
                threshold: float | None = None, **options: Any) -> list[dict[str, Any]]:
        """Encode, run and answer in one call, as the response records of :meth:`answer`
        (what the file stream and Ray write)."""
        found, notes = self.predictions(texts, top_k=top_k, threshold=threshold, **options)
        return [{**a.to_dict(digits=None), "long_text": note}
                for a, note in zip(found, notes, strict=True)]

    def warm_up(self, texts: Sequence[str]) -> None:
        """One pass over ``texts`` (first-call costs: lazy initialisation, kernels)."""
        self.run(self.encode(texts))
