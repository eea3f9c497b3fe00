"""The benchmarks' verdict rule (benchmarks/_verdicts.py) against hand-computed intervals."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import _harness as H  # noqa: E402
import _verdicts as V  # noqa: E402


def test_one_seed_interval_is_the_binomial_one():
    # p = 0.9 on 1000 rows: half-width 1.96 * sqrt(0.9 * 0.1 / 1000) = 0.018594
    iv = V.score_interval([0.9], 1000)
    assert iv.mean == pytest.approx(0.9)
    assert iv.high - iv.mean == pytest.approx(1.959964 * math.sqrt(0.09 / 1000), rel=1e-5)
    assert iv.mean - iv.low == pytest.approx(iv.high - iv.mean)


def test_seed_term_uses_students_t():
    # three seeds 0.80, 0.82, 0.84 without a row term: s = 0.02, t(0.975, 2) = 4.302653
    iv = V.score_interval([0.80, 0.82, 0.84], None)
    assert iv.high - iv.mean == pytest.approx(4.302653 * 0.02 / math.sqrt(3), rel=1e-5)


def test_both_terms_add_in_quadrature():
    seeds = 4.302653 * 0.02 / math.sqrt(3)
    rows = 1.959964 * math.sqrt(0.82 * 0.18 / 2000)
    iv = V.score_interval([0.80, 0.82, 0.84], 2000)
    assert iv.high - iv.mean == pytest.approx(math.hypot(seeds, rows), rel=1e-5)


def test_interval_of_a_share_stays_in_0_1():
    assert V.score_interval([0.999, 1.0, 1.0], 50).high == 1.0


def test_an_interval_prints_as_percent_points_or_as_it_is():
    iv = V.Interval(1.0344, 1.0251, 1.04)
    assert iv.plain() == "1.03 [1.03, 1.04]" and iv.plain(1) == "1.0 [1.0, 1.0]"
    assert V.Interval(-0.012, -0.03, 0.006).points() == "-1.20 [-3.00, +0.60]"
    assert V.Interval(0.9341, 0.928, 0.9402).pct() == "93.41 [92.80, 94.02]"


def test_difference_adds_both_sides():
    a, b = [0.9], [0.85]
    d = V.difference_interval(a, b, 1000)
    ha = 1.959964 * math.sqrt(0.09 / 1000)
    hb = 1.959964 * math.sqrt(0.85 * 0.15 / 1000)
    assert d.mean == pytest.approx(0.05)
    assert d.high - d.mean == pytest.approx(math.hypot(ha, hb), rel=1e-5)


@pytest.mark.parametrize(("low", "high", "target", "strictly", "want"), [
    (0.94, 0.95, 0.935, False, "PASS"),
    (0.935, 0.95, 0.935, False, "PASS"),
    (0.935, 0.95, 0.935, True, "within noise"),
    (0.92, 0.94, 0.935, False, "within noise"),
    (0.90, 0.93, 0.935, False, "FAIL"),
])
def test_judge(low, high, target, strictly, want):
    assert V.judge(V.Interval((low + high) / 2, low, high), target, strictly=strictly) == want


@pytest.mark.parametrize("low, high, want", [
    (252.0, 290.0, "PASS"), (252.0, 300.0, "PASS"), (252.0, 355.0, "within noise"),
    (300.5, 355.0, "FAIL"), (300.0, 355.0, "within noise"),
])
def test_judge_at_most_a_ceiling(low, high, want):
    assert V.judge_at_most(V.Interval((low + high) / 2, low, high), 300.0) == want


def test_paired_bootstrap_is_narrower_than_unpaired_when_rows_agree():
    rng = np.random.default_rng(0)
    base = rng.random(2000) < 0.85
    better = base.copy()
    flip = np.flatnonzero(~base)[:40]  # b fixes 40 of a's errors, changes nothing else
    better[flip] = True
    paired = V.paired_difference([better.tolist()], [base.tolist()], resamples=2000)
    unpaired = V.difference_interval([better.mean()], [base.mean()], 2000)
    assert paired.mean == pytest.approx(40 / 2000)
    assert paired.low > 0 and paired.low <= paired.mean <= paired.high
    assert paired.high - paired.low < unpaired.high - unpaired.low


def test_paired_bootstrap_refuses_different_rows():
    with pytest.raises(ValueError, match="different test rows"):
        V.paired_difference([[True, False]], [[True]])


def test_ratio_interval_is_a_geometric_mean_with_a_t_interval_on_logs():
    num, den = [2.0, 2.2, 1.8], [1.0, 1.0, 1.0]
    logs = [math.log(2.0), math.log(2.2), math.log(1.8)]
    m = sum(logs) / 3
    s = math.sqrt(sum((x - m) ** 2 for x in logs) / 2)
    iv = V.ratio_interval(num, den)
    assert iv.mean == pytest.approx(math.exp(m))
    assert iv.low == pytest.approx(math.exp(m - 4.302653 * s / math.sqrt(3)), rel=1e-5)
    assert iv.high == pytest.approx(math.exp(m + 4.302653 * s / math.sqrt(3)), rel=1e-5)
    with pytest.raises(ValueError, match="positive"):
        V.ratio_interval([1.0, 0.0], [1.0, 1.0])


def test_seed_paired_difference():
    iv = V.seed_paired_difference([0.8, 0.9, 0.85], [0.7, 0.8, 0.8])
    diffs = [0.1, 0.1, 0.05]
    m = sum(diffs) / 3
    s = math.sqrt(sum((x - m) ** 2 for x in diffs) / 2)
    assert iv.mean == pytest.approx(m)
    assert iv.high - iv.mean == pytest.approx(4.302653 * s / math.sqrt(3), rel=1e-5)
    with pytest.raises(ValueError, match="at least two"):
        V.seed_paired_difference([0.8], [0.7])


def test_mean_interval_of_milliseconds_is_a_t_interval_unclamped():
    # mean 7, sd 1 over 3 runs: half = t(0.975, 2) / sqrt(3) = 4.302653 / 1.732051 = 2.484138
    iv = V.mean_interval([6.0, 7.0, 8.0])
    assert iv.mean == pytest.approx(7.0)
    assert iv.high - 7.0 == pytest.approx(2.484138, rel=1e-5)
    assert iv.low == pytest.approx(7.0 - 2.484138, rel=1e-5)
    assert V.mean_interval([7.0]) is None and V.mean_interval([]) is None
    assert V.judge_at_most(iv, 8.0) == "within noise"
    assert V.judge_at_most(V.mean_interval([6.0, 6.1, 6.2]), 8.0) == "PASS"


def test_a_latency_target_reads_the_served_runtimes_runs():
    import _intent_report as R

    both_times = {"p50_runs": [20.0, 21.0], "onnx_p50_runs": [3.0, 3.2, 3.1]}
    iv, how = R.served_p50(both_times)
    assert iv.mean == pytest.approx(3.1) and how.startswith("onnxruntime")
    iv, how = R.served_p50({"p50_runs": [20.0, 21.0], "onnx_p50_runs": []})
    assert iv.mean == pytest.approx(20.5) and how == "PyTorch"
    assert R.both("PASS", "PASS") == "PASS" and R.both("PASS", "FAIL") == "FAIL"
    assert R.both("within noise", "PASS") == "within noise"
    assert R.both("PASS", "NOT JUDGED (fewer than two runs)").startswith("NOT JUDGED")


def test_the_batching_targets_read_the_load_rounds():
    """The speed-up of concurrency 32 over 1 is the geometric mean of the per-round ratios
    with a t-interval on their logarithms; the p99 is the rounds' mean with its
    t-interval; a record of one load run is not judged."""
    import _serve_report as R

    def point(c, round_, throughput, p99):
        return {"runtime": "onnx", "batching": True, "concurrency": c, "round": round_,
                "throughput": throughput, "p99_ms": p99}

    load = [point(1, 0, 100.0, 8.0), point(32, 0, 500.0, 40.0),
            point(1, 1, 110.0, 8.0), point(32, 1, 495.0, 44.0),
            point(1, 2, 90.0, 8.0), point(32, 2, 468.0, 42.0),
            {**point(32, 0, 9999.0, 1.0), "batching": False}]  # batching off: not read
    speed_rows, p99_rows = R._batching_targets({"load": load}, "onnx")
    logs = np.log([5.0, 4.5, 5.2])
    half = 4.302653 * logs.std(ddof=1) / math.sqrt(3)
    low, high = math.exp(logs.mean() - half), math.exp(logs.mean() + half)
    assert f"{math.exp(logs.mean()):.2f}x [{low:.2f}, {high:.2f}]" in speed_rows
    assert low > 4 and "| PASS |" in speed_rows  # 4.06: the whole interval clears 4
    p99 = 4.302653 * 2.0 / math.sqrt(3)  # 40, 44, 42: mean 42, s 2
    assert f"42.0 [{42 - p99:.1f}, {42 + p99:.1f}] ms" in p99_rows and "| PASS |" in p99_rows
    one = R._batching_targets({"load": [{k: v for k, v in x.items() if k != "round"}
                                        for x in load[:2]]}, "onnx")
    assert all("not judged" in row for row in one)


def test_the_knn_detectors_cost_is_the_interleaved_rounds_ratio():
    """The k-NN detector's cost on the single-query path: the geometric mean of the per-round
    ratios (detector / no detector) with a t-interval on their logarithms, reported beside
    both p50s; absent from a record without the detector's paths."""
    import _serve_report as R

    base = [0.010, 0.011, 0.012]
    knn = [0.011, 0.0121, 0.0138]  # ratios 1.1, 1.1, 1.15
    lat = {name: {"p50_ms": 1000 * v[1], "p99_ms": 1000 * v[2], "mean_ms": 11.0}
           for name, v in (("ours (PyTorch)", base), (R.KNN_PATHS["PyTorch"], knn))}
    rows = R._targets({"single": {"latency": lat, "times_s": {
        "ours (PyTorch)": base, R.KNN_PATHS["PyTorch"]: knn}}})
    logs = np.log([1.1, 1.1, 1.15])
    half = 4.302653 * logs.std(ddof=1) / math.sqrt(3)
    row = next(r for r in rows if "k-NN" in r)
    assert f"{math.exp(logs.mean()):.2f} [{math.exp(logs.mean() - half):.2f}, " \
           f"{math.exp(logs.mean() + half):.2f}]" in row
    assert "p50 12.10 against 11.00 ms" in row and "(reported)" in row
    assert not any("k-NN" in r for r in R._targets({"single": {"latency": {
        "ours (PyTorch)": lat["ours (PyTorch)"]}, "times_s": {"ours (PyTorch)": base}}}))


