"""ONNX export of an intent classifier (single-label, or a joint intent + slot network with
its tag logits): the graph (:mod:`headwise.onnx.export`: trace,
check against PyTorch, int8 quantisation, the metadata that ties a file to its weights) and
onnxruntime's fused operators in it (:mod:`headwise.onnx.fusion`), and the session options
every file is run with (:mod:`headwise.onnx.session`).

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
from headwise.onnx.session import SPIN_CONFIG, session_options

__all__ = [
    "META_QUANTIZED",
    "META_WEIGHTS_SHA256",
    "SPIN_CONFIG",
    "ExportableClassifier",
    "export_onnx",
    "fused_op_counts",
    "max_joint_difference",
    "max_logit_difference",
    "probe_batches",
    "quantize_int8",
    "session_options",
    "unfusable_reason",
]
