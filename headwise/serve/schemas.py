"""Request and response bodies of the intent service (the OpenAPI schema comes from these).

Requests are validated strictly: unknown fields are refused, and no value is coerced
(``"3"`` is not an integer, ``1`` is not a text). Limits that depend on the service's
configuration (texts per request, characters per text) are checked by the service and
answered with the same 422 error shape.

A service runs one model kind, and its ``/v1/predict`` (and OpenAPI schema) follows it:
:class:`PredictRequest` -> :class:`PredictResponse` for a single-label intent classifier,
:class:`CompoundPredictRequest` -> :class:`CompoundPredictResponse` for a compound
(multi-label + slots) classifier.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

_STRICT = ConfigDict(extra="forbid", strict=True)
#: what the service requires of every text, declared in the schema (JSON Schema's
#: ``pattern`` searches: at least one character that is not white space); the service
#: checks it itself (``str.strip``), answering 422 ``empty_text``. White space is Python's
#: (``str.isspace``) spelled out: JSON Schema's ``\s`` (ECMA-262's) is another set, without
#: U+001C..U+001F and U+0085 and with U+FEFF
TEXT_PATTERN = r"[^\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
#: the schema of one text; the app adds ``maxLength`` (its ``max_text_chars``,
#: :func:`declare_limits`), which the service checks (422 ``text_too_long``)
Text = Annotated[str, Field(json_schema_extra={"minLength": 1, "pattern": TEXT_PATTERN})]
#: the request fields that hold texts
TEXT_FIELDS = ("text", "texts")


def _whole_number(value: Any) -> Any:
    # JSON Schema's integer is any number without a fractional part (3.0 is one): taken as
    # the int it is; anything else is left to strict validation ("3" is not an integer)
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: ``top_k`` of a request: an integer, as JSON Schema's ``integer`` says (``3`` or ``3.0``)
TopK = Annotated[int, Field(ge=1, le=1000), BeforeValidator(_whole_number)]


def _texts_schema(examples: list[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
    """A texts request's ``json_schema_extra``: its examples, and the contract
    :class:`TextsRequest` enforces, stated exactly: ``oneOf`` a request with ``text`` and
    one with ``texts`` (exactly one of the two fields), neither of them null (their
    Python default None stands for a field left out, not for a value a client may send)."""

    def extra(schema: dict[str, Any]) -> None:
        for name in TEXT_FIELDS:
            prop = schema["properties"][name]
            prop.pop("default", None)
            branches = [b for b in prop.pop("anyOf") if b.get("type") != "null"]
            if len(branches) == 1:
                prop.update(branches[0])
            else:
                prop["anyOf"] = branches
        schema["oneOf"] = [{"required": [name]} for name in TEXT_FIELDS]
        schema["examples"] = examples

    return extra


#: YYYY-MM-DD in ASCII digits, from year 0001 (a Python date's first; JSON Schema's
#: ``date`` format allows 0000)
DATE_PATTERN = (r"^(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
                r"-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])$")
#: a calendar date as the schema states it: :data:`DATE_PATTERN` and JSON Schema's ``date``
#: format (RFC 3339 full-date: no 2026-02-30); the service checks both itself
#: (:meth:`CompoundPredictRequest._a_real_date`), with one message
CalendarDate = Annotated[str, Field(json_schema_extra={"format": "date",
                                                       "pattern": DATE_PATTERN})]


class TextsRequest(BaseModel):
    """What a request with texts shares: ``text`` (one text) or ``texts`` (one text or a
    list), exactly one of the two, and neither null (the JSON schema says so:
    :func:`_texts_schema`)."""

    model_config = _STRICT

    @field_validator(*TEXT_FIELDS, mode="before", check_fields=False)
    @classmethod
    def _not_null(cls, value: Any, info: ValidationInfo) -> Any:
        # runs only on a value the request gave (a left-out field keeps its default)
        if value is None:
            raise PydanticCustomError(
                "text_null", "{field} is null: give a text, or leave the field out",
                {"field": info.field_name})
        return value

    @model_validator(mode="after")
    def _one_of_text_and_texts(self) -> TextsRequest:
        given = [name for name in TEXT_FIELDS if getattr(self, name, None) is not None]
        if len(given) != 1:
            raise PydanticCustomError(
                "text_or_texts", "give either text (one text) or texts (one text or a list "
                "of texts){but}", {"but": ", not both" if given else ""})
        return self

    def given(self) -> tuple[str, str | list[str]]:
        """``(field name, value)`` of the texts field the request gave."""
        name = "text" if getattr(self, "text", None) is not None else "texts"
        return name, getattr(self, name)


class PredictRequest(TextsRequest):
    """``POST /v1/predict``: one text (``text``, or ``texts`` as a string) or a list of
    texts (``texts``); give one of the two fields."""

    model_config = ConfigDict(**_STRICT, json_schema_extra=_texts_schema(
        [{"texts": ["i lost my card", "what is my balance"], "top_k": 3},
         {"text": "i lost my card"}]))

    text: Text | None = Field(
        default=None, description="one text; must hold a non-space character (at most the "
                                  "service's max_text_chars); or give texts")
    texts: Text | Annotated[list[Text], Field(min_length=1)] | None = Field(
        default=None, description="one text, or a non-empty list of texts (at most the "
                                  "service's max_texts, each at most max_text_chars); each "
                                  "must hold a non-space character; or give text")
    top_k: TopK | None = Field(default=None,
                               description="intents listed per text (capped at the number "
                                          "of intents); default: the service's setting")
    threshold: float | None = Field(default=None, ge=0.0, le=1.0,
                                    description="override the model's out-of-scope "
                                                "threshold (0 never answers out-of-scope)")


class CompoundPredictRequest(PredictRequest):
    """``POST /v1/predict`` of a compound classifier: texts, and how intents are chosen."""

    model_config = ConfigDict(**_STRICT, json_schema_extra=_texts_schema(
        [{"texts": ["i was charged twice for 50 pounds, refund it"], "threshold": 0.4,
          "at_least_one": False}]))

    top_k: TopK | None = Field(default=None,
                               description="most probable intents listed in top_k per text "
                                          "(default: the service's setting)")
    threshold: float | None = Field(default=None, ge=0.0, le=1.0,
                                    description="one threshold for every intent, replacing "
                                                "the model's saved (possibly per-intent) "
                                                "thresholds; an intent is predicted when its "
                                                "probability reaches it")
    at_least_one: bool = Field(default=False,
                               description="answer the most probable intent when none "
                                           "reaches its threshold (never out-of-scope)")
    reference_date: CalendarDate | None = Field(
        default=None,
        description="the date that relative dates in the slot values (下个月5号, next "
                    "Friday) count from, as YYYY-MM-DD; default: the model's saved one, "
                    "else today's date")

    @field_validator("reference_date")
    @classmethod
    def _a_real_date(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                if not re.fullmatch(DATE_PATTERN, value):
                    raise ValueError(value)
                datetime.date.fromisoformat(value)
            except ValueError:
                raise PydanticCustomError("date_from_datetime_parsing",
                                          "reference_date {value} is not a calendar date "
                                          "(YYYY-MM-DD)", {"value": value}) from None
        return value

    def reference(self) -> datetime.date | None:
        """:attr:`reference_date` as a date (None when not given)."""
        return None if self.reference_date is None \
            else datetime.date.fromisoformat(self.reference_date)


class ExplainRequest(TextsRequest):
    """``POST /v1/explain``: one text, as ``text`` or as ``texts`` (a string or a list of
    one); give one of the two fields."""

    model_config = ConfigDict(**_STRICT, json_schema_extra=_texts_schema(
        [{"text": "i lost my card"}, {"texts": ["i lost my card"]}]))

    text: Text | None = Field(
        default=None, description="the text to explain; must hold a non-space character "
                                  "(at most the service's max_text_chars); or give texts")
    texts: Text | Annotated[list[Text], Field(min_length=1, max_length=1)] | None = Field(
        default=None, description="the text to explain, or a list of exactly that one text "
                                  "(as /v1/predict takes it); or give text")

    def one_text(self) -> tuple[str, str]:
        """``(where, text)``: the text and how an error names it (``text``, ``texts``,
        ``texts[0]``)."""
        name, value = self.given()
        return (name, value) if isinstance(value, str) else (f"{name}[0]", value[0])


def declare_limits(openapi: dict[str, Any], *, max_texts: int, max_text_chars: int
                   ) -> dict[str, Any]:
    """Write a service's limits into its OpenAPI document, where its request schemas hold
    texts: ``maxLength`` on every text, ``maxItems`` on a list of texts (unless smaller).
    The service checks them itself (422 ``text_too_long``, ``too_many_texts``).

    Args:
        openapi: the document (changed in place).
        max_texts: texts per request.
        max_text_chars: characters per text.

    Returns:
        ``openapi``.
    """

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "string":
                node["maxLength"] = max_text_chars
            elif node.get("type") == "array":
                node["maxItems"] = min(node.get("maxItems", max_texts), max_texts)
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    schemas = openapi.get("components", {}).get("schemas", {})
    for name in ("PredictRequest", "CompoundPredictRequest", "ExplainRequest"):
        for field in TEXT_FIELDS:
            visit(schemas.get(name, {}).get("properties", {}).get(field))
    return openapi


class Intent(BaseModel):
    """One intent with its calibrated probability."""

    intent: str
    confidence: float


class LongText(BaseModel):
    """How a text over the model's maximum length was handled."""

    policy: Literal["truncated", "head_tail", "chunked"] = Field(
        description="'truncated': only the first max_length tokens were read; 'head_tail': "
                    "the text's first and last half windows were read as one; 'chunked': "
                    "overlapping windows were read (see pooling)")
    tokens: int = Field(description="tokens of the whole text, special tokens included")
    max_length: int = Field(description="the model's maximum length in tokens")
    chunks: int = Field(description="windows read (1 unless chunked)")
    window: int = Field(description="the width of each window read, in tokens, special "
                                    "tokens included: max_length, or under a chunked policy "
                                    "the chunk_length setting's width")
    stride: int | Literal["sentence"] | None = Field(
        default=None, description="where chunked windows start: the tokens between window "
                                  "starts, or 'sentence' (a window starts at every sentence "
                                  "of the text and takes the whole sentences after it that "
                                  "fit); null unless chunked")
    pooling: Literal["mean", "max_confidence", "max_in_scope", "in_scope_span"] | None = Field(
        default=None, description="how chunked windows were combined: 'mean' (their pooled "
        "vectors averaged before the head), 'max_confidence' (each window answered; the "
        "most confident in-scope one decides, out of scope only when every window is) or "
        "'max_in_scope' (each window answered; the one the model's out-of-scope score finds "
        "most in scope decides, out of scope only when every window is) or 'in_scope_span' "
        "(narrow windows locate the request; the run of in-scope windows around the most "
        "confident one is read again as one window, see span); null unless chunked")
    chunk: int | None = Field(
        default=None, description="under max_confidence, max_in_scope or in_scope_span "
                                  "pooling, the window (from 1) whose answer this is, or "
                                  "that located the span; null otherwise")
    span: list[int] | None = Field(
        default=None, description="under in_scope_span pooling, the [start, end) tokens of the "
                                  "text (special tokens not counted) read again whose answer "
                                  "this is; null when none was (the window chunk answered) "
                                  "or under another pooling")