def test_the_sparse_dispatch_verdicts_judge_each_side_of_the_thresholds():
    """Block-sparse / SDPA per cell from interleaved rounds; where auto takes block-sparse
    every interval must lie at most at 1, where it takes SDPA at least at 1; the crossover
    density is where the log of the mean ratio crosses 0, linear between measured cells."""
    import sparse_dispatch as S

    def cell(density, ratios, pick, mode="fwd"):
        sdpa = [10.0, 11.0, 12.0]
        return {"n": 2048, "window": 64, "mode": mode, "density": density, "pick": pick,
                "rounds_ms": {"blocksparse": [r * t for r, t in zip(ratios, sdpa, strict=True)],
                              "sdpa": sdpa}}

    cheap = cell(0.1, [0.30, 0.32, 0.31], "blocksparse")
    mid = cell(0.4, [0.9, 1.1, 1.0], "blocksparse")  # straddles 1
    dense = cell(0.8, [2.0, 2.1, 1.9], "sdpa")
    iv = S.ratio(cheap)
    logs = np.log([0.30, 0.32, 0.31])
    assert iv.mean == pytest.approx(math.exp(logs.mean()))
    rows = {r[0]: r for r in S._verdicts([cheap, mid, dense])}
    sparse = rows["fwd: where auto takes block-sparse, block-sparse / SDPA at most 1"]
    assert sparse[1] == "within noise" and "window 64 (density 0.40)" in sparse[2]
    assert rows["fwd: where auto takes SDPA on a pattern, block-sparse / SDPA at least 1"][1] \
        == "PASS"
    assert S._verdicts([cheap, cell(0.8, [0.5, 0.55, 0.6], "sdpa")])[1][1] == "FAIL"
    a, b = math.log(S.ratio(mid).mean), math.log(S.ratio(dense).mean)
    assert a < 0 < b  # mid's geometric mean is just under 1: the crossing is after it
    assert S.crossover([dense, cheap, mid]) == pytest.approx(0.4 + 0.4 * (-a) / (b - a))
    assert S.crossover([cheap]) is None


