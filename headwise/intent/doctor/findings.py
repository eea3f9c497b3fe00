"""What is wrong with a labelled data set, found before any model is trained.

:func:`examine` looks at the rows of one labelled file (and, when given, its validation
file) and returns :class:`Finding` rows, each naming its kind of issue:

* ``duplicate``: the same text (after normalising case, width and white space) again with
  the same label; ``conflicting_duplicate``: with another label;
* ``near_duplicate`` / ``conflicting_near_duplicate``: a text whose character n-gram TF-IDF
  cosine similarity to an earlier row's is at least ``near``;
* ``label_issue``: confident learning (``cleanlab``, through
  :func:`headwise.intent.training.cleaning.find_label_issues`) on out-of-fold
  probabilities of the TF-IDF model flags the row, with the label it suggests;
* ``few_rows``: an intent with fewer than ``min_rows`` rows;
* ``leakage``: a validation row whose normalised text is also a training row's;
* and, for the intents rather than rows, :class:`Confusion`: the pairs of intents the
  out-of-fold model mixes up most.

Nothing here trains a network or changes the data: :func:`fixed_rows` gives the rows a
``--fix`` run writes to a new file.
"""

from __future__ import annotations

import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["ISSUES", "Confusion", "Examination", "Finding", "examine", "fixed_rows",
           "normalise"]

#: every kind of row issue, in the order the report lists them
ISSUES = ("conflicting_duplicate", "conflicting_near_duplicate", "label_issue", "leakage",
          "duplicate", "near_duplicate", "few_rows")


@dataclass(frozen=True)
class Finding:
    """One row with one issue.

    Attributes:
        row: the 1-based line of the row in its file.
        text: the row's text.
        label: its given label.
        issue: one of :data:`ISSUES`.
        suggested_label: the label the data suggests (another row's, or the out-of-fold
            model's), "" when none.
        other_row: the line of the row it repeats or collides with (0: none).
        score: how sure: the similarity of a near duplicate, the out-of-fold probability of
            the suggested label for a label issue, 1.0 for an exact repeat.
        file: ``"data"`` or ``"valid"``.
    """

    row: int
    text: str
    label: str
    issue: str
    suggested_label: str = ""
    other_row: int = 0
    score: float = 1.0
    file: str = "data"


@dataclass(frozen=True)
class Confusion:
    """A pair of intents that the data makes hard to tell apart: the out-of-fold model gave
    ``count`` rows of ``label`` the intent ``predicted`` (``share`` of ``label``'s rows)."""

    label: str
    predicted: str
    count: int
    share: float


@dataclass
class Examination:
    """What :func:`examine` found.

    Attributes:
        findings: the row issues, in the order of :data:`ISSUES`, then by row.
        confusions: the most confused pairs of intents, most first.
        rows: rows examined (training file).
        intents: rows per intent.
        seconds: wall time.
    """

    findings: list[Finding]
    confusions: list[Confusion]
    rows: int
    intents: dict[str, int]
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)


def normalise(text: str) -> str:
    """The form duplicates are compared in: NFKC (full-width to half-width), lower case,
    white space removed, trailing punctuation dropped."""
    t = unicodedata.normalize("NFKC", text).lower()
    t = "".join(t.split())
    return t.rstrip("?？!！.。,，~～")


def _exact(texts: Sequence[str], labels: Sequence[str], lines: Sequence[int]
           ) -> list[Finding]:
    first: dict[str, int] = {}
    out = []
    for i, t in enumerate(texts):
        key = normalise(t)
        if key not in first:
            first[key] = i
            continue
        j = first[key]
        same = labels[i] == labels[j]
        out.append(Finding(lines[i], t, labels[i],
                           "duplicate" if same else "conflicting_duplicate",
                           "" if same else labels[j], lines[j], 1.0))
    return out


def _near(texts: Sequence[str], labels: Sequence[str], lines: Sequence[int], near: float,
          skip: set[int]) -> list[Finding]:
    """Each row's most similar earlier row by character 1-3-gram TF-IDF cosine, where the
    similarity is at least ``near`` (exact repeats, in ``skip``, are left to
    :func:`_exact`)."""
    if len(texts) < 2:
        return []
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.neighbors import NearestNeighbors

    norm = [normalise(t) or t for t in texts]
    x = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3), sublinear_tf=True).fit_transform(
        norm)
    k = min(len(texts), 6)
    dist, idx = NearestNeighbors(n_neighbors=k, metric="cosine").fit(x).kneighbors(x)
    out = []
    for i in range(len(texts)):
        if i in skip:
            continue
        for d, j in zip(dist[i], idx[i], strict=True):
            sim = 1.0 - float(d)
            if j >= i or sim < near or norm[j] == norm[i]:
                continue  # only an earlier, different text counts (one finding per row)
            same = labels[i] == labels[j]
            out.append(Finding(lines[i], texts[i], labels[i],
                               "near_duplicate" if same else "conflicting_near_duplicate",
                               "" if same else labels[j], lines[j], round(sim, 4)))
            break
    return out


