"""The data doctor: what is wrong with a labelled data set, before training
(``headwise doctor``): duplicates and conflicts, likely mislabels by confident learning,
confusable intents, intents with too few rows, validation rows leaked from training; a
report (HTML, CSV, JSON) and a cleaned copy on request."""

from headwise.intent.doctor.findings import (
    ISSUES,
    Confusion,
    Examination,
    Finding,
    examine,
    fixed_rows,
    normalise,
)
from headwise.intent.doctor.report import CSV_COLUMNS, write_report

__all__ = ["CSV_COLUMNS", "ISSUES", "Confusion", "Examination", "Finding", "examine",
           "fixed_rows", "normalise", "write_report"]
