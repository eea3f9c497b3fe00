"""The one dataset type: :class:`Example` rows (a text, its intents, its slot spans) in a
:class:`Dataset`.

Both readers give it: :func:`~headwise.text.readers.read_examples` for single-label files
(CSV/TSV, JSON lines, BANKING77, CLUE, Excel), whose rows have one intent each (or none
when unlabelled) and no slots, and :func:`~headwise.text.annotations.read_annotated` /
:func:`~headwise.text.annotations.read_nlupp` for multi-intent files with slot spans::

    ds = read_examples("banking77/train.csv")   # ds[0].intents: one label, .label: it
    ds = read_annotated("nlupp_banking/fold0.json")
    ds[0].intents, ds[0].slots                    # every intent, the SlotSpans

Single-label code reads :attr:`Example.label` (and :attr:`Dataset.labels`): the row's one
intent, None when it has none, and a clear error for a row with several. ``intents`` is
what the file says: a single-label file's label as written, its out-of-scope label
(``oos``, or a team's own that a recipe's ``decision.oos_labels`` names) included; in a
multi-intent file, an out-of-scope row has no intent.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

__all__ = ["Dataset", "Example", "SlotSpan"]


@dataclass(frozen=True)
class SlotSpan:
    """One slot value: the characters ``text[start:end]`` (end exclusive) of slot ``name``.

    Attributes:
        name: the slot (``amount_of_money``, ``date`` ...).
        start: the first character.
        end: one past the last character.
        text: ``example.text[start:end]``.
        value: the normalised value (a number, a dict ...), None when unknown; it takes part
            in equality but not in the hash.
    """

    name: str
    start: int
    end: int
    text: str
    value: Any = field(default=None, hash=False)


@dataclass(frozen=True)
class Example:
    """One row of a dataset: a text, every intent it expresses and its slot spans.

    Attributes:
        text: the text (a single-label file's stripped of surrounding whitespace; a
            multi-intent file's exactly as written, which its slot spans index into).
        intents: its intents in file order; empty when it has none (unlabelled, or out of
            scope in a multi-intent file).
        slots: its slot spans, in order of start (empty when the file has none).
        line: the 1-based line of the source file where the row starts.
        slices: the slice names of the row's ``slices`` column or field (``()`` when it is
            empty), None when the file has none.

    Raises:
        TypeError: ``intents`` or ``slots`` not a tuple (of strings, of
            :class:`SlotSpan`).
    """

    text: str
    intents: tuple[str, ...]
    slots: tuple[SlotSpan, ...]
    line: int
    slices: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.intents, tuple) or \
                not all(isinstance(i, str) for i in self.intents):
            raise TypeError(f"intents must be a tuple of strings (one intent: ('name',)), "
                            f"got {self.intents!r}")
        if not isinstance(self.slots, tuple) or \
                not all(isinstance(s, SlotSpan) for s in self.slots):
            raise TypeError(f"slots must be a tuple of SlotSpan, got {self.slots!r}")

    @property
    def label(self) -> str | None:
        """The one intent, for single-label code; None when the row has none.

        Raises:
            ValueError: the row has several intents (a multi-label task reads those).
        """
        if len(self.intents) > 1:
            raise ValueError(f"line {self.line}: {self.text!r} has {len(self.intents)} "
                             f"intents ({', '.join(self.intents)}) but single-label code "
                             f"reads one; several intents are a multi-label task "
                             f"(task.type multi_label)")
        return self.intents[0] if self.intents else None


@dataclass
class Dataset:
    """The examples read from one file (or one NLU++ directory).

    Attributes:
        examples: the rows, in file order.
        path: the file (or directory) they came from.
        skipped: ``(line, problem)`` of each row left out by ``skip_bad_rows``.
        reference_date: the "today" the rows' relative dates were resolved against, when
            the rows declare one (``"reference_date"``, multi-intent files); None otherwise.
    """

    examples: list[Example]
    path: Path
    skipped: list[tuple[int, str]] = field(default_factory=list)
    reference_date: date | None = None

    @property
    def texts(self) -> list[str]:
        """The texts, in order."""
        return [e.text for e in self.examples]

    @property
    def labels(self) -> list[str | None]:
        """Each row's one intent (:attr:`Example.label`), in order; None where it has none.

        Raises:
            ValueError: a row with several intents.
        """
        return [e.label for e in self.examples]

    @property
    def slices(self) -> list[tuple[str, ...] | None]:
        """The slice names of each row, in order (None where a row has none)."""
        return [e.slices for e in self.examples]

    def intent_names(self) -> list[str]:
        """The distinct intents of all rows, sorted (a single-label file's labels, its
        out-of-scope label included)."""
        return sorted({i for e in self.examples for i in e.intents})

    def slot_names(self) -> list[str]:
        """The distinct slot names of all rows, sorted."""
        return sorted({s.name for e in self.examples for s in e.slots})

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self) -> Iterator[Example]:
        return iter(self.examples)

    def __getitem__(self, index: int) -> Example:
        return self.examples[index]
