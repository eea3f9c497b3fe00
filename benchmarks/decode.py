"""Greedy decoding speed of ``EncoderDecoder.generate`` with and without the KV cache.

``EncoderDecoder(preset("transformer-base", vocab_size=8000))``, randomly initialised
(seed 0; another preset with ``--model``), float32, eval mode. Batch 1 and 8, source
length 32 (random ids, no padding), output lengths 16 ... 512 forced with
``min_new_tokens = max_new_tokens`` (EOS is forbidden, so every row decodes exactly that
many tokens). Each (batch, length, path) runs in its own process (machinery:
``_harness.py``): warm-up, then repeats; the encoder alone is timed too and subtracted,
so the per-step times are those of the decoding loop.

Target: with the cache the time per generated token stays flat: per-step time at the
longest length at most ``FLAT_LIMIT`` x that at the shortest, judged on its 95 % interval.
That ratio is measured in one process per batch size that interleaves the two lengths
(:data:`FLAT_ROUNDS` rounds, each one call at the shortest and one at the longest length,
their order alternating): each round's ratio of per-step times sees the same load on both
sides, and the geometric mean of the rounds' ratios carries a t-interval
(``_verdicts.ratio_interval``). The slope of log(time per step) against log(length) over
the series is reported too (0: flat, 1: linear growth, as recomputing the prefix gives
once its compute dominates).

Usage::

    python benchmarks/decode.py                   # writes BENCHMARKS.md and a PNG
    python benchmarks/decode.py --quick --no-write   # smoke test (results: a temp dir)
    python benchmarks/decode.py --render benchmarks/results/decode_cpu.json

Uncached runs whose time, extrapolated from the previous length (x4 per doubling), exceeds
``--uncached-budget-s`` are skipped and reported as such (never estimated in the tables).
Writes ``<out>/decode_cpu.json``, ``<out>/decode_cpu.png`` and the section between
``<!-- decode:cpu:begin/end -->`` of ``docs/benchmarks/attention.md`` (summed up in
``BENCHMARKS.md``).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as hx
import _verdicts as V

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results"
KEY = "decode:cpu"
LENGTHS = (16, 32, 64, 128, 256, 512)
BATCHES = (1, 8)
SRC_LEN, VOCAB, FLAT_LIMIT = 32, 8000, 1.5
#: interleaved rounds of the flatness check (one call at each end of the lengths per round)
FLAT_ROUNDS = 6
PATHS = ("cached", "uncached")


# --- worker ----------------------------------------------------------------------------------
def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Time ``generate`` for one (model, batch, length, path) in this process."""
    import torch

    from headwise.models.config import preset
    from headwise.models.seq2seq import EncoderDecoder

    def body(dev: str, sync: Any) -> dict[str, Any]:
        torch.manual_seed(0)
        model = EncoderDecoder(preset(spec["model"], vocab_size=spec["vocab"])).eval()
        g = torch.Generator().manual_seed(1)
        src = torch.randint(3, spec["vocab"], (spec["batch"], SRC_LEN), generator=g)
        n, cache = spec["length"], spec["path"] == "cached"

        def gen(length: int) -> Any:
            return model.generate(src, max_new_tokens=length, min_new_tokens=length,
                                  use_cache=cache)

        def enc() -> Any:
            with torch.inference_mode():
                return model.encode(src)

        for length in (min(n, 32),) * spec["warmup"]:  # warm-up on short outputs
            gen(length)
        enc_s = [hx.timed(enc, sync) for _ in range(5)]
        if spec.get("kind") == "flatness":
            return interleaved(gen, statistics.median(enc_s), spec)
        out, times, t0 = None, [], time.perf_counter()
        while len(times) < spec["max_repeats"] and (
                len(times) < spec["min_repeats"] or sum(times) < spec["target_s"]):
            if times and time.perf_counter() - t0 + times[-1] > spec["budget_s"]:
                break  # one more repeat would run past this configuration's time budget
            start = time.perf_counter()
            out = gen(n)
            times.append(time.perf_counter() - start)
        if out is None or tuple(out.shape) != (spec["batch"], n):
            return {"status": "error", "detail": f"generated {tuple(out.shape)}, not "
                    f"{(spec['batch'], n)}"}
        gen_ms, enc_ms = statistics.median(times) * 1e3, statistics.median(enc_s) * 1e3
        return {"status": "ok", "ms": hx.summarize(times, 1e3), "encode_ms": enc_ms,
                "step_ms": (gen_ms - enc_ms) / n, "token_ms": (gen_ms - enc_ms) / n /
                spec["batch"], "times_s": times}

    return hx.in_worker(spec, body)


