"""Attention for long inputs: block-sparse and linear attention against dense SDPA, the
approximation error of linear and LSH attention, and the memory of chunked encoding.

Four parts (``--parts``), each configuration in its own process (machinery:
``_harness.py``; report: ``_long_report.py``):

* ``scaling``: B=1, 8 heads, head dim 64, float32, random normal q, k, v; N = 1024 ...
  32768; forward (inference mode) and forward+backward (gradients of q, k, v). Methods:
  "window" (``attend(..., masks.sliding_window(256), backend="blocksparse")``),
  "bigbird" (``masks.bigbird(128, 3)``: window of 3 blocks, 1 global block, 3 random
  blocks, block-sparse), "linear" (``linear_attention(..., "elu")``), and "dense"
  (``F.scaled_dot_product_attention`` with the window pattern's dense boolean mask). Warm-up
  (the first call also builds the block-sparse plan; its time is recorded), then repeats;
  the median, and the peak memory of one call above what was held before it (inputs and
  the dense mask excluded; the mask's size is recorded). Sizes are run in increasing order;
  a size whose time or memory, extrapolated from the previous size (x2 per doubling, x4 for
  "dense"), exceeds ``--call-cap-s`` or ``--mem-cap-gib`` is not run and is recorded as
  skipped with that prediction (never shown as a measurement).
* ``errors``: N=1024, float64; relative Frobenius and max-abs error against exact
  attention of linear attention (elu; FAVOR+ with several feature counts) and of LSH
  attention (buckets 4 ... 32, hash rounds 1, 2, 4, chunk 64) against dense shared-QK
  attention, on random keys (iid normal: no structure, the hard case) and clustered keys
  (16 centres, queries and keys near them); random-feature and hashing errors are medians
  over 3 seeds.
* ``chunked``: ``HierarchicalEncoder`` (chunk_len 512, stride 384, 8 chunks per
  mini-batch, [CLS]/[SEP] per chunk) over ``EncoderClassifier(preset("minilm-l6"))`` with
  random weights (seed 0), eval mode, texts of 4k ... 100k random token ids; the peak
  resident memory of one ``encode_long`` call as headwise runs it (``steady_memory``: a
  fixed glibc mmap threshold, which takes the heap-growth heuristics out of the number)
  and, at the shortest and longest length, with ``steady_memory=False`` (glibc's
  defaults).

Usage::

    python benchmarks/long_attention.py          # writes BENCHMARKS.md and PNGs
    python benchmarks/long_attention.py --quick --out /tmp/la --md /tmp/BENCH.md   # smoke
    # (--quick: N=256,512 forward+backward, errors at N=256, the chunked part on "tiny")
    python benchmarks/long_attention.py --render benchmarks/results/long_attention_cpu.json

Writes ``<out>/long_attention_<device>.json``, PNG plots beside it and the section between
``<!-- long_attention:<device>:begin/end -->`` of the attention page beside ``--md``
(default ``BENCHMARKS.md``: ``docs/benchmarks/attention.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import _harness as hx
import _long_report as report

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results"
B, H, D = 1, 8, 64
WINDOW, BB_BLOCK, BB_RANDOM = 256, 128, 3
METHODS = ("window", "bigbird", "linear", "dense")
MODES = ("fwd", "fwdbwd")
SIZES = (1024, 2048, 4096, 8192, 16384, 32768)
ERR_N, FEATURES, BUCKETS, HASHES, LSH_CHUNK, SEEDS = 1024, (16, 64, 266, 1024), \
    (4, 8, 16, 32), (1, 2, 4), 64, (0, 1, 2)
CLUSTERS, CLUSTER_NOISE = 16, 0.5
CHUNK_LEN, CHUNK_STRIDE, CHUNK_BATCH, CLS_ID, SEP_ID = 512, 384, 8, 101, 102
TOKENS = (4000, 16000, 50000, 100000)
#: allocator settings of the chunked part: name -> (steady_memory, chunks of the warm-up call).
#: ``HierarchicalEncoder(steady_memory=True)``, the default, fixes glibc's mmap threshold
#: (``headwise.models.heap.steady_heap``), so glibc returns every large freed buffer at once
#: and the peak is what the code needs. With ``steady_memory=False`` glibc keeps its default:
#: it raises the threshold as buffers are freed and serves later ones from its heap, where
#: freed chunks stay resident between the live ones, so the peak depends on the heap's
#: history. "cold": a 2-chunk warm-up; "warmed up": a 48-chunk text (6 mini-batches) first,
#: to see whether the growth is a one-off of a fresh process. Those two entries run only the
#: shortest and the longest text; the target is judged on the default.
ALLOCATORS = {"steady_memory (default)": (True, 2),
              "steady_memory=False, glibc default, cold": (False, 2),
              "steady_memory=False, glibc default, warmed up": (False, 48)}
DEFAULT_ALLOC = next(iter(ALLOCATORS))
PARTS = ("scaling", "errors", "chunked")
REPS = ("min_repeats", "max_repeats", "target_s")


# --- workers ---------------------------------------------------------------------------------
def _scaling(spec: dict[str, Any], dev: str, sync: Any) -> dict[str, Any]:
    """Time and peak memory of one (method, mode, N)."""
    import torch
    import torch.nn.functional as F

    from headwise.attention import attend, masks
    from headwise.attention.linear import linear_attention

    n, grad, method = spec["n"], spec["mode"] == "fwdbwd", spec["method"]
    gen = torch.Generator().manual_seed(0)
    q, k, v, g = (torch.randn(B, H, n, D, generator=gen).to(dev) for _ in range(4))
    q, k, v = (t.requires_grad_(grad) for t in (q, k, v))
    patterns = {"window": masks.sliding_window(WINDOW),
                "bigbird": masks.bigbird(BB_BLOCK, BB_RANDOM)}
    dense = patterns["window"].to_dense(n, device=dev) if method == "dense" else None
    forward = {
        "window": partial(attend, q, k, v, patterns["window"], backend="blocksparse"),
        "bigbird": partial(attend, q, k, v, patterns["bigbird"], backend="blocksparse"),
        "linear": partial(linear_attention, q, k, v, "elu"),
        "dense": partial(F.scaled_dot_product_attention, q, k, v, attn_mask=dense),
    }[method]

    def call() -> Any:
        if not grad:
            with torch.inference_mode():
                return forward()
        out = forward()
        torch.autograd.grad(out, (q, k, v), g)
        return out

    times, peak, warm = hx.measure(call, sync, hx.PeakMemory(dev), warmup_s=0.3,
                                   **{r: spec[r] for r in REPS})
    out: dict[str, Any] = {"status": "ok", "ms": hx.summarize(times, 1e3), "peak_mib": peak,
                           "first_call_s": warm["first_call_s"]}
    if dense is not None:
        out["mask_mib"] = dense.numel() * dense.element_size() / hx.MIB
    if method in ("window", "bigbird") and n <= spec["check_max_n"]:
        with torch.inference_mode():  # the same attention as dense SDPA with its mask?
            ref = F.scaled_dot_product_attention(q, k, v, attn_mask=patterns[method].to_dense(
                n, device=dev))
            out["max_abs_vs_dense"] = float((forward() - ref).abs().max())
    return out


def _inputs(dist: str, n: int, gen: Any) -> tuple[Any, Any, Any]:
    """(q, k, v) float64 (B, H, n, D): iid normal, or q and k near 16 centres per head."""
    import torch

    if dist == "random":
        return tuple(torch.randn(B, H, n, D, generator=gen, dtype=torch.float64)
                     for _ in range(3))
    centres = torch.randn(B, H, CLUSTERS, D, generator=gen, dtype=torch.float64)

    def near() -> Any:
        z = torch.randint(CLUSTERS, (B, H, n), generator=gen)
        picked = torch.gather(centres, 2, z[..., None].expand(B, H, n, D))
        return picked + CLUSTER_NOISE * torch.randn(B, H, n, D, generator=gen,
                                                    dtype=torch.float64)

    return near(), near(), torch.randn(B, H, n, D, generator=gen, dtype=torch.float64)


def _errors(spec: dict[str, Any], dev: str, sync: Any) -> dict[str, Any]:
    """Errors of linear (elu, FAVOR+) and LSH attention on one input distribution."""
    import statistics

    import torch

    from headwise.attention import attend
    from headwise.attention.linear import approximation_error, linear_attention
    from headwise.attention.lsh import lsh_attention, shared_qk_attention

    n, seeds = spec["n"], tuple(spec["seeds"])
    q, k, v = (t.to(dev) for t in _inputs(spec["dist"], n, torch.Generator().manual_seed(0)))
    rows: list[dict[str, Any]] = []

    def add(method: str, make: Any, exact: Any, seeds: tuple[int, ...], **cfg: Any) -> None:
        fro, mx = [], []
        for seed in seeds:
            diff = make(seed) - exact
            fro.append(float(diff.norm() / exact.norm()))
            mx.append(float(diff.abs().max()))
        rows.append({"method": method, **cfg, "rel_fro": statistics.median(fro),
                     "rel_fro_range": [min(fro), max(fro)], "max_abs": statistics.median(mx),
                     "seeds": len(seeds)})

    with torch.no_grad():
        exact = attend(q, k, v, backend="math")
        add("linear elu", lambda s: linear_attention(q, k, v, "elu"), exact, (0,))
        for m in spec["features"]:
            add("FAVOR+", lambda s, m=m: linear_attention(q, k, v, "favor", num_features=m,
                                                          seed=s), exact, seeds, features=m)
        shared = shared_qk_attention(q, v)  # LSH shares queries and keys: q serves as both
        for nb in spec["buckets"]:
            for nh in spec["hashes"]:
                add("LSH", lambda s, nb=nb, nh=nh: lsh_attention(q, v, nb, nh, LSH_CHUNK,
                                                                 seed=s), shared, seeds,
                    buckets=nb, hashes=nh)
        # the library's own error helper agrees with the numbers above
        helper = approximation_error(q, k, v, "favor", num_features=spec["features"][0])
        mine = float((linear_attention(q, k, v, "favor", num_features=spec["features"][0])
                      - exact).norm() / exact.norm())
    return {"status": "ok", "rows": rows, "helper_diff": abs(helper - mine),
            "exact_row_max_weight": _peakiness(q, k)}


def _peakiness(q: Any, k: Any) -> float:
    """Median over queries of the largest softmax weight (how peaked exact attention is)."""
    import torch

    w = torch.softmax(q @ k.transpose(-1, -2) / D**0.5, -1)
    return float(w.amax(-1).median())


def _chunked(spec: dict[str, Any], dev: str, sync: Any) -> dict[str, Any]:
    """Peak memory and time of one ``encode_long`` call on a text of ``tokens`` ids."""
    import torch

    from headwise.models import EncoderClassifier, preset
    from headwise.models.chunked import HierarchicalEncoder, split_into_chunks

    torch.manual_seed(0)
    config = preset(spec["preset"])
    model = EncoderClassifier(config).to(dev).eval()
    chunk_len, stride = spec["chunk_len"], spec["chunk_stride"]
    hier = HierarchicalEncoder(model, chunk_len=chunk_len, stride=stride,
                               chunk_batch=CHUNK_BATCH, cls_id=CLS_ID, sep_id=SEP_ID,
                               steady_memory=spec["steady_memory"]).eval()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, config.vocab_size, (spec["tokens"],), generator=gen)
    # warm-up: lazy initialisation, kernels (and, with more chunks, the C heap's plateau)
    warm = torch.randint(3, config.vocab_size, (chunk_len + (spec["warm_chunks"] - 1) * stride,),
                         generator=torch.Generator().manual_seed(2))
    hier.encode_long(warm)
    with hx.PeakMemory(dev) as mem:
        seconds = hx.timed(lambda: hier.encode_long(ids), sync)
    chunks = split_into_chunks(ids, chunk_len=chunk_len, stride=stride, cls_id=CLS_ID,
                               sep_id=SEP_ID)[0].shape[0]
    out = {"status": "ok", "peak_mib": mem.peak_mib, "seconds": seconds, "chunks": chunks,
           "tokens_per_s": spec["tokens"] / seconds}
    if dev == "cpu":
        out["vmhwm_mib"] = hx._proc_status_kib("VmHWM") / 1024
    return out


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one configuration of ``spec["part"]`` in this process."""
    import headwise.attention  # noqa: F401  (imported before the memory cap)

    if spec["part"] == "chunked":
        import headwise.models  # noqa: F401

    body = {"scaling": _scaling, "errors": _errors, "chunked": _chunked}[spec["part"]]
    return hx.in_worker(spec, lambda dev, sync: body(spec, dev, sync))


