"""How the int8 scheme of ``headwise export --int8`` was chosen: dynamic-quantisation variants
of a fine-tuned classifier's ONNX export, scored on the validation rows it was calibrated on
(DataCLUE CIC's training rows less the seeded 10 % that ``train`` held out; never the test
split): the share of rows whose top intent equals fp32's (with a paired bootstrap interval of
each variant's difference from the scheme ``quantize_int8`` writes), accuracy, the largest
change of a probability, and the file size.

    python benchmarks/int8_choice.py --model-dir MODEL   # MODEL: kept by intent.py --keep-models

The quantised integer products run differently by CPU (with VNNI or not: without it,
full-range int8 weights can saturate), so every run is kept, one record per run in
``benchmarks/results/int8_choice.jsonl`` (``--results``) with its provenance, and the
``int8:choice`` section (``docs/benchmarks/serving.md``, beside ``--md``) shows each run's
table under its machine (``--no-write`` prints it instead). One JSON line per variant is
printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402
import _verdicts as V  # noqa: E402
from intent import DATASETS, load_split  # noqa: E402
from pretrained_footprint import _RuntimeClassifier  # noqa: E402

SECTION = "int8:choice"
RESULTS = HERE / "results" / "int8_choice.jsonl"
#: the scheme :func:`headwise.onnx.export.quantize_int8` writes
CHOSEN = "per_channel_reduce_range"
VARIANTS: dict[str, dict] = {
    "per_matrix": {},
    "per_channel": {"per_channel": True},
    "per_channel_reduce_range": {"per_channel": True, "reduce_range": True},
    "per_channel_float_embeddings": {"per_channel": True,
                                     "op_types_to_quantize": ["MatMul", "Attention", "Gemm"]},
    "per_channel_matmul_only": {"per_channel": True, "op_types_to_quantize": ["MatMul"]},
}
LABELS = {
    "per_matrix": "one scale per matrix",
    "per_channel": "one scale per output channel, 8-bit weights",
    "per_channel_reduce_range": "per channel, 7-bit weights (reduce_range)",
    "per_channel_float_embeddings": "per channel, embeddings left in float",
    "per_channel_matmul_only": "per channel, MatMul only",
}


def _agrees(variant: dict[str, Any]) -> list[bool] | None:
    """The variant's per-row agreement with fp32, from its stored bit string."""
    bits = variant.get("agrees")
    return None if bits is None else [c == "1" for c in bits]


def _run_table(run: dict[str, Any]) -> list[str]:
    """One run's lines: what was measured and its table."""
    fp32 = run["fp32"]
    chosen = next((v for v in run["variants"] if v["variant"] == CHOSEN), None)
    base = chosen and _agrees(chosen)
    rows = []
    for v in run["variants"]:
        change = (v["accuracy_change_points"] if "accuracy_change_points" in v
                  else 100 * (v["accuracy"] - fp32["accuracy"]))
        mine = _agrees(v)
        if v is chosen:
            diff = "(the chosen scheme)"
        elif base is None or mine is None:
            diff = "-"
        else:
            d = V.paired_difference([mine], [base])
            diff = f"{100 * d.mean:+.1f} [{100 * d.low:+.1f}, {100 * d.high:+.1f}]"
        largest = v.get("max_probability_change")
        name = LABELS.get(v["variant"], v["variant"])
        rows.append([f"**{name}**" if v is chosen else name,
                     f"{100 * v['agreement_with_fp32']:.1f} %", diff, f"{change:+.2f}",
                     "-" if largest is None else f"{largest:.3f}", f"{v['file_mib']:.1f}"])
    lines = [f"**{H.run_machine(run)}**, `{run['command']}` ({run['date']}; the model "
             f"`{run['model_dir_name']}`, trained on DataCLUE CIC with seed {run['seed']}). "
             f"Rows: the {fp32['rows']:,} validation rows `train` held out of CIC's training "
             f"data (never the test split); fp32 accuracy on them "
             f"{100 * fp32['accuracy']:.1f} %."]
    if run.get("note"):
        lines += ["", run["note"]]
    best = max(run["variants"], key=lambda v: v["agreement_with_fp32"])
    ties = [v for v in run["variants"] if v["agreement_with_fp32"] == best["agreement_with_fp32"]]
    lines += ["", "Most often equal to fp32's top intent on these rows: "
              + " and ".join(LABELS.get(v["variant"], v["variant"]) for v in ties)
              + (" (the chosen scheme)." if chosen in ties
                 else "; the chosen scheme is not among them.")]
    return lines + ["", H.markdown_table(
        ["variant", "top intent equal to fp32's", "minus the chosen scheme, points [95 % CI]",
         "accuracy change (points)", "largest probability change", "file MiB"], rows)]


