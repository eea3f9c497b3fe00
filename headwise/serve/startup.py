"""Load what the service runs, refusing at start-up anything that would fail later.

:func:`load_engine` loads the model directory (an intent classifier, ``intent.json``, or a
compound classifier, ``compound.json``; pickle files and a config that does not match the
weights are refused by the loader with a message naming the problem) and, for the
onnxruntime path, checks that the ONNX file was exported from these very weights and that
its float32 outputs equal PyTorch's within :data:`ONNX_TOLERANCE`. A compound classifier
is served with the torch runtime only, and without chunk-and-pool.
"""

from __future__ import annotations

from pathlib import Path

from headwise.intent.classifier import INTENT_FILE, IntentClassifier
from headwise.intent.compound import COMPOUND_FILE, CompoundClassifier
from headwise.models.io import WEIGHTS_NAME
from headwise.serve.compound_engine import CompoundEngine
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


def load_classifier(model_dir: str | Path) -> IntentClassifier | CompoundClassifier:
    """The classifier saved in a directory, of whichever kind it is.

    Args:
        model_dir: a directory written by ``headwise train``.

    Returns:
        A :class:`CompoundClassifier` when the directory holds ``compound.json``, else an
        :class:`IntentClassifier`.

    Raises:
        FileNotFoundError: no such directory, or one holding neither ``intent.json`` nor
            ``compound.json``.
        ValueError: as the classifiers' loaders (pickle files, a config that does not
            match the weights, an invalid metadata file).
    """
    directory = Path(model_dir)
    if not directory.is_dir():
        raise FileNotFoundError(f"no model directory at {directory}")
    if (directory / COMPOUND_FILE).is_file():
        return CompoundClassifier.load(directory)
    if (directory / INTENT_FILE).is_file():
        return IntentClassifier.load(directory)
    raise FileNotFoundError(f"{directory} holds neither {INTENT_FILE} (an intent classifier) "
                            f"nor {COMPOUND_FILE} (a compound classifier): it is not a model "
                            f"saved by `headwise train` (or the save was interrupted)")


def load_engine(config: ServeConfig,
                classifier: IntentClassifier | CompoundClassifier | None = None
                ) -> InferenceEngine | CompoundEngine:
    """The inference engine a config describes.

    Args:
        config: the service settings (``model_dir`` is loaded unless ``classifier`` is
            given).
        classifier: an already loaded classifier.

    Returns:
        An :class:`InferenceEngine` for an intent classifier, a :class:`CompoundEngine`
        for a compound one.

    Raises:
        FileNotFoundError: no model directory, one that is neither kind, or no ONNX file.
        ValueError: pickle files in the directory (``UnsafeCheckpointError``), a config
            that does not match the weights, an ONNX file that does not match, or a
            compound classifier with ``runtime="onnx"`` or ``long_text="chunk"``.
    """
    if classifier is None:
        if not config.model_dir:
            raise ValueError("no model directory given")
        classifier = load_classifier(config.model_dir)
    if isinstance(classifier, CompoundClassifier):
        where = config.model_dir or "the model"
        if config.runtime == "onnx":
            raise ValueError(f"{where} is a compound (multi-label + slots) classifier, which "
                             f"the onnx runtime does not serve (its slot tags are a second "
                             f"output the export does not carry); serve it with --runtime "
                             f"torch")
        if config.long_text == "chunk":
            raise ValueError(f"{where} is a compound (multi-label + slots) classifier: "
                             f"--long-text chunk is not supported (slot spans cannot be "
                             f"pooled over windows); use truncate or reject")
        return CompoundEngine(classifier, TorchRuntime(classifier.model, threads=config.threads),
                              long_text=config.long_text,
                              max_rows=max(config.max_batch_size, 1))
    if config.runtime == "onnx":
        runtime: TorchRuntime | OnnxRuntime = OnnxRuntime(onnx_path_for(config),
                                                           threads=config.threads)
        check_onnx(classifier, runtime, config.model_dir)
    else:
        runtime = TorchRuntime(classifier.model, threads=config.threads)
    return InferenceEngine(classifier, runtime, long_text=config.long_text,
                           chunk_stride=config.chunk_stride,
                           max_rows=max(config.max_batch_size, 1))
