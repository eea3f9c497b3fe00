"""The BENCHMARKS.md section of ``benchmarks/serve.py``, computed from its results dict."""

from __future__ import annotations

import statistics
from typing import Any

import _harness as H
import _verdicts as V

KNN_PATHS = {"PyTorch": "ours (PyTorch, k-NN detector)", "ONNX": "ours (ONNX, k-NN detector)"}
"""The single-query paths of ``benchmarks/serve.py`` that answer with a k-NN out-of-scope
detector, by the path without one they are compared with."""

PARTS = ("single", "sweep", "load", "access")
"""The parts of ``benchmarks/serve.py``, in its order."""


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def _targets(r: dict[str, Any]) -> list[str]:
    lat = r.get("single", {}).get("latency", {})
    times = r.get("single", {}).get("times_s", {})
    rows = ["| target | verdict | measured |", "| --- | --- | --- |"]
    # runtime against runtime (the protocol): our ONNX path against transformers' own model
    # exported to ONNX in onnxruntime, our PyTorch path against transformers' PyTorch pipeline
    for name, base in (("ours (ONNX)", "transformers ONNX"),
                       ("ours (PyTorch)", "transformers pipeline")):
        if name not in lat or base not in lat:
            if name in lat:
                rows.append(f"| single-query p50 at most half of {base}'s: {name} | NOT "
                            f"MEASURED | the record predates the like-for-like baseline "
                            f"({base}); re-run `python benchmarks/serve.py` |")
            continue
        ours, hf = lat[name]["p50_ms"], lat[base]["p50_ms"]
        if name in times and base in times:
            iv = V.ratio_interval(times[name], times[base])
            verdict = V.judge_at_most(iv, 0.5)
            spread = f"; per-round ratio, geometric mean {iv.plain()}"
        else:
            verdict = _verdict(ours <= 0.5 * hf)
            spread = "; no interval: the record predates per-round times"
        rows.append(f"| single-query p50 at most half of {base}'s: {name} | {verdict} | "
                    f"ours {ours:.2f} ms, {base} {hf:.2f} ms (p50 ratio {ours / hf:.2f}"
                    f"{spread}) |")
    for base, name in KNN_PATHS.items():
        base = f"ours ({base})"
        if name in times and base in times:
            iv = V.ratio_interval(times[name], times[base])
            rows.append(f"| (cost) a k-NN out-of-scope detector on the single-query path: "
                        f"{name} against {base} | (reported) | p50 {lat[name]['p50_ms']:.2f} "
                        f"against {lat[base]['p50_ms']:.2f} ms, p99 {lat[name]['p99_ms']:.2f} "
                        f"against {lat[base]['p99_ms']:.2f} ms; per-round ratio, geometric "
                        f"mean {iv.plain()} |")
    for runtime in dict.fromkeys(x.get("runtime", "torch") for x in r.get("load", [])):
        rows += _batching_targets(r, runtime)
    sweep = {(x["runtime"], x["batch"]): x for x in r.get("sweep", [])}
    for runtime, name in (("onnx", "ONNX"), ("int8", "int8")):
        on = _points(r, runtime)
        top = sweep.get((name, 32))
        if top and on.get(1):
            need = 4 * statistics.median(x["throughput"] for x in on[1])
            rows.append(f"| (bound) {runtime}: in-process ceiling at batch 32 against what the "
                        f"targets need | (reported) | {top['predict_texts_per_s']:.0f} texts/s "
                        f"with no HTTP at all; 4x concurrency-1 needs {need:.0f} req/s and p99 "
                        f"under 50 ms at concurrency 32 needs more than 640 req/s (Little's "
                        f"law: mean latency = 32 / throughput) |")
    soak = r.get("soak")
    if soak:
        rows.append(f"| {soak['seconds']:.0f}-second load run (concurrency 32, batching on, "
                    f"{soak.get('runtime', 'torch')}) with zero errors | "
                    f"{_verdict(soak['errors'] == 0)} | "
                    f"{soak['requests']} requests, {soak['errors']} errors, "
                    f"{soak['throughput']:.1f} req/s, p50 {soak['p50_ms']:.1f} ms, "
                    f"p99 {soak['p99_ms']:.1f} ms |")
    if "onnx_max_logit_diff" in r.get("single", {}):
        d = r["single"]["onnx_max_logit_diff"]
        rows.append(f"| onnxruntime logits equal PyTorch's within 1e-4 | {_verdict(d <= 1e-4)} "
                    f"| max abs difference {d:.2e} |")
    return rows