def section(runs: list[dict[str, Any]]) -> str:
    """The ``int8:choice`` section: every run's table (oldest first), the machines under
    its heading."""
    return H.per_run_section([
        "## How `headwise export --int8` quantises (chosen on validation rows)", "",
             "Dynamic int8 quantisation variants of the fused ONNX export of one fine-tuned "
             "classifier, scored on validation rows. The scheme `quantize_int8` writes is in "
             "bold; the interval of a difference is a paired bootstrap over the rows (2,000 "
             "resamples). The integer products run differently by CPU: without VNNI (AVX2 "
             "only, or AVX-512 before Cascade Lake) full-range 8-bit weights can saturate "
             "the 16-bit sums of onnxruntime's u8 x s8 kernels, so each run is shown with its "
             "machine."], runs, _run_table)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", type=Path, required=True,
                   help="a classifier trained by benchmarks/intent.py on dataclue_cic")
    p.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data")
    p.add_argument("--seed", type=int, default=0, help="the seed the model was trained with")
    H.add_run_args(p, RESULTS)
    args = p.parse_args(argv)
    data = H.new_run(1, model_dir_name=args.model_dir.name, seed=args.seed, variants=[])

    import numpy as np
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from headwise.intent import IntentClassifier
    from headwise.intent.inference import OnnxRuntime
    from headwise.intent.training.data import validation_split
    from headwise.onnx.export import export_onnx

    torch.set_num_threads(1)
    clf = IntentClassifier.load(args.model_dir)
    ds = DATASETS["dataclue_cic"]
    train = load_split(args.data_dir, ds, "train")
    _, texts, _, labels = validation_split(list(train.texts), list(train.labels), 0.1,
                                           args.seed)
    index = {n: i for i, n in enumerate(clf.labels)}
    gold = np.array([index.get(y, -1) for y in labels])

    def probs(path: Path) -> np.ndarray:
        return _RuntimeClassifier(clf, OnnxRuntime(path, threads=1)).predict_proba(texts)

    with tempfile.TemporaryDirectory() as tmp:
        fp32 = export_onnx(clf.model, Path(tmp) / "m.onnx", max_length=clf.max_length)
        base = probs(fp32)
        top = base.argmax(1)
        data["fp32"] = {"variant": "fp32", "rows": len(texts),
                        "accuracy": float((top == gold).mean())}
        print(json.dumps(data["fp32"]), flush=True)
        for name, options in VARIANTS.items():
            out = Path(tmp) / f"{name}.onnx"
            start = time.perf_counter()
            quantize_dynamic(str(fp32), str(out), weight_type=QuantType.QInt8, **options)
            p8 = probs(out)
            data["variants"].append({
                "variant": name, "accuracy": float((p8.argmax(1) == gold).mean()),
                "agreement_with_fp32": float((p8.argmax(1) == top).mean()),
                "agrees": "".join("1" if x else "0" for x in p8.argmax(1) == top),
                "max_probability_change": float(np.abs(p8 - base).max()),
                "file_mib": out.stat().st_size / 2**20,
                "seconds": round(time.perf_counter() - start, 1)})
            print(json.dumps({k: x for k, x in data["variants"][-1].items()
                              if k != "agrees"}), flush=True)
    H.finish_run(args, data, SECTION, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
