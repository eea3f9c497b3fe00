"""Reading the answer records that every kind of model gives (``Prediction.to_dict``:
``intents``, ``out_of_scope``, ``slots``, ``top_k``, ``decision``) in tests."""

from __future__ import annotations

from typing import Any

from headwise.intent.prediction import OUT_OF_SCOPE


def intent_of(record: dict[str, Any]) -> str:
    """The best answered intent of a record, or ``"out_of_scope"``."""
    return record["intents"][0]["intent"] if record["intents"] else OUT_OF_SCOPE


def confidence_of(record: dict[str, Any]) -> float:
    """The calibrated confidence of a record's most probable intent (answered or not)."""
    return record["top_k"][0]["confidence"]
