"""What is wrong with a labelled data set, found before any model is trained.

:func:`examine` looks at the rows of one labelled file (and, when given, its validation
file) and returns :class:`Finding` rows, each naming its kind of issue:

* ``duplicate``: the same text (after normalising case, width and white space) again with
  the same label; ``conflicting_duplicate``: with another label;
* ``near_duplicate`` / ``conflicting_near_duplicate``: a text whose cosine similarity to an
  earlier row's is at least ``near``: of character n-gram TF-IDF vectors, or, with a saved
  model (``model``), of its sentence embeddings (centred, :mod:`.features`);
* ``label_issue``: confident learning (``cleanlab``, through
  :func:`headwise.intent.training.cleaning.find_label_issues`) on out-of-fold
  probabilities flags the row, with the label it suggests. The probabilities come from
  TF-IDF + logistic regression fitted in cross-validation, or, with ``model``, from a
  logistic-regression head cross-validated on the model's frozen sentence embeddings;
* ``looks_out_of_scope``: the out-of-fold model is unsure of every intent: the row's top
  probability is below the ``oos_quantile`` quantile of the top probabilities of the rows
  it gets right (a split-conformal bound: a new in-scope row the model would get right
  falls below it with that probability). A finding to look at, never a fix;
* ``few_rows``: an intent with fewer than ``min_rows`` rows;
* ``leakage``: a validation row whose normalised text is also a training row's;
* and, for the intents rather than rows, :class:`Confusion`: the pairs of intents the
  out-of-fold model mixes up most, and :class:`~.templates.Template`: the intents whose
  rows are mostly near-copies of a template (the rule is in :mod:`.templates`).

Multi-label rows (several intents each, ``labels`` of tuples) are examined the same way on
their intent sets, written with :data:`SET_JOIN` between the intents (``refund+charge``;
no intent: ``oos``): duplicates conflict when their sets differ, label issues come from
cleanlab's multi-label confident learning
(:func:`headwise.intent.training.cleaning.find_multi_label_issues`) on out-of-fold
one-vs-rest probabilities, and the suggested set is the out-of-fold one (the intents of
probability at least 0.5; the most probable one when none is and every row has one).

Nothing here trains a network or changes the data: :func:`fixed_rows` gives the rows a
``--fix`` run writes to a new file.
"""

from __future__ import annotations

import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from headwise.intent.doctor.templates import Template, template_intents
from headwise.text.labels import OOS_LABEL, is_oos_label

__all__ = ["ISSUES", "SET_JOIN", "Confusion", "Examination", "Finding", "examine",
           "fixed_rows", "intent_set", "intent_set_name", "normalise"]

#: every kind of row issue, in the order the report lists them
ISSUES = ("conflicting_duplicate", "conflicting_near_duplicate", "label_issue", "leakage",
          "looks_out_of_scope", "duplicate", "near_duplicate", "few_rows")
#: what joins the intents of a multi-label row in the report and the CSV
SET_JOIN = "+"
#: a multi-label row's out-of-fold intents: those of probability at least this
SET_THRESHOLD = 0.5


def intent_set_name(intents: Sequence[str]) -> str:
    """How the report writes an intent set: sorted, joined by :data:`SET_JOIN`; ``oos``
    for none."""
    return SET_JOIN.join(sorted(intents)) or OOS_LABEL


def intent_set(name: str) -> tuple[str, ...]:
    """The intents of :func:`intent_set_name`'s ``name``."""
    return () if name in ("", OOS_LABEL) else tuple(name.split(SET_JOIN))


