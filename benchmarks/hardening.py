"""The long hypothesis run, recorded: the gradient tests of every memory layout
(``tests/attention/test_grad_layouts.py``, ``tests/nn/test_grad_layouts_models.py``) under
hypothesis's ``long`` profile (``tests/conftest.py``: many more examples per property than
the suite's ``ci`` profile), in one process and one thread (``OMP_NUM_THREADS=1``), with no
per-test timeout.

They check the gradients of every attention backend (``attend`` with each backend and
``auto``, the sparse threshold lowered so that it dispatches to block-sparse too), linear
and LSH attention, ``MultiHeadAttention``, checkpointed encoder layers and a tiny
``EncoderClassifier``, for inputs in six memory layouts and upstream gradients in up to
twelve, every subset of q/k/v requiring grad, every mask kind and their combinations,
float64 / float32 / bfloat16, odd lengths, q_len != k_len and grouped-query heads, against
float64 math by FlashAttention's rule.

Per run (one record per invocation in ``benchmarks/results/hardening.jsonl``): the session's
hypothesis seed (``--hypothesis-seed`` replays it), each test's outcome and seconds
(pytest's JUnit XML), the examples each property ran, by outcome (hypothesis's statistics),
and the wall time. Target: no failing test and no failing example.

    python benchmarks/hardening.py                 # writes the hardening:hypothesis section
    python benchmarks/hardening.py --profile ci --no-write --results /tmp/h.jsonl  # a smoke run
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402

SECTION = "hardening:hypothesis"
RESULTS = HERE / "results" / "hardening.jsonl"
FILES = ("tests/attention/test_grad_layouts.py", "tests/nn/test_grad_layouts_models.py")
HEADING = "## Hardening: the long hypothesis run (gradients of every layout)"
#: what earlier runs of these tests found (each fixed, with a pinned example since)
FOUND = (
    "block-sparse backward crashed on a `.sum()` gradient (stride 0, in `as_strided`);",
    "block-sparse silently misread a dim-major q with batch = heads = 1 (output off by 1.06);",
    "tiled and block-sparse crashed on masks broadcast over queries (the encoder's padding "
    "mask);",
    "LSH lost 0.2 % in float32 on queries that see only themselves (the rounds' weights).")

_TEST = re.compile(r"^(\S+\.py::\S+):\s*$")
_COUNTS = re.compile(r"(\d+) passing, (\d+) failing, and (\d+) invalid")


def examples(output: str) -> dict[str, dict[str, int]]:
    """Per property test (``file::name``), the examples hypothesis ran in all its phases
    (explicit, reuse, generate, shrink), by outcome: ``{"passing", "failing", "invalid"}``,
    read from ``--hypothesis-show-statistics``'s report."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in output.splitlines():
        m = _TEST.match(line.strip())
        if m:
            current = m.group(1)
            out.setdefault(current, {"passing": 0, "failing": 0, "invalid": 0})
            continue
        m = _COUNTS.search(line)
        if m and current is not None:
            for key, n in zip(("passing", "failing", "invalid"), m.groups(), strict=True):
                out[current][key] += int(n)
    return out


