"""Benchmark of ``headwise.attention.attend``'s kernels against the naive formulation.

Batch 1, 8 heads, head dim 64, N = 128 ... 16384, masks none/causal, modes fwd (inference
mode) and fwdbwd (gradients of q, k, v). Backends: "naive" (matmul, ``masked_fill(~mask,
-1e9)``, softmax, matmul), "math", "sdpa", "tiled", "flex", "auto", and "raw" (SDPA called
directly; default on CUDA). Also ``MultiHeadAttention(512, 8)`` against its weights applied
by hand around SDPA, and the dispatcher's picks. One process per configuration::

    python benchmarks/attention.py                  # CPU grid; writes BENCHMARKS.md
    python benchmarks/attention.py --device cuda    # bfloat16 on the GPU, with TFLOP/s
    python benchmarks/attention.py --quick --no-write --out /tmp/bench   # smoke test
    python benchmarks/attention.py --render benchmarks/results/attention_cpu.json

Writes ``<out>/attention_<device>.json``, PNG plots beside it, and the section between
``<!-- attention:<device>:begin/end -->`` of ``BENCHMARKS.md`` (machinery: ``_harness.py``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import _harness as hx

B, H, D = 1, 8, 64
D_MODEL = 512
SIZES = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
QUICK_SIZES = (128, 256)
BACKENDS = ("naive", "math", "sdpa", "tiled", "flex", "auto")
CORRECT = ("math", "sdpa", "tiled", "flex")  # the candidates "auto" is compared with
MASKS = ("none", "causal")
MODES = ("fwd", "fwdbwd")
TARGET_MEMORY_N = 16384
ROOT = Path(__file__).resolve().parent.parent
REPS = ("min_repeats", "max_repeats", "target_s")
CMP_ROUNDS = 5  # ratios alternate up to 5x max_repeats rounds (cheap where calls are short)


# --- worker: one configuration, in its own process ---------------------------------------------
def naive_attention(q: Any, k: Any, v: Any, mask: Any, scale: float) -> Any:
    """The textbook formulation the issue compares against (scores materialised)."""
    import torch

    scores = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    return torch.softmax(scores, dim=-1) @ v


def _repeat(forward: Any, inputs: tuple, g: Any, grad: bool) -> Any:
    """One repeat: ``forward()`` under inference mode, or also the gradients of ``inputs``
    for the output gradient ``g``. Returns the output."""
    import torch

    def call() -> Any:
        if not grad:
            with torch.inference_mode():
                return forward()
        out = forward()
        torch.autograd.grad(out, inputs, g)
        return out
    return call


def _attention_calls(spec: dict[str, Any], dev: str, dtype: Any) -> tuple[Any, str | None]:
    """``make(backend)``, the function one repeat of that backend calls on this spec's
    inputs, and the backend "auto" picks for them (for "auto" only)."""
    import torch
    import torch.nn.functional as F

    from headwise.attention import attend, masks, select_backend

    n, causal, grad = spec["n"], spec["mask"] == "causal", spec["mode"] == "fwdbwd"
    gen = torch.Generator().manual_seed(0)
    q, k, v, g = (torch.randn(B, H, n, D, generator=gen).to(dev, dtype) for _ in range(4))
    q, k, v = (t.requires_grad_(grad) for t in (q, k, v))
    pattern = masks.causal() if causal else None
    dense = pattern.to_dense(n, device=dev) if causal and spec["backend"] == "naive" else None

    def make(be: str) -> Any:
        if be == "naive":
            forward = partial(naive_attention, q, k, v, dense, D**-0.5)
        elif be == "raw":
            forward = partial(F.scaled_dot_product_attention, q, k, v, is_causal=causal)
        else:
            forward = partial(attend, q, k, v, pattern, backend=be)
        return _repeat(forward, (q, k, v), g, grad)
    return make, select_backend(q, k, pattern) if spec["backend"] == "auto" else None


def _mha_run(spec: dict[str, Any], dev: str, dtype: Any, sync: Any) -> dict[str, Any]:
    """``MultiHeadAttention(512, 8)`` vs bare projections + SDPA, interleaved in one process."""
    import torch
    import torch.nn.functional as F

    from headwise.attention import MultiHeadAttention, masks

    n, causal, grad = spec["n"], spec["mask"] == "causal", spec["mode"] == "fwdbwd"
    gen = torch.Generator().manual_seed(0)
    mha = MultiHeadAttention(D_MODEL, H).to(dev, dtype)
    x, g = (torch.randn(B, n, D_MODEL, generator=gen).to(dev, dtype) for _ in range(2))
    x.requires_grad_(grad)
    w, b, wo, bo = (mha.in_proj.weight, mha.in_proj.bias, mha.out_proj.weight, mha.out_proj.bias)

    def bare() -> Any:
        qkv = F.linear(x, w, b).view(B, n, 3 * H, D)
        q, k, v = (t.transpose(1, 2) for t in qkv.split(H, dim=2))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return F.linear(out.transpose(1, 2).reshape(B, n, H * D), wo, bo)

    ours = partial(mha, x, mask=masks.causal() if causal else None)
    res = hx.compare({name: _repeat(f, (x, w, b, wo, bo), g, grad) for name, f in
                      (("ours", ours), ("bare", bare))}, sync, **_cmp_reps(spec))
    a, c = res.pop("results")
    return {"status": "ok", **res, "max_abs_diff": float((a - c).detach().abs().max())}


def _cmp_reps(spec: dict[str, Any]) -> dict[str, Any]:
    return {**{k: spec[k] for k in REPS}, "max_repeats": CMP_ROUNDS * spec["max_repeats"]}


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Measure one configuration (``spec["kind"]`` "attention" or "mha") in this process."""
    import torch

    import headwise.attention  # noqa: F401  (imported before the memory cap)

    def body(dev: str, sync: Any) -> dict[str, Any]:
        dtype = torch.bfloat16 if dev == "cuda" else torch.float32
        if spec["kind"] == "mha":
            return _mha_run(spec, dev, dtype, sync)
        make, pick = _attention_calls(spec, dev, dtype)
        reps = {k: spec[k] for k in REPS}
        times, peak = hx.measure(call := make(spec["backend"]), sync, hx.PeakMemory(dev), **reps)
        out = {"status": "ok", "ms": hx.summarize(times, 1e3), "peak_mib": peak, "pick": pick}
        if pick:  # "auto" against its pick (and raw SDPA), alternating in this process
            others = [pick] + (["raw"] if "raw" in spec["compare"] else [])
            res = hx.compare({"auto": call, **{be: make(be) for be in others}}, sync,
                             **_cmp_reps(spec))
            out["vs"] = {be: res[f"auto/{be}"] for be in others}
        return out

    return hx.in_worker(spec, body)


