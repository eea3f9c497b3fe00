"""Reusable machinery of the scripts in ``benchmarks/``.

* one process per configuration (:func:`run_grid`, :func:`run_worker`, :func:`in_worker`):
  each prints one JSON line, so its peak memory is its own, and a timeout, a kill by the
  OOM killer or a crash becomes a record instead of ending the run;
* timing (:func:`measure`, :func:`compare`): warm-up, adaptive repeats, medians and
  quartiles (:func:`summarize`); peak memory (:class:`PeakMemory`) on CPU and CUDA;
* provenance (:func:`collect_provenance`): the commit, the CPU and its instruction sets, the
  library versions and the load of every new record; :func:`machine_line` renders it under a
  section's heading, :func:`unmixed` keeps a row from mixing two commits or machines and
  :func:`stale_files` says which benchmarked modules changed since a record's commit;
* reporting: machine facts, markdown tables, verdicts, plots (:func:`plot_panels`) and
  :func:`write_section`, which replaces or appends a marked section of its area's page
  (:data:`PAGES`: ``docs/benchmarks/<area>.md``) and rebuilds the summary ``BENCHMARKS.md``
  (:func:`summary`). ``benchmarks/render.py`` re-renders all of them from the records alone.

The workers import this module too, so torch is imported only where it is needed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import gc
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

MIB = 2.0**20
GIB = 2.0**30


# --- running one configuration per process ------------------------------------------------
def recipe_with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A recipe given by part (``{"architecture": {...}, "train": {...}, ...}``, as a
    ``--config`` file holds it) with some parts' fields changed: a part's changes (a dict)
    are merged into that part, any other key is set as it is."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def run_worker(script: Path, spec: dict[str, Any], timeout_s: float,
               env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``python script --worker '<spec json>'``; return the last JSON line it prints,
    or ``{"status": "timeout" | "OOM" | "error", "detail": ...}`` when it ran past
    ``timeout_s`` (its process group is killed), was killed by SIGKILL (taken as the OOM
    killer) or printed no JSON. ``wall_s`` is always set."""
    cmd = [sys.executable, str(script), "--worker", json.dumps(spec)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"status": "timeout", "detail": f"over the {timeout_s:.0f} s budget",
                "wall_s": time.perf_counter() - start}
    wall = time.perf_counter() - start
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if proc.returncode == 0 and lines:
        return {**json.loads(lines[-1]), "wall_s": wall}
    if proc.returncode == -signal.SIGKILL:
        return {"status": "OOM", "detail": "killed by SIGKILL (out of memory)", "wall_s": wall}
    tail = (err.strip().splitlines() or ["no output"])[-1][:200]
    return {"status": "error", "detail": f"exit {proc.returncode}: {tail}", "wall_s": wall}


def is_oom(exc: BaseException) -> bool:
    """Whether an exception is an allocation failure (CPU or CUDA)."""
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and (
        "out of memory" in text or "can't allocate memory" in text))


def limit_memory(gib: float) -> None:
    """Cap this process's private writable memory (RLIMIT_DATA, counted when an allocation
    is requested, before a page is touched): an allocation beyond it fails with an error
    recorded as OOM instead of driving a swapless machine into its OOM killer. Should the
    machine run short anyway (other processes), this process is made the OOM killer's first
    victim (``oom_score_adj`` 1000)."""
    cap = int(gib * GIB)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")


# --- timing --------------------------------------------------------------------------------
def warm_up(fn: Callable[[], Any], sync: Callable[[], None], warmup_s: float = 0.3
            ) -> tuple[Any, dict[str, float]]:
    """Call ``fn`` once (compilation, lazy initialisation, caches), then again while the
    warm-up has taken less than ``warmup_s``, at most 5 more times. Returns the first result
    and ``{"first_call_s", "warmup_s", "calls"}`` (the first call holds any compilation)."""
    sync()
    t0 = time.perf_counter()
    first = fn()
    sync()
    first_s, calls = time.perf_counter() - t0, 1
    for _ in range(5):
        if time.perf_counter() - t0 >= warmup_s:
            break
        fn()
        sync()
        calls += 1
    return first, {"first_call_s": first_s, "warmup_s": time.perf_counter() - t0, "calls": calls}


def measure(fn: Callable[[], Any], sync: Callable[[], None], memory: PeakMemory, *,
            min_repeats: int = 3, max_repeats: int = 20, target_s: float = 2.0,
            warmup_s: float = 0.3) -> tuple[list[float], float, dict[str, float]]:
    """``(seconds per repeat, peak MiB of one call, warm-up facts)`` of ``fn``:
    :func:`warm_up`, then ``min_repeats`` to ``max_repeats`` repeats until ``target_s`` is
    spent; the first one also records the peak memory."""
    _, warm = warm_up(fn, sync, warmup_s)
    times: list[float] = []
    with memory:
        times.append(timed(fn, sync))
    while len(times) < max_repeats and (len(times) < min_repeats or sum(times) < target_s):
        times.append(timed(fn, sync))
    return times, memory.peak_mib, warm


def timed(fn: Callable[[], Any], sync: Callable[[], None]) -> float:
    """Seconds one call of ``fn`` takes, with the device synchronised on both sides."""
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def compare(fns: dict[str, Callable[[], Any]], sync: Callable[[], None], **reps: Any
            ) -> dict[str, Any]:
    """Warm ``fns`` up, then time them in rounds, the one to go first rotating each round,
    so that drift on a shared machine hits them alike and per-round ratios are robust.
    Rounds: at least ``min_repeats``, at most ``max_repeats``, until each took ``target_s``.
    A round times one call of each, or with ``calls=N`` the median of N calls in a row
    (sub-millisecond operations, whose single calls are mostly timer and scheduler noise).

    Returns:
        Each one's summary (ms) under its name, the per-round ratios of the first to each
        other one under "first/other", each one's :func:`warm_up` facts under "warmup" and
        under "results" what each returned first.
    """
    names = list(fns)
    results, warm = zip(*(warm_up(fns[k], sync) for k in names), strict=True)
    times: dict[str, list[float]] = {k: [] for k in names}
    while len(times[names[0]]) < reps.get("max_repeats", 20) and (
            len(times[names[0]]) < reps.get("min_repeats", 3)
            or sum(map(sum, times.values())) < reps.get("target_s", 2.0) * len(names)):
        i = len(times[names[0]]) % len(names)
        for k in names[i:] + names[:i]:
            times[k].append(statistics.median(timed(fns[k], sync)
                                              for _ in range(reps.get("calls", 1))))
    out: dict[str, Any] = {k: summarize(t, 1e3) for k, t in times.items()}
    out.update({f"{names[0]}/{k}": summarize([a / b for a, b in zip(times[names[0]], times[k],
                                                                      strict=True)])
                for k in names[1:]})
    # every round's times (ms), interleaved: a ratio's interval (benchmarks/_verdicts.py)
    out["rounds_ms"] = {k: [1e3 * t for t in v] for k, v in times.items()}
    return {**out, "warmup": dict(zip(names, warm, strict=True)), "results": list(results)}


