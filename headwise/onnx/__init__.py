"""ONNX export of an intent classifier (single-label, or a joint intent + slot network with
its tag logits): the graph (:mod:`headwise.onnx.export`: trace,
check against PyTorch, int8 quantisation, the metadata that ties a file to its weights) and
onnxruntime's fused operators in it (:mod:`headwise.onnx.fusion`).

``headwise export MODEL --onnx OUT`` writes the graph; the inference runtimes read it. The
package knows models, not intents or the service: it sits below both.
"""

from headwise.onnx.export import (
    META_QUANTIZED,
    META_WEIGHTS_SHA256,
    ExportableClassifier,
    export_onnx,
    max_joint_difference,
    max_logit_difference,
    probe_batches,
    quantize_int8,
)
from headwise.onnx.fusion import fused_op_counts, unfusable_reason

__all__ = [
    "META_QUANTIZED",
    "META_WEIGHTS_SHA256",
    "ExportableClassifier",
    "export_onnx",
    "fused_op_counts",
    "max_joint_difference",
    "max_logit_difference",
    "probe_batches",
    "quantize_int8",
    "unfusable_reason",
]