#: a slot's normalised value: a number, a string, or a JSON object of them
SlotValue = int | float | str | bool | dict[str, Any] | list[Any]


class Slot(BaseModel):
    """A slot span of the text with its normalised value."""

    name: str = Field(description="the slot, e.g. 'amount_of_money'")
    start: int = Field(description="character offset of the span's first character")
    end: int = Field(description="character offset just past the span")
    text: str = Field(description="the span's text, text[start:end]")
    value: SlotValue | None = Field(
        description="the normalised value, e.g. {'amount': 50.0, 'currency': 'GBP'}; null "
                    "when the span does not parse as its slot's kind")


class Decision(BaseModel):
    """The score that decided whether the text is out of scope."""

    score: str = Field(description="'max_prob' (the top calibrated probability), an "
                                   "out-of-scope detector's name ('energy', 'mahalanobis', "
                                   "'knn' ...), or 'intent_threshold' (a multi-label model: "
                                   "the intent nearest to its own threshold)")
    value: float = Field(description="the text's score; higher is more in scope")
    threshold: float = Field(description="the text is out of scope when value < threshold")


class Prediction(BaseModel):
    """The answer for one text, the same for every kind of model."""

    text: str
    intents: list[Intent] = Field(
        description="the answered intents, best first: one for a single-label model, zero "
                    "or more for a multi-label one; empty when out of scope")
    out_of_scope: bool = Field(description="whether the text was rejected (see decision)")
    slots: list[Slot] = Field(description="slot spans in text order, with normalised values; "
                                          "empty for a model without a slot head")
    top_k: list[Intent] = Field(description="the most probable intents, answered or not")
    decision: Decision | None = Field(
        description="the score that decided out_of_scope; null when no rule applied (a "
                    "compound request with at_least_one)")
    long_text: LongText | None = Field(
        default=None, description="set when the text was over the maximum length")


