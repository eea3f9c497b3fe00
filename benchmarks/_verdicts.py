"""Verdicts with uncertainty: 95 % intervals of a score and of a difference, and the rule
that turns an interval into PASS, FAIL or "within noise" (BENCHMARKS.md, the protocol).

A test score measured over seeds has two sources of noise: the seeds (the spread of the
runs: a t-interval over them) and the test rows (another draw of the same size from the
same population: the binomial standard error ``sqrt(p (1 - p) / rows)``). The interval
combines both, each at 95 %: ``half = sqrt((t * s / sqrt(k))^2 + (1.96 * se_rows)^2)``.
For macro-F1 the binomial term is an approximation (the per-class F1s move more than one
accuracy does on rare classes): the interval is then a lower bound on the true width.

A difference of two configurations measured on the same test rows adds both halves in
quadrature, as if the two were independent: the rows a pair shares make the true interval
narrower, so this is conservative. Where both configurations recorded their per-row
predictions, :func:`paired_difference` bootstraps the rows jointly instead.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054


def _t95(df: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


@dataclass(frozen=True)
class Interval:
    """A mean and its 95 % interval."""

    mean: float
    low: float
    high: float

    def pct(self, digits: int = 2) -> str:
        """``"93.41 [92.80, 94.02]"`` in percent."""
        return (f"{100 * self.mean:.{digits}f} [{100 * self.low:.{digits}f}, "
                f"{100 * self.high:.{digits}f}]")

    def plain(self, digits: int = 2) -> str:
        """A ratio or a time as it is: ``"1.03 [1.02, 1.04]"``."""
        return f"{self.mean:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"

    def points(self, digits: int = 2) -> str:
        """A difference in percentage points, signed: ``"+1.20 [-0.30, +2.70]"``."""
        return (f"{100 * self.mean:+.{digits}f} [{100 * self.low:+.{digits}f}, "
                f"{100 * self.high:+.{digits}f}]")


def _half_squared(values: Sequence[float], rows: int | None) -> float:
    k = len(values)
    m = statistics.fmean(values)
    seeds = (_t95(k - 1) * statistics.stdev(values) / math.sqrt(k)) ** 2 if k > 1 else 0.0
    sampling = (Z95 ** 2) * m * (1 - m) / rows if rows else 0.0
    return seeds + sampling


def score_interval(values: Sequence[float], rows: int | None) -> Interval:
    """The mean of per-seed scores (shares in [0, 1]) with its 95 % interval over seeds
    and test rows (``rows``: the test set's size; None leaves the row term out).

    Raises:
        ValueError: no values.
    """
    if not values:
        raise ValueError("no scores")
    m = statistics.fmean(values)
    half = math.sqrt(_half_squared(values, rows))
    return Interval(m, max(0.0, m - half), min(1.0, m + half))


def mean_interval(values: Sequence[float]) -> Interval | None:
    """The mean of per-run measurements in any unit (milliseconds, a ratio) with its 95 %
    t-interval over the runs; None for fewer than two runs (no interval to judge by)."""
    if len(values) < 2:
        return None
    m = statistics.fmean(values)
    half = _t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return Interval(m, m - half, m + half)


def difference_interval(a: Sequence[float], b: Sequence[float], rows: int | None
                        ) -> Interval:
    """``mean(a) - mean(b)`` with a conservative 95 % interval (both halves in
    quadrature; see the module's note)."""
    if not a or not b:
        raise ValueError("no scores")
    d = statistics.fmean(a) - statistics.fmean(b)
    half = math.sqrt(_half_squared(a, rows) + _half_squared(b, rows))
    return Interval(d, d - half, d + half)


def seed_paired_difference(a: Sequence[float], b: Sequence[float]) -> Interval:
    """``mean(a - b)`` over seeds paired one to one (the same seed's data and model for both
    sides), with a t-interval over the per-seed differences. Where each seed draws its own
    data (the demo's corpus), the seeds' spread holds the rows' sampling too.

    Raises:
        ValueError: fewer than two pairs, or lists of different lengths.
    """
    if len(a) != len(b):
        raise ValueError(f"{len(a)} seeds against {len(b)}")
    if len(a) < 2:
        raise ValueError("an interval over seeds needs at least two")
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    m = statistics.fmean(diffs)
    half = _t95(len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return Interval(m, m - half, m + half)


def ratio_interval(numerator: Sequence[float], denominator: Sequence[float]) -> Interval:
    """The geometric mean of per-round ratios ``numerator[i] / denominator[i]`` of positive
    measurements (times or rates of interleaved rounds: the same round's load on both
    sides) with a t-interval on their logarithms, mapped back: a ratio's 95 % interval.

    Raises:
        ValueError: fewer than two rounds, lists of different lengths, or a value <= 0.
    """
    if len(numerator) != len(denominator):
        raise ValueError(f"{len(numerator)} rounds against {len(denominator)}")
    if len(numerator) < 2:
        raise ValueError("an interval needs at least two rounds")
    if min(*numerator, *denominator) <= 0:
        raise ValueError("the measurements must be positive")
    logs = [math.log(a / b) for a, b in zip(numerator, denominator, strict=True)]
    m = statistics.fmean(logs)
    half = _t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return Interval(math.exp(m), math.exp(m - half), math.exp(m + half))


def paired_difference(correct_a: Sequence[Sequence[bool]], correct_b: Sequence[Sequence[bool]],
                      *, resamples: int = 2000, seed: int = 0) -> Interval:
    """Accuracy of ``a`` minus that of ``b`` from per-row correctness (one list per seed,
    every list over the same test rows), with a paired bootstrap over the rows: each
    resample draws rows with replacement and scores both configurations, averaged over their
    seeds, on the same rows.

    Raises:
        ValueError: no seeds, or lists of different lengths.
    """
    import numpy as np

    if not correct_a or not correct_b:
        raise ValueError("no seeds")
    a = np.asarray(correct_a, dtype=np.float64).mean(0)
    b = np.asarray(correct_b, dtype=np.float64).mean(0)
    if a.shape != b.shape:
        raise ValueError(f"different test rows: {a.shape[0]} against {b.shape[0]}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.shape[0], size=(resamples, a.shape[0]))
    diffs = a[idx].mean(1) - b[idx].mean(1)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return Interval(float(a.mean() - b.mean()), float(low), float(high))


def slope_interval(points: Sequence[tuple[float, float]]) -> Interval | None:
    """The least-squares slope of ``log y`` against ``log x`` over ``(x, y)`` points (``y``
    > 0) and its 95 % t-interval: the slope's standard error from the residuals, ``n - 2``
    degrees of freedom. How far a scaling exponent is pinned down by a few sizes (the
    residuals hold the timing noise and any bend of the curve); None below three points."""
    pts = [(math.log(x), math.log(y)) for x, y in points if y > 0]
    n = len(pts)
    if n < 3:
        return None
    mx, my = statistics.fmean(p[0] for p in pts), statistics.fmean(p[1] for p in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx
    rss = sum((y - my - b * (x - mx)) ** 2 for x, y in pts)
    half = _t95(n - 2) * math.sqrt(rss / (n - 2) / sxx)
    return Interval(b, b - half, b + half)


def combined(verdicts: Sequence[str]) -> str:
    """One verdict over several checks of a target: FAIL when any fails, PASS when every
    one passes, "within noise" otherwise (NOT MEASURED without checks)."""
    if not verdicts:
        return "NOT MEASURED"
    if "FAIL" in verdicts:
        return "FAIL"
    return "PASS" if all(v == "PASS" for v in verdicts) else "within noise"


def judge(interval: Interval, target: float, *, strictly: bool = False) -> str:
    """PASS when the whole interval clears ``target`` (is above it; ``strictly``: the low
    end must exceed it, for "beats"), FAIL when the whole interval is below it, "within
    noise" otherwise."""
    if interval.low > target or (not strictly and interval.low >= target):
        return "PASS"
    if interval.high < target:
        return "FAIL"
    return "within noise"


def judge_at_most(interval: Interval, target: float) -> str:
    """For a cost (a latency, a ratio of times): PASS when the whole interval is at most
    ``target``, FAIL when the whole interval is above it, "within noise" otherwise."""
    if interval.high <= target:
        return "PASS"
    if interval.low > target:
        return "FAIL"
    return "within noise"
