"""What ``/v1/predict`` takes and answers for each task, declared in one place.

Every predictor answers with :class:`~headwise.serve.schemas.PredictResponse` (the one
answer of every model kind: intents, out-of-scope decision, slots). A single-label
predictor (a network, a TF-IDF model, an ensemble: ``task`` ``"single_label"``) takes
:class:`~headwise.serve.schemas.PredictRequest`; a multi-label one (``task``
``"multi_label"``: a compound model) takes the compound request (``at_least_one``,
``reference_date``). ``/v1/explain`` serves every kind the kind registry says it can
explain (:mod:`headwise.intent.kinds`, capability ``explain``). Each request schema
states exactly what the served model takes. The app reads the served predictor's
:class:`PredictApi` (:func:`api_for`) instead of testing which kind it is; a task added
later declares its entry in :data:`PREDICT_APIS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel

from headwise.serve.schemas import CompoundPredictRequest, PredictRequest, PredictResponse

__all__ = ["PREDICT_APIS", "PredictApi", "api_for"]


@dataclass(frozen=True)
class PredictApi:
    """The request and answer of ``/v1/predict`` for one task (a predictor's ``task``:
    ``"single_label"`` or ``"multi_label"``), and what else the service offers for it.

    Attributes:
        described: how messages name the classifier ("a single-label", before
            "classifier").
        about: the service's description in its OpenAPI document.
        summary: the endpoint's summary.
        operation: the endpoint function's name (the OpenAPI operation id's stem).
        request, response: the pydantic models of the request and the answer.
        options: the predictor's ``answer`` keyword arguments that a request carries.
        stack_rows: whether the predictor's ``answer`` takes its rows stacked into one array
            (logits) rather than as the list the batcher returned.
    """

    described: str
    about: str
    summary: str
    operation: str
    request: type[BaseModel]
    response: type[BaseModel]
    options: Callable[[Any], dict[str, Any]]
    stack_rows: bool

    def answer(self, predictor: Any, body: Any, texts: Sequence[str], items: Sequence[Any],
               rows: Sequence[Any], *, top_k: int) -> list[dict[str, Any]]:
        """The predictor's answers to a request ``body`` for its texts, their encodings and
        the batcher's rows."""
        return predictor.answer(texts, items, np.stack(rows) if self.stack_rows else rows,
                             top_k=top_k, threshold=body.threshold, **self.options(body))


#: a predictor's ``task`` -> its ``/v1/predict``
PREDICT_APIS: dict[str, PredictApi] = {
    "single_label": PredictApi(
        described="a single-label",
        about="Intent recognition with calibrated confidence, out-of-scope detection and "
              "explanations: token attribution and per-head attention.",
        summary="Top-k intents of one or many texts", operation="predict",
        request=PredictRequest, response=PredictResponse,
        options=lambda body: {}, stack_rows=True),
    "multi_label": PredictApi(
        described="a compound (multi-label + slots)",
        about="Compound intent recognition: every intent a text expresses, with slot spans "
              "and normalised values.",
        summary="Every intent and the slots of one or many texts",
        operation="predict_compound", request=CompoundPredictRequest,
        response=PredictResponse,
        # whether one intent is a must, and the "today" of relative dates in the slots
        options=lambda body: {"at_least_one": body.at_least_one,
                              "reference_date": body.reference()},
        stack_rows=False),
}


def api_for(predictor: Any) -> PredictApi:
    """The :class:`PredictApi` of a predictor, by its ``task``.

    Raises:
        ValueError: a task with no entry in :data:`PREDICT_APIS`.
    """
    task = getattr(predictor, "task", None)
    if task not in PREDICT_APIS:
        raise ValueError(f"no /v1/predict is declared for task {task!r} "
                         f"({type(predictor).__name__}); known: {sorted(PREDICT_APIS)}")
    return PREDICT_APIS[task]
