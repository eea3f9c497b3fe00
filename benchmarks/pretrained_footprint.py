"""A fine-tuned pretrained encoder on the serving path: ONNX fp32 and int8 latency,
accuracy and file size, and the memory and size that vocabulary trimming saves.

Takes a classifier kept by ``benchmarks/intent.py --keep-models DIR`` (for instance
multilingual-e5-small fine-tuned on DataCLUE CIC) and measures, in one run:

* the fused fp32 ONNX export and its dynamic int8 quantization: file size, single-query
  p50/p99 through ``SingleLabelPredictor.predict`` (tokenize, forward, calibrated top-3, what
  ``headwise serve`` runs), and test accuracy / macro-F1 of each (int8's change is the
  number to watch);
* the same checkpoint untrimmed (every vocabulary row, a fresh head): ONNX file size and
  p50, and both models' peak memory (RSS) over one training step (forward, backward,
  AdamW), each in a fresh process.

    python benchmarks/pretrained_footprint.py \
        --model-dir /tmp/intent_models/dataclue_cic-e5-small-prior-0
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402
import _verdicts as V  # noqa: E402
from intent import DATASETS, load_split, predictor_latency  # noqa: E402

SECTION = "intent:pretrained-footprint"


class _RuntimeClassifier:
    """The calibrated probabilities of a classifier over another forward pass (ONNX fp32 or
    int8) on texts cut to its maximum length: what ``int8_choice.py`` compares row by row
    (the scores of a runtime are :func:`headwise.intent.evaluate` of its predictor)."""

    def __init__(self, clf: Any, runtime: Any) -> None:
        self.clf, self.runtime = clf, runtime
        self.labels, self.threshold = clf.labels, clf.threshold

    def predict_proba(self, texts: list[str], *, batch_size: int = 64) -> Any:
        import numpy as np

        out = []
        for start in range(0, len(texts), batch_size):
            enc = self.clf.tokenizer(list(texts[start:start + batch_size]),
                                     max_length=self.clf.max_length)
            logits, _ = self.runtime.forward(enc["input_ids"].numpy(),
                                             enc["attention_mask"].numpy())
            z = logits.astype(np.float64) / self.clf.temperature
            z -= z.max(1, keepdims=True)
            p = np.exp(z)
            out.append(p / p.sum(1, keepdims=True))
        return np.concatenate(out)


def _mib(path: Path) -> float:
    return path.stat().st_size / 2**20


def serving(spec: dict[str, Any]) -> dict[str, Any]:
    """fp32 and int8 ONNX of the kept classifier: size, latency, test scores."""
    import torch

    from headwise.intent import IntentClassifier, evaluate
    from headwise.intent.inference import OnnxRuntime, SingleLabelPredictor
    from headwise.onnx.export import export_onnx, quantize_int8

    torch.set_num_threads(spec["threads"])
    clf = IntentClassifier.load(spec["model_dir"])
    test = load_split(Path(spec["data_dir"]), DATASETS[spec["dataset"]], "test")
    texts, labels = list(test.texts), list(test.labels)
    out: dict[str, Any] = {"kept_vocab_size": clf.model.config.kept_vocab_size,
                           "vocab_size": clf.model.config.vocab_size,
                           "parameters": sum(p.numel() for p in clf.model.parameters())}
    torch_report = evaluate(clf, texts, labels)
    out["torch"] = {"accuracy": torch_report["accuracy"], "macro_f1": torch_report["macro_f1"]}
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = export_onnx(clf.model, Path(tmp) / "m.onnx", max_length=clf.max_length)
        int8 = quantize_int8(fp32, Path(tmp) / "m8.onnx")
        for name, path in (("fp32", fp32), ("int8", int8)):
            runtime = OnnxRuntime(path, threads=spec["threads"])
            predictor = SingleLabelPredictor(clf, runtime)
            report = evaluate(predictor, texts, labels)
            top = [a.top_k[0][0] for a in predictor.predictions(texts, top_k=1)[0]]
            out[name] = {"file_mib": _mib(path), "accuracy": report["accuracy"],
                         "macro_f1": report["macro_f1"],
                         # per test row, 1 when right: int8 against fp32 row by row
                         "correct": "".join("1" if t == y else "0"
                                            for t, y in zip(top, labels, strict=True)),
                         **predictor_latency(SingleLabelPredictor(clf, runtime), texts,
                                          spec["queries"])}
    return out


def untrimmed(spec: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint with every vocabulary row and a fresh head: ONNX size and latency."""
    import torch

    from headwise.intent import IntentClassifier
    from headwise.intent.inference import OnnxRuntime, SingleLabelPredictor
    from headwise.intent.training.builders import resolve_pretrained
    from headwise.loading import from_pretrained
    from headwise.onnx.export import export_onnx

    torch.set_num_threads(spec["threads"])
    kept = IntentClassifier.load(spec["model_dir"])
    model, tok = from_pretrained(resolve_pretrained(spec["checkpoint"]),
                                 num_labels=len(kept.labels))
    clf = IntentClassifier(model, kept.tokenizer, kept.labels, max_length=kept.max_length)
    test = load_split(Path(spec["data_dir"]), DATASETS[spec["dataset"]], "test")
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = export_onnx(model, Path(tmp) / "full.onnx", max_length=kept.max_length)
        return {"parameters": sum(p.numel() for p in model.parameters()),
                "vocab_size": tok.vocab_size, "fp32": {
                    "file_mib": _mib(fp32),
                    **predictor_latency(
                        SingleLabelPredictor(clf, OnnxRuntime(fp32, threads=spec["threads"])),
                        list(test.texts), spec["queries"])}}