def test_batch_predicts_targets_read_the_repeats():
    """Streaming over in-process rate: the geometric mean of the repeats' ratios with its
    interval, judged against 90 %; the memory allowance: the per-repeat room under
    1.5x + 16 MiB, judged against 0. A record of one run each is not judged."""
    import json

    import batch_predict as B

    data = json.loads((ROOT / "benchmarks" / "results" / "batch_predict_cpu.json").read_text())
    # one run of each: the stored record's first repeat, whatever the record holds
    runs = [{k: v for k, v in r.items() if k != "repeat"} for r in data["results"]
            if r["kind"] in ("ceiling", "stream") and r.get("repeat", 0) == 0]
    ray = [r for r in data["results"] if r["kind"] == "ray"]
    text = B.section({**data, "results": runs + ray})
    assert "not judged" in text
    repeated = []
    for repeat, (speed, grow) in enumerate([(1.00, 0.0), (0.98, 2.0), (0.97, 1.0)]):
        for r in runs:
            r = {**r, "repeat": repeat}
            if r["kind"] == "ceiling":
                r["predict_texts_per_s"] = 1000.0
            else:
                r["texts_per_s"] = 1000.0 * speed
                r["peak_mib"] = {1: 5.0, 10: 10.0, 100: 12.0 + grow}[r["times"]]
            repeated.append(r)
    data = {**data, "results": repeated + ray}
    text = B.section(data)
    logs = np.log([1.00, 0.98, 0.97])
    half = 4.302653 * logs.std(ddof=1) / math.sqrt(3)
    expected = f"{math.exp(logs.mean()):.0%} [{math.exp(logs.mean() - half):.0%}, " \
               f"{math.exp(logs.mean() + half):.0%}] **PASS**"
    assert f"torch {expected}" in text and f"onnx {expected}" in text
    room = [19.0, 17.0, 18.0]  # 1.5 * 10 + 16 - (12 + grow): mean 18, s 1
    half = 4.302653 * 1.0 / math.sqrt(3)
    assert sum(room) / 3 == 18.0 and f"{18.0:+.1f} [{18.0 - half:+.1f}, {18.0 + half:+.1f}] " \
        f"MiB over 3 repeat(s): **PASS**" in text


def test_warm_starts_targets_are_paired_by_seed():
    """warm - full per seed, judged against -1 point (old intents) and -2 points (new), and
    warm / full time against a third, each on its t-interval over seeds (hand-computed);
    one seed is not judged."""
    import warm_start as W

    def rec(seed: int, run: str, old: float, new: float, secs: float) -> dict:
        return {"status": "ok", "dataset": "demo", "model": "m", "seed": seed, "run": run,
                "old_accuracy": old, "new_accuracy": new, "train_seconds": secs}

    # old: warm - full = +0.2, 0.0, -0.2 points (mean 0, s 0.002): the interval
    # +-4.302653 * 0.002 / sqrt(3) = +-0.50 points lies above -1: PASS.
    # new: -5, -6, -7 points (mean -6, s 0.01): -6 +- 2.48, wholly below -2: FAIL.
    # time: 30/100, 20/100, 25/100: a geometric mean near 0.24 with an interval under 1/3
    # only if the logs' spread allows it: computed below.
    records = []
    for seed, (d_old, d_new, secs) in enumerate([(0.002, -0.05, 30.0), (0.0, -0.06, 20.0),
                                                 (-0.002, -0.07, 25.0)]):
        records += [rec(seed, "full", 0.90, 0.80, 100.0),
                    rec(seed, "warm", 0.90 + d_old, 0.80 + d_new, secs)]
    text = W.render(records)
    half = 4.302653 * 0.002 / math.sqrt(3)
    assert f"| PASS | warm - full: +0.0 [{-100 * half:+.1f}, {100 * half:+.1f}] points" in text
    half = 4.302653 * 0.01 / math.sqrt(3)
    assert f"| FAIL | warm - full: -6.0 [{-6 - 100 * half:+.1f}, {-6 + 100 * half:+.1f}] " \
        "points" in text
    logs = np.log([0.30, 0.20, 0.25])
    half = 4.302653 * logs.std(ddof=1) / math.sqrt(3)
    low, high = math.exp(logs.mean() - half), math.exp(logs.mean() + half)
    verdict = "PASS" if high <= 1 / 3 else ("FAIL" if low > 1 / 3 else "within noise")
    assert f"| {verdict} | warm / full: {math.exp(logs.mean()):.2f} [{low:.2f}, {high:.2f}]" \
        in text
    one = W.render(records[:2])
    assert "| not judged | 1 paired seed(s)" in one


def test_warm_start_time_is_not_judged_across_precisions():
    """A seed whose warm run trained in bf16 and its full retrain in fp32 (``auto``'s probe
    chose per run): the time target is not judged; the accuracy targets still are, and the
    table names each run's precision."""
    import warm_start as W

    def rec(seed: int, run: str, secs: float, precision: str) -> dict:
        return {"status": "ok", "dataset": "demo", "model": "m", "seed": seed, "run": run,
                "old_accuracy": 0.9, "new_accuracy": 0.8, "train_seconds": secs,
                "precision": precision}

    records = [rec(0, "full", 100.0, "fp32"), rec(0, "warm", 20.0, "bf16"),
               rec(1, "full", 100.0, "bf16"), rec(1, "warm", 25.0, "bf16")]
    text = W.render(records)
    assert "| not judged | seed(s) [0]: warm and full trained in other precisions" in text
    assert text.count("| PASS |") == 2  # warm - full is 0 on both accuracies
    assert "| demo | m | warm | 2 | bf16 |" in text
    assert "| demo | m | full | 2 | bf16/fp32 |" in text
    same = W.render([dict(r, precision="bf16") for r in records])
    assert "not judged" not in same


