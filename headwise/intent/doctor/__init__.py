"""The data doctor: what is wrong with a labelled data set, before training
(``headwise doctor``): duplicates and conflicts, likely mislabels by confident learning
(single- and multi-label), confusable intents, intents with too few rows or made of one
template, rows that look out of scope, validation rows leaked from training; a saved
model's sentence embeddings as the out-of-fold features on request; a report (HTML, CSV,
JSON) and a cleaned copy on request."""

from headwise.intent.doctor.features import ModelFeatures, model_features
from headwise.intent.doctor.findings import (
    ISSUES,
    SET_JOIN,
    Confusion,
    Examination,
    Finding,
    examine,
    fixed_rows,
    intent_set,
    intent_set_name,
    normalise,
)
from headwise.intent.doctor.report import CSV_COLUMNS, write_report
from headwise.intent.doctor.templates import Template

__all__ = ["CSV_COLUMNS", "ISSUES", "SET_JOIN", "Confusion", "Examination", "Finding",
           "ModelFeatures", "Template", "examine", "fixed_rows", "intent_set",
           "intent_set_name", "model_features", "normalise", "write_report"]