def _points(r: dict[str, Any], runtime: str) -> dict[int, list[dict[str, Any]]]:
    """The batching-on load points of a runtime by concurrency, one per round in round
    order (a record without rounds has one)."""
    on: dict[int, list[dict[str, Any]]] = {}
    for x in sorted((x for x in r.get("load", [])
                     if x["batching"] and x.get("runtime", "torch") == runtime),
                    key=lambda x: x.get("round", 0)):
        on.setdefault(x["concurrency"], []).append(x)
    return on


def _batching_targets(r: dict[str, Any], runtime: str) -> list[str]:
    """Micro-batching's two targets for one runtime, judged on the load rounds: the
    speed-up of concurrency 32 over concurrency 1 (the geometric mean of the per-round
    ratios, :func:`_verdicts.ratio_interval`) at least 4, and the p99 at concurrency 32
    (the mean over rounds, :func:`_verdicts.mean_interval`) at most 50 ms."""
    on = _points(r, runtime)
    c1, c32 = on.get(1, []), on.get(32, [])
    if not c32:
        return []
    label = f"| {runtime}, batching at concurrency 32:"
    if len(c1) != len(c32) or len(c32) < 2 or not all(x["throughput"] for x in c1):
        one = f"{c32[0]['throughput']:.1f} vs {c1[0]['throughput']:.1f} req/s" if c1 else \
            "concurrency 1 not measured"
        why = "not judged: one load run, no interval (re-run `python benchmarks/serve.py`)"
        return [f"{label} at least 4x the concurrency-1 throughput | {why} | {one} |",
                f"{label} p99 under 50 ms | {why} | p99 {c32[0]['p99_ms']:.1f} ms |"]
    speed = V.ratio_interval([x["throughput"] for x in c32], [x["throughput"] for x in c1])
    p99 = V.mean_interval([x["p99_ms"] for x in c32])
    per_round = ", ".join(f"{a['throughput'] / b['throughput']:.2f}"
                          for a, b in zip(c32, c1, strict=True))
    return [f"{label} at least 4x the concurrency-1 throughput | {V.judge(speed, 4.0)} | "
            f"{speed.mean:.2f}x [{speed.low:.2f}, {speed.high:.2f}] (geometric mean of "
            f"{len(c32)} rounds: {per_round}) |",
            f"{label} p99 under 50 ms | {V.judge_at_most(p99, 50.0)} | "
            f"{p99.mean:.1f} [{p99.low:.1f}, {p99.high:.1f}] ms (mean of {len(c32)} rounds: "
            + ", ".join(f"{x['p99_ms']:.1f}" for x in c32) + ") |"]


def _access_targets(a: dict[str, Any] | None) -> list[str]:
    """The targets of the access part: a reload under load and a drain without failures."""
    if not a:
        return []
    rl, dr = a["reload"], a["drain"]
    failed = rl["total"]["errors"]
    lost = dr["in_flight"] - dr["in_flight_ok"]
    return [
        f"| reload under load (concurrency 8): zero failed requests | {_verdict(failed == 0)} "
        f"| {rl['total']['requests']} requests, {failed} errors, swap in {rl['reload_s']:.2f} s |",
        f"| drain on SIGTERM (concurrency 32): every request in flight answered 200, exit "
        f"status 0 | {_verdict(lost == 0 and dr['exit_status'] == 0)} | {dr['in_flight_ok']} of "
        f"{dr['in_flight']} in flight answered, exit status {dr['exit_status']} |"]


#: the access part's block, inside the serve section (``--parts access`` rewrites it alone)
ACCESS_KEY = "serve-access:cpu"


def _ms(x: float) -> str:
    return "-" if x != x else f"{x:.1f}"  # NaN: no request in the window