def test_a_machine_is_busy_above_a_quarter_of_its_cpus():
    """The warning's rule: 0.5 on the 2-core machines (the old fixed threshold), 4 on a
    16-core GPU host, whose idle load of about 1 is no warning."""
    assert H.was_busy({"loadavg_start": 0.6, "logical_cpus": 2})
    assert not H.was_busy({"loadavg_start": 0.5, "logical_cpus": 2})
    assert not H.was_busy({"loadavg_start": 0.95, "logical_cpus": 16})
    assert H.was_busy({"loadavg_start": 4.1, "logical_cpus": 16})
    assert H.was_busy({"loadavg_start": 0.1}, 0.7)  # no CPU count: two


def test_demo_time_is_judged_on_the_mean_walls_interval():
    """Three runs 470, 480, 490 s (mean 480, s 10): 480 +- 4.302653 * 10 / sqrt(3), wholly
    above 396 s: FAIL; runs straddling the target: within noise; one run: not judged."""
    import demo_time as T

    half = 4.302653 * 10 / math.sqrt(3)
    verdict, text = T._verdict([470.0, 480.0, 490.0], 396.0)
    assert verdict == "FAIL" and text == \
        f"mean 480.0 s [{480 - half:.1f}, {480 + half:.1f}] over 3 runs"
    assert T._verdict([380.0, 400.0, 420.0], 396.0)[0] == "within noise"
    assert T._verdict([20.0, 21.0, 22.0], 120.0)[0] == "PASS"
    assert T._verdict([500.0], 396.0)[0] == "not judged"


def _cic_run(config: str, seed: int, macro_f1: float, accuracy: float, valid: float
             ) -> dict:
    return {"status": "ok", "dataset": "dataclue_cic", "config": config, "seed": seed,
            "accuracy": accuracy, "macro_f1": macro_f1,
            "valid": {"accuracy": valid, "macro_f1": valid},
            "latency": {"p50_ms": 5.0, "p99_ms": 9.0, "throughput_per_s": 100.0},
            "train_seconds": 1.0,
            "provenance": {"commit": "a" * 40, "dirty": False, "cpu": "AMD EPYC"}}


def test_a_configuration_whose_records_predate_provenance_is_never_chosen():
    """Rows measured before records kept a commit and machine are shown, listed as such,
    and never chosen for a verdict, however high their validation score."""
    import _intent_report as R

    runs = [_cic_run("e5-small-lpft-prior", s, 0.70, 0.80, 0.80) for s in range(3)]
    old = [_cic_run("e5-small-lpft-old", s, 0.90, 0.90, 0.99) for s in range(3)]
    for r in old:
        del r["provenance"]
    summary = R.summarise(runs + old)
    best, left_out = R.chosen(summary, "dataclue_cic",
                              ["e5-small-lpft-prior", "e5-small-lpft-old"], "macro_f1")
    assert best == "e5-small-lpft-prior" and left_out == ["e5-small-lpft-old"]
    assert summary[("dataclue_cic", "e5-small-lpft-old")]["unrecorded"]
    assert not summary[("dataclue_cic", "e5-small-lpft-prior")]["unrecorded"]


def test_a_doctor_cleaned_configuration_is_never_chosen_and_has_its_own_targets():
    """Its validation rows were cleaned too (0.95 here against the raw run's 0.80): the
    validation choice must not see it; its own targets set it against the floor and the
    raw rows on the test scores (2000 rows: the binomial term and the seeds' spread)."""
    import _intent_report as R

    runs = [_cic_run("tfidf", s, 0.75, 0.83, 0.0) for s in range(3)]
    runs += [_cic_run("e5-small-lpft-prior", s, 0.70 + 0.005 * s, 0.80, 0.80)
             for s in range(3)]
    runs += [_cic_run("e5-small-lpft-prior-doctor", s, 0.80 + 0.005 * s, 0.84, 0.95)
             for s in range(3)]
    for r in runs[:3]:
        r["valid"] = None  # the floor has no validation rows
    summary = R.summarise(runs)
    assert R.cleaned("e5-small-lpft-prior-doctor") and not R.cleaned("e5-small-lpft-prior")
    best, _ = R.chosen(summary, "dataclue_cic",
                       ["e5-small-lpft-prior", "e5-small-lpft-prior-doctor"], "macro_f1")
    assert best == "e5-small-lpft-prior"
    rows = {r[0]: r for r in R.doctor_targets(summary)}
    floor_f1 = [v for k, v in rows.items() if "floor (macro-F1)" in k][0]
    want = V.difference_interval([0.80, 0.805, 0.81], [0.75] * 3, 2000)
    assert floor_f1[1] == V.judge(want, 0.0, strictly=True) == "PASS"
    assert want.points() in floor_f1[2]
    raw_f1 = [v for k, v in rows.items() if "raw rows" in k and "macro-F1" in k][0]
    assert raw_f1[1] == "BETTER"
    raw_acc = [v for k, v in rows.items() if "raw rows" in k and "accuracy" in k][0]
    assert raw_acc[1] == "BETTER"  # 0.84 against 0.80 on 2000 rows
    # two seeds only: not judged
    two = R.summarise([r for r in runs if not (r["config"].endswith("doctor") and r["seed"] == 2)])
    assert R.doctor_targets(two)[0][1] == "NOT JUDGED"