def training_memory(spec: dict[str, Any]) -> dict[str, Any]:
    """Peak RSS over one training step (forward, backward, AdamW) of batch 32."""
    import torch

    from headwise.intent import IntentClassifier
    from headwise.intent.training.builders import resolve_pretrained
    from headwise.loading import from_pretrained

    torch.set_num_threads(spec["threads"])
    kept = IntentClassifier.load(spec["model_dir"])
    if spec["trimmed"]:
        model = kept.model
    else:
        model, _ = from_pretrained(resolve_pretrained(spec["checkpoint"]),
                                   num_labels=len(kept.labels))
    test = load_split(Path(spec["data_dir"]), DATASETS[spec["dataset"]], "test")
    batch = kept.tokenizer(list(test.texts)[:32], max_length=kept.max_length)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seconds = []
    for _ in range(3):
        t0 = time.perf_counter()
        optimizer.zero_grad()
        out = model(**batch, labels=torch.zeros(len(batch["input_ids"]), dtype=torch.long))
        out["loss"].backward()
        optimizer.step()
        seconds.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"peak_rss_mib": peak / 1024, "rss_before_step_mib": before / 1024,
            "step_s_median": statistics.median(seconds),
            "parameters": sum(p.numel() for p in model.parameters())}


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    part = {"serving": serving, "untrimmed": untrimmed, "memory": training_memory}
    return {"status": "ok", **part[spec["part"]](spec)}


def section(res: dict[str, Any]) -> str:
    """The section of a results file: :func:`render` with the machine line."""
    return H.with_machine_line(render(res, res["command"]), [res])


def render(res: dict[str, Any], command: str) -> str:
    s, u = res["serving"], res["untrimmed"]
    mt, mu = res["memory_trimmed"], res["memory_untrimmed"]

    def f(x: float, digits: int = 2) -> str:
        return f"{x:.{digits}f}"

    rows = [
        ["PyTorch (trimmed)", f(s["parameters"] / 1e6, 1), "", "", "",
         f(100 * s["torch"]["accuracy"], 2), f(100 * s["torch"]["macro_f1"], 2)],
        ["ONNX fp32 (trimmed)", f(s["parameters"] / 1e6, 1), f(s["fp32"]["file_mib"], 1),
         f(s["fp32"]["p50_ms"], 2), f(s["fp32"]["p99_ms"], 2),
         f(100 * s["fp32"]["accuracy"], 2), f(100 * s["fp32"]["macro_f1"], 2)],
        ["ONNX int8 (trimmed)", "", f(s["int8"]["file_mib"], 1), f(s["int8"]["p50_ms"], 2),
         f(s["int8"]["p99_ms"], 2), f(100 * s["int8"]["accuracy"], 2),
         f(100 * s["int8"]["macro_f1"], 2)],
        ["ONNX fp32 (untrimmed, fresh head)", f(u["parameters"] / 1e6, 1),
         f(u["fp32"]["file_mib"], 1), f(u["fp32"]["p50_ms"], 2), f(u["fp32"]["p99_ms"], 2),
         "", ""],
    ]
    table = H.markdown_table(["model", "parameters (M)", "file MiB", "p50 ms", "p99 ms",
                              "accuracy %", "macro-F1 %"], rows)
    delta_acc = 100 * (s["int8"]["accuracy"] - s["fp32"]["accuracy"])
    delta_f1 = 100 * (s["int8"]["macro_f1"] - s["fp32"]["macro_f1"])
    ratio = u["fp32"]["file_mib"] / max(s["fp32"]["file_mib"], 1e-9)
    int8_change, int8_verdict = _int8_judged(s, delta_acc)
    mem = H.markdown_table(
        ["one training step (batch 32, AdamW)", "parameters (M)", "peak RSS MiB", "step s"],
        [["trimmed", f(mt["parameters"] / 1e6, 1), f(mt["peak_rss_mib"], 0),
          f(mt["step_s_median"], 2)],
         ["untrimmed", f(mu["parameters"] / 1e6, 1), f(mu["peak_rss_mib"], 0),
          f(mu["step_s_median"], 2)]])
    return "\n".join([
        f"## A fine-tuned pretrained encoder on the serving path: `{res['model_dir_name']}`",
        "",
        f"Command: `{command}` ({res['date']}, {res['threads']} threads). Vocabulary: "
        f"{s['kept_vocab_size']:,} of {s['vocab_size']:,} rows kept. Latency: one query at a "
        f"time through `SingleLabelPredictor.predict` (tokenize, forward, calibrated top-3), "
        f"{res['queries']} queries, median and 99th percentile. Scores on the "
        f"{res['dataset']} test split.",
        "", table, "",
        f"int8 changes accuracy by {int8_change} and macro-F1 by {delta_f1:+.2f} "
        f"points against fp32 (target: at most 0.5 points of accuracy either way: "
        f"{int8_verdict}); "
        f"fp32 ONNX p50 "
        f"{s['fp32']['p50_ms']:.2f} ms (target at most 8 ms: "
        f"{'PASS' if s['fp32']['p50_ms'] <= 8 else 'FAIL'}). The trimmed fp32 file is "
        f"{ratio:.1f}x smaller than the untrimmed one.",
        "", mem, ""])