class PredictResponse(BaseModel):
    """``POST /v1/predict``'s answer: one prediction per text, in request order."""

    model: str
    runtime: str
    predictions: list[Prediction]


class Token(BaseModel):
    """A token of the explained text; special tokens have no character span."""

    token: str
    start: int | None = Field(description="character offset of the token's first character")
    end: int | None = Field(description="character offset just past the token")
    special: bool
    attribution: float | None = Field(
        description="the token's share of the explained intent's logit change from the "
                    "baseline (integrated gradients; a TF-IDF model's feature weights); "
                    "null for special tokens")


class Rollout(BaseModel):
    """Attention rollout (Abnar & Zuidema 2020) over the input tokens."""

    cls: list[float] = Field(description="rollout row of the first ([CLS]) token")
    mean: list[float] = Field(description="rollout rows averaged over all tokens")


class Completeness(BaseModel):
    """How well an explanation's attributions add up: they should sum to the intent's
    logit change from the baseline (``delta``); ``error`` is what they miss by."""

    intent: str
    method: Literal["integrated_gradients", "feature_weights"]
    sum: float = Field(description="the attributions' sum")
    logit: float = Field(description="the intent's raw logit on the text")
    baseline_logit: float = Field(description="its logit at the baseline (padding "
                                              "embeddings; a TF-IDF model's intercept)")
    delta: float = Field(description="logit - baseline_logit")
    error: float = Field(description="sum - delta")
    relative_error: float = Field(description="|error| / max(1, |delta|)")
    tolerance: float = Field(description="what relative_error is held to")
    within_tolerance: bool
    steps: int = Field(description="gradient evaluations of the integration (0: an exact "
                                   "sum)")