def test_a_doctor_runs_time_is_the_mean_of_whole_runs_with_its_t_interval():
    """Three runs of 100, 110, 120 s (mean 110, s 10): 110 +- 4.302653 * 10 / sqrt(3);
    per-step medians; the load at each start is shown."""
    import doctor as D

    def rec(seed: int, wall: float, load: float) -> dict:
        return {"status": "ok", "kind": D.CLI_TIME, "seed": seed, "wall_s": wall,
                "rows": 10000, "examine_s": wall - 2, "steps": {"duplicates": 5.0 + seed,
                                                               "out-of-fold": wall - 8},
                "provenance": {"loadavg_before": load, "cores": 2}}

    half = 4.302653 * 10 / math.sqrt(3)
    text = "\n".join(D.render_time([rec(0, 100.0, 0.1), rec(1, 110.0, 0.2),
                                    rec(2, 120.0, 0.3)]))
    assert f"110.0 s [{110 - half:.1f}, {110 + half:.1f}]" in text
    assert "| duplicates | 6.0 |" in text and "| out-of-fold | 102.0 |" in text
    assert "load average at each start: 0.10, 0.20, 0.30 (on 2 logical CPUs" in text
    assert D.render_time([{"status": "ok", "kind": "random"}]) == []


def test_the_intent_benchmark_trains_on_what_the_doctor_keeps(tmp_path):
    """``doctor_cleaned`` leaves in the training rows exactly what ``headwise doctor --fix
    drop`` writes (the flipped rows gone, the rest in file order) and says what it did."""
    sys.path.insert(0, str(ROOT / "tests" / "intent" / "doctor"))
    import intent as B
    from test_doctor import FLIPS, _corpus

    from headwise.intent.doctor import examine, fixed_rows
    from headwise.text.dataset import Dataset, Example

    rows = _corpus()
    data = Dataset([Example(t, (y,), (), n) for n, (t, y) in enumerate(rows, start=1)],
                   tmp_path / "train.csv")
    texts, labels = [t for t, _ in rows], [y for _, y in rows]
    lines = list(range(1, len(rows) + 1))
    want = fixed_rows(texts, labels, lines, examine(texts, labels, lines, seed=0), "drop")
    done = B.doctor_cleaned(data, "drop", 0)
    assert [(e.text, e.label) for e in data.examples] == [(t, y) for _, t, y in want]
    assert not {t for t, _, _ in FLIPS} & set(data.texts)
    assert done["rows"] == len(rows) and done["kept"] == len(want) < len(rows)
    assert done["relabelled"] == 0 and done["findings"]["label_issue"] >= len(FLIPS)


def test_cic_default_training_time_is_judged_on_the_mean_walls_interval():
    """Three runs of 20, 25 and 30 minutes (mean 25, s 5): 25 +- 4.302653 * 5 / sqrt(3)
    minutes, straddling 30: within noise; 10, 11, 12 minutes: PASS; one run: not judged."""
    import cic_train_time as T

    half = 4.302653 * 5 / math.sqrt(3)
    judged, text = T.verdict([1200.0, 1500.0, 1800.0])
    assert judged == "within noise"
    assert text == f"mean 25.0 min [{25 - half:.1f}, {25 + half:.1f}] over 3 runs"
    assert T.verdict([600.0, 660.0, 720.0])[0] == "PASS"
    assert T.verdict([3000.0, 3100.0, 3200.0])[0] == "FAIL"
    assert T.verdict([900.0])[0] == "not judged"
    record = {"command": "python benchmarks/cic_train_time.py", "date": "2026-12-04",
              "provenance": {}, "runs": [
                  {"seed": s, "model": "multilingual-e5-small", "epochs": 3,
                   "saved": "blend, TF-IDF weight 0.3", "precision": "bf16", "wall_s": w,
                   "cpu_s": 2 * w, "peak_rss_mib": 2000,
                   "accuracy": 0.8, "macro_f1": 0.7} for s, w in enumerate((600, 660, 720))]}
    text = T.section([record])
    assert "| PASS |" in text
    assert "| 0 | multilingual-e5-small | blend, TF-IDF weight 0.3 | 3 | bf16 | 10.0 |" in text
    assert "Not measured yet" in T.section([])


def test_a_timed_process_reports_its_own_time_and_refuses_a_failure():
    import subprocess

    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass"
    out = H.timed_process([sys.executable, "-c", busy])
    assert out["cpu_s"] >= 0.2 and out["wall_s"] >= out["cpu_s"] * 0.5
    assert out["peak_rss_mib"] > 1
    with pytest.raises(subprocess.CalledProcessError):
        H.timed_process([sys.executable, "-c", "raise SystemExit(3)"])


def test_the_hardening_run_reads_pytests_report_and_hypothesis_statistics(tmp_path):
    """Examples are summed over a property's phases, outcomes come from the JUnit XML, and
    one failing example or test makes the verdict FAIL."""
    import hardening as Hd

    stats = """============================ Hypothesis Statistics =============================
tests/attention/test_grad_layouts.py::test_attend_gradients_match_float64_reference:

  - during explicit phase (0.52 seconds):
    - Typical runtimes: ~ 2-717 ms, of which < 1ms in data generation
    - 4 passing, 0 failing, and 0 invalid test cases

  - during generate phase (310.81 seconds):
    - Typical runtimes: ~ 2-717 ms, of which ~ 1-114 ms in data generation
    - 1996 passing, 0 failing, and 12 invalid test cases

  - Stopped because settings.max_examples=2000

tests/nn/test_grad_layouts_models.py::test_encoder_layer_gradients:

  - during generate phase (20.0 seconds):
    - 499 passing, 1 failing, and 0 invalid test cases
"""
    got = Hd.examples(stats)
    assert got == {
        "tests/attention/test_grad_layouts.py::test_attend_gradients_match_float64_reference":
            {"passing": 2000, "failing": 0, "invalid": 12},
        "tests/nn/test_grad_layouts_models.py::test_encoder_layer_gradients":
            {"passing": 499, "failing": 1, "invalid": 0}}
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
        '<testcase classname="tests.attention.test_grad_layouts" '
        'name="test_attend_gradients_match_float64_reference" time="311.4"/>'
        '<testcase classname="tests.nn.test_grad_layouts_models" '
        'name="test_encoder_layer_gradients" time="20.5"><failure message="x">x</failure>'
        '</testcase></testsuite></testsuites>', encoding="utf-8")
    tests = Hd.outcomes(junit)
    assert [(t["test"].split("::")[1], t["outcome"], t["seconds"]) for t in tests] == [
        ("test_attend_gradients_match_float64_reference", "passed", 311.4),
        ("test_encoder_layer_gradients", "failed", 20.5)]
    for t in tests:
        t["examples"] = got[t["test"]]
    run = {"profile": "long", "hypothesis_seed": 7, "exit_code": 1, "wall_s": 340.0,
           "tests": tests}
    assert Hd.verdict(run) == ("FAIL", "2,499 examples passed, 1 failed; 2 tests, 1 failed; "
                                       "5.7 min")
    tests[1].update(outcome="passed", examples={"passing": 500, "failing": 0, "invalid": 0})
    assert Hd.verdict({**run, "exit_code": 0})[0] == "PASS"
    text = Hd.section([{"command": "python benchmarks/hardening.py", "date": "2026-12-04",
                        "provenance": {}, "run": {**run, "exit_code": 0}}])
    assert "| no failing test and no failing example | PASS |" in text
    assert "--hypothesis-seed=7" in text and "2,000" in text


