"""Where ``attend(backend="auto")`` should take the block-sparse kernel: block-sparse against
SDPA with the pattern's dense mask, by sequence length and by the share of tiles the
pattern needs.

The dispatcher (:func:`headwise.attention.kernels.select_backend`) sends a sparse pattern to
the block-sparse kernel when the sequence is at least ``SPARSE_MIN_LEN`` long and the
pattern's block plan computes at most ``SPARSE_MAX_DENSITY`` of the tiles; otherwise SDPA
runs with the pattern as a dense boolean mask. This script measures both sides of those
two thresholds on the CPU: batch 1, 8 heads, head dim 64, float32, random normal q, k, v,
sliding windows (``masks.sliding_window(w)``) whose widths are fractions of the length, so
the density (``BlockPlan.density``) runs from a few per cent to most of the tiles. Each
(length, window, mode) times both kernels in interleaved rounds in this process
(``_harness.compare``: the one to go first rotating, so drift hits both alike); the ratio
block-sparse / SDPA is the geometric mean of the per-round ratios with its t-interval
(``_verdicts.ratio_interval``). Modes: ``fwd`` (inference mode) and ``fwdbwd`` (gradients of
q, k and v).

Verdicts: where the dispatcher takes block-sparse, its interval must lie at most at 1 (it is
no slower than SDPA); where it takes SDPA on a pattern (too short or too dense), the
interval must lie at least at 1. Each is PASS when every row's interval clears 1, FAIL when
one lies wholly on the wrong side, "within noise" otherwise.

    python benchmarks/sparse_dispatch.py                      # appends a record, writes the page
    python benchmarks/sparse_dispatch.py --quick --no-write --results /tmp/sd.jsonl   # smoke

One record per run in ``benchmarks/results/sparse_dispatch_cpu.jsonl`` (``--results``) with
its provenance; the section ``sparse_dispatch:cpu`` of ``docs/benchmarks/attention.md``
shows every run, each judging the thresholds of its commit.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402
import _verdicts as V  # noqa: E402

SECTION = "sparse_dispatch:cpu"
RESULTS = HERE / "results" / "sparse_dispatch_cpu.jsonl"
B, HEADS, D = 1, 8, 64
SIZES = (512, 1024, 2048, 4096)
QUICK_SIZES = (256, 1024)
#: window widths as fractions of the length (densities from about 0.05 to 0.9)
FRACTIONS = (1 / 32, 1 / 16, 1 / 8, 3 / 16, 1 / 4, 3 / 8, 1 / 2)
QUICK_FRACTIONS = (1 / 16, 1 / 2)
MODES = ("fwd", "fwdbwd")
BACKENDS = ("blocksparse", "sdpa")


def measure_cell(n: int, window: int, mode: str, reps: dict[str, Any]) -> dict[str, Any]:
    """One (length, window, mode): the dispatcher's pick, the pattern's density, both
    kernels timed in interleaved rounds, and the largest difference of their outputs."""
    import torch

    from headwise.attention import attend, masks, select_backend
    from headwise.attention.kernels.blocksparse import DEFAULT_BLOCK, block_plan

    g = torch.Generator().manual_seed(n + window)
    q, k, v, grad = (torch.randn(B, HEADS, n, D, generator=g) for _ in range(4))
    pattern = masks.sliding_window(window)
    density = block_plan(pattern, n, n, DEFAULT_BLOCK, "cpu").density()
    if mode == "fwdbwd":
        q, k, v = (x.requires_grad_() for x in (q, k, v))

    def call(backend: str) -> Any:
        def run() -> Any:
            if mode == "fwd":
                with torch.inference_mode():
                    return attend(q, k, v, pattern, backend=backend)
            for x in (q, k, v):
                x.grad = None
            out = attend(q, k, v, pattern, backend=backend)
            out.backward(grad)
            return torch.cat([x.grad.detach().clone() for x in (q, k, v)], dim=-1)
        return run

    res = H.compare({be: call(be) for be in BACKENDS}, lambda: None, **reps)
    first, second = res["results"]
    rounds = res["rounds_ms"]
    return {"n": n, "window": window, "mode": mode, "density": density,
            "pick": select_backend(q, k, pattern),
            "ms": {be: res[be]["median"] for be in BACKENDS}, "rounds_ms": rounds,
            "max_abs_diff": float((first - second).abs().max())}


def ratio(cell: dict[str, Any]) -> V.Interval:
    """Block-sparse over SDPA: the geometric mean of the per-round ratios, 95 % interval."""
    return V.ratio_interval(cell["rounds_ms"]["blocksparse"], cell["rounds_ms"]["sdpa"])


def crossover(cells: list[dict[str, Any]]) -> float | None:
    """The density at which block-sparse stops being faster, for one length and mode: where
    the log of the mean ratio crosses 0 between two measured densities (linear in the
    density); None when it does not cross inside the measured range."""
    pts = sorted((c["density"], math.log(ratio(c).mean)) for c in cells)
    for (d0, r0), (d1, r1) in itertools.pairwise(pts):
        if r0 <= 0 < r1:
            return d0 + (d1 - d0) * (-r0) / (r1 - r0)
    return None


def _verdicts(cells: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for mode in MODES:
        mine = [c for c in cells if c["mode"] == mode]
        sparse = [c for c in mine if c["pick"] == "blocksparse"]
        dense = [c for c in mine if c["pick"] != "blocksparse"]
        for what, group, judge in (
                ("where auto takes block-sparse, block-sparse / SDPA at most 1", sparse,
                 lambda iv: V.judge_at_most(iv, 1.0)),
                ("where auto takes SDPA on a pattern, block-sparse / SDPA at least 1", dense,
                 lambda iv: V.judge(iv, 1.0))):
            if not group:
                continue
            verdicts = [judge(ratio(c)) for c in group]
            worst = [f"N={c['n']} window {c['window']} (density {c['density']:.2f}): "
                     f"{ratio(c).plain()}"
                     for c, vd in zip(group, verdicts, strict=True) if vd != "PASS"]
            rows.append([f"{mode}: {what}", V.combined(verdicts),
                         f"{len(group)} cells; " + ("every interval clears 1" if not worst
                                                    else "not clearing: " + "; ".join(worst))])
    return rows


def _run_lines(run: dict[str, Any], earlier: bool = False) -> list[str]:
    """One run's lines; ``earlier``: under a heading marking it as an earlier run (its
    verdicts judged thresholds changed since: not the section's)."""
    cells = run["cells"]
    commit = (run["provenance"].get("commit") or "?")[:10]
    head = (f"### Run of commit {commit} {H.EARLIER_MARK}run: the thresholds it judged were "
            f"changed after it)" if earlier
            else f"### Run of commit {commit} (the latest: the section's verdicts)")
    h = "####"
    lines = [head, "", f"**{H.run_machine(run)}**, `{run['command']}` ({run['date']}; "
             f"{run['provenance']['threads']} torch threads). The dispatcher's thresholds at "
             f"this commit: `SPARSE_MIN_LEN` {run['min_len']}, `SPARSE_MAX_DENSITY` "
             f"{run['max_density']}.",
             "", f"{h} Targets", "",
             H.markdown_table(["target", "verdict", "measured"], _verdicts(cells)), "",
             f"{h} Block-sparse / SDPA by length and density", ""]
    rows = []
    for c in sorted(cells, key=lambda c: (c["n"], c["density"], c["mode"])):
        rows.append([str(c["n"]), str(c["window"]), f"{c['density']:.3f}", c["mode"],
                     c["pick"], f"{c['ms']['blocksparse']:.2f}", f"{c['ms']['sdpa']:.2f}",
                     ratio(c).plain(), f"{c['max_abs_diff']:.1e}"])
    lines.append(H.markdown_table(
        ["N", "window", "density", "mode", "auto takes", "block-sparse ms", "SDPA ms",
         "ratio [95 %]", "max abs diff"], rows))
    cross = []
    for n in sorted({c["n"] for c in cells}):
        for mode in MODES:
            x = crossover([c for c in cells if c["n"] == n and c["mode"] == mode])
            cross.append(f"N={n} {mode}: {'-' if x is None else f'{x:.2f}'}")
    lines += ["", "Density at which block-sparse stops being faster (the mean ratio crossing 1, "
              "interpolated between measured densities; \"-\": no crossing in the range "
              "measured): " + "; ".join(cross) + "."]
    return lines