def examine(texts: Sequence[str], labels: Sequence[str], lines: Sequence[int] | None = None,
            *, valid: tuple[Sequence[str], Sequence[int]] | None = None, near: float = 0.9,
            min_rows: int = 5, folds: int = 5, seed: int = 0, top_confusions: int = 10
            ) -> Examination:
    """Find what is wrong with labelled rows (see the module's docstring).

    Args:
        texts, labels: the training rows.
        lines: each row's line in its file (default 1, 2, ...).
        valid: ``(texts, lines)`` of the validation file, checked for leakage.
        near: the cosine similarity from which two different texts are near duplicates.
        min_rows: intents with fewer rows are reported.
        folds: cross-validation folds of the out-of-fold model.
        seed: the folds' seed.
        top_confusions: how many confused pairs to report.

    Raises:
        ValueError: mismatched lengths, a missing label, fewer than two intents, ``near``
            outside (0, 1].
    """
    start = time.perf_counter()
    texts, labels = list(texts), list(labels)
    lines = list(lines) if lines is not None else list(range(1, len(texts) + 1))
    if not (len(texts) == len(labels) == len(lines)):
        raise ValueError(f"{len(texts)} texts, {len(labels)} labels, {len(lines)} lines")
    if any(y is None or y == "" for y in labels):
        raise ValueError("every row needs a label: the doctor examines labelled data")
    if not 0.0 < near <= 1.0:
        raise ValueError(f"near must be in (0, 1], got {near}")
    counts = Counter(labels)
    if len(counts) < 2:
        raise ValueError(f"the data has {len(counts)} intent; the doctor needs at least two")
    findings = _exact(texts, labels, lines)
    at = {line: i for i, line in enumerate(lines)}
    repeated = {at[f.row] for f in findings}
    findings += _near(texts, labels, lines, near, repeated)
    findings += [Finding(lines[i], texts[i], y, "few_rows") for i, y in enumerate(labels)
                 if counts[y] < min_rows]
    confusions: list[Confusion] = []
    learnable = [i for i, y in enumerate(labels) if counts[y] >= 2]
    if len({labels[i] for i in learnable}) >= 2:
        from headwise.intent.training.cleaning import find_label_issues, out_of_fold_probs

        sub_t = [texts[i] for i in learnable]
        sub_y = [labels[i] for i in learnable]
        probs, intents = out_of_fold_probs(sub_t, sub_y, folds=folds, seed=seed)
        issues = find_label_issues(sub_t, sub_y, folds=folds, seed=seed,
                                   probs=(probs, intents))
        col = {k: j for j, k in enumerate(intents)}
        for i, suggested in zip(issues.indices, issues.suggested, strict=True):
            r = learnable[i]
            findings.append(Finding(lines[r], texts[r], labels[r], "label_issue", suggested,
                                    0, round(float(probs[i, col[suggested]]), 4)))
        pairs: dict[tuple[str, str], int] = defaultdict(int)
        for y, p in zip(sub_y, probs.argmax(1), strict=True):
            if intents[p] != y:
                pairs[(y, intents[p])] += 1
        confusions = [Confusion(a, b, n, round(n / counts[a], 4))
                      for (a, b), n in sorted(pairs.items(), key=lambda kv: -kv[1])
                      ][:top_confusions]
    if valid is not None:
        seen = {normalise(t): (lines[i], labels[i]) for i, t in enumerate(texts)}
        for t, line in zip(*valid, strict=True):
            hit = seen.get(normalise(t))
            if hit is not None:
                findings.append(Finding(line, t, "", "leakage", hit[1], hit[0], 1.0, "valid"))
    order = {k: i for i, k in enumerate(ISSUES)}
    findings.sort(key=lambda f: (order[f.issue], f.file, f.row))
    return Examination(findings, confusions, len(texts), dict(counts.most_common()),
                       time.perf_counter() - start,
                       {k: sum(f.issue == k for f in findings) for k in ISSUES})


def fixed_rows(texts: Sequence[str], labels: Sequence[str], lines: Sequence[int],
               exam: Examination, mode: str) -> list[tuple[str, str]]:
    """The training rows a ``--fix`` run writes: exact repeats and rows that conflict with
    an earlier (near-)identical row are left out (the first of a group stays); a label
    issue's row is left out (``"drop"``) or given its suggested label (``"relabel"``).
    Near duplicates with the same label (often variants of one template), few-row intents
    and validation leakage are reported, not fixed.

    Raises:
        ValueError: a mode other than drop or relabel.
    """
    if mode not in ("drop", "relabel"):
        raise ValueError(f"--fix must be drop or relabel, got {mode!r}")
    drop = {f.row for f in exam.findings if f.file == "data" and f.issue in (
        "duplicate", "conflicting_duplicate", "conflicting_near_duplicate")}
    relabel = {f.row: f.suggested_label for f in exam.findings
               if f.file == "data" and f.issue == "label_issue"}
    out = []
    for t, y, line in zip(texts, labels, lines, strict=True):
        if line in drop or (line in relabel and mode == "drop"):
            continue
        out.append((t, relabel.get(line, y) if mode == "relabel" else y))
    return out
