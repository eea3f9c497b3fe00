"""The challenge-slice names of customer-service phrasing, in the order reports list them.

A test example may carry the phenomena it exercises (``slices``: a column or field of the
data, :func:`headwise.text.readers.read_examples`); ``headwise eval`` reports accuracy per
slice. These are the names of the built-in demo corpus (:mod:`headwise.demo.corpus`);
user data may carry any others, which reports list after these.
"""

from __future__ import annotations

__all__ = ["COMPOUND_PHENOMENA", "PHENOMENA", "PLAIN"]

#: the slices of compound questions (the demo corpus's ``compound_share``): several intents
#: in one message, a pair of them no training message has together, a request taken back by
#: a negation (one intent kept), a slot value in the second or a later request
COMPOUND_PHENOMENA: tuple[str, ...] = (
    "compound", "unseen_pair", "dropped_request", "numbers_in_second",
)
#: every slice name an example can carry, in the order reports list them
PHENOMENA: tuple[str, ...] = (
    "plain", "numbers", "negation_scope", "synonym", "word_order", "filler", "typo",
    "code_mixed", "long_context", "oos_near_miss", *COMPOUND_PHENOMENA,
)
PLAIN = "plain"