def interleaved(gen: Any, enc_s: float, spec: dict[str, Any]) -> dict[str, Any]:
    """The flatness check's rounds in this process: per round one call of ``gen`` at
    ``spec["short"]`` and one at ``spec["length"]`` output tokens (the order alternating
    round by round), each turned into ms per step with the encoder's ``enc_s`` taken off."""
    short, long_ = spec["short"], spec["length"]
    steps: dict[int, list[float]] = {short: [], long_: []}
    for i in range(spec["rounds"]):
        for n in ((short, long_) if i % 2 == 0 else (long_, short)):
            start = time.perf_counter()
            gen(n)
            steps[n].append((time.perf_counter() - start - enc_s) * 1e3 / n)
    return {"status": "ok", "encode_ms": enc_s * 1e3, "short_step_ms": steps[short],
            "long_step_ms": steps[long_]}


# --- running the series ----------------------------------------------------------------------
def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (batch, path) series in increasing length; uncached lengths extrapolated past
    the budget are skipped without running."""
    common = {k: getattr(args, k) for k in ("device", "threads", "mem_limit_gib", "warmup",
                                              "min_repeats", "max_repeats", "target_s")}
    env = {"OMP_NUM_THREADS": str(args.threads)}
    records: list[dict[str, Any]] = []
    for batch in args.batches:
        for path in PATHS:
            prev: dict[str, Any] | None = None
            for n in args.lengths:
                rec: dict[str, Any] = {"batch": batch, "path": path, "length": n}
                est = None
                if prev is not None and prev.get("status") == "ok":
                    est = prev["ms"]["median"] / 1e3 * (n / prev["length"]) ** 2
                if path == "uncached" and (est is not None and est > args.uncached_budget_s
                                           or prev is not None and prev.get("status") != "ok"):
                    why = (f"one call extrapolated to > {args.uncached_budget_s:g} s "
                           f"(--uncached-budget-s)" if est is not None
                           else "a shorter length was not measured")
                    rec.update(status="skipped", detail=f"not run: {why}")
                else:
                    print(f"decode: batch {batch} {path} length {n}", file=sys.stderr)
                    spec = {**common, "model": args.model, "vocab": args.vocab, "batch": batch,
                            "path": path, "length": n, "budget_s": args.config_budget_s}
                    rec.update(hx.run_worker(Path(__file__), spec, args.timeout, env))
                records.append(rec)
                prev = rec
    if len(args.lengths) > 1:
        for batch in args.batches:
            print(f"decode: batch {batch} flatness, {args.flat_rounds} interleaved rounds",
                  file=sys.stderr)
            spec = {**common, "model": args.model, "vocab": args.vocab, "batch": batch,
                    "path": "cached", "kind": "flatness", "length": max(args.lengths),
                    "short": min(args.lengths), "rounds": args.flat_rounds}
            records.append({"batch": batch, "kind": "flatness", "short": min(args.lengths),
                            "length": max(args.lengths),
                            **hx.run_worker(Path(__file__), spec, args.timeout, env)})
    return records


# --- report ----------------------------------------------------------------------------------
def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(y) against log(x)."""
    if len(points) < 2:
        return None
    xs, ys = [math.log(x) for x, _ in points], [math.log(y) for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs)


def series(records: list[dict[str, Any]], batch: int, path: str) -> list[tuple[int, float]]:
    """(length, ms per step) of the measured records of one series."""
    return sorted((r["length"], r["step_ms"]) for r in records if r["batch"] == batch
                  and r.get("path") == path and r.get("kind") != "flatness"
                  and r.get("status") == "ok")


def flatness(records: list[dict[str, Any]], lengths: list[int], batch: int) -> dict[str, Any]:
    """The cached series' check: per-step time at the longest over the shortest length,
    the geometric mean of the interleaved rounds' ratios with its 95 % interval
    (``ratio``, a :class:`_verdicts.Interval`; absent without the rounds), and the
    series' log-log slopes."""
    pts = series(records, batch, "cached")
    out: dict[str, Any] = {"slope": slope(pts), "uncached_slope": slope(
        series(records, batch, "uncached"))}
    rec = next((r for r in records if r.get("kind") == "flatness" and r["batch"] == batch
                and r.get("status") == "ok" and r["short"] == min(lengths)
                and r["length"] == max(lengths)), None)
    if rec is not None:
        out["ratio"] = V.ratio_interval(rec["long_step_ms"], rec["short_step_ms"])
        out["rounds"] = len(rec["long_step_ms"])
    return out