# --- plan -----------------------------------------------------------------------------------
def flops(n: int, mode: str, mask: str) -> float:
    """FLOPs of one call: 4·B·H·N²·D forward (half for causal), x3.5 with the backward."""
    f = 4.0 * B * H * n * n * D * (0.5 if mask == "causal" else 1.0)
    return f * (3.5 if mode == "fwdbwd" else 1.0)


def estimate_gib(backend: str, n: int, mode: str, device: str) -> float:
    """Memory of the score-materialising backends: 3 (fwd) or 4 (fwdbwd) score matrices."""
    elem = 2 if backend == "naive" and device == "cuda" else 4  # "math" scores are float32
    return (4 if mode == "fwdbwd" else 3) * B * H * n * n * elem / hx.GIB


def _decide(args: argparse.Namespace, be: str, n: int, mode: str, mask: str,
            budget_gib: float) -> dict[str, Any]:
    """Why a configuration is not run (status, detail), or {} to run it."""
    import torch

    from headwise.attention import masks, select_backend
    from headwise.attention.kernels import supports_backward

    est = estimate_gib(be, n, mode, args.device)
    if be == "flex" and mode == "fwdbwd" and not supports_backward(torch.device(args.device)):
        return {"status": "n/a", "detail": f"FlexAttention has no backward on {args.device} "
                f"in torch {torch.__version__}"}
    if be == "math" and args.device == "cpu" and n > args.math_max_n:
        return {"status": "skipped", "detail": f"O(N²) like naive, not run above "
                f"N={args.math_max_n} on CPU (time budget)"}
    if be in ("naive", "math") and est > budget_gib:
        return {"status": "OOM", "est_gib": est, "detail": f"not run: estimated "
                f"{hx.fmt(est)} GiB > the {hx.fmt(budget_gib)} GiB budget"}
    if be == "auto" and n > args.auto_max_n:
        q = torch.empty(B, H, n, D, device="meta")
        return {"status": "skipped", "pick": select_backend(q, q, masks.causal() if mask ==
                                                            "causal" else None),
                "detail": f"runs the kernel it picks; above N={args.auto_max_n} judged by that "
                "kernel's own time (time budget)"}
    if be == "mha" and n > args.mha_max_n:
        return {"status": "skipped", "detail": f"not run above N={args.mha_max_n}: the shared "
                "O(N²) kernel dominates both paths (time budget)"}
    return {}