class CharSpan(BaseModel):
    """Characters ``[start, end)`` of the text."""

    start: int
    end: int


class ExplainedWindow(BaseModel):
    """The part of a text over the model's maximum length that the explanation covers: the
    window the answer came from (see the prediction's long_text)."""

    start: int = Field(description="character offset of the window's first token")
    end: int = Field(description="character offset just past its last token")
    skipped: CharSpan | None = Field(
        default=None, description="the characters inside [start, end) that the window does "
                                  "not read (the head_tail policy's middle); null otherwise")


class ExplainedIntent(BaseModel):
    """One explained intent: each token's attribution, in token order."""

    intent: str
    attribution: list[float | None] = Field(description="per token; null for special tokens")
    completeness: Completeness


class ExplainResponse(BaseModel):
    """``POST /v1/explain``'s answer for one text: the prediction, each token's attribution
    to the answered intent with its completeness, and, for a network with attention heads,
    the per-head attention and its rollout (null otherwise: a BiLSTM, a TF-IDF model)."""

    model: str
    prediction: Prediction
    tokens: list[Token]
    completeness: Completeness = Field(description="of the attribution in tokens")
    explained: list[ExplainedIntent] = Field(
        description="every explained intent, the one in tokens first: the answered intent "
                    "(its most probable one when out of scope); each intent a compound "
                    "model answers")
    window: ExplainedWindow | None = Field(
        default=None,
        description="for a text over the model's maximum length, the characters the "
                    "explained input covers, as the service's long-text policy read it (the "
                    "prediction's long_text): under chunk_span the span read again whose "
                    "answer was kept, under chunk_max the window whose answer was "
                    "kept, under truncate the first window, under head_tail the head and "
                    "tail; the tokens' offsets are in the whole text. Null when the whole "
                    "text was read. A text answered from the mean of its windows (chunk) is "
                    "refused with 409 'unexplained_long_text'")
    tfidf_share: float = Field(
        default=0.0, description="a blended compound model's share of each intent's "
                                 "probability that comes from its TF-IDF model: the "
                                 "attributions explain the network's logits, not that "
                                 "share; 0 for every other model")
    num_layers: int | None
    num_heads: int | None
    attention: list[list[list[list[float]]]] | None = Field(
        description="weights [layer][head][query][key]; each query row sums to 1")
    rollout: Rollout | None