def section(runs: list[dict[str, Any]]) -> str:
    """The ``sparse_dispatch:cpu`` section: every run's verdicts and table, oldest first."""
    return H.per_run_section([
        "## Sparse patterns: when the dispatcher takes the block-sparse kernel (CPU)", "",
        "Batch 1, 8 heads, head dim 64, float32; sliding windows of widths that are "
        "fractions of the length N; density: the share of 128 x 128 tiles the block plan "
        "computes. Both kernels run in interleaved rounds in one process; the ratio is "
        "block-sparse time over SDPA time (with the pattern's dense boolean mask), the "
        "geometric mean of the per-round ratios with its 95 % t-interval. \"auto takes\": "
        "`select_backend` at the run's commit. Max abs diff: of the outputs (fwd) or the "
        "gradients of q, k and v (fwdbwd). Every run is shown, oldest first: a run judges "
        "the thresholds of its own commit."], runs,
        lambda r: _run_lines(r, earlier=r is not runs[-1]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="two lengths, two windows, few rounds")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    H.add_run_args(p, RESULTS)
    args = p.parse_args(argv)
    import torch

    from headwise.attention.kernels import SPARSE_MAX_DENSITY, SPARSE_MIN_LEN

    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    sizes, fractions = (QUICK_SIZES, QUICK_FRACTIONS) if args.quick else (SIZES, FRACTIONS)
    reps = ({"min_repeats": 2, "max_repeats": 3, "target_s": 0.05} if args.quick
            else {"min_repeats": 6, "max_repeats": 20, "target_s": 1.0})
    data = H.new_run(threads, quick=args.quick, min_len=SPARSE_MIN_LEN,
                     max_density=SPARSE_MAX_DENSITY, cells=[])
    for n in sizes:
        for f in fractions:
            for mode in MODES:
                cell = measure_cell(n, max(1, round(n * f)), mode, reps)
                data["cells"].append(cell)
                print(f"N={n} window {cell['window']} {mode}: density {cell['density']:.3f}, "
                      f"ratio {ratio(cell).plain()}, auto takes {cell['pick']}",
                      file=sys.stderr, flush=True)
    H.finish_run(args, data, SECTION, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