# --- running ---------------------------------------------------------------------------------
def _prediction(prev: dict[str, Any] | None, n: int, method: str, args: argparse.Namespace
                ) -> dict[str, Any] | None:
    """Why size ``n`` is not run, from the previous size of its series, or None to run it."""
    if prev is None:
        return None
    if prev.get("status") != "ok":
        return {"status": "skipped", "detail": f"not run: N={prev['n']} was not measured"}
    p = 2 if method == "dense" else 1
    grow = (n / prev["n"]) ** p
    est_s = prev["ms"]["median"] / 1e3 * grow
    est_gib = (prev["peak_mib"] + prev.get("mask_mib", 0.0)) * grow / 1024
    if est_s <= args.call_cap_s and est_gib <= args.mem_cap_gib:
        return None
    return {"status": "skipped", "pred_s": est_s, "pred_gib": est_gib,
            "detail": f"predicted {hx.fmt(est_gib)} GiB, {hx.fmt(est_s)} s per call "
            f"(N={prev['n']} x{grow:g}); caps {args.mem_cap_gib:g} GiB, {args.call_cap_s:g} s"}


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every configuration of the selected parts, in order; records in the order run."""
    common = {"device": args.device, "threads": args.threads,
              "mem_limit_gib": args.mem_limit_gib, **{r: getattr(args, r) for r in REPS}}
    env = {"OMP_NUM_THREADS": str(args.threads)}
    me, records = Path(__file__), []
    if "scaling" in args.parts:
        for method in args.methods:
            for mode in args.modes:
                prev = None
                for n in args.sizes:
                    rec: dict[str, Any] = {"part": "scaling", "method": method, "mode": mode,
                                           "n": n}
                    rec.update(_prediction(prev, n, method, args) or {})
                    if "status" not in rec:
                        print(f"long_attention: {method} {mode} N={n}", file=sys.stderr)
                        spec = {**common, "part": "scaling", "method": method, "mode": mode,
                                "n": n, "check_max_n": args.check_max_n}
                        rec.update(hx.run_worker(me, spec, args.timeout, env))
                    records.append(rec)
                    prev = rec
    if "errors" in args.parts:
        for dist in ("random", "clustered"):
            print(f"long_attention: errors, {dist} keys", file=sys.stderr)
            spec = {**common, "part": "errors", "dist": dist, "n": args.err_n,
                    "features": args.features, "buckets": args.buckets,
                    "hashes": args.hashes, "seeds": args.seeds}
            records.append({"part": "errors", "dist": dist, "n": args.err_n,
                            **hx.run_worker(me, spec, args.timeout, env)})
    if "chunked" in args.parts:
        for i, (alloc, (steady, warm_chunks)) in enumerate(ALLOCATORS.items()):
            for tokens in args.tokens if i == 0 else sorted({min(args.tokens),
                                                             max(args.tokens)}):
                print(f"long_attention: chunked {tokens} tokens, {alloc}", file=sys.stderr)
                spec = {**common, "part": "chunked", "preset": args.preset, "tokens": tokens,
                        "chunk_len": args.chunk_len, "chunk_stride": args.chunk_stride,
                        "warm_chunks": warm_chunks, "steady_memory": steady}
                records.append({"part": "chunked", "alloc": alloc, "tokens": tokens,
                                **hx.run_worker(me, spec, args.timeout, env)})
    return records


# --- main ------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    ints = lambda s: tuple(int(x) for x in s.split(","))  # noqa: E731
    names = lambda s: tuple(x for x in s.split(",") if x)  # noqa: E731
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="Defaults here: --min-repeats 3, "
        "--max-repeats 10, --target-s 1, --mem-limit-gib 8.")
    hx.add_common_args(p, DEFAULT_OUT)
    p.set_defaults(min_repeats=3, max_repeats=10, target_s=1.0, mem_limit_gib=8.0)
    add = p.add_argument
    add("--md", type=Path, default=ROOT / "BENCHMARKS.md", help="markdown file to write")
    add("--parts", type=names, default=PARTS, help=f"default {','.join(PARTS)}")
    add("--merge", type=Path, default=None,
        help="a results JSON of an earlier run: its records not re-measured now are kept, "
             "and the report notes this run as a merge")
    add("--methods", type=names, default=METHODS, help=f"default {','.join(METHODS)}")
    add("--modes", type=names, default=None, help="default fwd,fwdbwd (--quick: fwdbwd)")
    add("--sizes", type=ints, default=None, help=f"default {','.join(map(str, SIZES))}")
    add("--call-cap-s", type=float, default=10.0,
        help="do not run a size whose one call is predicted above this (default 10)")
    add("--mem-cap-gib", type=float, default=6.0,
        help="do not run a size whose peak (with a dense mask) is predicted above this")
    add("--check-max-n", type=int, default=4096,
        help="compare block-sparse outputs with dense SDPA up to this N")
    add("--err-n", type=int, default=None, help=f"sequence length of the errors (default "
        f"{ERR_N})")
    add("--features", type=ints, default=FEATURES, help="FAVOR+ feature counts")
    add("--buckets", type=ints, default=BUCKETS, help="LSH bucket counts")
    add("--hashes", type=ints, default=HASHES, help="LSH hash rounds")
    add("--seeds", type=ints, default=SEEDS, help="seeds of the random features and hashes")
    add("--tokens", type=ints, default=None, help="chunked text lengths (default "
        f"{','.join(map(str, TOKENS))})")
    add("--preset", default=None, help="encoder preset of the chunked part (default "
        "minilm-l6; --quick: tiny)")
    add("--chunk-len", type=int, default=None, help=f"default {CHUNK_LEN} (--quick: 128)")
    add("--chunk-stride", type=int, default=None, help=f"default {CHUNK_STRIDE} (--quick: 96)")
    args = p.parse_args(argv)
    args.modes = args.modes or (("fwdbwd",) if args.quick else MODES)
    for got, allowed in ((args.parts, PARTS), (args.methods, METHODS), (args.modes, MODES)):
        if set(got) - set(allowed):
            p.error(f"unknown {sorted(set(got) - set(allowed))}; choose from {allowed}")
    if args.quick:
        args.min_repeats, args.max_repeats, args.target_s = 1, 2, 0.0
        args.sizes = args.sizes or (256, 512)
        args.err_n = args.err_n or 256
        args.features, args.buckets = args.features[:2], args.buckets[:2]
        args.hashes, args.seeds = args.hashes[:2], args.seeds[:1]
        args.tokens = args.tokens or (600, 1500)
        args.preset = args.preset or "tiny"
        args.chunk_len, args.chunk_stride = args.chunk_len or 128, args.chunk_stride or 96
        if args.out == DEFAULT_OUT:
            args.out = Path(tempfile.mkdtemp(prefix="long-attention-quick-"))
        if not args.no_write and args.md.resolve() == (ROOT / "BENCHMARKS.md").resolve():
            p.error("--quick numbers are not published: add --no-write or --md /tmp/...")
    args.sizes = args.sizes or SIZES
    args.err_n = args.err_n or ERR_N
    args.tokens = args.tokens or TOKENS
    args.preset = args.preset or "minilm-l6"
    args.chunk_len, args.chunk_stride = args.chunk_len or CHUNK_LEN, args.chunk_stride or \
        CHUNK_STRIDE
    if args.merge is not None and args.worker is None and (why := hx.merge_refusal(args.merge)):
        p.error(f"--merge: {why}")
    return args


def _key(rec: dict[str, Any]) -> tuple:
    return tuple(rec.get(k) for k in ("part", "method", "mode", "n", "dist", "alloc", "tokens"))


def merge(old: dict[str, Any], meta: dict[str, Any], records: list[dict[str, Any]]
          ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The earlier run's meta and records with this run's records in place of the ones it
    re-measured; ``meta["merges"]`` lists each merged run (command, date, what, load).
    A re-measured chunked part replaces the old one whole (its settings may have changed)."""
    new = {_key(r) for r in records}
    whole = {"chunked"} & {r["part"] for r in records}
    kept = [r for r in old["records"] if _key(r) not in new and r["part"] not in whole]
    what = sorted({" ".join(str(x) for x in _key(r)[:3] if x) for r in records})
    merged = {**old["meta"], "merges": [*old["meta"].get("merges", []), {
        "command": meta["command"], "date": meta["date"], "what": what,
        "wall_min": meta["wall_min"], "loadavg_start": meta["machine"]["loadavg_start"]}]}
    return merged, kept + records