def plot(path: Path, records: list[dict[str, Any]], batches: list[int], title: str) -> None:
    """Per-step time against output length (log-log), one panel per batch size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, axes = plt.subplots(1, len(batches), figsize=(5.5 * len(batches), 4.0), squeeze=False)
    for ax, batch in zip(axes[0], batches, strict=True):
        xs: set[int] = set()
        for i, p in enumerate(PATHS):
            pts = series(records, batch, p)
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", ms=3, color=f"C{i}",
                        label=p if len(pts) < 2 else f"{p} (slope {slope(pts):.2f})")
                xs.update(x for x, _ in pts)
        cached = series(records, batch, "cached")
        if cached:
            ax.axhline(FLAT_LIMIT * cached[0][1], color="grey", ls="--", lw=1,
                       label=f"{FLAT_LIMIT:g}x cached at {cached[0][0]}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(  # label the 2s and 5s of each decade
            lambda y, _: f"{y:g}" if f"{y:e}"[0] in "25" else ""))
        ax.set_xticks(sorted(xs), [str(x) for x in sorted(xs)])
        ax.set(title=f"batch {batch}", xlabel="output length (tokens)",
               ylabel="ms per decoding step (encoder excluded)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section(data: dict[str, Any], png: Path, md_dir: Path) -> str:
    """The markdown section (without its markers)."""
    meta, records = data["meta"], data["records"]
    s = meta["settings"]
    lengths, batches = list(s["lengths"]), list(s["batches"])
    verdicts, ev = [], []
    for b in batches:
        f = flatness(records, lengths, b)
        sl = "-" if f["slope"] is None else f"{f['slope']:.3f}"
        if "ratio" in f:
            r = f["ratio"]
            verdicts.append(V.judge_at_most(r, FLAT_LIMIT))
            ev.append(f"batch {b}: {r.mean:.2f}x [{r.low:.2f}, {r.high:.2f}] over "
                      f"{f['rounds']} interleaved rounds ({verdicts[-1]}), series slope {sl}")
        else:
            verdicts.append("not measured")
            ev.append(f"batch {b}: the interleaved rounds were not measured, slope {sl}")
    verdict = V.combined(verdicts) if verdicts and "not measured" not in verdicts \
        else "not measured"
    parts = [
        "## Decoding speed with and without the KV cache on cpu", hx.provenance(meta),
        f"`EncoderDecoder(preset(\"{s['model']}\", vocab_size={s['vocab']}))`, randomly "
        f"initialised (seed 0), float32, eval mode under `torch.inference_mode` (as "
        f"`generate` runs). Source: {SRC_LEN} random token ids per row, no padding. Greedy "
        f"search, `min_new_tokens = max_new_tokens` = the output length (EOS forbidden, so "
        f"every row decodes exactly that many tokens). Each (batch, length, path) in its own "
        f"process: {s['warmup']} warm-up calls on outputs of at most 32 tokens, then "
        f"{s['min_repeats']} to {s['max_repeats']} calls (until {s['target_s']:g} s; fewer "
        f"when one more would take the configuration past {s['config_budget_s']:g} s), the "
        f"median (the tables). Uncached lengths whose one call, extrapolated from the "
        f"previous length (x4 per doubling), would exceed "
        f"{s['uncached_budget_s']:g} s are not run. "
        f"The encoder alone (median of 5 calls) is subtracted: "
        f"**ms per step** = (generate - encoder) / output length, one step producing one "
        f"token per row; **ms per token** = ms per step / batch. \"uncached\" recomputes the "
        f"decoder over the whole prefix at every step (`use_cache=False`). The target is "
        f"judged in one more process per batch size that interleaves the two ends: "
        f"{s.get('flat_rounds', FLAT_ROUNDS)} rounds, each one cached call at "
        f"{min(lengths)} and one at {max(lengths)} tokens (order alternating), the "
        f"geometric mean of the rounds' ratios of ms per step with its 95 % t-interval; "
        f"PASS when the whole interval is at most the limit.",
        "### Target", hx.markdown_table(["target", "verdict", "measured"], [[
            f"with the cache, ms per step at output length {max(lengths)} at most "
            f"{FLAT_LIMIT:g}x that at {min(lengths)} (\"flat\"); slope of log(ms/step) vs "
            f"log(length) reported (0 = flat)", verdict, "; ".join(ev)]], "lll")]
    rows = []
    for b in batches:
        for p in PATHS:
            cells = []
            for n in lengths:
                r = next((r for r in records if (r["batch"], r["path"], r["length"]) ==
                          (b, p, n)), None)
                cells.append("-" if r is None else hx.fmt(r["step_ms"]) if r.get("status") ==
                             "ok" else r["status"])
            sl = slope(series(records, b, p))
            rows.append([b, p, *cells, "-" if sl is None else f"{sl:.2f}"])
    parts += ["### ms per decoding step (encoder excluded)", hx.markdown_table(
        ["batch", "path", *map(str, lengths), "log-log slope"], rows, "rl" + "r" * (
            len(lengths) + 1))]
    detail = [[r["batch"], r["path"], r["length"], hx.fmt(r["ms"]["median"]),
               hx.fmt(r["encode_ms"]), hx.fmt(r["token_ms"]), r["ms"]["n"]]
              for r in records if r.get("status") == "ok" and r.get("kind") != "flatness"]
    parts += ["### Whole calls", hx.markdown_table(
        ["batch", "path", "length", "generate ms", "encoder ms", "ms per token", "calls"],
        detail, "rlrrrrr")]
    parts += hx.image_links([("decode: ms per step vs output length", png)], md_dir)
    missing = hx.not_measured(records, lambda r: f"batch {r['batch']} "
                              f"{r.get('path', r.get('kind'))} length {r['length']}")
    if missing:
        parts += ["### Not measured", "\n".join(missing)]
    return "\n\n".join(parts)


def render(data: dict[str, Any], out: Path, md: Path | None, json_path: Path | None) -> None:
    """Draw the plot beside the results and publish the JSON and the section."""
    s = data["meta"]["settings"]
    png = out / "decode_cpu.png"
    plot(png, data["records"], list(s["batches"]),
         f"greedy decoding, {s['model']} (random weights), source {SRC_LEN} tokens")
    hx.publish(json_path, data, md, KEY, lambda md_dir: section(data, png, md_dir))


# --- main ------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    ints = lambda s: tuple(int(x) for x in s.split(","))  # noqa: E731
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="Defaults here: --min-repeats 3, "
        "--max-repeats 10, --target-s 5, --timeout 900.")
    hx.add_common_args(p, DEFAULT_OUT)
    p.set_defaults(min_repeats=3, max_repeats=10, target_s=5.0, timeout=900.0)
    add = p.add_argument
    add("--model", default="transformer-base",
        help="a seq2seq preset of headwise (default transformer-base)")
    add("--vocab", type=int, default=VOCAB,
        help="vocabulary size, overriding the preset's (default 8000)")
    add("--lengths", type=ints, default=LENGTHS,
        help="output lengths (default 16,32,64,128,256,512)")
    add("--batches", type=ints, default=BATCHES, help="batch sizes (default 1,8)")
    add("--warmup", type=int, default=2, help="warm-up calls per process (default 2)")
    add("--flat-rounds", type=int, default=FLAT_ROUNDS,
        help=f"interleaved rounds of the flatness check (default {FLAT_ROUNDS})")
    add("--uncached-budget-s", type=float, default=120.0,
        help="skip an uncached length whose one call is extrapolated above this many "
        "seconds (default 120)")
    add("--config-budget-s", type=float, default=300.0,
        help="no further repeat once one more would take a configuration past this many "
        "seconds (default 300)")
    args = p.parse_args(argv)
    if args.device != "cpu":
        p.error("only --device cpu is implemented (the section is decode:cpu)")
    if args.quick:
        args.lengths = args.lengths if args.lengths != LENGTHS else (16, 64)
        args.min_repeats, args.max_repeats, args.target_s, args.warmup = 1, 1, 0.0, 1
        args.flat_rounds = 2
        if not args.no_write:
            p.error("--quick numbers are not published: add --no-write")
        if args.out == DEFAULT_OUT:
            args.out = Path(tempfile.mkdtemp(prefix="decode-quick-"))
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the series (or one worker), save the JSON, draw the plot, write the section."""
    args = parse_args(argv)
    md = None if args.no_write else ROOT / "BENCHMARKS.md"
    if hx.worker_or_render(args, worker, lambda d: render(d, args.render.parent, md, None),
                           md is not None):
        return 0
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "render", "worker")}
    meta = hx.results_meta(args.device, args.threads, settings)
    start = time.perf_counter()
    records = run(args)
    meta["wall_min"] = (time.perf_counter() - start) / 60
    args.out.mkdir(parents=True, exist_ok=True)
    render({"meta": meta, "records": records}, args.out, md, args.out / "decode_cpu.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