def outcomes(junit: Path) -> list[dict[str, Any]]:
    """Each test case of a JUnit XML report: ``test`` (``file::name``), ``outcome``
    (passed, failed, error or skipped) and ``seconds``."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        outcome = ("failed" if "failure" in kinds else "error" if "error" in kinds
                   else "skipped" if "skipped" in kinds else "passed")
        path = case.get("classname", "").replace(".", "/")
        out.append({"test": f"{path}.py::{case.get('name')}", "outcome": outcome,
                    "seconds": round(float(case.get("time", 0.0)), 2)})
    return out


def run(profile: str, seed: int) -> dict[str, Any]:
    """One run of :data:`FILES` under ``profile`` with hypothesis seed ``seed``."""
    with tempfile.TemporaryDirectory(prefix="headwise-hardening-") as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *FILES,
               f"--hypothesis-profile={profile}", f"--hypothesis-seed={seed}",
               "--hypothesis-show-statistics", f"--junitxml={junit}", "-o", "timeout=0"]
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=HERE.parent, capture_output=True, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        wall = time.perf_counter() - start
        if not junit.is_file():
            raise SystemExit(f"pytest wrote no report (exit {done.returncode}):\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        tests = outcomes(junit)
    counts = examples(done.stdout)
    for t in tests:
        t["examples"] = counts.get(t["test"])
    return {"profile": profile, "hypothesis_seed": seed, "exit_code": done.returncode,
            "wall_s": round(wall, 1), "tests": tests,
            "summary": (done.stdout.strip().splitlines() or [""])[-1]}


def verdict(r: dict[str, Any]) -> tuple[str, str]:
    """PASS when no test failed or errored and no example failed, else FAIL."""
    bad = [t for t in r["tests"] if t["outcome"] in ("failed", "error")]
    failing = sum((t.get("examples") or {}).get("failing", 0) for t in r["tests"])
    passing = sum((t.get("examples") or {}).get("passing", 0) for t in r["tests"])
    ok = not bad and not failing and r["exit_code"] == 0
    return ("PASS" if ok else "FAIL",
            f"{passing:,} examples passed, {failing} failed; {len(r['tests'])} tests, "
            f"{len(bad)} failed; {r['wall_s'] / 60:.1f} min")


def _run_lines(data: dict[str, Any]) -> list[str]:
    r = data["run"]
    judged, measured = verdict(r)
    rows = []
    for t in r["tests"]:
        ex = t.get("examples")
        rows.append([f"`{t['test']}`", t["outcome"],
                     f"{ex['passing']:,}" if ex else "-", str(ex["failing"]) if ex else "-",
                     str(ex["invalid"]) if ex else "-", f"{t['seconds']:.1f}"])
    return [f"**{H.run_machine(data)}**: `{data['command']}` ({data['date']}; profile "
            f"`{r['profile']}`, hypothesis seed {r['hypothesis_seed']}: replay with "
            f"`--hypothesis-seed={r['hypothesis_seed']}`).", "",
            H.markdown_table(["target", "verdict", "measured"],
                             [["no failing test and no failing example", judged, measured]],
                             "lll"), "",
            H.markdown_table(["test", "outcome", "examples passed", "failed", "invalid",
                              "seconds"], rows, "llrrrr")]


def section(records: list[dict[str, Any]]) -> str:
    """The section: every run (one record each), oldest first, under its machine."""
    return H.per_run_section([
        HEADING, "",
        f"`OMP_NUM_THREADS=1 python -m pytest {' '.join(FILES)} --hypothesis-profile=long` "
        "(run and recorded by `python benchmarks/hardening.py`): the gradients of every "
        "attention backend (`attend` with each backend and `auto`, the sparse threshold "
        "lowered so that it dispatches to block-sparse too), linear and LSH attention, "
        "`MultiHeadAttention`, checkpointed encoder layers and a tiny `EncoderClassifier`, "
        "for inputs in six memory layouts and upstream gradients in up to twelve, every "
        "subset of q/k/v requiring grad, every mask kind and their combinations, float64 / "
        "float32 / bfloat16, odd lengths, q_len != k_len and grouped-query heads, against "
        "float64 math by FlashAttention's rule. The suite's own `ci` profile runs a few "
        "fresh examples of each property on every run, plus a pinned example of each bug "
        "these tests found earlier:", "",
        *[f"- {f}" for f in FOUND]], records, _run_lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--profile", default="long", help="the hypothesis profile (default long)")
    p.add_argument("--seed", type=int, help="the hypothesis seed (default: drawn, recorded)")
    H.add_run_args(p, RESULTS)
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2 ** 31)
    data = H.new_run(1)
    data["run"] = run(args.profile, seed)
    judged, measured = verdict(data["run"])
    print(f"{judged}: {measured}", file=sys.stderr)
    H.finish_run(args, data, SECTION, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
