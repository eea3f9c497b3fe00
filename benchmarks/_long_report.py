"""The report of ``benchmarks/long_attention.py``: targets, tables, plots and its section of
the markdown file, all computed from a results JSON (``{"meta": ..., "records": [...]}``)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import _harness as hx
import _verdicts as V

TARGET_N, SPEEDUP, MEM_FRACTION = 8192, 6.0, 0.25
SLOPE_LIMIT, SLOPE_MIN_N = 1.15, 2048
FLAT_LIMIT, SHORT, LONG = 1.10, 4000, 100000
LINEAR_METHODS = ("window", "bigbird", "linear")
LABELS = {"window": "block-sparse, window 256", "bigbird": "block-sparse, BigBird",
          "linear": "linear (elu)", "dense": "dense SDPA + mask"}


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(y) against log(x); None below two points."""
    pts = [(math.log(x), math.log(y)) for x, y in points if y > 0]
    if len(pts) < 2:
        return None
    mx, my = statistics.fmean(p[0] for p in pts), statistics.fmean(p[1] for p in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def _scaling(data: dict[str, Any]) -> dict[tuple, dict[str, Any]]:
    return {(r["method"], r["mode"], r["n"]): r for r in data["records"]
            if r["part"] == "scaling"}


def _min_n(data: dict[str, Any]) -> int:
    st = data["meta"]["settings"]
    return min(st["sizes"]) if st.get("quick") else SLOPE_MIN_N


def series(data: dict[str, Any], method: str, mode: str, what: str, min_n: int = 0
           ) -> list[tuple[int, float]]:
    """(N, value) of the measured records of one series: "ms", "mib" or "first_s"."""
    out = []
    for (m, md, n), r in sorted(_scaling(data).items()):
        if (m, md) == (method, mode) and r.get("status") == "ok" and n >= min_n:
            out.append((n, {"ms": r["ms"]["median"], "mib": r["peak_mib"],
                            "first_s": r["first_call_s"]}[what]))
    return out


def _ok(r: dict[str, Any] | None) -> bool:
    return r is not None and r.get("status") == "ok"


def targets(data: dict[str, Any]) -> list[list[str]]:
    """[target, verdict, evidence] rows."""
    idx, st, rows = _scaling(data), data["meta"]["settings"], []
    bs, dn = idx.get(("window", "fwdbwd", TARGET_N)), idx.get(("dense", "fwdbwd", TARGET_N))
    if _ok(bs) and _ok(dn):
        speed = dn["ms"]["median"] / bs["ms"]["median"]
        call, full = bs["peak_mib"] / dn["peak_mib"], bs["peak_mib"] / (
            dn["peak_mib"] + dn["mask_mib"])
        rows += [
            [f"window 256, forward+backward, N={TARGET_N}: block-sparse at least {SPEEDUP:g}x "
             "faster than dense SDPA with the dense boolean mask", hx.verdict(
                 [speed >= SPEEDUP], 1), f"{speed:.2f}x ({hx.fmt(bs['ms']['median'])} ms vs "
             f"{hx.fmt(dn['ms']['median'])} ms)"],
            [f"... and its peak memory at most {MEM_FRACTION:g} of dense's: the SDPA call "
             "alone", hx.verdict([call <= MEM_FRACTION], 1),
             f"{call:.2f} ({hx.fmt(bs['peak_mib'])} vs {hx.fmt(dn['peak_mib'])} MiB)"],
            ["... the SDPA call plus the dense mask it needs", hx.verdict(
                [full <= MEM_FRACTION], 1), f"{full:.2f} ({hx.fmt(bs['peak_mib'])} vs "
             f"{hx.fmt(dn['peak_mib'])} + {hx.fmt(dn['mask_mib'])} MiB)"]]
    else:
        rows.append([f"block-sparse vs dense at N={TARGET_N}, forward+backward",
                     "NOT MEASURED", "a record is missing (see Not measured)"])
    min_n = _min_n(data)
    for method in (m for m in LINEAR_METHODS if m in st["methods"]):
        checks, ev = [], []
        for mode in st["modes"]:
            for what, name in (("ms", "time"), ("mib", "memory")):
                pts = series(data, method, mode, what, min_n)
                iv = V.slope_interval(pts)
                if iv is None:
                    ev.append(f"{mode} {name}: not measured (fewer than three sizes)")
                    continue
                checks.append(V.judge_at_most(iv, SLOPE_LIMIT))
                top = "" if pts[-1][0] == max(st["sizes"]) else f" (to N={pts[-1][0]} only)"
                ev.append(f"{mode} {name} {iv.plain()}{top}")
        verdict = V.combined(checks)
        if verdict != "NOT MEASURED" and len(checks) < 2 * len(st["modes"]):
            verdict += " (incomplete)"
        rows.append([f"{LABELS[method]}: log-log slope of time and of peak memory over N >= "
                     f"{min_n} at most {SLOPE_LIMIT:g} (each slope's 95 % interval from the "
                     f"fit's residuals)", verdict, "; ".join(ev)])
    allocs = list(dict.fromkeys(r["alloc"] for r in data["records"] if r["part"] == "chunked"))
    for i, alloc in enumerate(allocs):
        got = {r["tokens"]: r for r in data["records"] if r["part"] == "chunked"
               and r["alloc"] == alloc and _ok(r)}
        short, long = min(st["tokens"]), max(st["tokens"])
        name = (f"chunked encoder ({alloc}): peak memory of a {long:,}-token text at most "
                f"{FLAT_LIMIT:g}x that of a {short:,}-token one")
        # the first setting is how headwise runs; the others show what it is for
        judged = i == 0 or "steady_memory" not in alloc
        if short in got and long in got:
            ratio = got[long]["peak_mib"] / got[short]["peak_mib"]
            verdict = hx.verdict([ratio <= FLAT_LIMIT], 1) if judged else "(reported)"
            rows.append([name, verdict, f"{ratio:.3f} ("
                         f"{hx.fmt(got[long]['peak_mib'])} vs {hx.fmt(got[short]['peak_mib'])}"
                         " MiB above the loaded model)"])
        else:
            rows.append([name, "NOT MEASURED", "a length is missing (see Not measured)"])
    return rows


def _cell(r: dict[str, Any] | None, what: str) -> str:
    if r is None:
        return "-"
    if r.get("status") == "ok":
        if what == "ms":
            return hx.fmt(r["ms"]["median"])
        if what == "first_s":
            return hx.fmt(r["first_call_s"])
        extra = f" (+{hx.fmt(r['mask_mib'])} mask)" if "mask_mib" in r else ""
        return hx.fmt(r["peak_mib"]) + extra
    if r.get("status") == "skipped" and "pred_gib" in r:
        return f"skipped: predicted {hx.fmt(r['pred_gib'])} GiB, {hx.fmt(r['pred_s'])} s"
    return r.get("status", "-")


def scaling_tables(data: dict[str, Any]) -> list[str]:
    """Time, memory, first-call and slope tables of the scaling part."""
    idx, st = _scaling(data), data["meta"]["settings"]
    if not idx:
        return []
    out = []
    for what, title in (("ms", "ms per call (median)"),
                        ("mib", "peak MiB of one call above the inputs (dense: the boolean "
                         "mask, an input, in brackets)"),
                        ("first_s", "seconds of the first call (block-sparse: builds the "
                         "block plan, cached for later calls)")):
        rows = [[LABELS[m], mode, *(_cell(idx.get((m, mode, n)), what) for n in st["sizes"])]
                for m in st["methods"] for mode in st["modes"]]
        out += [f"### {title}", hx.markdown_table(["method", "mode", *map(str, st["sizes"])],
                                                  rows, "ll" + "r" * len(st["sizes"]))]
    min_n, rows = _min_n(data), []
    for m in st["methods"]:
        for mode in st["modes"]:
            cells = [slope(series(data, m, mode, w, min_n)) for w in ("ms", "mib", "first_s")]
            rows.append([LABELS[m], mode, *("-" if c is None else f"{c:.2f}" for c in cells)])
    out += [f"### Log-log slopes over N >= {min_n} (least squares; 1 = linear, 2 = quadratic)",
            hx.markdown_table(["method", "mode", "time", "peak memory", "first call"], rows,
                              "llrrr")]
    checks = [(r["method"], r["n"], r["max_abs_vs_dense"]) for r in idx.values()
              if "max_abs_vs_dense" in r]
    if checks:
        worst = max(checks, key=lambda c: c[2])
        out.append(f"Block-sparse outputs were compared with dense SDPA under the same mask "
                   f"up to N={st['check_max_n']}: largest absolute difference "
                   f"{worst[2]:.2e} ({LABELS[worst[0]]}, N={worst[1]}).")
    return out


def error_tables(data: dict[str, Any]) -> list[str]:
    """Per input distribution: linear attention errors, then the LSH grid."""
    out = []
    for r in data["records"]:
        if r["part"] != "errors" or not _ok(r):
            continue
        lin = [row for row in r["rows"] if row["method"] != "LSH"]
        rows = [[row["method"], row.get("features", "-"), f"{row['rel_fro']:.3g}",
                 f"{row['rel_fro_range'][0]:.3g}-{row['rel_fro_range'][1]:.3g}"
                 if row["seeds"] > 1 else "-", f"{row['max_abs']:.3g}"] for row in lin]
        out += [f"### Approximation error, {r['dist']} keys (N={r['n']}; exact attention's "
                f"median largest weight per query {r['exact_row_max_weight']:.3f})",
                hx.markdown_table(["method", "features", "relative Frobenius (median)",
                                   "range over seeds", "max abs (median)"], rows, "lrrrr")]
        lsh = [row for row in r["rows"] if row["method"] == "LSH"]
        hashes = sorted({row["hashes"] for row in lsh})
        cells = {(row["buckets"], row["hashes"]): row for row in lsh}
        grid = [[b, *(f"{cells[b, h]['rel_fro']:.3g} / {cells[b, h]['max_abs']:.3g}"
                      for h in hashes)] for b in sorted({row["buckets"] for row in lsh})]
        if len(lin) > 1:
            out.append(f"(`approximation_error` of `headwise.attention.linear`, the library's "
                       f"helper, agrees with the FAVOR+ row for {lin[1]['features']} features "
                       f"to {r['helper_diff']:.1e} at seed 0.)")
        out += [f"LSH attention against dense shared-QK attention, {r['dist']} keys: relative "
                "Frobenius / max abs (medians over seeds)", hx.markdown_table(
                    ["buckets", *(f"{h} hash round{'s' if h > 1 else ''}" for h in hashes)],
                    grid, "r" * (len(hashes) + 1))]
    return out


def chunked_table(data: dict[str, Any]) -> list[str]:
    """One row per (allocator, text length)."""
    rows = [[r["alloc"], f"{r['tokens']:,}", r["chunks"], hx.fmt(r["peak_mib"]),
             hx.fmt(r.get("vmhwm_mib")), hx.fmt(r["seconds"]), hx.fmt(r["tokens_per_s"])]
            for r in data["records"] if r["part"] == "chunked" and _ok(r)]
    if not rows:
        return []
    return ["### Chunked encoder: one `encode_long` call", hx.markdown_table(
        ["allocator", "tokens", "chunks", "peak MiB above the loaded model",
         "process peak RSS MiB", "seconds", "tokens/s"], rows, "lrrrrrr")]


def _axes(ax: Any, xlabel: str, ylabel: str, title: str) -> None:
    """Log-log axes ticked at the x values plotted, plain numbers on both axes."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    xs = sorted({float(x) for line in ax.get_lines() if line.get_marker() not in ("None", None)
                 for x in line.get_xdata()})  # data lines (reference lines have no marker)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(  # label the 2s and 5s of each decade
        lambda y, _: f"{y:g}" if f"{y:e}"[0] in "25" else ""))
    ax.set_xticks(xs, [f"{x:,.0f}" for x in xs], fontsize=7)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def image_paths(data: dict[str, Any], out: Path) -> list[tuple[str, Path]]:
    """The (label, path) pairs :func:`plots` draws, nothing drawn."""
    dev, recs = data["meta"]["device"], data["records"]
    return [(label, out / f"long_attention_{dev}_{name}.png") for label, name, there in (
        ("long attention: time and memory against N", "scaling", bool(_scaling(data))),
        ("approximation error", "errors", any(r["part"] == "errors" and _ok(r) for r in recs)),
        ("chunked encoder memory", "chunked",
         any(r["part"] == "chunked" and _ok(r) for r in recs))) if there]


def plots(data: dict[str, Any], out: Path, draw: bool = True) -> list[tuple[str, Path]]:
    """The scaling, error and chunked-memory figures; returns (label, path) pairs
    (``draw=False``: :func:`image_paths`, nothing drawn)."""
    if not draw:
        return image_paths(data, out)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    st, dev, images = data["meta"]["settings"], data["meta"]["device"], []
    min_n = _min_n(data)
    if _scaling(data):
        def panel(what: str, mode: str, ylabel: str) -> dict[str, Any]:
            ser = {}
            for m in st["methods"]:
                s = slope(series(data, m, mode, what, min_n))
                ser[LABELS[m] + ("" if s is None else f" (slope {s:.2f})")] = series(
                    data, m, mode, what)
            return {"title": f"{mode}: {ylabel}", "ylabel": ylabel, "series": ser}
        path = out / f"long_attention_{dev}_scaling.png"
        hx.plot_panels(path, [[panel("ms", m, "ms per call") for m in st["modes"]],
                              [panel("mib", m, "peak MiB") for m in st["modes"]]],
                       f"long attention on {dev}, B=1 H=8 D=64 float32 (slopes over N >= "
                       f"{min_n})")
        images.append(("long attention: time and memory against N", path))
    errs = [r for r in data["records"] if r["part"] == "errors" and _ok(r)]
    if errs:
        fig, axes = plt.subplots(len(errs), 2, figsize=(11, 4 * len(errs)), squeeze=False)
        for r, (a1, a2) in zip(errs, axes, strict=True):
            fav = [(row["features"], row["rel_fro"]) for row in r["rows"]
                   if row["method"] == "FAVOR+"]
            a1.plot(*zip(*fav, strict=True), marker="o", ms=3, label="FAVOR+")
            elu = next(row["rel_fro"] for row in r["rows"] if row["method"] == "linear elu")
            a1.axhline(elu, color="grey", ls="--", lw=1, label="linear elu")
            _axes(a1, "random features", "relative Frobenius error",
                  f"linear attention, {r['dist']} keys")
            for i, h in enumerate(sorted({row["hashes"] for row in r["rows"]
                                          if row["method"] == "LSH"})):
                pts = [(row["buckets"], row["rel_fro"]) for row in r["rows"]
                       if row["method"] == "LSH" and row["hashes"] == h]
                a2.plot(*zip(*pts, strict=True), marker="o", ms=3, color=f"C{i + 1}",
                        label=f"{h} hash round(s)")
            _axes(a2, "buckets", "relative Frobenius error", f"LSH attention, {r['dist']} keys")
        fig.tight_layout()
        path = out / f"long_attention_{dev}_errors.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        images.append(("approximation error", path))
    chunk = [r for r in data["records"] if r["part"] == "chunked" and _ok(r)]
    if chunk:
        fig, ax = plt.subplots(figsize=(6, 4))
        for i, alloc in enumerate(dict.fromkeys(r["alloc"] for r in chunk)):
            pts = sorted((r["tokens"], r["peak_mib"]) for r in chunk if r["alloc"] == alloc)
            ax.plot(*zip(*pts, strict=True), marker="o", ms=3, color=f"C{i}", label=alloc)
            ax.axhline(FLAT_LIMIT * pts[0][1], color=f"C{i}", ls="--", lw=1,
                       label=f"{FLAT_LIMIT:g}x at {pts[0][0]:,} tokens")
        _axes(ax, "tokens in the text", "peak MiB above the loaded model",
              f"HierarchicalEncoder over {st['preset']} (random weights)")
        fig.tight_layout()
        path = out / f"long_attention_{dev}_chunked.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        images.append(("chunked encoder memory", path))
    return images


def _setup(meta: dict[str, Any]) -> str:
    s, st = meta["shapes"], meta["settings"]
    return (
        f"**Scaling**: batch {s['B']}, {s['H']} heads, head dim {s['D']}, float32, random "
        f"normal q, k, v. Methods: block-sparse (`attend(..., backend=\"blocksparse\")`) with "
        f"`masks.sliding_window({s['window']})` and with `masks.bigbird({s['bigbird_block']}, "
        f"{s['bigbird_random']})`; `linear_attention(..., \"elu\")`; and dense "
        f"`F.scaled_dot_product_attention` with the window pattern's dense boolean mask. "
        f"\"fwd\" runs under inference mode, \"fwdbwd\" also takes the gradients of q, k, v. "
        f"Each (method, mode, N) in its own process: warm-up, then {st['min_repeats']} to "
        f"{st['max_repeats']} calls (until {st['target_s']:g} s), the median; the peak is "
        f"that of the first timed call. A size whose time or memory, extrapolated from the "
        f"size before (x2 per doubling, x4 for dense), exceeds {st['call_cap_s']:g} s per "
        f"call or {st['mem_cap_gib']:g} GiB is not run. **Errors**: float64, exact softmax "
        f"attention (`backend=\"math\"`) as reference for linear attention and dense "
        f"shared-QK attention (`shared_qk_attention`, the queries used as keys) for LSH "
        f"(chunk {s['lsh_chunk']}); random features and hash rotations: medians over "
        f"{s['seeds']} seed(s). \"random\" keys: iid normal q, k, v (no structure, the hard "
        f"case); \"clustered\": q and k = one of {s['clusters']} normal centres per head + "
        f"{s['cluster_noise']:g} x normal noise. **Chunked**: `HierarchicalEncoder` "
        f"(chunk_len {s['chunk_len']}, stride {s['chunk_stride']}, {s['chunk_batch']} chunks "
        f"per mini-batch, [CLS]/[SEP] per chunk, mean pooling) over "
        f"`EncoderClassifier(preset(\"{st['preset']}\"))` with random weights, eval mode; one "
        f"call per process after a warm-up call (a separate random text); peak resident "
        f"memory above what the process held after loading the model and the text (and its "
        f"whole peak RSS). `steady_memory` (the default) fixes glibc's mmap threshold once per "
        f"process (`headwise.models.heap.steady_heap`, 1 MiB), so glibc returns every large "
        f"freed buffer at once and the peak is what the code holds (warm-up: 2 chunks); the "
        f"target is judged on it. With `steady_memory=False` glibc keeps its defaults: the "
        f"threshold rises as buffers are freed and later buffers come from its heap, where "
        f"freed chunks stay resident between live ones, so the peak depends on the heap's "
        f"history and varies between runs by tens of MiB; those rows show what the setting "
        f"is for and what it costs in tokens/s. \"cold\": "
        f"warm-up on 2 chunks; \"warmed up\": warm-up on a 48-chunk text (6 mini-batches), "
        f"to see whether the growth is a one-off of a fresh process (the baseline is taken "
        f"after `malloc_trim`, which hands the warm-up's free pages back).")


def section(data: dict[str, Any], images: list[tuple[str, Path]], md_dir: Path) -> str:
    """The markdown section (without its markers)."""
    meta = data["meta"]
    merges = [f"Re-measured by `{m['command']}` on {m['date']} in {m['wall_min']:.1f} min "
              f"(1-minute load average {m['loadavg_start']:.2f} at the start): "
              f"{', '.join(m['what'])}; those rows replace the first run's."
              for m in meta.get("merges", [])]
    parts = [f"## Attention for long inputs on {meta['device']}", hx.provenance(meta),
             *merges, _setup(meta), "### Targets",
             hx.markdown_table(["target", "verdict", "measured"], targets(data), "lll")]
    parts += scaling_tables(data) + error_tables(data) + chunked_table(data)
    parts += hx.image_links(images, md_dir)
    missing = hx.not_measured(data["records"], _name)
    if missing:
        parts += ["### Not measured", "\n".join(missing)]
    return "\n\n".join(parts)


def _name(r: dict[str, Any]) -> str:
    if r["part"] == "scaling":
        return f"{r['method']} {r['mode']} N={r['n']}"
    if r["part"] == "errors":
        return f"errors ({r['dist']})"
    return f"chunked {r['tokens']} tokens ({r['alloc']})"


def render(data: dict[str, Any], out: Path, md: Path | None, json_path: Path | None) -> None:
    """Draw the plots beside the results and publish the JSON and the section."""
    images = plots(data, out)
    key = f"long_attention:{data['meta']['device']}"
    hx.publish(json_path, data, md, key, lambda md_dir: section(data, images, md_dir))
