"""How the int8 scheme of ``headwise export --int8`` was chosen: dynamic-quantisation variants
of a fine-tuned classifier's ONNX export, scored on the validation rows it was calibrated on
(DataCLUE CIC's training rows less the seeded 10 % that ``train`` held out; never the test
split): the share of rows whose top intent equals fp32's, accuracy, the largest change of a
probability, and the file size.

    python benchmarks/int8_choice.py --model-dir MODEL   # MODEL: kept by intent.py --keep-models

Measured once (2026-12-01, multilingual-e5-small fine-tuned on CIC, seed 0, 1,200 rows):
one scale per matrix 90.4 % agreement (accuracy -1.17 points), one per output channel
95.8 % (-0.08), per channel with reduce_range 95.5 %, the embeddings left in float 94.6 %
(56.7 MiB against 31.2), MatMul only 95.8 % (71.8 MiB); so ``quantize_int8`` quantises per
channel. One JSON line per variant is printed; the results (with their provenance) go to
``benchmarks/results/int8_choice.json`` and the ``int8:choice`` section to its page
(``docs/benchmarks/serving.md``, beside ``--md``), unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402
from intent import DATASETS, load_split  # noqa: E402
from pretrained_footprint import _RuntimeClassifier  # noqa: E402

SECTION = "int8:choice"
RESULTS = HERE / "results" / "int8_choice.json"
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
    "per_channel": "one scale per output channel (what `quantize_int8` does)",
    "per_channel_reduce_range": "per channel, reduce_range",
    "per_channel_float_embeddings": "per channel, embeddings left in float",
    "per_channel_matmul_only": "per channel, MatMul only",
}


def section(data: dict) -> str:
    """The ``int8:choice`` section of a results file, the machine line under its heading."""
    fp32 = data["fp32"]
    rows = [[LABELS.get(v["variant"], v["variant"]), f"{100 * v['agreement_with_fp32']:.1f} %",
             f"{100 * (v['accuracy'] - fp32['accuracy']):+.2f}",
             f"{v['max_probability_change']:.3f}", f"{v['file_mib']:.1f}"]
            for v in data["variants"]]
    return H.with_machine_line("\n".join([
        "## How `headwise export --int8` quantises (chosen on validation rows)", "",
        f"`{data['command']}` ({data['date']}; the model `{data['model_dir_name']}`, trained "
        f"on DataCLUE CIC with seed {data['seed']}). Rows: the {fp32['rows']:,} validation "
        f"rows `train` held out of CIC's training data (never the test split); fp32 accuracy "
        f"on them {100 * fp32['accuracy']:.1f} %. Dynamic int8 quantisation variants of the "
        f"fused ONNX export:", "",
        H.markdown_table(["variant", "top intent equal to fp32's", "accuracy change (points)",
                          "largest probability change", "file MiB"], rows)]), [data])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", type=Path, required=True,
                   help="a classifier trained by benchmarks/intent.py on dataclue_cic")
    p.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data")
    p.add_argument("--seed", type=int, default=0, help="the seed the model was trained with")
    p.add_argument("--md", type=Path, default=HERE.parent / "BENCHMARKS.md",
                   help="the summary markdown file; the section goes into its page under "
                        "docs/benchmarks/ beside it")
    p.add_argument("--no-write", action="store_true",
                   help=f"print the section; leave {RESULTS.name} and the markdown alone")
    args = p.parse_args(argv)
    data = {"command": H.command_line(), "model_dir_name": args.model_dir.name,
            "seed": args.seed, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "provenance": H.collect_provenance(1), "variants": []}

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
    train.examples.extend(load_split(args.data_dir, ds, "extra_train").examples)
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
                "max_probability_change": float(np.abs(p8 - base).max()),
                "file_mib": out.stat().st_size / 2**20,
                "seconds": round(time.perf_counter() - start, 1)})
            print(json.dumps(data["variants"][-1]), flush=True)
    H.finish_provenance(data["provenance"])
    H.print_or_write(args.md, SECTION, section(data), no_write=args.no_write)
    if not args.no_write:
        RESULTS.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