def access_rows(r: dict[str, Any]) -> list[str]:
    """Markdown of the access part: API keys' cost, the reload and the drain."""
    a = r["access"]
    auth, guard = a["auth"], a["guard"]
    base, keyed = auth["open"]["p50_ms"], auth["api keys"]["p50_ms"]
    spread = max(max(v["rounds"]) - min(v["rounds"]) for v in auth.values())
    s = r["settings"]
    lines = [
        "### API keys, reload under load, drain on SIGTERM",
        "",
        f"Servers on the {a['runtime']} runtime, batching on. **API keys**: the same model "
        f"served without and with `--api-key-file` (one key, sent as `Authorization: Bearer`), "
        f"single-query requests at concurrency 1, {s['access_rounds']} interleaved rounds of "
        f"{s['access_point_s']:g} s each (median of the rounds' p50):",
        "",
        "| server | p50 ms (median of rounds) | rounds' p50 ms |",
        "| --- | ---: | --- |",
        *(f"| {name} | {v['p50_ms']:.2f} | {', '.join(f'{x:.2f}' for x in v['rounds'])} |"
          for name, v in auth.items()),
        "",
        f"Difference: {keyed - base:+.3f} ms ({(keyed - base) / base * 100:+.1f} %) on the "
        f"p50, {'within' if abs(keyed - base) <= spread else 'beyond'} the spread of one "
        f"server's p50 between rounds ({spread:.3f} ms). In process, the access guard (header "
        f"scan, SHA-256 of the presented key, constant-time comparison with each of the "
        f"{guard['keys']} keys) costs {guard['guard_us']:.1f} µs per request (best of 5 × "
        f"{guard['calls']} calls).",
        "",
    ]
    rl = a["reload"]
    ans = rl["answer"]
    lines += [
        f"**Reload under load**: 8 clients send single-text requests with the key; "
        f"`POST /admin/reload` names a second model directory (the same encoder with another "
        f"random head); it answered after {rl['reload_s']:.2f} s (load and warm-up beside "
        f"the old model: {ans['load_seconds']:.2f} s), serving `{ans['model']}` "
        f"(generation {ans['generation']}).",
        "",
        "| window | requests | errors | p50 ms | p99 ms | max ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in ("before", "during", "after"):
        w = rl[name]
        lines.append(f"| {name} the reload ({w['seconds']:.1f} s) | {w['requests']} | "
                     f"{w['errors']} | {_ms(w['p50_ms'])} | {_ms(w['p99_ms'])} | "
                     f"{_ms(w['max_ms'])} |")
    t = rl["total"]
    kinds = f" ({', '.join(t['error_kinds'])})" if t["error_kinds"] else ""
    lines += ["", f"In all: {t['requests']} requests, {t['errors']} errors{kinds}. The load "
              f"generator shares the cores with the server, which also loads the new model on "
              f"them during the reload.", ""]
    dr = a["drain"]
    after = ", ".join(f"{k}: {v}" for k, v in sorted(dr["after_outcomes"].items())) or "none"
    lines += [
        f"**Drain**: 32 clients; SIGTERM after {max(1.0, s['access_point_s']):g} s of load. "
        f"Requests in flight when the signal came: {dr['in_flight']}, answered 200: "
        f"{dr['in_flight_ok']} (outcomes {', '.join(dr['in_flight_outcomes']) or '-'}). "
        f"Requests sent after it: {dr['sent_after']} ({after}; `ConnectionRefusedError`: "
        f"the listening socket was closed, uvicorn's drain; `closed`: a keep-alive connection "
        f"closed before the request was read; 200: a request that reached a connection before "
        f"it closed). The process exited with status {dr['exit_status']} "
        f"{dr['drain_s']:.2f} s after the signal. Before the signal: "
        f"{dr['before']['requests']} requests, {dr['before']['errors']} errors.",
    ]
    return lines


def access_block(r: dict[str, Any], command: str | None) -> str:
    """The access part's block: on its own (``--parts access``) with how it was made, or
    (``command`` None) inside the serve section, which says that."""
    m = r["machine"]
    head = []
    if command is not None:
        head = [f"Produced by `{command}` on {r['date']} in {r['minutes']:.1f} "
                f"min. Machine: {m['cpu']}, {m['logical_cpus']} logical CPUs; 1-minute load "
                f"average {m['loadavg_start']:.2f} at the start.", ""]
        if r["quick"]:
            head += ["**Quick mode**: short rounds; the numbers are a smoke test, not a "
                     "measurement.", ""]
    rows = access_rows(r)
    targets = ["| target | verdict | measured |", "| --- | --- | --- |",
               *_access_targets(r["access"])]
    return "\n".join([rows[0], "", *head, *targets, "", *rows[2:]]) + "\n"


def command_of(r: dict[str, Any]) -> str:
    """The command that produced the results ``r`` (``benchmarks/serve.py``'s flags)."""
    parts = r.get("parts", list(PARTS))
    return "python benchmarks/serve.py" + (" --quick" if r["quick"] else "") + (
        f" --parts {','.join(parts)}" if parts != list(PARTS) else "")


def full_section(r: dict[str, Any]) -> str:
    """The ``serve:cpu`` section of a results file, the machine line under its heading."""
    return H.with_machine_line(section(r, command_of(r)), [r])


def access_section(r: dict[str, Any]) -> str:
    """The ``serve-access:cpu`` section of a results file of ``--parts access`` alone."""
    return H.with_machine_line(access_block(r, command_of(r)), [r])


def section(r: dict[str, Any], command: str) -> str:
    """Markdown for the ``serve:cpu`` section."""
    m = r["machine"]
    s = r["settings"]
    lines = [
        "## Intent service on cpu: latency, throughput, micro-batching, ONNX",
        "",
        f"Produced by `{command}` on {r['date']} in {r['minutes']:.1f} min. Machine: "
        f"{m['cpu']}, {m['logical_cpus']} logical CPUs; "
        f"torch {m['torch']}; 1-minute load average {m['loadavg_start']:.2f} at the start.",
        "",
    ]
    if r["quick"]:
        lines += ["**Quick mode**: few repeats and short load points; the numbers are a "
                  "smoke test, not a measurement.", ""]
    if H.was_busy(m):
        lines += ["**Warning**: the machine was busy when the run started; timings are "
                  "suspect.", ""]
    lines += [
        "Model: all-MiniLM-L6-v2 (6 layers, 12 heads, d=384, mean pooling) with a random "
        "10-intent head (latency does not depend on what the head learnt), maximum length "
        "128; texts are English queries of 4 to ~25 words. The server is `headwise serve` in "
        "its own process (1 worker, onnxruntime with the fused export, or PyTorch; max batch "
        f"{s['max_batch_size']}, max wait {s['max_wait_ms']} ms); the load generator "
        "(`benchmarks/_serve_load.py`) is another process on loopback, each client sending "
        f"one single-text request at a time; each point runs {s['point_s']:.0f} s after "
        f"{s.get('warmup_s', 1.0):g} s of warm-up. Both share the machine's cores.",
        "",
        "### Targets",
        "",
        *_targets(r),
        "",
    ]
    if r.get("single"):
        lines += [f"### Single-query latency (in process, {s['rounds']} interleaved rounds)",
                  "", "| path | p50 ms | p99 ms | mean ms |", "| --- | --- | --- | --- |"]
        for name, v in r["single"]["latency"].items():
            lines.append(f"| {name} | {v['p50_ms']:.2f} | {v['p99_ms']:.2f} | "
                         f"{v['mean_ms']:.2f} |")
        lines += ["", "\"ours\": tokenize, forward, calibrated top-3 "
                  "(`SingleLabelPredictor.predict`); the pipeline: `transformers.pipeline("
                  "'text-classification', top_k=3)` on `AutoModelForSequenceClassification` "
                  "of the same checkpoint.", ""]
        if set(KNN_PATHS.values()) & set(r["single"]["latency"]):
            lines += ["\"k-NN detector\": the same predictor with a fitted k-NN out-of-scope "
                      f"detector (k=10, a bank of {s['knn_bank']} seeded random vectors of the "
                      "pooled width, the threshold at the median score of the texts) deciding "
                      "each answer: the model, then the detector's matrix product on "
                      "PyTorch's threads (`ood.base.matmul`).", ""]
        d = r["single"].get("default_path")
        if d:
            lines += [f"The default path (`headwise serve MODEL`, `predict`) of a directory "
                      f"never exported: \"default before\" is PyTorch, what runtime auto "
                      f"chose until it built the export itself; \"default now\" is what it "
                      f"chooses now ({d['runtime']}); the first start took "
                      f"{d['first_use_s']:.1f} s, the export built and checked once into the "
                      f"user cache, later starts reuse it.", ""]
    if "int8" in r.get("single", {}):
        i8 = r["single"]["int8"]
        lines += [f"int8 (onnxruntime dynamic quantisation) vs float32 on {i8['texts']} texts: "
                  f"top-1 agreement {i8['top1_agreement']:.3f}, largest probability change "
                  f"{i8['max_prob_change']:.3f} (the head is random, so this is agreement, not "
                  f"accuracy; `headwise export --data` measures accuracy on a trained model). "
                  f"Export of both files took {r['export_s']:.0f} s.", ""]
    if r.get("sweep"):
        lines += ["### In-process throughput by batch size (the server's ceiling)", "",
                  "| runtime | batch | forward texts/s | predict texts/s | calls |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for x in r["sweep"]:
            lines.append(f"| {x['runtime']} | {x['batch']} | {x['forward_texts_per_s']:.0f} | "
                         f"{x['predict_texts_per_s']:.0f} | {x['calls']} |")
        lines += ["", "Consecutive groups of the benchmark texts, in this process, no HTTP: "
                  "\"forward\" = `SingleLabelPredictor.logits` on pre-tokenized texts (padding, "
                  "forward, pooling), \"predict\" = `SingleLabelPredictor.predict` (tokenize, "
                  "forward, calibrated top-3); texts/s = batch size / median time per call. "
                  "The server at concurrency c cannot beat the predict column at batch c: "
                  "HTTP parsing, the event loop and the load generator share the same cores.",
                  ""]
    if r.get("load"):
        lines += _load_rows(r)
    if r.get("access"):
        block = access_block(r, None)
        lines += ["", f"<!-- {ACCESS_KEY}:begin -->", block.strip(), f"<!-- {ACCESS_KEY}:end -->"]
    return "\n".join(lines) + "\n"


def _load_rows(r: dict[str, Any]) -> list[str]:
    rounds = max((x.get("round", 0) for x in r.get("load", [])), default=0) + 1
    lines = ["### Throughput over HTTP", ""]
    if rounds > 1:
        lines += [f"Each point ran in {rounds} rounds on the same server; the table shows "
                  f"the median over rounds and each round's req/s.", ""]
    lines += ["| runtime | batching | concurrency | req/s | p50 ms | p90 ms | p99 ms | errors "
              "| rounds' req/s |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    points: dict[tuple[str, bool, int], list[dict[str, Any]]] = {}
    for x in r.get("load", []):
        points.setdefault((x.get("runtime", "torch"), x["batching"], x["concurrency"]),
                          []).append(x)
    for (runtime, batching, c), xs in points.items():
        med = {k: statistics.median(x[k] for x in xs)
               for k in ("throughput", "p50_ms", "p90_ms", "p99_ms")}
        lines.append(f"| {runtime} | {'on' if batching else 'off'} | {c} | "
                     f"{med['throughput']:.1f} | {med['p50_ms']:.1f} | {med['p90_ms']:.1f} | "
                     f"{med['p99_ms']:.1f} | {sum(x['errors'] for x in xs)} | "
                     + ", ".join(f"{x['throughput']:.1f}" for x in xs) + " |")
    if r.get("metrics_sample"):
        vals = {ln.split()[0]: float(ln.split()[1]) for ln in r["metrics_sample"]}
        n, total = vals.get("headwise_batch_size_count"), vals.get("headwise_batch_size_sum")
        if n:
            lines += ["", f"Mean texts per forward batch over the batching-on run (from "
                      f"`/metrics`) of the server that ran the soak: {total / n:.1f} "
                      f"({int(n)} batches)."]
    return lines