def test_a_run_record_is_started_appended_and_rendered(tmp_path, capsys):
    """new_run stamps command, date and provenance; finish_run completes the provenance,
    appends the record and writes (or prints) the section from every record of the file."""
    import argparse

    p = argparse.ArgumentParser()
    H.add_run_args(p, tmp_path / "runs.jsonl")
    args = p.parse_args(["--md", str(tmp_path / "BENCHMARKS.md"), "--no-write"])
    assert args.results == tmp_path / "runs.jsonl"
    for n in (1, 2):
        data = H.new_run(1, value=n)
        assert {"command", "date", "provenance"} <= set(data) and data["value"] == n
        H.finish_run(args, data, "decode:cpu",
                     lambda records: "## Decoding\n\n" + ",".join(
                         str(r["value"]) for r in records))
    assert capsys.readouterr().out.strip().endswith("1,2")
    lines = (tmp_path / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["value"] for x in lines] == [1, 2]
    assert "loadavg_after" in json.loads(lines[-1])["provenance"]


def test_a_log_log_slope_interval_is_scipys_regression_with_students_t():
    from scipy import stats

    n = [2048, 4096, 8192, 16384, 32768]
    ms = [10.0, 21.5, 41.0, 88.0, 190.0]
    iv = V.slope_interval(list(zip(n, ms, strict=True)))
    fit = stats.linregress(np.log(n), np.log(ms))
    half = stats.t.ppf(0.975, len(n) - 2) * fit.stderr
    assert iv.mean == pytest.approx(fit.slope)
    assert (iv.low, iv.high) == pytest.approx((fit.slope - half, fit.slope + half))
    # an exact power law pins the slope; two points cannot give an interval
    exact = V.slope_interval([(x, 3.0 * x ** 1.5) for x in n])
    assert exact.low == pytest.approx(1.5) and exact.high == pytest.approx(1.5)
    assert V.slope_interval([(1, 1.0), (2, 2.0)]) is None
    assert iv.low < 1.0 < iv.high and V.judge_at_most(iv, 1.0) == "within noise"


@pytest.mark.parametrize("verdicts, want", [
    (["PASS", "PASS"], "PASS"), (["PASS", "within noise"], "within noise"),
    (["within noise", "FAIL"], "FAIL"), ([], "NOT MEASURED")])
def test_a_target_of_several_checks_fails_on_any_failure(verdicts, want):
    assert V.combined(verdicts) == want


def test_the_demos_negation_targets_pair_the_two_models_by_seed():
    import demo_heldout as DH

    def run(seed, transformer, bilstm, pretrained):
        def model(acc):
            return {"slices": [{"slice": "negation_scope", "accuracy": acc, "n": 189}]}
        return {"seed": seed, "models": {"transformer": model(transformer),
                                         "bilstm": model(bilstm),
                                         "pretrained": model(pretrained)}}

    runs = [run(0, 0.70, 0.80, 0.91), run(1, 0.85, 0.90, 0.92), run(2, 0.75, 0.82, 0.93)]
    table = DH.slice_targets(runs)
    # per-seed differences -0.10, -0.05, -0.07: mean -0.0733, s = 0.025166, t(2) = 4.302653
    half = 4.302653 * 0.0251661 / math.sqrt(3)
    assert f"{100 * -0.073333:+.1f} [{100 * (-0.073333 - half):+.1f}, " \
           f"{100 * (-0.073333 + half):+.1f}] points (paired by seed" in table
    assert "| negation_scope: transformer at least bilstm | FAIL |" in table
    # an absolute score keeps the rows' term: 189 rows a seed leave 92 % within noise of 90 %
    assert "| negation_scope: pretrained >= 90 % | within noise | 92.0 [87.4, 96.6] % |" in table


def test_decodes_flatness_is_judged_on_the_interleaved_rounds_ratio_interval():
    import decode

    def flat(batch: int, long_ms: list[float], short_ms: list[float]) -> dict:
        return {"batch": batch, "kind": "flatness", "short": 16, "length": 512,
                "status": "ok", "long_step_ms": long_ms, "short_step_ms": short_ms}

    series = [{"batch": 1, "path": "cached", "length": n, "status": "ok", "step_ms": 10.0}
              for n in (16, 512)]
    recs = [*series, flat(1, [12.0, 11.0, 13.0], [10.0, 10.0, 10.0])]
    f = decode.flatness(recs, [16, 512], 1)
    logs = [math.log(1.2), math.log(1.1), math.log(1.3)]
    half = 4.302653 * float(np.std(logs, ddof=1)) / math.sqrt(3)
    m = float(np.mean(logs))
    assert f["rounds"] == 3 and f["slope"] == pytest.approx(0.0)
    assert (f["ratio"].mean, f["ratio"].low, f["ratio"].high) == pytest.approx(
        (math.exp(m), math.exp(m - half), math.exp(m + half)), rel=1e-5)
    assert V.judge_at_most(f["ratio"], decode.FLAT_LIMIT) == "PASS"
    # the interleaved records are not points of the series, and a batch without rounds is
    # not judged
    assert decode.series(recs, 1, "cached") == [(16, 10.0), (512, 10.0)]
    assert "ratio" not in decode.flatness(recs, [16, 512], 8)
    # a noisy ratio straddling the limit is within noise, not PASS
    noisy = decode.flatness([flat(1, [12.0, 20.0, 14.0], [10.0] * 3)], [16, 512], 1)["ratio"]
    assert noisy.low < decode.FLAT_LIMIT < noisy.high
    assert V.judge_at_most(noisy, decode.FLAT_LIMIT) == "within noise"