@dataclass(frozen=True)
class Finding:
    """One row with one issue.

    Attributes:
        row: the 1-based line of the row in its file.
        text: the row's text.
        label: its given label (multi-label: its intent set, :func:`intent_set_name`).
        issue: one of :data:`ISSUES`.
        suggested_label: the label the data suggests (another row's, or the out-of-fold
            model's), "" when none.
        other_row: the line of the row it repeats or collides with (0: none).
        score: how sure: the similarity of a near duplicate, the out-of-fold probability of
            the suggested label for a label issue (multi-label: of the least sure of its
            intents' in-or-out decisions), the top out-of-fold probability of a row that
            looks out of scope, 1.0 for an exact repeat.
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
    ``count`` rows of ``label`` the intent ``predicted`` (``share`` of ``label``'s rows;
    multi-label: it left ``label`` out and put ``predicted`` in)."""

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
        counts: findings per issue.
        templates: the intents that are mostly template copies, largest share first.
        multi_label: whether the rows carry intent sets.
        steps: seconds per step, in the order they ran.
        probabilities: what gave the out-of-fold probabilities, in words.
        similarity: what near duplicates were compared by, in words.
        oos_bound: the top probability under which a row looks out of scope (None: too
            few rows the out-of-fold model gets right to set it).
    """

    findings: list[Finding]
    confusions: list[Confusion]
    rows: int
    intents: dict[str, int]
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    templates: list[Template] = field(default_factory=list)
    multi_label: bool = False
    steps: dict[str, float] = field(default_factory=dict)
    probabilities: str = ""
    similarity: str = ""
    oos_bound: float | None = None


def normalise(text: str) -> str:
    """The form duplicates are compared in: NFKC (full-width to half-width), lower case,
    white space removed, trailing punctuation dropped."""
    t = unicodedata.normalize("NFKC", text).lower()
    t = "".join(t.split())
    return t.rstrip("?？!！.。,，~～")


def _exact(texts: Sequence[str], keys: Sequence[Hashable], names: Sequence[str],
           lines: Sequence[int]) -> list[Finding]:
    first: dict[str, int] = {}
    out = []
    for i, t in enumerate(texts):
        key = normalise(t)
        if key not in first:
            first[key] = i
            continue
        j = first[key]
        same = keys[i] == keys[j]
        out.append(Finding(lines[i], t, names[i],
                           "duplicate" if same else "conflicting_duplicate",
                           "" if same else names[j], lines[j], 1.0))
    return out


def _char_ngrams(texts: Sequence[str]) -> Any:
    """Character 1-3-gram TF-IDF rows (L2-normalised) of the normalised texts."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    norm = [normalise(t) or t for t in texts]
    return TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3),
                           sublinear_tf=True).fit_transform(norm)