def in_worker(spec: dict[str, Any], body: Callable[[str, Callable[[], None]], dict[str, Any]]
              ) -> dict[str, Any]:
    """Set this worker up from ``spec`` (``device``, torch ``threads``, on CPU the
    ``mem_limit_gib`` cap, 0: none) and return ``body(device, sync)``; an exception becomes
    ``{"status": "OOM" | "error", "detail": ...}``; an allocation refused under the cap also
    gives ``cap_gib`` and the process's resident high-water mark ``vmhwm_mib`` at that point
    (measured; the inputs included)."""
    import torch

    dev, cap = spec["device"], spec.get("mem_limit_gib") or 0
    if dev == "cuda" and not torch.cuda.is_available():
        return {"status": "error", "detail": "CUDA requested but torch.cuda.is_available() "
                "is False"}
    if dev == "cpu" and cap:
        limit_memory(cap)
    torch.set_num_threads(spec["threads"])
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    try:
        return body(dev, sync)
    except Exception as e:  # noqa: BLE001 - every failure becomes a record
        text = f"{type(e).__name__}: {e}"
        if not is_oom(e) or dev != "cpu" or not cap:
            return {"status": "OOM" if is_oom(e) else "error", "detail": text[:300]}
        return {"status": "OOM", "cap_gib": cap, "vmhwm_mib": _proc_status_kib("VmHWM") / 1024,
                "detail": f"failed to allocate under the {cap:g} GiB cap: {text}"[:400]}


def summarize(values: Sequence[float], scale: float = 1.0) -> dict[str, float | int]:
    """Median, quartiles, min and max of ``values`` times ``scale``, and their count."""
    v = sorted(x * scale for x in values)
    q1, q3 = (statistics.quantiles(v, n=4)[0::2] if len(v) > 1 else (v[0], v[0]))
    return {"median": statistics.median(v), "q1": q1, "q3": q3, "min": v[0], "max": v[-1],
            "n": len(v)}


# --- peak memory ---------------------------------------------------------------------------
def _proc_status_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


class PeakMemory:
    """Peak memory (``peak_mib``) of the code inside ``with`` above what was held on entry.

    CPU (Linux): after ``gc`` and ``malloc_trim``, VmRSS is the baseline and VmHWM is reset
    through ``/proc/self/clear_refs``; the peak is VmHWM minus the baseline, page resolution.
    CUDA: ``max_memory_allocated`` minus ``memory_allocated`` at entry (tensors only).
    """

    def __init__(self, device: str) -> None:
        self.device, self.peak_mib, self._base = device, float("nan"), 0

    def __enter__(self) -> PeakMemory:
        gc.collect()
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._base = torch.cuda.memory_allocated()
        else:
            with contextlib.suppress(OSError):  # not glibc: the baseline may hold free heap
                ctypes.CDLL("libc.so.6").malloc_trim(0)
            self._base = _proc_status_kib("VmRSS") * 1024
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
        else:
            peak = _proc_status_kib("VmHWM") * 1024
        self.peak_mib = (peak - self._base) / MIB


def run_grid(script: Path, items: list[dict[str, Any]], timeout_s: float,
             env: dict[str, str] | None = None, desc: str = "bench") -> list[dict[str, Any]]:
    """Run each item's ``spec`` (popped) through :func:`run_worker` and merge the result in;
    items without one (decided without running) pass through. Progress goes to stderr."""
    from tqdm import tqdm

    bar = tqdm(items, desc=desc, file=sys.stderr, unit="cfg")
    for it in bar:
        if "spec" in it:
            spec = it.pop("spec")
            bar.set_postfix_str(" ".join(str(v) for k, v in it.items()
                                         if k != "kind" and isinstance(v, str | int)))
            it.update(run_worker(script, spec, timeout_s, env))
    return items


def worker_or_render(args: argparse.Namespace, worker: Callable[[dict[str, Any]], Any],
                     render: Callable[[dict[str, Any]], None], publishes: bool) -> bool:
    """The two short paths of every script's ``main``: ``--worker SPEC`` runs one
    configuration and prints its JSON line; ``--render RESULTS`` redoes the report from a
    results file, refusing to publish ``--quick`` numbers (``publishes``: the report would
    go into the project's BENCHMARKS.md). True when one of them ran."""
    if args.worker is not None:
        print(json.dumps(worker(json.loads(args.worker))), flush=True)
        return True
    if args.render is None:
        return False
    data = json.loads(args.render.read_text())
    if data["meta"]["settings"].get("quick") and publishes:
        sys.exit("--render: these are --quick numbers, not published; add --no-write")
    render(data)
    return True


def add_record_args(p: argparse.ArgumentParser, results: Path, md: Path, *,
                    timeout_s: float, unit: str = "run") -> None:
    """The options every script that records runs in a JSON-lines file shares:
    ``--results``, ``--md``, ``--no-write``, ``--render``, ``--rerun``, ``--threads``,
    ``--timeout`` (seconds per ``unit``) and the hidden ``--worker``."""
    p.add_argument("--results", type=Path, default=results, help="JSON-lines results file")
    p.add_argument("--md", type=Path, default=md,
                   help="the summary markdown file; the section goes into its page under "
                        "docs/benchmarks/ beside it")
    p.add_argument("--no-write", action="store_true", help="print the section instead")
    p.add_argument("--render", action="store_true", help="only rebuild the section")
    p.add_argument("--rerun", action="store_true", help=f"measure {unit}s already in the file")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--timeout", type=float, default=timeout_s, help=f"seconds per {unit}")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)