def test_the_dispatchers_target_judges_each_side_by_side_rows_interval():
    import _attention_report as R

    def auto(n: int, auto_ms: list[float], cand: dict[str, list[float]]) -> dict:
        ratios = {be: {"median": float(np.median(np.array(auto_ms) / np.array(t))),
                       "q1": 0.0, "q3": 0.0} for be, t in cand.items()}
        return {"kind": "attention", "backend": "auto", "mask": "none", "n": n,
                "mode": "fwd", "status": "ok", "pick": "sdpa", "ms": {"median": 1.0},
                "candidates": list(cand), "vs": ratios,
                "rounds_ms": {"auto": auto_ms, **cand}}

    data = {"meta": {"settings": {"modes": ["fwd"], "masks": ["none"], "sizes": [128, 256]}},
            "records": [auto(128, [1.0, 1.0, 1.0], {"sdpa": [1.0, 1.0, 1.0],
                                                     "tiled": [2.0, 2.0, 2.0]}),
                        auto(256, [1.2, 1.1, 1.3], {"sdpa": [1.0, 1.0, 1.0],
                                                     "tiled": [3.0, 3.0, 3.0]})]}
    rows = R.dispatch_rows(data)
    # the fastest candidate is the one auto is slowest against, its interval by hand
    assert [r["best"] for r in rows] == ["sdpa", "sdpa"]
    logs = [math.log(1.2), math.log(1.1), math.log(1.3)]
    m, half = float(np.mean(logs)), 4.302653 * float(np.std(logs, ddof=1)) / math.sqrt(3)
    iv = rows[1]["interval"]
    assert (iv.mean, iv.low, iv.high) == pytest.approx(
        (math.exp(m), math.exp(m - half), math.exp(m + half)), rel=1e-5)
    what, verdict, text = R._dispatch_target(rows)
    assert verdict == "within noise"  # 1.197 [0.973, 1.473] straddles 1.10
    assert "worst auto/fastest 1.197 [0.973, 1.473]" in text and "N=256" in text
    # a row wholly above the limit fails; one with no per-round times is shown, not judged
    data["records"][1]["rounds_ms"]["auto"] = [1.5, 1.52, 1.48]
    assert R._dispatch_target(R.dispatch_rows(data))[1] == "FAIL"
    for r in data["records"]:
        r.pop("rounds_ms")
    v, text = R._dispatch_target(R.dispatch_rows(data))[1:]
    assert "no interval" in text and v == "FAIL"  # the older rule, said so
    data["records"][1]["vs"]["sdpa"]["median"] = 1.05
    assert R._dispatch_target(R.dispatch_rows(data))[1] == "NOT JUDGED"


def test_bf16_accuracy_is_judged_against_the_margin_of_fp32s_interval():
    """bf16 - fp32 per seed (a t-interval over seeds; hand-computed) against the margin
    fp32's own interval (seeds and test rows) spans below its mean: a close bf16 passes, a
    lower one fails; CIC accuracy is a paired bootstrap over its shared test rows, and the
    training times give the per-seed fp32 / bf16 ratio."""
    import bf16_accuracy as B

    def rec(ds: str, precision: str, seed: int, acc: float, secs: float,
            correct: str = "") -> dict:
        return {"status": "ok", "dataset": ds, "precision": precision, "seed": seed,
                "accuracy": acc, "macro_f1": acc - 0.05, "test_rows": 500,
                "test_correct": correct, "valid": {"accuracy": acc}, "train_seconds": secs,
                "epochs": 3}

    fp32 = [0.90, 0.92, 0.91]
    close, low = [0.905, 0.915, 0.91], [0.80, 0.81, 0.80]
    runs = [rec("demo", "fp32", s, a, 100.0) for s, a in enumerate(fp32)]
    runs += [rec("demo", "bf16", s, a, 60.0) for s, a in enumerate(close)]
    # fp32's interval: seeds 4.302653 * 0.01 / sqrt(3), rows 1.96 * sqrt(0.91 * 0.09 / 500)
    margin = math.sqrt((4.302653 * 0.01 / math.sqrt(3)) ** 2
                       + (1.959964 * math.sqrt(0.91 * 0.09 / 500)) ** 2)
    # the differences +0.5, -0.5, 0 points: s = 0.005, half 4.302653 * 0.005 / sqrt(3)
    half = 4.302653 * 0.005 / math.sqrt(3)
    text = B.render(runs)
    assert (f"| demo: bf16 accuracy within fp32's 95 % interval | PASS | "
            f"+0.00 [{-100 * half:+.2f}, {100 * half:+.2f}] | -{100 * margin:.2f} |") in text
    assert "| demo | 3 | 0, 0, 0 | 1.67 [1.67, 1.67] |" in text  # 100 s / 60 s every seed
    worse = [r for r in runs if r["precision"] == "fp32"]
    worse += [rec("demo", "bf16", s, a, 60.0) for s, a in enumerate(low)]
    assert "| demo: bf16 accuracy within fp32's 95 % interval | FAIL |" in B.render(worse)
    # CIC: 10 shared rows, fp32 right on 9, bf16 on the same 9 in every seed: difference 0
    cic = [rec("cic", p, s, 0.9, 100.0, "1111111110") for p in ("fp32", "bf16")
           for s in range(3)]
    diff = B.difference(B._pairs(cic, "cic"), "accuracy", "cic")
    assert (diff.mean, diff.low, diff.high) == (0.0, 0.0, 0.0)
    assert B.verdict(V.score_interval([0.9] * 3, 10), diff) == "PASS"
    cic[3]["test_correct"] = "1111111101"  # seed 0's bf16: two rows answered differently
    assert "| cic | 3 | 2, 0, 0 | 1.00 [1.00, 1.00] |" in B.render(cic)
    assert B.difference(B._pairs(runs[:1] + runs[3:4], "demo"), "accuracy", "demo") is None
    assert "Not measured yet" in B.render([])


