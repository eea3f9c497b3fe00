"""The report of ``benchmarks/attention.py``: targets, tables, notes, plots and its section of
``BENCHMARKS.md``, all computed from a results JSON (``{"meta": ..., "records": [...]}``)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import _harness as hx
import _verdicts as V

CORRECT = ("math", "sdpa", "tiled", "flex")  # the candidates "auto" is compared with
TARGET_MEMORY_N = 16384
SIDE, PICK, LEGACY = "side by side", "pick, separate", "auto/pick x pick/fastest"


def key(r: dict[str, Any]) -> tuple:
    """What identifies a configuration: kind, backend (None for "mha"), mask, N, mode."""
    return r["kind"], r.get("backend"), r["mask"], r["n"], r["mode"]


def _index(records: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    return {key(r): r for r in records}


def _ms(r: dict[str, Any] | None) -> float | None:
    return r["ms"]["median"] if r and r.get("status") == "ok" else None


def _capped_oom(r: dict[str, Any]) -> bool:
    """An allocation that really failed (under the worker's cap or on the GPU); records of
    older runs marked "OOM" from an estimate alone are not."""
    return r["status"] == "OOM" and "estimated" not in r.get("detail", "")


def _cell(r: dict[str, Any] | None, what: str) -> str:
    if r is None:
        return "-"
    if r["status"] == "ok":
        return hx.fmt({"ms": r["ms"]["median"], "mib": r["peak_mib"], "tflops": r["tflops"]}[what])
    if "cap_gib" in r:
        return f"OOM (cap {r['cap_gib']:g} GiB)"
    if "estimated" in r.get("detail", ""):
        return f"not run (est. {hx.fmt(r['est_gib'])} GiB)"
    return r["status"]


# --- dispatcher ---------------------------------------------------------------------------
def dispatch_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (mode, mask, N): how much slower "auto" is than each correct backend ("ratios")
    and than the fastest of them ("ratio", the verdict's number), by the row's "method":

    * SIDE: in the "auto" worker, auto and every candidate alternate; the median of the
      per-round ratios auto/candidate, "ratio" the largest (``iqr``: its quartiles), and
      where the record keeps every round's times, "interval": the geometric mean of the
      per-round ratios auto/that candidate with its 95 % interval (the verdict's);
    * PICK (auto not run, above --auto-max-n): the picked kernel's median over each
      candidate's, each from its own process;
    * LEGACY (results of older runs): auto/pick alternating x pick/fastest separately.

    Also, from separate processes: "best_sep", the fastest candidate, and "pick_sep", the
    pick's median over that one's; "raw_ratio": auto/raw SDPA alternating (CUDA)."""
    idx, st, rows = _index(data["records"]), data["meta"]["settings"], []
    for mode, mask, n in itertools.product(st["modes"], st["masks"], st["sizes"]):
        get = lambda be: idx.get(("attention", be, mask, n, mode))  # noqa: B023,E731
        auto = get("auto")
        if auto is None:
            continue
        sep = {be: t for be in CORRECT if (t := _ms(get(be))) is not None}
        pick, vs = auto.get("pick"), auto.get("vs", {})
        row: dict[str, Any] = {"mode": mode, "mask": mask, "n": n, "pick": pick, "ratios": {},
                               "ratio": None, "best": None, "iqr": None, "method": None,
                               "raw_ratio": vs["raw"]["median"] if "raw" in vs else None}
        if sep:
            row["best_sep"] = min(sep, key=sep.__getitem__)
            row["pick_sep"] = sep[pick] / sep[row["best_sep"]] if pick in sep else None
        if auto["status"] == "ok" and "candidates" in auto:
            row["ratios"] = {be: vs[be]["median"] for be in auto["candidates"]}
            best = max(row["ratios"], key=row["ratios"].__getitem__)
            row.update(method=SIDE, best=best, ratio=row["ratios"][best],
                       iqr=(vs[best]["q1"], vs[best]["q3"]))
            rounds = auto.get("rounds_ms", {})
            if len(rounds.get("auto", ())) >= 2 and best in rounds:
                row["interval"] = V.ratio_interval(rounds["auto"], rounds[best])
        elif auto["status"] == "ok" and pick in vs and row.get("pick_sep"):
            row.update(method=LEGACY, best=row["best_sep"],
                       ratio=vs[pick]["median"] * row["pick_sep"])
        elif auto["status"] == "skipped" and pick in sep:
            row.update(method=PICK, best=row["best_sep"], ratio=row["pick_sep"],
                       ratios={be: sep[pick] / t for be, t in sep.items()})
        else:
            row["method"] = f"not measured ({auto['status']})"
        rows.append(row)
    return rows


def _flag(row: dict[str, Any]) -> str:
    """A row's mark: its verdict against 1.10 where it has an interval (blank on PASS),
    else whether its point ratio is above 1.10."""
    if row.get("interval"):
        v = V.judge_at_most(row["interval"], 1.10)
        return "" if v == "PASS" else f"**{v}**"
    return "**> 1.10**" if row["ratio"] is not None and row["ratio"] > 1.1 else ""


def _dispatch_table(rows: list[dict[str, Any]]) -> str:
    raw = any(r["raw_ratio"] is not None for r in rows)
    heads = ["mode", "mask", "N", "method", "picks", *(f"auto/{be}" for be in CORRECT),
             *(["auto/raw"] if raw else []), "fastest", "auto/fastest", "IQR", "95 %",
             "fastest, separate", "pick/fastest, separate", ""]
    out = []
    for r in rows:
        ratio = r["ratio"]
        out.append([r["mode"], r["mask"], r["n"], r["method"], r["pick"] or "-",
                    *(f"{r['ratios'][be]:.3f}" if be in r["ratios"] else "-" for be in CORRECT),
                    *([hx.fmt(r["raw_ratio"])] if raw else []), r["best"] or "-",
                    "-" if ratio is None else f"{ratio:.3f}",
                    f"{r['iqr'][0]:.3f}-{r['iqr'][1]:.3f}" if r["iqr"] else "-",
                    f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"
                    if (iv := r.get("interval")) else "-",
                    r.get("best_sep", "-"),
                    "-" if r.get("pick_sep") is None else f"{r['pick_sep']:.3f}",
                    _flag(r)])
    align = "llrll" + "r" * (len(CORRECT) + raw) + "lrrrlrl"
    return hx.markdown_table(heads, out, align)


def _compile_table(data: dict[str, Any]) -> list[str]:
    """flex's compile time per N: its first call minus its median call, in its own process
    ("flex run") and inside the "auto" worker's side-by-side comparison, with the compile
    cache the run found (cold, or warm from the flex run of the same configuration)."""
    idx, st = _index(data["records"]), data["meta"]["settings"]
    rows = []
    for mode, mask in itertools.product(st["modes"], st["masks"]):
        for src in ("flex", "auto"):
            cells, caches = [], set()
            for n in st["sizes"]:
                r = idx.get(("attention", src, mask, n, mode)) or {}
                warm, ms = ((r.get("warmup"), r.get("ms")) if src == "flex" else (
                    r.get("side_warmup", {}).get("flex"), r.get("side_ms", {}).get("flex")))
                if r.get("status") != "ok" or not warm:
                    cells.append("-")
                    continue
                cells.append(hx.fmt(warm["first_call_s"] - ms["median"] / 1e3))
                caches.add(r.get("compile_cache", "?"))
            if caches:
                rows.append([mode, mask, f"{src} run, {'/'.join(sorted(caches))} cache", *cells])
    if not rows:
        return []
    return ["", COMPILE_TEXT, "", hx.markdown_table(
        ["mode", "mask", "measured in", *map(str, st["sizes"])], rows, "lll" + "r" *
        len(st["sizes"]))]


# --- targets --------------------------------------------------------------------------------
def _memory_check(t: dict[str, Any], nv: dict[str, Any]) -> tuple[bool, str]:
    """Tiled at least 20x below naive in peak memory, or naive failing to allocate."""
    if nv["status"] == "OOM":
        return True, f"naive {_cell(nv, 'mib')}, tiled runs in {t['peak_mib']:.1f} MiB"
    ratio = nv["peak_mib"] / t["peak_mib"] if t["peak_mib"] > 0 else float("inf")
    return ratio >= 20, (f"naive {nv['peak_mib']:.1f} MiB / tiled {t['peak_mib']:.1f} MiB = "
                         f"{ratio:.1f}x")


def _mha_target(recs: list[dict[str, Any]]) -> tuple[str, str, str]:
    """The MHA overhead target under the protocol: per configuration, the 95 % interval of
    the per-round ratio ours/bare (benchmarks/_verdicts.py) against 1.05; records without
    per-round times keep the median rule and say so; the encoder's key-padding mask must be
    among the configurations."""
    what = "MultiHeadAttention default path at most 5 % slower than bare projections + SDPA"
    mha = [r for r in recs if r["kind"] == "mha" and r["status"] == "ok"]
    tried = sum(r["kind"] == "mha" and r["status"] != "skipped" for r in recs)
    if not mha:
        return what, "NOT MEASURED", "no configuration measured"
    if not all(len(r.get("rounds_ms", {}).get("ours", ())) >= 2 for r in mha):
        v, text = hx.worst([{**r, "r": r["ours/bare"]["median"]} for r in mha], "r", 1.05,
                           "ours/bare")
        return (what, "NOT JUDGED" if v == "PASS" else v,
                text + f"; measured for N ≤ {max(r['n'] for r in mha)}; no interval: the "
                "records hold fewer than two rounds each (older records: no per-round times); "
                "re-run")
    judged = []
    for r in mha:
        iv = V.ratio_interval(r["rounds_ms"]["ours"], r["rounds_ms"]["bare"])
        verdict = V.judge_at_most(iv, 1.05)
        judged.append((verdict, iv, r))
    worst = max(judged, key=lambda j: j[1].mean)
    if any(v == "FAIL" for v, _, _ in judged):
        verdict = "FAIL"
    elif all(v == "PASS" for v, _, _ in judged):
        verdict = "PASS" if len(mha) >= tried and any(
            r["mask"] == "padding" for r in mha) else "PASS (incomplete)"
    else:
        verdict = "within noise"
    counts = {v: sum(j[0] == v for j in judged) for v in ("PASS", "within noise", "FAIL")}
    _, iv, r = worst
    return (what, verdict,
            f"worst ours/bare {iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}] ({r['mode']}, "
            f"{r['mask']}, N={r['n']}; geometric mean of interleaved rounds, 95 %); "
            + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
            + f" of {len(judged)}; masks {', '.join(sorted({r['mask'] for r in mha}))}; "
            f"N ≤ {max(r['n'] for r in mha)}")


def _dispatch_target(rows: list[dict[str, Any]]) -> tuple[str, str, str]:
    """The dispatcher target: every side-by-side row's interval of auto over the fastest
    candidate (:func:`dispatch_rows`) against 1.10; rows timed in separate processes (picks
    above --auto-max-n, older records) have no interval: shown, not judged, and said so."""
    what = "dispatcher never more than 10 % slower than the fastest correct backend"
    judged = [(V.judge_at_most(r["interval"], 1.10), r) for r in rows if r.get("interval")]
    methods = {m: [r["n"] for r in rows if r["method"] == m] for m in (SIDE, PICK, LEGACY)}
    where = "".join(f"; {m}: {len(ns)} rows, N {min(ns)}-{max(ns)}"
                    for m, ns in methods.items() if ns)
    missing = sum(r["ratio"] is None for r in rows)
    if not judged:
        v, text = hx.worst(rows, "ratio", 1.10, "auto/fastest")
        return (what, "NOT JUDGED" if v == "PASS" else v,
                text + where + "; no interval: the records hold no per-round times; re-run")
    verdict = V.combined([v for v, _ in judged])
    unjudged = [r for r in rows if r["ratio"] is not None and not r.get("interval")]
    if verdict == "PASS" and (missing or unjudged):
        verdict = "PASS (incomplete)"
    _, w = max(judged, key=lambda j: j[1]["interval"].mean)
    iv = w["interval"]
    counts = {v: sum(j[0] == v for j in judged) for v in ("PASS", "within noise", "FAIL")}
    text = (f"worst auto/fastest {iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}] ({w['mode']}, "
            f"{w['mask']}, N={w['n']}, fastest {w['best']}; geometric mean of interleaved "
            f"rounds, 95 %); " + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
            + f" of {len(judged)} side-by-side rows")
    if unjudged:
        u = max(unjudged, key=lambda r: r["ratio"])
        text += (f"; {len(unjudged)} rows without an interval (separate processes), not "
                 f"judged: worst {u['ratio']:.3f} ({u['mode']}, {u['mask']}, N={u['n']})")
    return what, verdict, text + where + (f"; {missing} not measured" if missing else "")


def targets(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Each target of the issue as (target, verdict, measured evidence)."""
    recs, st = data["records"], data["meta"]["settings"]
    idx, out = _index(recs), []
    if any(r["kind"] == "mha" for r in recs):
        out.append(_mha_target(recs))
    n_t = TARGET_MEMORY_N if TARGET_MEMORY_N in st["sizes"] else max(st["sizes"])
    checks = [(f"{mode}/{mask}", *_memory_check(t, nv))
              for mode, mask in itertools.product(st["modes"], st["masks"])
              if (t := idx.get(("attention", "tiled", mask, n_t, mode)))
              and (nv := idx.get(("attention", "naive", mask, n_t, mode)))
              and t["status"] == "ok" and (nv["status"] == "ok" or _capped_oom(nv))]
    out.append((f"tiled peak memory at N={TARGET_MEMORY_N} at least 20x below naive (or naive "
                "does not fit)" + ("" if n_t == TARGET_MEMORY_N else f"; at N={n_t}, this "
                                   "grid's largest"),
                hx.verdict([ok for _, ok, _ in checks], len(st["modes"]) * len(st["masks"])),
                "; ".join(f"{c}: {text}" for c, _, text in checks) or "not measured"))
    rows = dispatch_rows(data)
    out.append(_dispatch_target(rows))
    if "raw" in st["backends"]:
        out.append(("dispatcher's dense path within 10 % of raw SDPA (the GPU target)",
                    *hx.worst(rows, "raw_ratio", 1.10, "auto/raw")))
    return out


# --- plots and section ----------------------------------------------------------------------
def plots(data: dict[str, Any], out: Path, draw: bool = True) -> list[tuple[str, Path]]:
    """Time and memory vs N per mask (fwd/fwdbwd panels), the MHA ratio; (label, path)s.
    ``draw=False``: only the paths, nothing drawn (re-rendering the section)."""
    recs, st, dev = data["records"], data["meta"]["settings"], data["meta"]["device"]
    idx, paths = _index(recs), []

    def series(mask: str, mode: str, what: str) -> dict[str, list[tuple[float, float]]]:
        got = {be: [(n, r["ms"]["median"] if what == "ms" else r["peak_mib"])
                    for n in st["sizes"] if (r := idx.get(("attention", be, mask, n, mode)))
                    and r["status"] == "ok"] for be in st["backends"]}
        return {be: pts for be, pts in got.items() if pts}

    for mask in st["masks"]:
        panels = [[{"title": f"{mode}, mask {mask}", "ylabel": ylabel,
                    "series": series(mask, mode, what)} for mode in st["modes"]]
                  for what, ylabel in (("ms", "median time (ms)"), ("mib", "peak memory (MiB)"))]
        paths.append((f"time and memory, mask {mask}", out / f"attention_{dev}_{mask}.png"))
        if draw:
            hx.plot_panels(paths[-1][1], panels,
                           f"attention on {dev}, B=1 H=8 D=64, mask {mask}")
    mha = {f"{mode}, {mask}": [(r["n"], r["ours/bare"]["median"]) for r in recs
                               if r["kind"] == "mha" and r["status"] == "ok"
                               and (r["mode"], r["mask"]) == (mode, mask)]
           for mode in st["modes"] for mask in st["masks"]}
    if any(mha.values()):
        paths.append(("MultiHeadAttention overhead", out / f"attention_{dev}_mha.png"))
    if any(mha.values()) and draw:
        hx.plot_panels(paths[-1][1], [[{"title": "MultiHeadAttention / bare, median of per-run "
                                        "ratios", "ylabel": "time ratio", "series": mha,
                                        "logy": False, "hline": 1.05}]],
                       f"MHA overhead on {dev}, d_model=512, 8 heads")
    return paths


METHOD = (
    "Batch 1, 8 heads, head dim 64, {dtype}. Each configuration ran in its own process: "
    "warm-up (compilation included; its time is kept in the JSON, flex's is shown below), "
    "then {repeats}; tables give the median "
    "(quartiles and extremes are in the JSON). fwd runs under `torch.inference_mode`; fwdbwd "
    "also takes the gradients of q, k, v for a random output gradient. \"naive\": `q @ k^T * "
    "scale`, `masked_fill(~mask, -1e9)` with the dense causal mask (none without one), "
    "softmax, `@ v`{raw}. Peak memory of one call: {memory}")
MEMORY = {"cpu": "VmHWM (reset through `/proc/self/clear_refs`) minus VmRSS with the inputs "
                 "built, page resolution. Each CPU worker runs under an address-space cap "
                 "(`RLIMIT_DATA`: {cap}), so an allocation beyond it is refused before any "
                 "page is touched and recorded as \"OOM (cap ...)\"; naive and math are not "
                 "attempted where their estimate exceeds --mem-budget-gib ({budget}).",
          "cuda": "`max_memory_allocated` above the inputs. TFLOP/s count 4·B·H·N²·D per "
                  "forward, half for causal, 3.5x that for forward+backward (FlashAttention's "
                  "convention: backward = 2.5x forward)."}
MHA_TEXT = (
    "`MultiHeadAttention(512, 8)` (default backend \"auto\") against the same weights applied "
    "by hand: `F.linear` -> view -> split -> transpose -> `F.scaled_dot_product_attention` -> "
    "transpose -> reshape -> `F.linear`. The two alternate within one process; the ratio is the "
    "median of the per-repeat ratios, robust against drift on a shared machine. Times are "
    "medians with their quartiles (q1-q3); ratio IQR: the quartiles of the per-repeat ratios.")
DISPATCH_TEXT = (
    "How much slower `attend(backend=\"auto\")` is than each correct backend that supports the "
    "configuration ({cands}; math only up to the N where it runs on CPU, flex only for fwd on "
    "CPU). Method \"" + SIDE + "\" (up to --auto-max-n): in the \"auto\" worker's "
    "process, auto and every candidate run in rounds (at least 5, at most 5x --max-repeats, "
    "until they took --target-s each on average), the order rotating each round, so drift "
    "on a shared machine hits them alike; auto/X is the median of the per-round ratios, "
    "auto/fastest the largest of them (how much slower auto is than the best backend timed side "
    "by side; IQR: that ratio's per-round quartiles; 95 %: the geometric mean of the "
    "per-round ratios auto/that backend with its t-interval on the logs). Method \"" + PICK
    + "\" (above "
    "--auto-max-n, auto not run: it runs the kernel it picks): the pick's median over each "
    "candidate's, each from its own process. Method \"" + LEGACY + "\": results of the "
    "earlier method. For reference only, \"fastest, separate\" and \"pick/fastest, separate\" "
    "compare medians from separate processes, which vary by up to ±40 % at small N on a busy "
    "machine. The verdict judges each side-by-side row's 95 % interval against 1.10 (PASS "
    "when every interval is at most 1.10, FAIL when one lies wholly above); rows without an "
    "interval are shown and not judged."
    ).format(cands=", ".join(CORRECT))
COMPILE_TEXT = (
    "flex compile time (s): its first call minus its median call. Each configuration gets its "
    "own `TORCHINDUCTOR_CACHE_DIR`, empty at first: the flex run finds it cold (a shape never "
    "compiled on this machine); the auto run after it finds it warm (the same shape in a new "
    "process), cold where no flex run of that configuration preceded it. Warm-up excludes "
    "this from every timing above, but an application pays it for every new shape (N, mask): "
    "one reason, beside its lack of a backward on CPU, why the dispatcher does not pick flex "
    "on CPU.")


def _size(mib: float) -> str:
    return f"{hx.fmt(mib / 1024)} GiB" if mib >= 1024 else f"{hx.fmt(mib)} MiB"


def _memory_notes(data: dict[str, Any]) -> list[str]:
    """Naive and math at the target N when attempted, and every allocation that failed under
    the cap: measured peak or failure, with the estimate beside it."""
    recs, st = data["records"], data["meta"]["settings"]
    n_t = TARGET_MEMORY_N if TARGET_MEMORY_N in st["sizes"] else max(st["sizes"])
    lines = []
    for r in sorted(recs, key=lambda r: (r["n"], r.get("backend") or "", r["mode"], r["mask"])):
        if r["kind"] != "attention" or not ("cap_gib" in r or (r["n"] == n_t and r.get(
                "backend") in ("naive", "math") and (r["status"] == "ok" or _capped_oom(r)))):
            continue
        est = f" (estimate {_size(r['est_gib'] * 1024)})" if "est_gib" in r else ""
        what = f"- {r['backend']} {r['mode']}, mask {r['mask']}, N={r['n']}: "
        if r["status"] == "ok":
            lines.append(what + f"measured peak {_size(r['peak_mib'])}{est}, median "
                         f"{hx.fmt(r['ms']['median'])} ms")
        elif "cap_gib" in r:
            lines.append(what + f"OOM{est}: {r['detail']}; the process had reached "
                         f"{_size(r['vmhwm_mib'])} resident")
        else:
            lines.append(what + f"{r['status']}{est}: {r.get('detail', '')}")
    return ["", "Memory at the largest N, measured (the estimate beside it, 3 fwd or 4 fwdbwd "
            "float32 score tensors of 8×N×N, is only for reference):", "", *lines] if lines else []


def _provenance(meta: dict[str, Any]) -> str:
    """The full run's provenance, then each run merged in since (``meta["merged_runs"]``)."""
    merged = meta.get("merged_runs", [])
    busy = [f"`{r['command']}`" for r in merged
            if hx.was_busy(r.get("machine", {}), r["loadavg_start"])]
    return hx.provenance(meta) + ("" if not merged else (
        "\n\nThen merged in, each replacing the records of the configurations it ran:\n\n"
        + "\n".join(f"- `{r['command']}` on {r['date']} in {r['wall_min']:.1f} min, 1-minute "
                    f"load average {r['loadavg_start']:.2f} at the start: {r['replaced']}"
                    for r in merged))) + (
        f"\n\n**Warning**: the machine was busy (1-minute load average above 0.5) when "
        f"{', '.join(busy)} started; its timings are suspect." if busy else "")


def _across_runs(meta: dict[str, Any], text: Any) -> str:
    """``text(settings)`` of the run, or of each run where the merged runs differ."""
    runs = [("full run", meta["settings"])] + [
        (f"merge {i}", r["settings"]) for i, r in enumerate(meta.get("merged_runs", []), 1)]
    vals = {k: text(st) for k, st in runs}
    if len(set(vals.values())) == 1:
        return next(iter(vals.values()))
    return "; ".join(f"{v} ({k})" for k, v in vals.items())


def section(data: dict[str, Any], images: list[tuple[str, Path]], md_dir: Path) -> str:
    """The BENCHMARKS.md section for one results file."""
    meta, recs = data["meta"], data["records"]
    st, dev, idx = meta["settings"], meta["device"], _index(recs)
    memory = MEMORY[dev].format(
        cap=_across_runs(meta, lambda s: f"{s['mem_limit_gib']:g} GiB" if s["mem_limit_gib"]
                         else "off"),
        budget=_across_runs(meta, lambda s: f"{hx.fmt(s['mem_budget_gib'])} GiB"))
    reps = _across_runs(meta, lambda s: f"{s['min_repeats']} to {s['max_repeats']} repeats "
                                        f"(until {s['target_s']} s)")
    lines = [f"## Attention kernels on {dev}", "", _provenance(meta), "",
             METHOD.format(dtype=meta["dtype"], memory=memory, repeats=reps, raw="; \"raw\": "
                           "`F.scaled_dot_product_attention` called directly"
                           if "raw" in st["backends"] else ""), "", "### Targets", "",
             hx.markdown_table(("target", "verdict", "measured"), targets(data), "lll"), "",
             "### Kernels", ""]
    keys = [("ms", "median time (ms)"), ("mib", "peak memory (MiB)"), ("tflops", "TFLOP/s")]
    for (what, label), mode, mask in itertools.product(keys[:3 if dev == "cuda" else 2],
                                                       st["modes"], st["masks"]):
        rows = [[be, *(_cell(idx.get(("attention", be, mask, n, mode)), what)
                       for n in st["sizes"])] for be in st["backends"]]
        lines += [f"{label}, {mode}, mask {mask}:", "",
                  hx.markdown_table(["backend", *map(str, st["sizes"])], rows), ""]
    notes = hx.not_measured([r for r in recs if "cap_gib" not in r],
                            lambda r: f"{r.get('backend', 'mha')} {r['mode']} {r['mask']} "
                                      f"N={r['n']}")
    links = hx.image_links(images, md_dir)
    lines += (["Not measured:", "", *notes] if notes else []) + _memory_notes(data)
    lines += ["", *links[:len(st["masks"])]]
    mha = sorted((r for r in recs if r["kind"] == "mha" and r["status"] == "ok"),
                 key=lambda r: (r["mode"], r["mask"], r["n"]))
    q = lambda s: f"{hx.fmt(s['q1'])}-{hx.fmt(s['q3'])}"  # noqa: E731
    if mha:
        lines += ["", "### MultiHeadAttention overhead", "", MHA_TEXT, "", hx.markdown_table(
            ("mode", "mask", "N", "ours ms", "ours q1-q3", "bare ms", "bare q1-q3", "ours/bare",
             "ratio IQR", "max abs diff"),
            [(r["mode"], r["mask"], r["n"], hx.fmt(r["ours"]["median"]), q(r["ours"]),
              hx.fmt(r["bare"]["median"]), q(r["bare"]), f"{r['ours/bare']['median']:.3f}",
              f"{r['ours/bare']['q1']:.3f}-{r['ours/bare']['q3']:.3f}", f"{r['max_abs_diff']:.1e}")
             for r in mha], "llrrrrrrrr"), "", *links[len(st["masks"]):]]
    rows = dispatch_rows(data)
    if rows:
        lines += ["", "### Dispatcher", "", DISPATCH_TEXT, "", _dispatch_table(rows),
                  *_compile_table(data)]
    return "\n".join(lines)


def render(data: dict[str, Any], out: Path, md: Path | None, path: Path | None) -> None:
    """Plots into ``out``, the results JSON to ``path`` (unless None), the section into
    ``md`` (printed when None)."""
    images, dev = plots(data, out), data["meta"]["device"]
    hx.publish(path, data, md, f"attention:{dev}", lambda md_dir: section(data, images, md_dir))