def divert_smoke_runs(args: argparse.Namespace, results: Path) -> None:
    """A ``--quick`` smoke run that would write into the script's real results file
    (``results``, the default) writes into a temporary file instead, and prints its section
    instead of writing BENCHMARKS.md: smoke runs never mix into the records."""
    if args.quick and args.results == results:
        import tempfile

        args.results = Path(tempfile.gettempdir()) / f"{results.stem}_quick.jsonl"
        args.no_write = True


def answered_as_worker(args: argparse.Namespace, worker: Callable[[dict[str, Any]], Any]
                       ) -> bool:
    """When this process was started as a worker (the hidden ``--worker SPEC`` of
    :func:`add_record_args`): run ``worker`` on the JSON spec, print its record as one line
    of JSON for the parent to read, and say True; else False."""
    if not args.worker:
        return False
    print(json.dumps(worker(json.loads(args.worker))), flush=True)
    return True


def append_record(path: Path, rec: dict[str, Any], start: float, **fields: Any
                  ) -> dict[str, Any]:
    """Append one run's record to a JSON-lines results file, with ``fields``, the command
    line, the run's start (``start``: ``time.time()``) as a UTC date and its ``provenance``
    (from ``fields``, collected before the run, else collected now); the record back."""
    prov = fields.pop("provenance", None) or collect_provenance(fields.get("threads"))
    rec.update(**fields, command=command_line(),
               date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(start)),
               provenance=finish_provenance(prov))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return rec


def record_run(script: Path, spec: dict[str, Any], path: Path, timeout_s: float,
               **fields: Any) -> dict[str, Any]:
    """Run one configuration in its own process (:func:`run_worker`) and append its record
    (:func:`append_record`, with ``fields``) to the results file ``path``."""
    start, prov = time.time(), collect_provenance(spec.get("threads"))
    return append_record(path, run_worker(script, spec, timeout_s), start, provenance=prov,
                         **fields)