def plan(args: argparse.Namespace, budget_gib: float) -> list[dict[str, Any]]:
    """Every configuration, with a ``spec`` to run or a status decided without running."""
    common = {k: getattr(args, k) for k in ("device", "threads", "mem_limit_gib", *REPS)}
    common["compare"] = [be for be in args.backends if be == "raw"]
    items = []
    for n, mode, mask in itertools.product(args.sizes, args.modes, args.masks):
        for be in args.backends + (("mha",) if args.mha else ()):
            r = {"kind": "mha"} if be == "mha" else {"kind": "attention", "backend": be}
            r.update(mask=mask, n=n, mode=mode, **_decide(args, be, n, mode, mask, budget_gib))
            items.append(r if "status" in r else {**r, "spec": {**common, **r}})
    return items


# --- report -----------------------------------------------------------------------------------
def _index(records: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    return {(r["kind"], r.get("backend"), r["mask"], r["n"], r["mode"]): r for r in records}


def _ms(r: dict[str, Any] | None) -> float | None:
    return r["ms"]["median"] if r and r.get("status") == "ok" else None


def _cell(r: dict[str, Any] | None, key: str) -> str:
    if r is None:
        return "-"
    if r["status"] != "ok":
        return f"OOM (est. {hx.fmt(r['est_gib'])} GiB)" if "est_gib" in r else r["status"]
    return hx.fmt({"ms": r["ms"]["median"], "mib": r["peak_mib"], "tflops": r["tflops"]}[key])


def dispatch_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (mode, mask, N): the pick of "auto", the fastest correct backend, and the ratios
    auto/pick (alternating in one process), pick/fastest and their product auto/fastest."""
    idx, st, rows = _index(data["records"]), data["meta"]["settings"], []
    for mode, mask, n in itertools.product(st["modes"], st["masks"], st["sizes"]):
        get = lambda be: idx.get(("attention", be, mask, n, mode))  # noqa: B023,E731
        auto = get("auto") or {}
        cands = [(t, be) for be in CORRECT if (t := _ms(get(be))) is not None]
        pick_ms, vs = _ms(get(auto.get("pick"))), auto.get("vs", {})
        if not cands or pick_ms is None:
            continue
        best_ms, best = min(cands)
        over = vs[auto["pick"]]["median"] if auto["pick"] in vs else None
        rows.append({"mode": mode, "mask": mask, "n": n, "pick": auto["pick"], "best": best,
                     "over": over, "pick_ratio": pick_ms / best_ms,
                     "ratio": (over or 1.0) * pick_ms / best_ms,
                     "raw_ratio": vs["raw"]["median"] if "raw" in vs else None})
    return rows


def _memory_check(t: dict[str, Any], nv: dict[str, Any]) -> tuple[bool, str]:
    """Tiled at least 20x below naive in peak memory, or naive out of memory."""
    if nv["status"] == "OOM":
        return True, f"naive {_cell(nv, 'mib')}, tiled runs in {t['peak_mib']:.1f} MiB"
    ratio = nv["peak_mib"] / t["peak_mib"] if t["peak_mib"] > 0 else float("inf")
    return ratio >= 20, (f"naive {nv['peak_mib']:.1f} MiB / tiled {t['peak_mib']:.1f} MiB = "
                         f"{ratio:.1f}x")


def targets(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Each target of the issue as (target, verdict, measured evidence)."""
    recs, st = data["records"], data["meta"]["settings"]
    idx, out = _index(recs), []
    if any(r["kind"] == "mha" for r in recs):
        mha = [{**r, "r": r["ours/bare"]["median"]} for r in recs if r["kind"] == "mha"
               and r["status"] == "ok"]
        tried = sum(r["kind"] == "mha" and r["status"] != "skipped" for r in recs)
        v, text = hx.worst(mha, "r", 1.05, "ours/bare")
        out.append(("MultiHeadAttention default path at most 5 % slower than bare projections "
                    "+ SDPA", "PASS (incomplete)" if v == "PASS" and len(mha) < tried else v,
                    text + f"; measured for N ≤ {max((r['n'] for r in mha), default=0)}"))
    n_t = TARGET_MEMORY_N if TARGET_MEMORY_N in st["sizes"] else max(st["sizes"])
    checks = [(f"{mode}/{mask}", *_memory_check(t, nv))
              for mode, mask in itertools.product(st["modes"], st["masks"])
              if (t := idx.get(("attention", "tiled", mask, n_t, mode)))
              and (nv := idx.get(("attention", "naive", mask, n_t, mode)))
              and t["status"] == "ok" and nv["status"] in ("ok", "OOM")]
    out.append((f"tiled peak memory at N={TARGET_MEMORY_N} at least 20x below naive (or naive "
                "does not fit)" + ("" if n_t == TARGET_MEMORY_N else f"; at N={n_t}, this "
                                   "grid's largest"),
                hx.verdict([ok for _, ok, _ in checks], len(st["modes"]) * len(st["masks"])),
                "; ".join(f"{c}: {text}" for c, _, text in checks) or "not measured"))
    rows = dispatch_rows(data)
    out.append(("dispatcher never more than 10 % slower than the fastest correct backend",
                *hx.worst(rows, "ratio", 1.10, "auto/fastest")))
    if "raw" in st["backends"]:
        out.append(("dispatcher's dense path within 10 % of raw SDPA (the GPU target)",
                    *hx.worst(rows, "raw_ratio", 1.10, "auto/raw")))
    return out


def plots(data: dict[str, Any], out: Path) -> list[tuple[str, Path]]:
    """Time and memory vs N per mask (fwd/fwdbwd panels), the MHA ratio; (label, path)s."""
    recs, st, dev = data["records"], data["meta"]["settings"], data["meta"]["device"]
    idx, paths = _index(recs), []

    def series(mask: str, mode: str, key: str) -> dict[str, list[tuple[float, float]]]:
        got = {be: [(n, r["ms"]["median"] if key == "ms" else r["peak_mib"]) for n in st["sizes"]
                    if (r := idx.get(("attention", be, mask, n, mode))) and r["status"] == "ok"]
               for be in st["backends"]}
        return {be: pts for be, pts in got.items() if pts}

    for mask in st["masks"]:
        panels = [[{"title": f"{mode}, mask {mask}", "ylabel": ylabel,
                    "series": series(mask, mode, key)} for mode in st["modes"]]
                  for key, ylabel in (("ms", "median time (ms)"), ("mib", "peak memory (MiB)"))]
        paths.append((f"time and memory, mask {mask}", out / f"attention_{dev}_{mask}.png"))
        hx.plot_panels(paths[-1][1], panels, f"attention on {dev}, B=1 H=8 D=64, mask {mask}")
    mha = {f"{mode}, {mask}": [(r["n"], r["ours/bare"]["median"]) for r in recs
                               if r["kind"] == "mha" and r["status"] == "ok"
                               and (r["mode"], r["mask"]) == (mode, mask)]
           for mode in st["modes"] for mask in st["masks"]}
    if any(mha.values()):
        paths.append(("MultiHeadAttention overhead", out / f"attention_{dev}_mha.png"))
        hx.plot_panels(paths[-1][1], [[{"title": "MultiHeadAttention / bare, median of per-run "
                                        "ratios", "ylabel": "time ratio", "series": mha,
                                        "logy": False, "hline": 1.05}]],
                       f"MHA overhead on {dev}, d_model=512, 8 heads")
    return paths


METHOD = (
    "Batch 1, 8 heads, head dim 64, {dtype}. Each configuration ran in its own process: "
    "warm-up (compilation included), then {min_repeats} to {max_repeats} repeats (until "
    "{target_s} s); tables give the median (quartiles and extremes are in the JSON). fwd runs "
    "under `torch.inference_mode`; fwdbwd also takes the gradients of q, k, v for a random "
    "output gradient. \"naive\": `q @ k^T * scale`, `masked_fill(~mask, -1e9)` with the dense "
    "causal mask (none without one), softmax, `@ v`{raw}. Peak memory of one call: {memory}")
MEMORY = {"cpu": "VmHWM (reset through `/proc/self/clear_refs`) minus VmRSS with the inputs "
                 "built, page resolution.",
          "cuda": "`max_memory_allocated` above the inputs. TFLOP/s count 4·B·H·N²·D per "
                  "forward, half for causal, 3.5x that for forward+backward (FlashAttention's "
                  "convention: backward = 2.5x forward)."}
MHA_TEXT = (
    "`MultiHeadAttention(512, 8)` (default backend \"auto\") against the same weights applied "
    "by hand: `F.linear` -> view -> split -> transpose -> `F.scaled_dot_product_attention` -> "
    "transpose -> reshape -> `F.linear`. The two alternate within one process; the ratio is the "
    "median of the per-repeat ratios, robust against drift on a shared machine.")
DISPATCH_TEXT = (
    "What `select_backend` picks against the fastest of {} that supports the mode. auto/pick: "
    "`attend(backend=\"auto\")` against the picked backend, alternating in one process (the "
    "dispatch overhead; \"-\" where auto was not run); pick/fastest: their own medians (exactly "
    "1 when the pick is the fastest); auto/fastest: the product.".format(", ".join(CORRECT)))


def section(data: dict[str, Any], images: list[tuple[str, Path]], md_dir: Path) -> str:
    """The BENCHMARKS.md section for one results file."""
    meta, recs = data["meta"], data["records"]
    st, dev, idx = meta["settings"], meta["device"], _index(recs)
    lines = [f"## Attention kernels on {dev}", "", hx.provenance(meta), "",
             METHOD.format(dtype=meta["dtype"], memory=MEMORY[dev], **st, raw="; \"raw\": "
                           "`F.scaled_dot_product_attention` called directly"
                           if "raw" in st["backends"] else ""), "", "### Targets", "",
             hx.markdown_table(("target", "verdict", "measured"), targets(data), "lll"), "",
             "### Kernels", ""]
    keys = [("ms", "median time (ms)"), ("mib", "peak memory (MiB)"), ("tflops", "TFLOP/s")]
    for (key, label), mode, mask in itertools.product(keys[:3 if dev == "cuda" else 2],
                                                      st["modes"], st["masks"]):
        rows = [[be, *(_cell(idx.get(("attention", be, mask, n, mode)), key)
                       for n in st["sizes"])] for be in st["backends"]]
        lines += [f"{label}, {mode}, mask {mask}:", "",
                  hx.markdown_table(["backend", *map(str, st["sizes"])], rows), ""]
    notes = hx.not_measured(recs, lambda r: f"{r.get('backend', 'mha')} {r['mode']} "
                                            f"{r['mask']} N={r['n']}")
    links = hx.image_links(images, md_dir)
    lines += (["Not measured:", "", *notes, ""] if notes else []) + links[:len(st["masks"])]
    mha = sorted((r for r in recs if r["kind"] == "mha" and r["status"] == "ok"),
                 key=lambda r: (r["mode"], r["mask"], r["n"]))
    if mha:
        lines += ["", "### MultiHeadAttention overhead", "", MHA_TEXT, "", hx.markdown_table(
            ("mode", "mask", "N", "ours ms", "bare ms", "ours/bare", "ratio IQR", "max abs diff"),
            [(r["mode"], r["mask"], r["n"], hx.fmt(r["ours"]["median"]),
              hx.fmt(r["bare"]["median"]), f"{r['ours/bare']['median']:.3f}",
              f"{r['ours/bare']['q1']:.3f}-{r['ours/bare']['q3']:.3f}", f"{r['max_abs_diff']:.1e}")
             for r in mha], "llrrrrrr"), "", *links[len(st["masks"]):]]
    rows = dispatch_rows(data)
    if rows:
        lines += ["", "### Dispatcher", "", DISPATCH_TEXT, "", hx.markdown_table(
            ("mode", "mask", "N", "picks", "fastest", "auto/pick", "pick/fastest", "auto/fastest",
             ""), [(r["mode"], r["mask"], r["n"], r["pick"], r["best"], hx.fmt(r["over"]),
                    f"{r['pick_ratio']:.3f}", f"{r['ratio']:.3f}", "**> 1.10**" if r["ratio"]
                    > 1.1 else "") for r in rows], "llrllrrrl")]
    return "\n".join(lines)


def render(data: dict[str, Any], out: Path, md: Path | None, save: bool = True) -> None:
    """Plots into ``out``, the results JSON too when ``save``, the section into ``md``."""
    images, dev = plots(data, out), data["meta"]["device"]
    hx.publish(out / f"attention_{dev}.json" if save else None, data, md, f"attention:{dev}",
               lambda md_dir: section(data, images, md_dir))


# --- main -----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    ints = lambda s: tuple(int(x) for x in s.split(","))  # noqa: E731
    names = lambda s: tuple(x for x in s.split(",") if x)  # noqa: E731
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    hx.add_common_args(p, ROOT / "benchmarks" / "results")
    add = p.add_argument
    add("--sizes", type=ints, default=None, help=f"default {','.join(map(str, SIZES))}")
    add("--backends", type=names, default=None, help=f"default {','.join(BACKENDS)} (+raw on cuda)")
    add("--masks", type=names, default=MASKS)
    add("--modes", type=names, default=MODES)
    add("--no-mha", dest="mha", action="store_false", help="skip the MHA overhead")
    add("--math-max-n", type=int, default=4096, help="CPU: skip math above this N")
    add("--auto-max-n", type=int, default=4096, help="time auto above this N by its pick")
    add("--mha-max-n", type=int, default=4096, help="skip the MHA overhead above this N")
    add("--mem-budget-gib", type=float, default=None,
        help="naive/math estimated above this are not run (cpu 18, cuda 80%% of the GPU)")
    args = p.parse_args(argv)
    if args.quick:
        args.min_repeats, args.max_repeats, args.target_s = 1, 2, 0.0
    args.sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    args.backends = args.backends or BACKENDS + (("raw",) if args.device == "cuda" else ())
    for got, allowed in ((args.backends, BACKENDS + ("raw",)), (args.masks, MASKS),
                         (args.modes, MODES)):
        if set(got) - set(allowed):
            p.error(f"unknown {sorted(set(got) - set(allowed))}; choose from {allowed}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the grid (or one worker), save the JSON, draw the plots, write the section."""
    args = parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(json.loads(args.worker))), flush=True)
        return 0
    md = None if args.no_write else ROOT / "BENCHMARKS.md"
    if args.render is not None:
        render(json.loads(args.render.read_text()), args.render.parent, md, save=False)
        return 0
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: torch.cuda.is_available() is False (no GPU, or a CPU-only torch)")
    budget = args.mem_budget_gib or (18.0 if args.device == "cpu" else 0.8 * torch.cuda
                                     .get_device_properties(0).total_memory / hx.GIB)
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "render", "worker")}
    meta = hx.results_meta(args.device, args.threads, {**settings, "mem_budget_gib": budget})
    meta["dtype"] = "bfloat16" if args.device == "cuda" else "float32"
    start = time.perf_counter()
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "OMP_NUM_THREADS": str(args.threads)}
    records = hx.run_grid(Path(__file__), plan(args, budget), args.timeout, env, "attention")
    for r in records:
        if r["kind"] == "attention" and r["status"] == "ok":
            r["tflops"] = flops(r["n"], r["mode"], r["mask"]) / (r["ms"]["median"] * 1e9)
    meta["wall_min"] = (time.perf_counter() - start) / 60
    args.out.mkdir(parents=True, exist_ok=True)
    render({"meta": meta, "records": records}, args.out, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
