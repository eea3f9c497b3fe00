"""The out-of-scope label: the one definition that readers, the demo corpus and the intent
system share.

A dataset marks a question that none of its intents covers with a label of its own;
headwise reads any of :data:`OOS_LABELS` (compared case-insensitively, spaces trimmed) as
that mark, and writes :data:`OOS_LABEL`. A team whose data names it otherwise (``其他``)
adds its own labels (``extra``; a recipe's ``decision.oos_labels``).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["OOS_LABEL", "OOS_LABELS", "is_oos_label", "marked_oos"]

#: the out-of-scope label headwise writes (the demo corpus, compound annotations)
OOS_LABEL = "oos"
#: labels that mark an out-of-scope example in user data (compared case-insensitively)
OOS_LABELS = (OOS_LABEL, "out_of_scope", "out-of-scope", "none", "other")


def is_oos_label(label: str | None, extra: Iterable[str] = ()) -> bool:
    """Whether a dataset label marks an out-of-scope example: one of :data:`OOS_LABELS` or
    of ``extra`` (a team's own labels), compared case-insensitively, spaces trimmed."""
    if label is None:
        return False
    key = label.strip().lower()
    return key in OOS_LABELS or key in {x.strip().lower() for x in extra}


def marked_oos(labels: Iterable[str | None], extra: Iterable[str] = ()) -> list[str | None]:
    """``labels`` with every out-of-scope one (:func:`is_oos_label` with ``extra``) written
    :data:`OOS_LABEL`, the others as they are: a team's own label read as the one mark."""
    extra = list(extra)
    return [OOS_LABEL if is_oos_label(y, extra) else y for y in labels]
