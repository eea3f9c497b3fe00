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
channel. One JSON line per variant is printed; nothing is written.
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

from intent import DATASETS, load_split  # noqa: E402
from pretrained_footprint import _RuntimeClassifier  # noqa: E402

VARIANTS: dict[str, dict] = {
    "per_matrix": {},
    "per_channel": {"per_channel": True},
    "per_channel_reduce_range": {"per_channel": True, "reduce_range": True},
    "per_channel_float_embeddings": {"per_channel": True,
                                     "op_types_to_quantize": ["MatMul", "Attention", "Gemm"]},
    "per_channel_matmul_only": {"per_channel": True, "op_types_to_quantize": ["MatMul"]},
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", type=Path, required=True,
                   help="a classifier trained by benchmarks/intent.py on dataclue_cic")
    p.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data")
    p.add_argument("--seed", type=int, default=0, help="the seed the model was trained with")
    args = p.parse_args(argv)

    import numpy as np
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from headwise.intent import IntentClassifier
    from headwise.intent.training.data import validation_split
    from headwise.serve import OnnxRuntime
    from headwise.serve.onnx_export import export_onnx

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
        print(json.dumps({"variant": "fp32", "rows": len(texts),
                          "accuracy": float((top == gold).mean())}), flush=True)
        for name, options in VARIANTS.items():
            out = Path(tmp) / f"{name}.onnx"
            start = time.perf_counter()
            quantize_dynamic(str(fp32), str(out), weight_type=QuantType.QInt8, **options)
            p8 = probs(out)
            print(json.dumps({
                "variant": name, "accuracy": float((p8.argmax(1) == gold).mean()),
                "agreement_with_fp32": float((p8.argmax(1) == top).mean()),
                "max_probability_change": float(np.abs(p8 - base).max()),
                "file_mib": out.stat().st_size / 2**20,
                "seconds": round(time.perf_counter() - start, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
