"""Benchmark of ``headwise.attention.attend``'s kernels against the naive formulation.

Batch 1, 8 heads, head dim 64, N = 128 ... 16384, masks none/causal, modes fwd (inference
mode) and fwdbwd (gradients of q, k, v). Backends: "naive" (matmul, ``masked_fill(~mask,
-1e9)``, softmax, matmul), "math", "sdpa", "tiled", "flex", "auto", and "raw" (SDPA called
directly; default on CUDA). Also ``MultiHeadAttention(512, 8)`` against its weights applied
by hand around SDPA, and the dispatcher: the "auto" worker times "auto" side by side with
every correct backend. One process per configuration::

    python benchmarks/attention.py                  # CPU grid; writes BENCHMARKS.md
    python benchmarks/attention.py --device cuda    # bfloat16 on the GPU, with TFLOP/s
    python benchmarks/attention.py --quick --no-write --out /tmp/bench   # smoke test
    python benchmarks/attention.py --render benchmarks/results/attention_cpu.json
    python benchmarks/attention.py --merge benchmarks/results/attention_cpu.json \
        --backends auto --no-mha        # rerun some configurations into an earlier run

Writes ``<out>/attention_<device>.json``, PNG plots beside it, and the section between
``<!-- attention:<device>:begin/end -->`` of ``docs/benchmarks/attention.md`` (summed up in
``BENCHMARKS.md``; machinery: ``_harness.py``;
report: ``_attention_report.py``). ``--merge PATH`` runs only the configurations selected
(--sizes, --backends, --masks, --modes, --no-mha / --only-mha), replaces their records in
the JSON at PATH, records the run in its meta ("merged_runs") and redraws the plots beside
PATH and the section.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import _attention_report as report
import _harness as hx
from _attention_report import CORRECT

B, H, D = 1, 8, 64
D_MODEL = 512
SIZES = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
QUICK_SIZES = (128, 256)
BACKENDS = ("naive", "math", "sdpa", "tiled", "flex", "auto")
MASKS = ("none", "causal")
#: the MHA overhead's masks: the kernels' and the encoder's key-padding mask
MHA_MASKS = (*MASKS, "padding")
MODES = ("fwd", "fwdbwd")
ROOT = Path(__file__).resolve().parent.parent
REPS = ("min_repeats", "max_repeats", "target_s")
CMP_ROUNDS = 5  # ratios alternate up to 5x max_repeats rounds (cheap where calls are short)
CMP_MIN_ROUNDS = 5  # the dispatcher's side-by-side rounds: at least this many
CACHE_ROOT = "HEADWISE_BENCH_CACHE_ROOT"  # a compile cache per configuration under it


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
    # "padding": the encoder classifier's own call, a key-padding mask from its attention
    # mask (here the last quarter of the keys are padding)
    keep = (torch.arange(n, device=dev) < n - n // 4).expand(B, n)
    dense = keep[:, None, None, :] if spec["mask"] == "padding" else None

    def bare() -> Any:
        qkv = F.linear(x, w, b).view(B, n, 3 * H, D)
        q, k, v = (t.transpose(1, 2) for t in qkv.split(H, dim=2))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=dense, is_causal=causal)
        return F.linear(out.transpose(1, 2).reshape(B, n, H * D), wo, bo)

    mask = (masks.causal() if causal else masks.key_padding(keep)
            if spec["mask"] == "padding" else None)
    ours = partial(mha, x, mask=mask)
    res = hx.compare({name: _repeat(f, (x, w, b, wo, bo), g, grad) for name, f in
                      (("ours", ours), ("bare", bare))}, sync, **_cmp_reps(spec))
    a, c = res.pop("results")
    res.pop("warmup")
    return {"status": "ok", **res, "max_abs_diff": float((a - c).detach().abs().max())}


def _cmp_reps(spec: dict[str, Any], min_rounds: int = 0) -> dict[str, Any]:
    top = CMP_ROUNDS * spec["max_repeats"]
    return {**{k: spec[k] for k in REPS}, "max_repeats": top,
            "min_repeats": min(top, max(spec["min_repeats"], min_rounds))}


def _dispatch_check(spec: dict[str, Any], auto: Any, make: Any, sync: Any) -> dict[str, Any]:
    """"auto" side by side with every candidate in ``spec["candidates"]`` (and raw SDPA when
    compared): per candidate the per-round ratios auto/candidate, its times, its warm-up
    (flex: compilation) and the largest difference of its output from auto's."""
    others = [*spec["candidates"], *(["raw"] if "raw" in spec["compare"] else [])]
    res = hx.compare({"auto": auto, **{be: make(be) for be in others}}, sync,
                     **_cmp_reps(spec, CMP_MIN_ROUNDS))
    first, *outs = res["results"]
    return {"candidates": spec["candidates"], "vs": {be: res[f"auto/{be}"] for be in others},
            "side_ms": {be: res[be] for be in ["auto", *others]}, "side_warmup": res["warmup"],
            "rounds_ms": res["rounds_ms"],
            "max_abs_diff": {be: float((first - o).detach().abs().max())
                             for be, o in zip(others, outs, strict=True)}}


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Measure one configuration (``spec["kind"]`` "attention" or "mha") in this process."""
    cache = None
    if os.environ.get(CACHE_ROOT):  # one compile cache per configuration, empty at first
        cache = Path(os.environ[CACHE_ROOT], f"{spec['mode']}-{spec['mask']}-{spec['n']}")
        cache.mkdir(exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    warm_cache = cache is not None and any(cache.iterdir())
    import torch

    import headwise.attention  # noqa: F401  (imported before the memory cap)

    def body(dev: str, sync: Any) -> dict[str, Any]:
        dtype = torch.bfloat16 if dev == "cuda" else torch.float32
        if spec["kind"] == "mha":
            return _mha_run(spec, dev, dtype, sync)
        make, pick = _attention_calls(spec, dev, dtype)
        reps = {k: spec[k] for k in REPS}
        times, peak, warm = hx.measure(call := make(spec["backend"]), sync, hx.PeakMemory(dev),
                                       **reps)
        out = {"status": "ok", "ms": hx.summarize(times, 1e3), "peak_mib": peak, "pick": pick,
               "warmup": warm, "compile_cache": "warm" if warm_cache else "cold"}
        if pick:
            out.update(_dispatch_check(spec, call, make, sync))
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
    """Why a configuration is not run (status, detail), or what its record and spec get
    when it is: the memory estimate (naive, math), the candidates to compare (auto)."""
    import torch

    from headwise.attention import masks, select_backend
    from headwise.attention.kernels import supports_backward

    est = estimate_gib(be, n, mode, args.device)
    est = {"est_gib": est} if be in ("naive", "math") else {}
    if be == "flex" and mode == "fwdbwd" and not supports_backward(torch.device(args.device)):
        return {"status": "n/a", "detail": f"FlexAttention has no backward on {args.device} "
                f"in torch {torch.__version__}"}
    if be == "math" and args.device == "cpu" and n > args.math_max_n:
        return {"status": "skipped", "detail": f"O(N²) like naive, not run above "
                f"N={args.math_max_n} on CPU (time budget)"}
    if est and est["est_gib"] > budget_gib:
        return {"status": "skipped", **est, "detail": f"not attempted: estimated "
                f"{hx.fmt(est['est_gib'])} GiB > the {hx.fmt(budget_gib)} GiB --mem-budget-gib"}
    if be == "auto" and n > args.auto_max_n:
        q = torch.empty(B, H, n, D, device="meta")
        return {"status": "skipped", "pick": select_backend(q, q, masks.causal() if mask ==
                                                            "causal" else None),
                "detail": f"runs the kernel it picks; above N={args.auto_max_n} judged by that "
                "kernel's own time (time budget)"}
    if be == "mha" and n > args.mha_max_n:
        return {"status": "skipped", "detail": f"not run above N={args.mha_max_n}: the shared "
                "O(N²) kernel dominates both paths (time budget)"}
    if be == "auto":  # checked side by side with every candidate that runs this configuration
        return {"candidates": [c for c in CORRECT if "status" not in _decide(
            args, c, n, mode, mask, budget_gib)]}
    return est


def plan(args: argparse.Namespace, budget_gib: float) -> list[dict[str, Any]]:
    """Every configuration, with a ``spec`` to run or a status decided without running."""
    common = {k: getattr(args, k) for k in ("device", "threads", "mem_limit_gib", *REPS)}
    common["compare"] = [be for be in args.backends if be == "raw"]
    items = []
    for n, mode, mask in itertools.product(args.sizes, args.modes, args.masks):
        for be in args.backends + (("mha",) if args.mha else ()):
            if mask not in MASKS and be != "mha":  # "padding": the MHA overhead's only
                continue
            r = {"kind": "mha"} if be == "mha" else {"kind": "attention", "backend": be}
            r.update(mask=mask, n=n, mode=mode, **_decide(args, be, n, mode, mask, budget_gib))
            if "status" not in r:  # to run; the worker returns the candidates compared
                r = {**r, "spec": {**common, **r}}
                r.pop("candidates", None)
            items.append(r)
    return items


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
    add("--masks", type=names, default=MHA_MASKS,
        help=f"default {','.join(MHA_MASKS)} (padding: the MHA overhead rows only)")
    add("--modes", type=names, default=MODES)
    add("--no-mha", dest="mha", action="store_false", help="skip the MHA overhead")
    add("--only-mha", action="store_true", help="run only the MHA overhead rows")
    add("--math-max-n", type=int, default=4096, help="CPU: skip math above this N")
    add("--auto-max-n", type=int, default=4096,
        help="time auto side by side up to this N; above, judge it by its pick's own time")
    add("--mha-max-n", type=int, default=4096, help="skip the MHA overhead above this N")
    add("--mem-budget-gib", type=float, default=None,
        help="naive/math estimated above this are not attempted (cpu: 2x --mem-limit-gib, "
        "as the cap makes a failed attempt safe, or 0.75x RAM without a cap; cuda: 80%% of "
        "the GPU)")
    add("--merge", type=Path, default=None, metavar="PATH",
        help="run only the selected configurations, replace their records in the results "
        "JSON at PATH, redraw the plots beside it and the section (--out is not used)")
    args = p.parse_args(argv)
    if args.quick:
        args.min_repeats, args.max_repeats, args.target_s = 1, 2, 0.0
    if args.only_mha and (args.backends or not args.mha):
        p.error("--only-mha runs no backend: leave out --backends and --no-mha")
    args.sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    args.backends = () if args.only_mha else (
        args.backends or BACKENDS + (("raw",) if args.device == "cuda" else ()))
    for got, allowed in ((args.backends, BACKENDS + ("raw",)), (args.masks, MHA_MASKS),
                         (args.modes, MODES)):
        if set(got) - set(allowed):
            p.error(f"unknown {sorted(set(got) - set(allowed))}; choose from {allowed}")
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / hx.GIB
    if args.device == "cpu" and args.mem_limit_gib > 0.9 * ram:
        p.error(f"--mem-limit-gib {args.mem_limit_gib:g} leaves this machine ({ram:.1f} GiB "
                "of RAM) too little: at most 0.9x RAM")
    if args.merge is not None and not args.merge.is_file():
        p.error(f"--merge {args.merge}: no such results file")
    if args.merge is not None and args.quick and args.merge.resolve().is_relative_to(
            ROOT / "benchmarks" / "results"):
        p.error("--quick numbers are not merged into benchmarks/results: merge into a copy")
    if args.merge is not None and args.worker is None and (why := hx.merge_refusal(args.merge)):
        p.error(f"--merge: {why}")
    return args


def merge(base: dict[str, Any], records: list[dict[str, Any]], meta: dict[str, Any]
          ) -> dict[str, Any]:
    """``base`` with ``records`` replacing those of the same configuration (the others kept
    in place, new ones appended), the grid widened to cover them, and the run that made
    them appended to ``meta["merged_runs"]``."""
    if base["meta"]["device"] != meta["device"]:
        sys.exit(f"--merge: the results are for {base['meta']['device']}, not {meta['device']}")
    new = {report.key(r): r for r in records}
    out = [new.pop(report.key(r), r) for r in base["records"]]
    st, run = base["meta"]["settings"], meta["settings"]
    for name, order in (("sizes", None), ("backends", BACKENDS + ("raw",)), ("masks", MASKS),
                        ("modes", MODES)):
        got = set(st[name]) | set(run[name])
        st[name] = sorted(got, key=order.index) if order else sorted(got)
    st["mha"] = st["mha"] or run["mha"]
    what = [*run["backends"], *(["MHA"] if run["mha"] else [])]
    base["meta"].setdefault("merged_runs", []).append({
        "command": meta["command"], "date": meta["date"], "wall_min": meta["wall_min"],
        "loadavg_start": meta["machine"]["loadavg_start"], "machine": meta["machine"],
        "settings": run, "replaced": f"{len(records)} configurations ({', '.join(what)}; "
        f"N={','.join(map(str, run['sizes']))}; {', '.join(run['modes'])}; masks "
        f"{', '.join(run['masks'])})"})
    return {"meta": base["meta"], "records": out + list(new.values())}


def main(argv: list[str] | None = None) -> int:
    """Run the grid (or one worker), save the JSON, draw the plots, write the section."""
    args = parse_args(argv)
    md = None if args.no_write else ROOT / "BENCHMARKS.md"
    if hx.worker_or_render(args, worker, lambda d: report.render(d, args.render.parent, md, None),
                           md is not None):
        return 0
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: torch.cuda.is_available() is False (no GPU, or a CPU-only torch)")
    base = json.loads(args.merge.read_text()) if args.merge else None
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / hx.GIB
    budget = args.mem_budget_gib or (
        (2 * args.mem_limit_gib if args.mem_limit_gib else 0.75 * ram) if args.device == "cpu"
        else 0.8 * torch.cuda.get_device_properties(0).total_memory / hx.GIB)
    settings = {k: v for k, v in vars(args).items()
                if k not in ("out", "render", "worker", "merge")}
    meta = hx.results_meta(args.device, args.threads, {**settings, "mem_budget_gib": budget})
    meta["dtype"] = "bfloat16" if args.device == "cuda" else "float32"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="attention-bench-") as cache:
        env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "OMP_NUM_THREADS": str(args.threads),
               CACHE_ROOT: cache}
        records = hx.run_grid(Path(__file__), plan(args, budget), args.timeout, env, "attention")
    for r in records:
        if r["kind"] == "attention" and r["status"] == "ok":
            r["tflops"] = flops(r["n"], r["mode"], r["mask"]) / (r["ms"]["median"] * 1e9)
    meta["wall_min"] = (time.perf_counter() - start) / 60
    if base is not None:
        report.render(merge(base, records, meta), args.merge.parent, md, args.merge)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    report.render({"meta": meta, "records": records}, args.out, md,
                  args.out / f"attention_{args.device}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
