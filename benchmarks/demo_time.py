"""How long ``headwise demo`` takes on this machine: ``--quick`` and the full run without the
pretrained encoder, each as a user runs it (a fresh process, the console script).

    python benchmarks/demo_time.py                  # 3 runs each, writes demo:time in BENCHMARKS.md
    python benchmarks/demo_time.py --runs 1 --no-write --results /tmp/demo_time.jsonl

The two commands alternate (quick, full, quick, full ...) so that a change in the machine's
load hits both alike; the table gives the median wall-clock seconds with the fastest and
slowest run, the median CPU seconds (user + system of the process and its children) and
the largest peak RSS. Targets (the evaluation issue): ``--quick`` under 2 minutes, the full
run (``--no-pretrained``) about 6 minutes, on 2 cores. Each run writes into its own
temporary folder, removed after.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402
import _verdicts as V  # noqa: E402
from startup import headwise_command  # noqa: E402

SECTION = "demo:time"
RESULTS = HERE / "results" / "demo_time.jsonl"
#: command name -> (extra arguments, target in seconds, how the target reads)
COMMANDS = {
    "headwise demo --quick": (["--quick"], 120.0, "under 2 minutes"),
    "headwise demo --no-pretrained": (["--no-pretrained"], 6 * 60 * 1.1, "about 6 minutes "
                                      "(at most 6.6)"),
}


def run_once(extra: list[str]) -> dict[str, float]:
    """One demo run in a fresh process: wall and CPU seconds, peak RSS (MiB)."""
    out = Path(tempfile.mkdtemp(prefix="headwise-demo-time-"))
    try:
        return H.timed_process(headwise_command() + ["demo", "--out", str(out / "demo"),
                                                     *extra])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _verdict(walls: list[float], target: float) -> tuple[str, str]:
    """The mean wall time with its 95 % t-interval over the runs, judged against
    ``target`` (PASS when the whole interval is within it, FAIL when wholly above, within
    noise otherwise); one run is not judged."""
    iv = V.mean_interval(walls)
    if iv is None:
        return "not judged", f"{walls[0]:.1f} s, one run (an interval needs two)"
    return V.judge_at_most(iv, target), \
        f"mean {iv.mean:.1f} s [{iv.low:.1f}, {iv.high:.1f}] over {len(walls)} runs"


def _run_lines(data: dict[str, Any]) -> list[str]:
    """One record's lines: where, the verdicts and the numbers."""
    rows, verdicts = [], []
    for name, rs in data["results"].items():
        walls = [r["wall_s"] for r in rs]
        median = statistics.median(walls)
        rows.append([f"`{name}`", len(rs), f"{median:.1f}", f"{min(walls):.1f}-{max(walls):.1f}",
                     f"{statistics.median(r['cpu_s'] for r in rs):.1f}",
                     f"{max(r['peak_rss_mib'] for r in rs):.0f}"])
        verdicts.append([f"`{name}` {COMMANDS[name][2]}", *_verdict(walls,
                                                                  COMMANDS[name][1])])
    return [f"**{H.run_machine(data)}**: `{data['command']}` ({data['date']}; "
            f"{data['runs']} runs of each command, alternating, each in a fresh process "
            f"writing into its own temporary folder).", "",
            H.markdown_table(["target", "verdict", "measured"], verdicts, "lll"), "",
            H.markdown_table(["command", "runs", "median wall s", "range s", "median CPU s",
                              "peak RSS MiB (largest run)"], rows)]


def section(runs: list[dict[str, Any]]) -> str:
    """The section of the results file's records (each: ``results``, command -> its runs,
    ``runs``, ``command``, ``date``, ``provenance``), oldest first, each under its machine
    and commit (the machines differ between sessions), the machine line under the
    heading."""
    return H.per_run_section(["## How long `headwise demo` takes (CPU)", "",
             "The full run trains the TF-IDF floor, the BiLSTM and the from-scratch "
             "Transformer on the generated corpus and the compound models (the BiLSTM joint "
             "and the Transformer joint; `--no-pretrained` leaves out the pretrained joint) "
             "on the same corpus with a quarter compound questions, scores them on held-out "
             "phrasing and writes the head-analysis reports; `--quick` trains smaller models "
             "on a smaller corpus and skips the compound models. Until commit e5aaaf0 the "
             "compound models trained after the single-label ones; from it on, in a second "
             "process alongside them: its CPU seconds count both processes, its peak RSS is the "
             "larger process's peak (not their sum). From commit ebf88a2 the work is split "
             "by time: the second process trains the compound Transformer and writes both "
             "head analyses, the first trains the single-label models and then the compound "
             "BiLSTM (before, the second trained both compound models while the first "
             "waited). A verdict judges the mean wall time's 95 % "
             "t-interval over the runs: PASS when it lies wholly within the target, FAIL "
             "when wholly above, within noise otherwise."], runs,
        _run_lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--only", choices=sorted(COMMANDS), help="time one command only")
    H.add_run_args(p, RESULTS)
    args = p.parse_args(argv)
    names = [args.only] if args.only else list(COMMANDS)
    results: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    data = H.new_run(runs=args.runs, results=results)
    for i in range(args.runs):
        for name in names:
            r = run_once(COMMANDS[name][0])
            results[name].append(r)
            print(f"[{i + 1}/{args.runs}] {name}: {r['wall_s']:.1f} s", file=sys.stderr,
                  flush=True)
    H.finish_run(args, data, SECTION, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