def test_blend_reads_the_demos_single_label_splits(tmp_path: Path) -> None:
    """blend.py scores a demo directory's networks on the rows they were trained and
    scored with, ``data/*.csv``, never the compound corpus ``data/*.jsonl`` beside it (its
    joined several-intent questions made the rebuilt validation rows differ)."""
    import blend as B

    data = tmp_path / "data"
    data.mkdir()
    for part, rows in (("valid", [("我要挂失", "report_card_loss")]),
                       ("test", [("怎么提前还款", "early_repayment"), ("hello", "oos")])):
        (data / f"{part}.csv").write_text(
            "text,label\n" + "".join(f"{t},{y}\n" for t, y in rows), encoding="utf-8")
        (data / f"{part}.jsonl").write_text(json.dumps(
            {"text": "我要挂失，还想提前还款", "intents": ["report_card_loss",
                                                   "early_repayment"]}) + "\n",
            encoding="utf-8")
    valid, test = B.demo_splits(tmp_path)
    assert valid == (["我要挂失"], ["report_card_loss"])
    assert test == (["怎么提前还款", "hello"], ["early_repayment", "oos"])


def test_intent_load_split_train_holds_every_training_file(tmp_path: Path) -> None:
    """A data set's "train" split is its training file and its ``extra_train`` file
    together (CIC: train + dev), read by every benchmark through ``intent.load_split``; the
    other splits are their own file, and a split a data set lacks is None."""
    import intent as I

    for name, rows in (("a", [("挂失", "loss")]), ("b", [("还款", "repay")]),
                       ("c", [("余额", "balance")])):
        (tmp_path / f"{name}.csv").write_text(
            "text,label\n" + "".join(f"{t},{y}\n" for t, y in rows), encoding="utf-8")
    spec = {"format": "csv", "train": "a.csv", "extra_train": "b.csv", "valid": None,
            "test": "c.csv"}
    assert list(I.load_split(tmp_path, spec, "train").texts) == ["挂失", "还款"]
    assert list(I.load_split(tmp_path, spec, "test").texts) == ["余额"]
    assert I.load_split(tmp_path, spec, "valid") is None
    alone = {**spec, "extra_train": None}
    assert list(I.load_split(tmp_path, alone, "train").labels) == ["loss"]


def test_intent_parameter_count_sums_a_blends_members() -> None:
    """intent.py counts a TF-IDF model's weights and biases, and an ensemble (a network
    blended with TF-IDF by levers.blend) as the sum of its members."""
    import intent

    from headwise.intent.ensemble import EnsembleClassifier
    from headwise.intent.training.tfidf_selection import fit_tfidf

    texts = ["lost my card", "card stolen", "send money", "transfer funds", "my balance",
             "how much left"]
    labels = ["card", "card", "transfer", "transfer", "balance", "balance"]
    tfidf = fit_tfidf(texts, labels, c=10.0)
    one = intent.parameter_count(tfidf)
    assert one == tfidf.coef.size + tfidf.intercept.size > 0
    assert intent.parameter_count(EnsembleClassifier([tfidf, tfidf])) == 2 * one


def test_compare_rotates_the_order_and_takes_the_median_of_calls_per_round() -> None:
    """H.compare: the one to go first rotates each round, and with calls=N each round's time
    is the median of N calls in a row (a slow outlier among them does not move it)."""
    import time

    order: list[str] = []

    def fn(name: str):
        def call() -> None:
            order.append(name)
            # the warm-up makes 6 calls of a fast function; the 8th call of "a" is the
            # second of its first timed round
            if name == "a" and order.count("a") == 8:
                time.sleep(0.05)
        return call

    res = H.compare({"a": fn("a"), "b": fn("b")}, lambda: None, min_repeats=2, max_repeats=2,
                    calls=3)
    assert order[:12] == ["a"] * 6 + ["b"] * 6  # the warm-up
    assert order[12:] == ["a"] * 3 + ["b"] * 3 + ["b"] * 3 + ["a"] * 3
    assert len(res["rounds_ms"]["a"]) == len(res["rounds_ms"]["b"]) == 2
    assert max(res["rounds_ms"]["a"]) < 10  # the 50 ms call is not a round's median


def test_each_ensemble_is_judged_against_the_ensemble_of_the_baseline():
    """An ensemble is set against the ensemble of TF-IDF models (not one model), each on
    its own row (ensembles record no validation score, so none is chosen); one with fewer
    than three seeds is not judged; without the baseline ensemble nothing is."""
    import _intent_report as R

    def ens(config, f1s):
        runs = [_cic_run(config, s, f, 0.8, 0.0) for s, f in enumerate(f1s)]
        for r in runs:
            r["valid"] = None
        return runs

    base = ens(R.BASELINE_ENSEMBLE, [0.75, 0.76, 0.77])
    strong = ens("ens-tfidf-e5", [0.80, 0.81, 0.82])
    close = ens("transformer-concat-ln-rope-distill-ens3", [0.75, 0.77, 0.76])
    short = ens("ens-tfidf-bilstm-transformer", [0.9, 0.9])
    rows = {r[0]: r for r in R.ensemble_targets(R.summarise(base + strong + close + short))}
    assert len(rows) == 3
    by = {c: next(v for k, v in rows.items() if f"{c} (" in k)
          for c in ("ens-tfidf-e5", "transformer-concat-ln-rope-distill-ens3",
                    "ens-tfidf-bilstm-transformer")}
    want = V.difference_interval([0.80, 0.81, 0.82], [0.75, 0.76, 0.77], 2000)
    assert by["ens-tfidf-e5"][1] == V.judge(want, 0.0, strictly=True)
    assert want.points() in by["ens-tfidf-e5"][2]
    assert by["transformer-concat-ln-rope-distill-ens3"][1] == "within noise"
    assert by["ens-tfidf-bilstm-transformer"][1] == "NOT JUDGED"
    alone = R.ensemble_targets(R.summarise(strong))
    assert len(alone) == 1 and alone[0][1] == "NOT MEASURED"
    assert R.ensemble_targets(R.summarise(base)) == []