def main(argv: list[str] | None = None) -> int:
    """Run the parts (or one worker), save the JSON, draw the plots, write the section."""
    args = parse_args(argv)
    md = None if args.no_write else args.md
    publishes = md is not None and md.resolve() == (ROOT / "BENCHMARKS.md").resolve()
    if hx.worker_or_render(args, worker,
                           lambda d: report.render(d, args.render.parent, md, None), publishes):
        return 0
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            sys.exit("--device cuda: torch.cuda.is_available() is False")
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "render", "worker",
                                                                   "md")}
    meta = hx.results_meta(args.device, args.threads, settings)
    meta["shapes"] = {"B": B, "H": H, "D": D, "window": WINDOW, "bigbird_block": BB_BLOCK,
                      "bigbird_random": BB_RANDOM, "chunk_len": args.chunk_len,
                      "chunk_stride": args.chunk_stride, "chunk_batch": CHUNK_BATCH,
                      "lsh_chunk": LSH_CHUNK, "seeds": len(args.seeds), "clusters": CLUSTERS,
                      "cluster_noise": CLUSTER_NOISE, "allocators": ALLOCATORS}
    start = time.perf_counter()
    records = run(args)
    meta["wall_min"] = (time.perf_counter() - start) / 60
    if args.merge is not None:
        meta, records = merge(json.loads(args.merge.read_text()), meta, records)
    args.out.mkdir(parents=True, exist_ok=True)
    report.render({"meta": meta, "records": records}, args.out, md,
                  args.out / f"long_attention_{args.device}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