class ErrorBody(BaseModel):
    """What went wrong."""

    status: int
    type: str = Field(description="a short machine-readable kind, e.g. 'validation_error'")
    message: str = Field(description="a sentence for a person")
    details: list[dict] | None = None


class ErrorResponse(BaseModel):
    """Every 4xx/5xx answer of the service."""

    error: ErrorBody


class Health(BaseModel):
    """``/healthz`` and ``/readyz``."""

    status: Literal["ok", "ready", "starting", "stopping"]
    model: str | None = Field(default=None, description="the model served (its name)")
    runtime: str | None = Field(default=None, description="the inference path: onnx, torch, "
                                                          "tfidf or ensemble")


class ReloadRequest(BaseModel):
    """``POST /admin/reload``: what to reload (the body is optional: everything, the model
    from the directory it was loaded from)."""

    model_config = ConfigDict(**_STRICT, json_schema_extra={
        "examples": [{}, {"model_dir": "runs/intent-v2"}, {"model": False}]})

    model_dir: Annotated[str, Field(min_length=1)] | None = Field(
        default=None, description="a new model directory to serve (default: the one being "
                                  "served, read again); it must hold the same kind of "
                                  "classifier (single-label, or compound)")
    model: bool = Field(default=True, description="reload the model (load and warm up the "
                                                  "new one beside the old, then swap)")
    keys: bool = Field(default=True, description="read the API key files again")

    @model_validator(mode="after")
    def _something_to_do(self) -> ReloadRequest:
        if self.model_dir is not None and not self.model:
            raise PydanticCustomError("model_dir_without_model",
                                      "model_dir names a model to load: it needs model true")
        if not (self.model or self.keys):
            raise PydanticCustomError("nothing_to_reload",
                                      "nothing to reload: model and keys are both false")
        return self


class ReloadResponse(BaseModel):
    """``POST /admin/reload``'s answer: what is served now."""

    model: str = Field(description="the model served now (its name)")
    model_dir: str = Field(description="its directory")
    runtime: str = Field(description="its inference path")
    generation: int = Field(description="1 for the model the service started with, one "
                                        "more per model reload")
    reloaded_model: bool = Field(description="the model was loaded again and swapped in")
    previous_model: str | None = Field(default=None,
                                       description="the model served before the swap")
    load_seconds: float | None = Field(default=None, description="time to load and warm up "
                                                                 "the new model")
    api_keys: int | None = Field(default=None, description="API keys in use (null: none)")
    admin_keys: int | None = Field(default=None, description="admin keys in use (null: the "
                                                             "API keys serve /admin too)")