def _neighbours(x: Any, k: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` most similar rows by cosine (itself among them): (similarities,
    indices), most similar first."""
    from sklearn.neighbors import NearestNeighbors

    k = min(x.shape[0], k)
    dist, idx = NearestNeighbors(n_neighbors=k, metric="cosine").fit(x).kneighbors(x)
    return 1.0 - dist, idx


def _near(texts: Sequence[str], keys: Sequence[Hashable], names: Sequence[str],
          lines: Sequence[int], near: float, skip: set[int],
          neighbours: tuple[np.ndarray, np.ndarray]) -> list[Finding]:
    """Each row's most similar earlier row (by ``neighbours``), where the similarity is at
    least ``near`` (exact repeats, in ``skip``, are left to :func:`_exact`)."""
    norm = [normalise(t) for t in texts]
    sims, idx = neighbours
    out = []
    for i in range(len(texts)):
        if i in skip:
            continue
        for sim, j in zip(sims[i], idx[i], strict=True):
            if j >= i or sim < near or norm[j] == norm[i]:
                continue  # only an earlier, different text counts (one finding per row)
            same = keys[i] == keys[j]
            out.append(Finding(lines[i], texts[i], names[i],
                               "near_duplicate" if same else "conflicting_near_duplicate",
                               "" if same else names[j], lines[j], round(float(sim), 4)))
            break
    return out


class _Clock:
    """Seconds per step of one examination."""

    def __init__(self) -> None:
        self.steps: dict[str, float] = {}

    @contextmanager
    def step(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.steps[name] = round(self.steps.get(name, 0.0) + time.perf_counter() - start, 3)


def _check(texts: list[str], labels: list[Any], lines: list[int], near: float,
           multi: bool) -> None:
    if not (len(texts) == len(labels) == len(lines)):
        raise ValueError(f"{len(texts)} texts, {len(labels)} labels, {len(lines)} lines")
    if not 0.0 < near <= 1.0:
        raise ValueError(f"near must be in (0, 1], got {near}")
    if multi:
        if any(not isinstance(y, (tuple, list)) for y in labels):
            raise ValueError("multi-label rows need an intent set (a tuple) each")
        joined = sorted({k for y in labels for k in y if SET_JOIN in k or not k})
        if joined:
            raise ValueError(f"intents {joined[:5]} contain {SET_JOIN!r} or are empty: the "
                             f"report joins a row's intents with {SET_JOIN!r}")
    elif any(y is None or y == "" for y in labels):
        raise ValueError("every row needs a label: the doctor examines labelled data")


def _predicted_sets(probs: np.ndarray, empty_allowed: bool) -> np.ndarray:
    chosen = probs >= SET_THRESHOLD
    if not empty_allowed:
        chosen[np.arange(len(probs)), probs.argmax(1)] = True
    return chosen


def examine(texts: Sequence[str], labels: Sequence[str] | Sequence[Sequence[str]],
            lines: Sequence[int] | None = None, *,
            valid: tuple[Sequence[str], Sequence[int]] | None = None, near: float = 0.9,
            min_rows: int = 5, folds: int = 5, seed: int = 0, top_confusions: int = 10,
            model: str | Path | None = None, oos_quantile: float = 0.05,
            template_share: float = 0.5,
            progress: Callable[[int, int], None] | None = None,
            jobs: int | None = None) -> Examination:
    """Find what is wrong with labelled rows (see the module's docstring).

    Args:
        texts: the training rows' texts.
        labels: their intents: one string each, or (multi-label data) a tuple of intents
            each (empty: no intent).
        lines: each row's line in its file (default 1, 2, ...).
        valid: ``(texts, lines)`` of the validation file, checked for leakage.
        near: the cosine similarity from which two different texts are near duplicates.
        min_rows: intents with fewer rows are reported.
        folds: cross-validation folds of the out-of-fold model.
        seed: the folds' seed.
        top_confusions: how many confused pairs to report.
        model: a saved network whose frozen sentence embeddings the out-of-fold logistic
            regression reads and near duplicates are compared by, or a TF-IDF model whose
            recipe is refitted per fold (:func:`headwise.intent.doctor.model_features`);
            None: TF-IDF + logistic regression, and character n-grams.
        oos_quantile: the quantile of the top probabilities of the rows the out-of-fold
            model gets right under which a row looks out of scope.
        template_share: the share of an intent's rows that are template copies from which
            the intent is reported (:mod:`headwise.intent.doctor.templates`).
        progress: called ``(folds done, folds)`` after each cross-validation fold.
        jobs: worker processes fitting the folds
            (:func:`headwise.intent.training.cleaning.fold_jobs`; None: one per CPU on
            large data). The findings do not depend on it.

    Raises:
        ValueError: mismatched lengths, a missing label, fewer than two intents, ``near``
            outside (0, 1], ``oos_quantile`` outside (0, 0.5], an intent containing
            :data:`SET_JOIN` in multi-label data, ``jobs`` below 1; as
            :func:`headwise.intent.doctor.model_features` for ``model``.
    """
    from headwise.intent.training.cleaning import fold_jobs

    start = time.perf_counter()
    clock = _Clock()
    texts, labels = list(texts), list(labels)
    lines = list(lines) if lines is not None else list(range(1, len(texts) + 1))
    multi = any(isinstance(y, (tuple, list)) for y in labels)
    _check(texts, labels, lines, near, multi)
    if jobs is not None:
        fold_jobs(len(texts), folds, jobs)  # refused before any work
    if not 0.0 < oos_quantile <= 0.5:
        raise ValueError(f"oos_quantile must be in (0, 0.5], got {oos_quantile}")
    if multi:
        keys: list[Hashable] = [frozenset(y) for y in labels]
        names = [intent_set_name(y) for y in labels]
        counts = Counter(k for y in labels for k in set(y))
    else:
        keys, names = list(labels), list(labels)
        counts = Counter(labels)
    if len(counts) < 2:
        raise ValueError(f"the data has {len(counts)} intent; the doctor needs at least two")
    features = None
    if model is not None:
        from headwise.intent.doctor.features import model_features

        with clock.step("model features"):
            features = model_features(model, texts)
    with clock.step("duplicates"):
        findings = _exact(texts, keys, names, lines)
        at = {line: i for i, line in enumerate(lines)}
        repeated = {at[f.row] for f in findings}
        grams = _neighbours(_char_ngrams(texts)) if len(texts) >= 2 else None
        if features is not None and features.values is not None and len(texts) >= 2:
            from headwise.intent.doctor.features import unit_rows

            similar = _neighbours(unit_rows(features.values))
        else:
            similar = grams
        if similar is not None:
            findings += _near(texts, keys, names, lines, near, repeated, similar)
        rare = {k for k, n in counts.items() if n < min_rows}
        findings += [Finding(lines[i], texts[i], names[i], "few_rows")
                     for i, y in enumerate(labels)
                     if (set(y) & rare if multi else y in rare)]
    templates: list[Template] = []
    if grams is not None:
        with clock.step("templates"):
            templates = template_intents(texts, keys, names, lines, grams[1],
                                         share=template_share, min_rows=min_rows)
    learnt = (_multi_label_issues if multi else _single_label_issues)(
        texts, labels, lines, names, counts, features, folds, seed, oos_quantile, min_rows,
        top_confusions, progress, clock, jobs)
    findings += learnt[0]
    if valid is not None:
        seen = {normalise(t): (lines[i], names[i]) for i, t in enumerate(texts)}
        for t, line in zip(*valid, strict=True):
            hit = seen.get(normalise(t))
            if hit is not None:
                findings.append(Finding(line, t, "", "leakage", hit[1], hit[0], 1.0, "valid"))
    order = {k: i for i, k in enumerate(ISSUES)}
    findings.sort(key=lambda f: (order[f.issue], f.file, f.row))
    embedded = features is not None and features.values is not None
    head = "a logistic-regression head" if embedded else "TF-IDF + logistic regression"
    return Examination(
        findings, learnt[1], len(texts), dict(counts.most_common()),
        time.perf_counter() - start, {k: sum(f.issue == k for f in findings) for k in ISSUES},
        templates, multi, clock.steps,
        f"{head} fitted in {learnt[3]}-fold cross-validation"
        + ("" if features is None else f" {'on' if embedded else 'with'} {features.source}")
        + (" (one-vs-rest, one probability per intent)" if multi else ""),
        features.source if embedded else "character 1-3-gram TF-IDF", learnt[2])


def _fold_ticker(progress: Callable[[int, int], None] | None, total: int
                 ) -> Callable[[], None] | None:
    if progress is None:
        return None
    done = [0]

    def tick() -> None:
        done[0] += 1
        progress(done[0], total)
    return tick


def _out_of_scope(texts: Sequence[str], names: Sequence[str], lines: Sequence[int],
                  rows: Sequence[int], conf: np.ndarray, correct: np.ndarray,
                  in_scope: np.ndarray, quantile: float) -> tuple[list[Finding], float | None]:
    """``looks_out_of_scope`` findings: in-scope rows whose top out-of-fold probability is
    below the ``quantile`` of those of the rows the model gets right (at least 20 of them
    are needed to set it). Rows marked out of scope, and rows of an intent with too few
    rows to learn (``few_rows``), are not in scope here."""
    reference = conf[correct & in_scope]
    if len(reference) < 20:
        return [], None
    bound = float(np.quantile(reference, quantile))
    return [Finding(lines[r], texts[r], names[r], "looks_out_of_scope", "", 0,
                    round(float(conf[i]), 4))
            for i, r in enumerate(rows) if in_scope[i] and conf[i] < bound], round(bound, 4)


def _head(features: Any, rows: list[int]) -> dict[str, Any]:
    """The out-of-fold model's settings: TF-IDF + logistic regression with ``C`` 4 (no
    model given), a TF-IDF model's own recipe, or ``C`` 1 on a network's embeddings of
    ``rows``."""
    if features is None:
        return {"c": 4.0, "class_weight": None}
    values = None if features.values is None else features.values[rows]
    return {"c": features.c, "class_weight": features.class_weight, "features": values}


def _confusions(pairs: dict[tuple[str, str], int], counts: Counter, top: int
                ) -> list[Confusion]:
    return [Confusion(a, b, n, round(n / counts[a], 4))
            for (a, b), n in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))][:top]


def _single_label_issues(texts, labels, lines, names, counts, features, folds, seed,
                         oos_quantile, min_rows, top, progress, clock, jobs):
    """Label issues, out-of-scope-looking rows and confusions of single-label rows:
    (findings, confusions, the out-of-scope bound, folds)."""
    from headwise.intent.training.cleaning import (
        cv_folds,
        find_label_issues,
        out_of_fold_probs,
    )

    learnable = [i for i, y in enumerate(labels) if counts[y] >= 2]
    sub_y = [labels[i] for i in learnable]
    if len(set(sub_y)) < 2:
        return [], [], None, 0
    sub_t = [texts[i] for i in learnable]
    used = cv_folds(sub_y, folds)
    with clock.step("out-of-fold probabilities"):
        probs, intents = out_of_fold_probs(
            sub_t, sub_y, folds=folds, seed=seed, progress=_fold_ticker(progress, used),
            jobs=jobs, **_head(features, learnable))
    with clock.step("label issues"):
        issues = find_label_issues(sub_t, sub_y, folds=folds, seed=seed,
                                   probs=(probs, intents))
    col = {k: j for j, k in enumerate(intents)}
    findings = []
    for i, suggested in zip(issues.indices, issues.suggested, strict=True):
        r = learnable[i]
        findings.append(Finding(lines[r], texts[r], labels[r], "label_issue", suggested,
                                0, round(float(probs[i, col[suggested]]), 4)))
    predicted = probs.argmax(1)
    given = np.array([col[y] for y in sub_y])
    in_scope = np.array([not is_oos_label(y) and counts[y] >= min_rows for y in sub_y])
    oos, bound = _out_of_scope(texts, names, lines, learnable, probs.max(1),
                               predicted == given, in_scope, oos_quantile)
    pairs: dict[tuple[str, str], int] = defaultdict(int)
    for y, p in zip(sub_y, predicted, strict=True):
        if intents[p] != y:
            pairs[(y, intents[p])] += 1
    return findings + oos, _confusions(pairs, counts, top), bound, used


def _multi_label_issues(texts, labels, lines, names, counts, features, folds, seed,
                        oos_quantile, min_rows, top, progress, clock, jobs):
    """As :func:`_single_label_issues`, for rows with intent sets."""
    from headwise.intent.training.cleaning import (
        find_multi_label_issues,
        out_of_fold_multi_label_probs,
    )

    if len(texts) < 4:
        return [], [], None, 0
    used = min(folds, len(texts))
    with clock.step("out-of-fold probabilities"):
        head = _head(features, list(range(len(texts))))
        head.pop("class_weight")  # one-vs-rest: each intent's own two classes
        probs, intents = out_of_fold_multi_label_probs(
            texts, labels, folds=folds, seed=seed, progress=_fold_ticker(progress, used),
            jobs=jobs, **head)
    with clock.step("label issues"):
        flagged = find_multi_label_issues(labels, probs, intents)
    col = {k: j for j, k in enumerate(intents)}
    given = np.zeros(probs.shape, dtype=bool)
    for i, y in enumerate(labels):
        given[i, [col[k] for k in y]] = True
    chosen = _predicted_sets(probs, empty_allowed=any(len(y) == 0 for y in labels))
    findings = []
    for i in flagged:
        sure = np.where(chosen[i], probs[i], 1.0 - probs[i]).min()
        suggested = intent_set_name([intents[j] for j in np.flatnonzero(chosen[i])])
        findings.append(Finding(lines[i], texts[i], names[i], "label_issue",
                                suggested if suggested != names[i] else "", 0,
                                round(float(sure), 4)))
    in_scope = given.any(1) & np.array([all(counts[k] >= min_rows for k in y)
                                        for y in labels], dtype=bool)
    oos, bound = _out_of_scope(texts, names, lines, list(range(len(texts))), probs.max(1),
                               (chosen == given).all(1), in_scope, oos_quantile)
    pairs: dict[tuple[str, str], int] = defaultdict(int)
    for i in range(len(texts)):
        missed = np.flatnonzero(given[i] & ~chosen[i])
        extra = np.flatnonzero(chosen[i] & ~given[i])
        for a in missed:
            for b in extra:
                pairs[(intents[a], intents[b])] += 1
    return findings + oos, _confusions(pairs, counts, top), bound, used


def fixed_rows(texts: Sequence[str], labels: Sequence[str] | Sequence[Sequence[str]],
               lines: Sequence[int], exam: Examination, mode: str
               ) -> list[tuple[int, str, Any]]:
    """The training rows a ``--fix`` run writes, ``(line, text, label)``: exact repeats
    and rows that conflict with an earlier (near-)identical row are left out (the first of
    a group stays); a label issue's row is left out (``"drop"``) or given its suggested
    label (``"relabel"``; multi-label: its suggested intent set, a tuple). Near
    duplicates with the same label (often variants of one template), few-row intents, rows
    that look out of scope and validation leakage are reported, not fixed.

    Raises:
        ValueError: a mode other than drop or relabel.
    """
    if mode not in ("drop", "relabel"):
        raise ValueError(f"--fix must be drop or relabel, got {mode!r}")
    drop = {f.row for f in exam.findings if f.file == "data" and f.issue in (
        "duplicate", "conflicting_duplicate", "conflicting_near_duplicate")}
    relabel = {f.row: f.suggested_label for f in exam.findings
               if f.file == "data" and f.issue == "label_issue" and f.suggested_label}
    flagged = {f.row for f in exam.findings if f.file == "data" and f.issue == "label_issue"}
    out: list[tuple[int, str, Any]] = []
    for t, y, line in zip(texts, labels, lines, strict=True):
        if line in drop or (line in flagged and mode == "drop"):
            continue
        if mode == "relabel" and line in relabel:
            y = intent_set(relabel[line]) if exam.multi_label else relabel[line]
        out.append((line, t, tuple(y) if exam.multi_label else y))
    return out
