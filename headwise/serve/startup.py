"""Load what the service runs, refusing at start-up anything that would fail later.

:func:`load_engine` loads the classifier directory (pickle files and a config that does
not match the weights are refused by the loader with a message naming the problem) and,
for the onnxruntime path, checks that the ONNX file was exported from these very weights
and that its float32 outputs equal PyTorch's within :data:`ONNX_TOLERANCE`.
"""

from __future__ import annotations

from pathlib import Path

from headwise.intent.classifier import IntentClassifier
from headwise.models.io import WEIGHTS_NAME
from headwise.serve.config import ServeConfig
from headwise.serve.engine import InferenceEngine
from headwise.serve.onnx_export import max_logit_difference, probe_batches
from headwise.serve.runtime import META_WEIGHTS_SHA256, OnnxRuntime, TorchRuntime, file_sha256

#: largest |logit difference| accepted between a float32 ONNX file and PyTorch
ONNX_TOLERANCE = 1e-4
#: the ONNX file ``serve --runtime onnx`` reads when none is named
DEFAULT_ONNX_NAME = "model.onnx"


def onnx_path_for(config: ServeConfig) -> Path:
    """The ONNX file of a config: ``onnx_path``, else ``MODEL/model.onnx``."""
    return Path(config.onnx_path) if config.onnx_path else Path(config.model_dir) / \
        DEFAULT_ONNX_NAME


def check_onnx(classifier: IntentClassifier, runtime: OnnxRuntime, model_dir: str | Path
               ) -> float:
    """Refuse an ONNX file made from other weights or (float32) disagreeing with PyTorch.

    Returns:
        The largest |logit difference| on random probe batches (not checked for int8).

    Raises:
        ValueError: a weights hash that differs from the directory's ``model.safetensors``,
            or float32 outputs further than :data:`ONNX_TOLERANCE` from PyTorch's.
    """
    recorded = runtime.metadata.get(META_WEIGHTS_SHA256)
    weights = Path(model_dir) / WEIGHTS_NAME
    if recorded and weights.is_file() and recorded != file_sha256(weights):
        raise ValueError(f"{runtime.path} was exported from other weights than "
                         f"{weights}; export again with `headwise export {model_dir} --onnx "
                         f"{runtime.path}`")
    tok = classifier.tokenizer
    diff = max_logit_difference(TorchRuntime(classifier.model), runtime,
                                probe_batches(tok.vocab_size, classifier.max_length,
                                              pad_id=tok.pad_token_id))
    if not runtime.quantized and diff > ONNX_TOLERANCE:
        raise ValueError(f"{runtime.path} does not reproduce the model in {model_dir}: logits "
                         f"differ by up to {diff:.3g} (> {ONNX_TOLERANCE}); export again")
    return diff


def load_engine(config: ServeConfig, classifier: IntentClassifier | None = None
                ) -> InferenceEngine:
    """The inference engine a config describes.

    Args:
        config: the service settings (``model_dir`` is loaded unless ``classifier`` is
            given).
        classifier: an already loaded classifier.

    Raises:
        FileNotFoundError: no model directory, no ``intent.json``, or no ONNX file.
        ValueError: pickle files in the directory (``UnsafeCheckpointError``), a config
            that does not match the weights, or an ONNX file that does not match.
    """
    if classifier is None:
        if not config.model_dir:
            raise ValueError("no model directory given")
        classifier = IntentClassifier.load(config.model_dir)
    if config.runtime == "onnx":
        runtime: TorchRuntime | OnnxRuntime = OnnxRuntime(onnx_path_for(config),
                                                           threads=config.threads)
        check_onnx(classifier, runtime, config.model_dir)
    else:
        runtime = TorchRuntime(classifier.model, threads=config.threads)
    return InferenceEngine(classifier, runtime, long_text=config.long_text,
                           chunk_stride=config.chunk_stride,
                           max_rows=max(config.max_batch_size, 1))