def done_runs(path: Path, key: Sequence[str]) -> dict[tuple, dict[str, Any]]:
    """The records of a JSON-lines results file by their ``key`` fields (the last record of
    a key wins: a re-run replaces the earlier one)."""
    runs: dict[tuple, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                runs[tuple(r[k] for k in key)] = r
    return runs


def timed_process(argv: Sequence[str]) -> dict[str, float]:
    """Run ``argv`` in a fresh process (output discarded, progress bars off) and measure
    it: ``wall_s``, ``cpu_s`` (user + system of that process and its children) and
    ``peak_rss_mib`` (its own largest resident set).

    Raises:
        subprocess.CalledProcessError: the command exited non-zero.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "TQDM_DISABLE": "1"})
    _, status, usage = os.wait4(proc.pid, 0)  # this child's usage, not every child's peak
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise subprocess.CalledProcessError(code, proc.args)
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": usage.ru_maxrss / 1024}


# --- provenance ----------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parent.parent
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni",
             "amx_bf16", "amx_int8", "amx_tile")
"""The instruction sets that change what the CPU kernels run (``/proc/cpuinfo`` flags)."""
LIBRARIES = ("torch", "numpy", "onnxruntime", "transformers")


def _git(*args: str, cwd: Path = ROOT) -> str | None:
    """``git args`` in ``cwd``: its stripped output, None when git or the repository is
    unavailable or the command fails."""
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _cpu() -> tuple[str, list[str]]:
    """The CPU's model name and which of :data:`CPU_FLAGS` it has."""
    model, flags = None, set()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model is None:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    return model or platform.processor() or "unknown CPU", [x for x in CPU_FLAGS if x in flags]


#: what benchmark runs write, left out of a record's ``dirty`` check
RESULT_PATHS = ("benchmarks/results", "BENCHMARKS.md", "docs/benchmarks")


def collect_provenance(threads: int | None = None) -> dict[str, Any]:
    """What a record must say of where and how it was measured: the git ``commit`` and
    whether tracked files other than :data:`RESULT_PATHS` differed from it (``dirty``; both
    None outside a repository), the
    ``cpu`` model, its ``cpu_flags`` (of :data:`CPU_FLAGS`), logical ``cores``, the torch
    ``threads`` of the measured code (None when not given), the ``versions`` of python and
    of :data:`LIBRARIES` that are installed (read from their metadata, none imported), the
    1-minute ``loadavg_before`` and the UTC ``date``. :func:`finish_provenance` adds the
    load after."""
    commit = _git("rev-parse", "HEAD")
    # what the benchmarks themselves write (records, pages) does not make the code dirty:
    # otherwise a script's second run would differ from its first
    dirty = None if commit is None else bool(_git(
        "status", "--porcelain", "--untracked-files=no", "--", ".",
        *(f":(exclude){p}" for p in RESULT_PATHS)))
    cpu, flags = _cpu()
    versions = {"python": platform.python_version()}
    for lib in LIBRARIES:
        if importlib.util.find_spec(lib) is not None:
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                versions[lib] = importlib.metadata.version(lib)
    now = datetime.datetime.now(datetime.timezone.utc)
    return {"commit": commit, "dirty": dirty, "cpu": cpu, "cpu_flags": flags,
            "cores": os.cpu_count(), "threads": threads, "versions": versions,
            "loadavg_before": round(os.getloadavg()[0], 2), "date": f"{now:%Y-%m-%d %H:%M} UTC"}


def finish_provenance(prov: dict[str, Any]) -> dict[str, Any]:
    """``prov`` (from :func:`collect_provenance`) with the 1-minute ``loadavg_after`` set,
    unless it already is."""
    prov.setdefault("loadavg_after", round(os.getloadavg()[0], 2))
    return prov


def fingerprint(prov: dict[str, Any] | None) -> tuple:
    """What two records must share to stand in one row: commit, dirty, CPU and its flags."""
    if not prov:
        return ()
    return (prov.get("commit"), prov.get("dirty"), prov.get("cpu"),
            tuple(prov.get("cpu_flags", ())))


def unmixed(records: Sequence[dict[str, Any]], row: Sequence[str]
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split ``records`` so that no row (the records sharing the ``row`` fields) mixes two
    commits or machines: a row whose records differ in :func:`fingerprint` keeps those of
    its newest record's (by ``provenance.date``, then ``date``), the others are left out.
    Returns (kept, left out), each in the input order."""
    newest: dict[tuple, tuple] = {}
    for r in records:
        k = tuple(r.get(f) for f in row)
        when = ((r.get("provenance") or {}).get("date", ""), r.get("date", ""))
        if k not in newest or when >= newest[k][0]:
            newest[k] = (when, fingerprint(r.get("provenance")))
    kept, out = [], []
    for r in records:
        same = fingerprint(r.get("provenance")) == newest[tuple(r.get(f) for f in row)][1]
        (kept if same else out).append(r)
    return kept, out


def stale_files(commit: str | None, modules: Sequence[str], cwd: Path = ROOT
                ) -> list[str] | None:
    """The files among ``modules`` (paths from the repository root) changed between
    ``commit`` and HEAD (``git diff --name-only COMMIT..HEAD -- modules``, committed
    changes only); None when that cannot be told: no commit, no git, or the commit is not
    in this clone (a shallow CI clone)."""
    if not commit or not modules:
        return None
    out = _git("diff", "--name-only", f"{commit}..HEAD", "--", *modules, cwd=cwd)
    return None if out is None else [x for x in out.splitlines() if x]


def machine_line(records: Sequence[dict[str, Any]], left_out: int = 0) -> str:
    """The line under a section's heading: the machine(s), commit(s) and dates of the
    ``provenance`` of ``records`` (one group per distinct :func:`fingerprint`, in the
    records' order), "not recorded" for records without one; ``left_out`` records of
    another commit or machine were kept out of their rows (:func:`unmixed`). The text before
    " - " is the short form the summary quotes."""
    groups: dict[tuple, list[dict[str, Any] | None]] = {}
    for r in records:
        groups.setdefault(fingerprint(r.get("provenance")), []).append(r.get("provenance"))
    parts, short = [], []
    for provs in groups.values():
        p = provs[0]
        n = f" ({len(provs)} of {len(records)} records)" if len(groups) > 1 else ""
        if not p:
            parts.append(f"provenance not recorded{n}")
            short.append("not recorded")
            continue
        commit = (f"commit {p['commit'][:10]}{' with uncommitted changes' if p['dirty'] else ''}"
                  if p.get("commit") else "commit unknown")
        flags = ", ".join(p.get("cpu_flags") or []) or "none of " + "/".join(CPU_FLAGS)
        dates = sorted(x["date"] for x in provs if x and x.get("date"))
        when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
        loads = [f"{x['loadavg_before']:.2f}->{x['loadavg_after']:.2f}" for x in provs
                 if x.get("loadavg_after") is not None]
        libs = ", ".join(f"{k} {v}" for k, v in p.get("versions", {}).items())
        threads = f", {p['threads']} torch threads" if p.get("threads") else ""
        parts.append(f"{p['cpu']} ({flags}), {p['cores']} logical CPUs{threads}; {commit}; "
                     f"{when}; {libs}" + (f"; 1-minute load {', '.join(loads[:4])}"
                                          f"{' ...' if len(loads) > 4 else ''}" if loads else "")
                     + n)
        short.append(f"{p['cpu']}, {commit.replace(' with uncommitted changes', '+dirty')}")
    if not parts:
        parts, short = ["no records"], ["no records"]
    line = f"*Measured on: {' / '.join(short)}* - {'; and '.join(parts)}."
    if left_out:
        line += (f" {left_out} older records of another commit or machine are left out of "
                 f"their rows (re-run them).")
    return line


def with_machine_line(body: str, records: Sequence[dict[str, Any]], left_out: int = 0) -> str:
    """``body`` with :func:`machine_line` put under its first heading (at the top when it
    has none)."""
    lines = body.strip("\n").split("\n")
    at = next((i + 1 for i, ln in enumerate(lines) if ln.startswith("#")), 0)
    extra = ["", machine_line(records, left_out)] if at else [machine_line(records, left_out), ""]
    return "\n".join(lines[:at] + extra + lines[at:])


def merge_refusal(results: Path) -> str | None:
    """Why this process may not merge re-measured records into the results file
    ``results`` (``{"meta": ...}``): its records were measured on another commit or machine,
    or predate provenance, so that a row would mix them; None when it may."""
    base = json.loads(results.read_text(encoding="utf-8"))["meta"].get("provenance")
    if not base:
        return (f"{results} predates provenance (no commit or machine recorded): re-run the "
                f"whole benchmark instead of merging into it")
    if fingerprint(base) != fingerprint(here := collect_provenance()):
        return (f"{results} was measured at commit {base.get('commit')} on {base.get('cpu')}, "
                f"this is commit {here['commit']} on {here['cpu']} (or the tree is dirty "
                f"differently): re-run the whole benchmark instead of merging into it")
    return None


def run_machine(record: dict[str, Any]) -> str:
    """How a section names the machine and commit of one record kept per run (records of
    several machines side by side): ``CPU (flags), commit C``, or that it was not recorded."""
    prov = record.get("provenance") or {}
    if not prov:
        return "a machine not recorded"
    flags = ", ".join(prov.get("cpu_flags") or []) or "none of " + "/".join(CPU_FLAGS)
    return f"{prov['cpu']} ({flags}), commit {(prov.get('commit') or 'unknown')[:10]}"


def per_run_section(intro: Sequence[str], records: Sequence[dict[str, Any]],
                    run_lines: Callable[[dict[str, Any]], list[str]]) -> str:
    """A section that shows every record of its results file (one per run, oldest first,
    each from :func:`run_machine`'s machine): ``intro`` lines, then ``run_lines`` of each
    record, the machine line under the heading."""
    lines = list(intro)
    for r in records:
        lines += ["", *run_lines(r)]
    return with_machine_line("\n".join(lines), records)


def add_run(path: Path, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Append ``record`` to the JSON-lines file ``path`` (a run is never lost: a smoke run
    names another file with ``--results``); return the file's records, ``record`` last."""
    records = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines()
               if ln.strip()] if path.is_file() else []
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    return [*records, record]


def add_run_args(p: argparse.ArgumentParser, results: Path) -> None:
    """The options of a script that appends one record per invocation (:func:`add_run`):
    ``--md``, ``--results`` (default ``results``) and ``--no-write``."""
    p.add_argument("--md", type=Path, default=ROOT / "BENCHMARKS.md",
                   help="the summary markdown file; the section goes into its page under "
                        "docs/benchmarks/ beside it")
    p.add_argument("--results", type=Path, default=results,
                   help="JSON-lines file the invocation's record is appended to")
    p.add_argument("--no-write", action="store_true",
                   help="print the section instead of writing it into the markdown")


def new_run(threads: int | None = None, **fields: Any) -> dict[str, Any]:
    """The start of an invocation's record: ``command``, ``date`` and ``provenance``
    (:func:`collect_provenance` with ``threads``, now), then ``fields``."""
    return {"command": command_line(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "provenance": collect_provenance(threads), **fields}


def finish_run(args: argparse.Namespace, data: dict[str, Any], key: str,
               section: Callable[[list[dict[str, Any]]], str]) -> None:
    """End an invocation started with :func:`new_run`: complete its provenance, append it to
    ``args.results`` and write (``--no-write``: print) section ``key``, ``section`` of every
    record of the file."""
    finish_provenance(data["provenance"])
    print_or_write(args.md, key, section(add_run(args.results, data)),
                   no_write=args.no_write)


def render_records(render: Callable[[list[dict[str, Any]]], str],
                   records: Sequence[dict[str, Any]], row: Sequence[str]) -> str:
    """A section from per-run records: ``render`` of those :func:`unmixed` keeps by the
    ``row`` fields, with :func:`machine_line` under its heading (the left-out ones
    counted). What a script writes and what ``benchmarks/render.py`` renders."""
    kept, out = unmixed(records, row)
    return with_machine_line(render(kept), kept, len(out))


def commits_of(body: str) -> list[str]:
    """The (abbreviated) commits a section's :func:`machine_line` names."""
    m = re.search(r"^\*Measured on: .*$", body, re.M)
    return list(dict.fromkeys(re.findall(r"commit ([0-9a-f]{7,40})", m.group(0)))) if m else []


# --- pages -----------------------------------------------------------------------------------
AREAS = {
    "attention": "Attention kernels, long inputs and decoding",
    "training": "Training throughput, head pruning and hardening",
    "intent": "Intent recognition: quality, out-of-scope detection, distillation",
    "compound": "Compound intents and slots",
    "serving": "Serving: latency, start-up, batch prediction, Ray, int8 export",
    "inspect": "Head analysis",
    "translate": "Translation",
}
"""Each area's page (``docs/benchmarks/<area>.md``) and its title."""
PAGES = {
    "attention:cpu": "attention", "attention:cuda": "attention",
    "long_attention:cpu": "attention", "decode:cpu": "attention",
    "sparse_dispatch:cpu": "attention",
    "train_throughput:cpu": "training", "pruning:cpu": "training",
    "hardening:hypothesis": "training", "cpu_finetune:cpu": "training",
    "bf16_accuracy:cpu": "training",
    "train_estimate:cpu": "training", "cic_train:cpu": "training",
    "intent:cpu": "intent", "intent:pretrained-footprint": "intent",
    "e5_fidelity:cpu": "intent", "demo:heldout": "intent", "demo:transformer": "intent",
    "transformer_default:cpu": "intent", "demo:ood": "intent",
    "demo:time": "intent", "oos:cpu": "intent", "blend": "intent", "distill:cpu": "intent",
    "doctor:cpu": "intent", "warm-start:cpu": "intent", "demo:long_text": "intent",
    "compound:cpu": "compound",
    "serve:cpu": "serving", "startup:cpu": "serving", "serve-access:cpu": "serving",
    "batch_predict:cpu": "serving", "ray-serve:cpu": "serving", "int8:choice": "serving",
    "one_path:cpu": "serving", "walkthrough": "serving", "playground:cpu": "serving",
    "inspect_demo:cpu": "inspect", "explain_faithfulness:cpu": "inspect",
    "translate:cpu": "translate",
}
"""Section name -> area: the one place that says which page a section lives on (in this
order on the page)."""
PAGES_DIR = Path("docs") / "benchmarks"


def page_path(md: Path, key: str) -> Path:
    """The page of section ``key`` for the summary file ``md``: ``docs/benchmarks/<area>.md``
    beside it (a section of no area: ``md`` itself)."""
    return md.parent / PAGES_DIR / f"{PAGES[key]}.md" if key in PAGES else md


def page_dir(md: Path) -> Path:
    """The folder of the pages of the summary ``md`` (what image links are relative to)."""
    return md.parent / PAGES_DIR


def _page_head(area: str) -> str:
    return (f"# Benchmarks: {AREAS[area]}\n\nGenerated from the records in `benchmarks/results/` "
            f"by `python benchmarks/render.py` (each benchmark script writes its section here "
            f"too); the summary of every area is [BENCHMARKS.md](../../BENCHMARKS.md). Each "
            f"section says under its heading the machine and commit its records were measured "
            f"on.\n")


def anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.lstrip("#").strip().lower())
    return text.replace(" ", "-")


def sections_of(text: str) -> dict[str, str]:
    """The marked sections of a markdown text: name -> body (without the markers)."""
    return {m.group(1): m.group(2).strip("\n") for m in re.finditer(
        r"<!-- ([\w:.\-]+):begin -->\n(.*?)\n<!-- \1:end -->", text, re.S)}


HEADLINES = {
    "intent:pretrained-footprint": "int8 changes accuracy by",
    "blend": "3 seeds: mean macro-F1",
    "batch_predict:cpu": "**One more machine**",
}
"""Sections whose summary line is the sentence of their text holding this phrase (the
others: :func:`headline`'s verdicts or bold line)."""


#: what a subsection's heading says when it holds an earlier measurement kept for the
#: record (a grid the section has moved on from): its verdicts are not the section's
EARLIER_MARK = "(an earlier "


def current_lines(body: str) -> list[str]:
    """The lines of a section without its subsections marked :data:`EARLIER_MARK` (each up
    to the next heading of its level or higher)."""
    out, skip_level = [], 0
    for line in body.splitlines():
        level = len(line) - len(line.lstrip("#")) if line.startswith("#") else 0
        if level and skip_level and level <= skip_level:
            skip_level = 0
        if level and not skip_level and EARLIER_MARK in line:
            skip_level = level
        if not skip_level:
            out.append(line)
    return out


def headline(body: str, key: str = "", width: int = 70) -> str:
    """A section's line in the summary: the sentence holding its :data:`HEADLINES` phrase;
    else the tally of its targets' verdicts (the rows of its "| target | verdict | ... |"
    tables, outside subsections of earlier measurements: :func:`current_lines`) with the
    first targets it fails; else its bold headline (a whole line in bold); else "-"."""
    if key in HEADLINES:
        for line in body.splitlines():
            if HEADLINES[key] in line:
                at = line.index(HEADLINES[key])
                begin = max((m.end() for m in re.finditer(r"[.)] (?=[A-Z*])", line[:at])),
                            default=0)
                end = re.search(r"[.)](?= [A-Z]|$)", line[at:])
                text = line[begin:at + end.end() if end else len(line)]
                return text if len(text) <= 3 * width else text[:3 * width - 3] + "..."
    # a verdict is a table row's second cell, or its last (a targets table: target |
    # model | measured | verdict)
    rows = []
    for line in current_lines(body):
        cells = [c.strip() for c in line.strip().strip("|").split("|")] \
            if line.startswith("| ") else []
        for cell in (cells[1:2] + cells[-1:]) if len(cells) > 1 else []:
            verdict = re.match(r"(PASS \(incomplete\)|PASS|FAIL|NOT MEASURED|NOT JUDGED|"
                               r"within noise|BETTER|WORSE|faster|slower)\b", cell)
            if verdict:
                rows.append((cells[0], verdict.group(1)))
                break
    if rows:
        verdicts = [v for _, v in rows]
        text = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts))
        fails = [t.strip() for t, v in rows if v == "FAIL"]
        short = [t if len(t) <= width else t[:width - 3].rstrip() + "..." for t in fails[:2]]
        more = f"; and {len(fails) - 2} more" if len(fails) > 2 else ""
        return text + (f"; failed: {'; '.join(short)}{more}" if short else "")
    bold = re.search(r"^\*\*([^*]+)\*\*$", body, re.M)
    return bold.group(1) if bold else "-"


def summary(bodies: dict[str, str]) -> str:
    """The text of ``BENCHMARKS.md``: per area, a table of its sections (``bodies``: name ->
    body as on the page) with the machine they were measured on and its :func:`headline`,
    each linking to its page."""
    out = ["# Benchmarks", "",
           "A summary, generated with the pages from the records in `benchmarks/results/` by "
           "`python benchmarks/render.py` (no measurement; `tests/test_benchmarks_render.py` "
           "fails when a committed page differs from what its records render). Each area has "
           "its page under `docs/benchmarks/`; each section there names the machine, the "
           "commit and the library versions its records were measured with (\"not recorded\": "
           "the records predate provenance). `python benchmarks/render.py --stale` lists the "
           "sections whose benchmarked modules changed since their records' commit.", "",
           "**The protocol.** Choices (a configuration, hyperparameters, detector candidates, "
           "family defaults, ensemble members) are made on validation rows or by "
           "cross-validation on the training rows; a test split is read only for "
           "configurations fixed before it is read, and no report picks by a test score: it "
           "shows every configuration run, and a target's row names the one chosen on "
           "validation. A verdict is PASS only when its 95 % interval clears the target, FAIL "
           "when the interval lies wholly on the wrong side, and \"within noise\" otherwise "
           "(`benchmarks/_verdicts.py`). One model is compared with one model, an ensemble "
           "with an ensemble of the baseline, a runtime with a runtime. A section re-stated "
           "under the protocol says so where it lists its targets; the others predate it.", ""]
    for area, title in AREAS.items():
        keys = [k for k, a in PAGES.items() if a == area and k in bodies]
        if not keys:
            continue
        page = f"{PAGES_DIR.as_posix()}/{area}.md"
        out += [f"## [{title}]({page})", "", "| section | measured on | headline |",
                "| --- | --- | --- |"]
        for k in keys:
            body = bodies[k]
            head = next((ln for ln in body.splitlines() if ln.startswith("#")), k)
            name = head.lstrip("#").strip().replace("|", "\\|") if head != k else k
            m = re.search(r"^\*Measured on: (.*?)\*", body, re.M)
            tally = headline(body, k)
            out.append(f"| [{name}]({page}#{anchor(head)}) | "
                       f"{m.group(1) if m else 'not recorded'} | {tally.replace('|', '/')} |")
        out.append("")
    return "\n".join(out)


def write_pages(md: Path, bodies: dict[str, str]) -> None:
    """Write every section of ``bodies`` into its page (:func:`page_path`), in
    :data:`PAGES` order, and the summary (:func:`summary`) at ``md``; sections not in
    ``bodies`` are dropped from the pages (``bodies`` is all of them)."""
    for area in AREAS:
        keys = [k for k, a in PAGES.items() if a == area and k in bodies]
        if keys:
            text = _page_head(area) + "".join(
                f"\n<!-- {k}:begin -->\n{bodies[k].strip()}\n<!-- {k}:end -->\n" for k in keys)
            path = md.parent / PAGES_DIR / f"{area}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    md.write_text(summary(bodies), encoding="utf-8")


def read_pages(md: Path) -> dict[str, str]:
    """The sections on the pages of the summary ``md``: name -> body."""
    bodies: dict[str, str] = {}
    for area in AREAS:
        page = md.parent / PAGES_DIR / f"{area}.md"
        if page.exists():
            bodies.update(sections_of(page.read_text(encoding="utf-8")))
    return bodies


# --- reporting -----------------------------------------------------------------------------
def verdict(checks: Sequence[bool], total: int) -> str:
    """PASS / FAIL over the checks made; "PASS (incomplete)" when fewer than ``total``."""
    if not checks:
        return "NOT MEASURED"
    if not all(checks):
        return "FAIL"
    return "PASS" if len(checks) >= total else "PASS (incomplete)"


def worst(rows: Sequence[dict[str, Any]], key: str, limit: float, what: str
          ) -> tuple[str, str]:
    """(verdict, evidence) for "every row's ``key`` is at most ``limit``"; rows name their
    configuration by ``mode``, ``mask`` and ``n``."""
    rows = [r for r in rows if r.get(key) is not None]
    if not rows:
        return "NOT MEASURED", "no configuration measured"
    w = max(rows, key=lambda r: r[key])
    bad = sum(r[key] > limit for r in rows)
    return verdict([not bad], 1), (f"worst {what} {w[key]:.3f} ({w['mode']}, {w['mask']}, "
                                   f"N={w['n']}); {bad} of {len(rows)} above {limit:.2f}")


def not_measured(records: Sequence[dict[str, Any]], name: Callable[[dict[str, Any]], str]
                 ) -> list[str]:
    """Markdown bullets grouping the records whose status is not "ok" by status and reason."""
    groups: dict[str, list[str]] = {}
    for r in records:
        if r.get("status") != "ok":
            groups.setdefault(f"{r.get('status')}: {r.get('detail', '')}", []).append(name(r))
    return [f"- {why}: {', '.join(names)}" for why, names in groups.items()]


def image_links(images: Sequence[tuple[str, Path]], md_dir: Path) -> list[str]:
    """Markdown image lines, the paths relative to the markdown file's folder."""
    return [f"![{label}]({os.path.relpath(p, md_dir)})" for label, p in images]


def add_common_args(p: argparse.ArgumentParser, out: Path) -> None:
    """The options every benchmark script shares (device, repeats, budgets, output)."""
    add = p.add_argument
    add("--device", choices=("cpu", "cuda"), default="cpu")
    add("--quick", action="store_true", help="a tiny grid with 1-2 repeats (a smoke test)")
    add("--threads", type=int, default=2, help="torch threads per worker")
    add("--min-repeats", type=int, default=3)
    add("--max-repeats", type=int, default=20)
    add("--target-s", type=float, default=2.0, help="time to spend repeating one config")
    add("--timeout", type=float, default=600.0, help="seconds per configuration")
    add("--mem-limit-gib", type=float, default=20.0, help="RLIMIT_DATA per CPU worker (0: off)")
    add("--out", type=Path, default=out, help="results folder")
    add("--no-write", action="store_true",
        help="print the section, leave BENCHMARKS.md and its pages alone")
    add("--render", type=Path, default=None, help="redo plots and section from a results JSON")
    add("--worker", default=None, help=argparse.SUPPRESS)


def results_meta(device: str, threads: int, settings: dict[str, Any]) -> dict[str, Any]:
    """The ``meta`` of a results file: command, date, machine, device, settings and the
    run's :func:`collect_provenance` (:func:`publish` adds the load after)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return {"command": command_line(), "date": f"{now:%Y-%m-%d %H:%M} UTC",
            "machine": machine_info(device, threads), "device": device, "settings": settings,
            "provenance": collect_provenance(threads)}


def was_busy(machine: dict[str, Any], load: float | None = None) -> bool:
    """Whether a 1-minute load average (``load``, default the machine's at the start) says
    the machine was busy: above a quarter of its logical CPUs (0.5 on the 2-core machines
    most records come from; a 16-core GPU host idles near 1)."""
    load = machine["loadavg_start"] if load is None else load
    return load > 0.25 * (machine.get("logical_cpus") or 2)


def provenance(meta: dict[str, Any]) -> str:
    """The paragraph a report section opens with: command, date, duration, machine."""
    m = meta["machine"]
    gpu = f"; GPU {m['gpu']} ({m['gpu_mem_gib']:.0f} GiB), CUDA {m['cuda']}" if "gpu" in m else ""
    busy = ("\n\n**Warning**: the machine was busy when the run started; timings are suspect."
            if was_busy(m) else "")
    if meta.get("note"):  # what the operator recorded of the run's conditions
        busy += f"\n\nNote: {meta['note']}"
    return (f"Produced by `{meta['command']}` on {meta['date']} in {meta['wall_min']:.1f} min. "
            f"Machine: {m['cpu']}, {m['logical_cpus']} logical CPUs, {m['ram_gib']:.0f} GiB "
            f"RAM{gpu}; torch {m['torch']}, {m['threads']} threads per worker; 1-minute load "
            f"average {m['loadavg_start']:.2f} at the start.{busy}")


def publish(path: Path | None, data: dict[str, Any], md: Path | None, key: str,
            section: Callable[[Path], str]) -> None:
    """Save ``data`` as JSON at ``path`` (unless None; the load after the run goes into its
    ``meta``'s provenance) and write ``section(folder of the pages)``, with
    :func:`machine_line` of ``data["meta"]`` under its heading, as the ``key`` section of
    ``md`` (:func:`write_section`: its page), or print it when ``md`` is None."""
    if isinstance(data.get("meta"), dict) and data["meta"].get("provenance"):
        finish_provenance(data["meta"]["provenance"])
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1))
        print(f"results: {path}", file=sys.stderr)
    body = section(page_dir(md or ROOT / "BENCHMARKS.md"))
    if isinstance(data.get("meta"), dict):
        body = with_machine_line(body, [data["meta"]])
    if md is None:
        print(body)
    else:
        write_section(md, key, body)
        print(f"wrote the {key} section of {md}", file=sys.stderr)


def machine_info(device: str, threads: int | None) -> dict[str, Any]:
    """Facts about this machine and software for a results file and its report."""
    import torch

    cpu = platform.processor() or "unknown CPU"
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                       cpu)
    info: dict[str, Any] = {
        "torch": torch.__version__, "python": platform.python_version(), "cpu": cpu,
        "logical_cpus": os.cpu_count(), "threads": threads, "loadavg_start": os.getloadavg()[0],
        "ram_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, gpu_mem_gib=props.total_memory / GIB,
                    cuda=torch.version.cuda)
    return info


def command_line() -> str:
    """This process's command line as one would type it from the repository root."""
    script = os.path.relpath(Path(sys.argv[0]).resolve(), Path.cwd())
    return shlex.join(["python", script, *sys.argv[1:]])


def fmt(x: float | None, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits, whole numbers from ``10**digits`` up."""
    if x is None or x != x:
        return "-"
    return f"{x:.0f}" if abs(x) >= 10**digits else f"{x:.{digits}g}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
                   align: str | None = None) -> str:
    """A GitHub markdown table; ``align`` has an "l" or "r" per column (default: the first
    column left, the others right)."""
    align = align or "l" + "r" * (len(headers) - 1)
    seps = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(seps) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_section(path: Path, key: str, body: str, title: str = "# Benchmarks") -> None:
    """Put ``body`` between ``<!-- key:begin -->`` and ``<!-- key:end -->``. A section of
    :data:`PAGES` goes into its area's page beside the summary ``path``
    (:func:`page_path`), replacing it there, and the summary ``path`` is rebuilt from the
    pages (:func:`write_pages`); any other section is replaced or appended in ``path`` itself
    (a new file headed ``title``)."""
    if key in PAGES:
        bodies = read_pages(path)
        bodies[key] = body.strip()
        write_pages(path, bodies)
        return
    begin, end = f"<!-- {key}:begin -->", f"<!-- {key}:end -->"
    section = f"{begin}\n{body.strip()}\n{end}"
    text = path.read_text() if path.exists() else f"{title}\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


def print_or_write(md: Path, key: str, body: str, *, no_write: bool) -> None:
    """Print a benchmark's section (``--no-write``) or put it into ``md``'s page
    (:func:`write_section`) and say so on stderr."""
    if no_write:
        print(body)
    else:
        write_section(md, key, body)
        print(f"wrote the {key} section of {md}", file=sys.stderr)


def plot_panels(path: Path, panels: Sequence[Sequence[dict[str, Any]]], title: str) -> None:
    """Save rows of line plots as a PNG. Each panel: ``title``, ``ylabel``, ``series``
    (label -> [(x, y)]; y <= 0 is dropped on a log axis), optional ``logy`` (default True)
    and ``hline`` (a reference level). The x axis is log2, ticked at the x values present."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    labels = list(dict.fromkeys(k for row in panels for p in row for k in p["series"]))
    color = {k: f"C{i % 10}" for i, k in enumerate(labels)}  # one colour per label throughout
    plain = FuncFormatter(lambda y, _: f"{y:g}")
    rows, cols = len(panels), max(len(r) for r in panels)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.0 * rows), squeeze=False)
    for row, ax_row in zip(panels, axes, strict=True):
        for panel, ax in zip(row, ax_row, strict=False):
            logy, xs = panel.get("logy", True), set()
            for label, points in panel["series"].items():
                pts = sorted((x, y) for x, y in points if y == y and (y > 0 or not logy))
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", ms=3, label=label,
                            color=color[label])
                    xs.update(x for x, _ in pts)
            if panel.get("hline") is not None:
                ax.axhline(panel["hline"], color="grey", ls="--", lw=1)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log" if logy else "linear")
            ax.yaxis.set_major_formatter(plain)
            ax.set_xticks(sorted(xs), [f"{x:g}" for x in sorted(xs)], fontsize=7)
            ax.set(title=panel["title"], xlabel="sequence length N", ylabel=panel["ylabel"])
            ax.grid(True, which="both", alpha=0.3)
            if xs:
                ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def expand_soups(plan: list[tuple[str, str, int]], configs: dict[str, dict[str, Any]]
                 ) -> list[tuple[str, str, int]]:
    """A plan of ``(data, config, seed)`` runs with each soup run's members put before it
    (once each): a configuration ``{"soup_of": C, "soup": k}``'s run ``s`` averages runs
    ``k * s`` to ``k * s + k - 1`` of ``C``."""
    out: list[tuple[str, str, int]] = []
    for d, c, s in plan:
        cfg = configs[c]
        if "soup_of" in cfg:
            out += [(d, cfg["soup_of"], cfg["soup"] * s + j) for j in range(cfg["soup"])]
        out.append((d, c, s))
    return list(dict.fromkeys(out))


def runs_to_measure(named: list[tuple[str, str, int]],
                    done: dict[tuple[str, str, int], dict[str, Any]], rerun: bool,
                    here: dict[str, Any], configs: dict[str, dict[str, Any]]
                    ) -> list[tuple[str, str, int]]:
    """The runs of ``named`` (``(data, config, seed)``; each soup's members put first,
    :func:`expand_soups`) to measure: those without a record in ``done``; with ``rerun``
    (``--rerun``), every named run and each soup member whose record is of another commit or
    machine than ``here`` (a provenance, :func:`fingerprint`)."""
    if rerun:
        same = fingerprint(here)
        done = {k: r for k, r in done.items()
                if k not in named and fingerprint(r.get("provenance")) == same}
    return [k for k in expand_soups(named, configs) if k not in done]


def soup_members(done: dict[tuple[str, str, int], dict[str, Any]], data: str, config: str,
                 seed: int, configs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The kept members of soup run (data, config, seed) (:func:`expand_soups`' runs), each
    ``{"seed", "model_dir", "train_seconds"}``.

    Raises:
        ValueError: a member's run failed, was quick, ran another recipe than the
            configuration's current one, or was not kept.
    """
    cfg, members = configs[config], []
    for j in range(cfg["soup"]):
        s = cfg["soup"] * seed + j
        rec = done.get((data, cfg["soup_of"], s), {})
        if rec.get("status") != "ok" or rec.get("quick") \
                or rec.get("recipe") != configs[cfg["soup_of"]] \
                or not rec.get("model_dir") or not Path(rec["model_dir"]).is_dir():
            raise ValueError(f"the soup {config} seed {seed} needs the kept model of "
                             f"{cfg['soup_of']} seed {s} ({data}, its current recipe, not "
                             f"--quick): run it with --keep-models DIR")
        members.append({"seed": s, "model_dir": rec["model_dir"],
                        "train_seconds": rec["train_seconds"]})
    return members
