"""/v1/predict declared per task (headwise.serve.predict_api): each kind's request,
answer and options reach the predictor as its ``answer`` takes them."""

from __future__ import annotations

import datetime
import types

import numpy as np
import pytest

from headwise.serve.predict_api import PREDICT_APIS, api_for
from headwise.serve.schemas import CompoundPredictRequest, PredictRequest


class _Engine:
    def __init__(self, task):
        self.task, self.calls = task, []

    def answer(self, texts, items, rows, **kw):
        self.calls.append((rows, kw))
        return [{} for _ in texts]


def test_each_task_has_its_api_and_an_unknown_one_is_refused():
    assert api_for(_Engine("single_label")) is PREDICT_APIS["single_label"]
    assert api_for(_Engine("multi_label")) is PREDICT_APIS["multi_label"]
    with pytest.raises(ValueError, match=r"task 'other' \(_Engine\); known: "
                                         r"\['multi_label', 'single_label'\]"):
        api_for(_Engine("other"))
    with pytest.raises(ValueError, match="task None"):
        api_for(types.SimpleNamespace())


def test_single_label_rows_are_stacked_and_compound_options_passed():
    rows = [np.array([0.1, 0.9]), np.array([0.7, 0.3])]
    predictor = _Engine("single_label")
    PREDICT_APIS["single_label"].answer(predictor, PredictRequest(texts=["a", "b"], threshold=0.4),
                                  ["a", "b"], [None, None], rows, top_k=2)
    got, kw = predictor.calls[0]
    assert isinstance(got, np.ndarray) and got.shape == (2, 2)
    assert kw == {"top_k": 2, "threshold": 0.4}
    predictor = _Engine("multi_label")
    body = CompoundPredictRequest(texts=["a"], at_least_one=True, reference_date="2026-03-01")
    PREDICT_APIS["multi_label"].answer(predictor, body, ["a"], [None], rows[:1], top_k=3)
    got, kw = predictor.calls[0]
    assert got is not None and isinstance(got, list)
    assert kw == {"top_k": 3, "threshold": None, "at_least_one": True,
                  "reference_date": datetime.date(2026, 3, 1)}
