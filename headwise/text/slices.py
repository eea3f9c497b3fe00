"""The challenge-slice names of customer-service phrasing, in the order reports list them.

A test example may carry the phenomena it exercises (``slices``: a column or field of the
data, :func:`headwise.text.readers.read_examples`); ``headwise eval`` reports accuracy per
slice. These are the names of the built-in demo corpus (:mod:`headwise.demo.corpus`);
user data may carry any others, which reports list after these.
"""

from __future__ import annotations

__all__ = ["PHENOMENA", "PLAIN"]

#: every slice name an example can carry, in the order reports list them
PHENOMENA: tuple[str, ...] = (
    "plain", "numbers", "negation_scope", "synonym", "word_order", "filler", "typo",
    "code_mixed", "long_context", "oos_near_miss",
)
PLAIN = "plain"