def _int8_judged(s: dict[str, Any], delta_acc: float) -> tuple[str, str]:
    """int8's accuracy change (points, with its 95 % paired-bootstrap interval over the test
    rows where the record holds per-row results) and the protocol's verdict on "within 0.5
    points either way"."""
    if s["int8"].get("correct") and s["fp32"].get("correct"):
        iv = V.paired_difference([[c == "1" for c in s["int8"]["correct"]]],
                                 [[c == "1" for c in s["fp32"]["correct"]]])
        inside = -0.005 <= iv.low and iv.high <= 0.005
        outside = iv.high < -0.005 or iv.low > 0.005
        return (f"{iv.points()} points",
                "PASS" if inside else "FAIL" if outside else "within noise")
    if round(abs(delta_acc), 9) == 0.5:
        return (f"{delta_acc:+.2f} points", "within noise: the change lies on the limit, so "
                "any interval around it straddles it (this record predates per-row results)")
    return (f"{delta_acc:+.2f} points", "NOT JUDGED: the record has no per-row results for "
            "an interval; re-run")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model-dir", type=Path, help="a classifier kept by benchmarks/intent.py")
    p.add_argument("--checkpoint", default="multilingual-e5-small",
                   help="the pretrained name or directory it was fine-tuned from")
    p.add_argument("--dataset", default="dataclue_cic", choices=sorted(DATASETS))
    p.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--md", type=Path, default=HERE.parent / "BENCHMARKS.md")
    p.add_argument("--no-write", action="store_true", help="print the section instead")
    p.add_argument("--render", action="store_true",
                   help="only rebuild the section from results/pretrained_footprint.json")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if H.answered_as_worker(args, worker):
        return 0
    results = HERE / "results" / "pretrained_footprint.json"
    if args.render:
        res = json.loads(results.read_text(encoding="utf-8"))
        H.write_section(args.md, SECTION, section(res))
        return 0
    if args.model_dir is None:
        p.error("--model-dir is required")
    base = {"model_dir": str(args.model_dir), "checkpoint": args.checkpoint,
            "dataset": args.dataset, "data_dir": str(args.data_dir), "queries": args.queries,
            "threads": args.threads}
    res: dict[str, Any] = {"model_dir_name": args.model_dir.name, "dataset": args.dataset,
                           "threads": args.threads, "queries": args.queries,
                           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                           "provenance": H.collect_provenance(args.threads)}
    for key, part, extra in (("serving", "serving", {}), ("untrimmed", "untrimmed", {}),
                             ("memory_trimmed", "memory", {"trimmed": True}),
                             ("memory_untrimmed", "memory", {"trimmed": False})):
        print(f"{key} ...", file=sys.stderr, flush=True)
        rec = H.run_worker(Path(__file__), {**base, "part": part, **extra}, 3600.0)
        if rec.get("status") != "ok":
            raise SystemExit(f"{key} failed: {rec}")
        res[key] = rec
    res["command"] = H.command_line()
    H.finish_provenance(res["provenance"])
    body = section(res)
    results.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    H.print_or_write(args.md, SECTION, body, no_write=args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
