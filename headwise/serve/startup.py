"""Load what the service runs, refusing at start-up anything that would fail later.

:func:`load_engine` loads the model directory (an intent classifier, ``intent.json``, a
compound classifier, ``compound.json``, a TF-IDF model, ``tfidf.json``, or an ensemble,
``ensemble.json``; pickle files and a config that does not match the
weights are refused by the loader with a message naming the problem) and, for the
onnxruntime path, checks that the ONNX file was exported from these very weights and that
its float32 outputs equal PyTorch's within :data:`ONNX_TOLERANCE`. A compound classifier
is served with the torch runtime only, and without chunk-and-pool; a TF-IDF model or an
ensemble by :class:`~headwise.serve.proba_engine.ProbabilityEngine`, with no ONNX path and
the truncate policy only.

``runtime="auto"`` (the default) serves on onnxruntime when the ONNX file
(``MODEL/model.onnx`` or ``onnx_path``) exists and passes those checks, and on PyTorch
otherwise, saying why in one line (:func:`choose_runtime`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from headwise._files import file_sha256
from headwise.intent import kinds
from headwise.intent.answering import ProbabilityClassifier
from headwise.intent.classifier import IntentClassifier
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.models.heap import steady_heap
from headwise.models.io import WEIGHTS_NAME
from headwise.onnx.export import (
    META_WEIGHTS_SHA256,
    ExportableClassifier,
    max_logit_difference,
    probe_batches,
)
from headwise.serve.compound_engine import CompoundEngine
from headwise.serve.config import ServeConfig
from headwise.serve.engine import InferenceEngine
from headwise.serve.proba_engine import ProbabilityEngine
from headwise.serve.runtime import OnnxRuntime, TorchRuntime

#: what a model directory may hold for the service: a network, a compound classifier, a
#: TF-IDF model or an ensemble (the last two are ProbabilityClassifiers)
ServedClassifier = IntentClassifier | CompoundClassifier | ProbabilityClassifier
#: the engines the service runs, by the kind of model
Engine = InferenceEngine | CompoundEngine | ProbabilityEngine
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


def onnx_unsupported(classifier: IntentClassifier) -> str | None:
    """Why ``headwise export`` cannot write an ONNX graph of this classifier's network
    (a BiLSTM, a sparse attention pattern), in its words; None when it can."""
    try:
        ExportableClassifier(classifier.model)
    except ValueError as e:
        return " ".join(str(e).split())
    return None


def _stderr_line(message: str) -> None:
    print(f"headwise serve: {message}", file=sys.stderr, flush=True)


def choose_runtime(config: ServeConfig, classifier: IntentClassifier | CompoundClassifier
                   ) -> tuple[TorchRuntime | OnnxRuntime, str | None]:
    """The runtime a config asks for, resolving ``"auto"``.

    ``"auto"`` takes onnxruntime with :func:`onnx_path_for`'s file when the classifier is
    a single-label intent classifier, onnxruntime is importable, the file exists, loads
    as a headwise export and passes :func:`check_onnx` (these very weights, float32
    logits within :data:`ONNX_TOLERANCE` of PyTorch); otherwise PyTorch.

    Args:
        config: the service settings.
        classifier: the loaded classifier.

    Returns:
        ``(runtime, reason)``: ``reason`` says why ``"auto"`` fell back to PyTorch (one
        line), else None.

    Raises:
        FileNotFoundError, ValueError: ``runtime="onnx"`` with a missing or mismatching
            file, or a compound classifier (as :func:`load_engine`).
    """
    if config.runtime == "torch":
        return TorchRuntime(classifier.model, threads=config.threads), None
    path = onnx_path_for(config)
    kind = kinds.kind_of_classifier(classifier)
    if config.runtime == "onnx":
        kind.require("onnx", config.model_dir or "the model")
        unsupported = onnx_unsupported(classifier)
        if unsupported is not None:
            raise ValueError(f"{config.model_dir or 'the model'} cannot be served with "
                             f"--runtime onnx: {unsupported}; serve it with --runtime torch")
        runtime = OnnxRuntime(path, threads=config.threads)
        check_onnx(classifier, runtime, config.model_dir)
        return runtime, None
    unsupported = None if not kind.supports("onnx") else onnx_unsupported(classifier)
    if not kind.supports("onnx"):
        reason = f"{kind.description} has no ONNX path"
    elif unsupported is not None:
        # a file beside it is not this model's (export never writes one): say so, and do
        # not suggest an export that would be refused
        stale = f"; {path} is ignored" if path.is_file() else ""
        reason = f"no ONNX path for this model ({unsupported}){stale}"
    elif not path.is_file():
        reason = (f"no ONNX export at {path} (`headwise export {config.model_dir or 'MODEL'} "
                  f"--onnx {path}` writes one)")
    else:
        try:
            runtime = OnnxRuntime(path, threads=config.threads)
            check_onnx(classifier, runtime, config.model_dir)
            return runtime, None
        except ImportError as e:
            reason = f"onnxruntime cannot be imported ({e})"
        except Exception as e:  # whatever keeps "auto" from running the file: fall back
            reason = " ".join(str(e).split())
    return (TorchRuntime(classifier.model, threads=config.threads),
            f"runtime auto: using torch: {reason}")


def _proba_engine(config: ServeConfig, classifier: ProbabilityClassifier) -> ProbabilityEngine:
    """The engine of a TF-IDF model, an ensemble or any kind served by its own
    ``predict_proba``, refusing what its kind cannot do (:mod:`headwise.intent.kinds`)."""
    kind, where = kinds.kind_of_classifier(classifier), config.model_dir or "the model"
    if config.runtime == "onnx":
        kind.require("onnx", where)
        raise ValueError(f"{where} is {kind.description}, which the onnx runtime does not "
                         f"serve; serve it with --runtime auto")
    if config.long_text != "truncate":
        kind.require(config.long_text, where)
    return ProbabilityEngine(classifier, threads=config.threads)


def load_engine(config: ServeConfig, classifier: ServedClassifier | None = None, *,
                report: Callable[[str], None] | None = _stderr_line,
                ) -> Engine:
    """The inference engine a config describes.

    Args:
        config: the service settings (``model_dir`` is loaded unless ``classifier`` is
            given).
        classifier: an already loaded classifier.
        report: receives the one-line reason when ``runtime="auto"`` falls back to
            PyTorch (default: printed on stderr; None: silent).

    Returns:
        An :class:`InferenceEngine` for an intent classifier, a :class:`CompoundEngine`
        for a compound one, a :class:`ProbabilityEngine` for a TF-IDF model or an ensemble.

    Raises:
        FileNotFoundError: no model directory, one that is neither kind, or no ONNX file.
        ValueError: pickle files in the directory (``UnsafeCheckpointError``), a config
            that does not match the weights, an ONNX file that does not match (with
            ``runtime="onnx"``; ``"auto"`` falls back to PyTorch), a compound
            classifier with ``runtime="onnx"`` or ``long_text="chunk"``, or a TF-IDF model
            or an ensemble with ``runtime="onnx"`` or a long-text policy other than
            ``"truncate"``.

    With ``long_text="chunk"`` it also fixes glibc's mmap threshold for the process
    (:func:`~headwise.models.heap.steady_heap`): the windows of long texts then do not
    leave the C heap's resident memory growing.
    """
    if classifier is None:
        if not config.model_dir:
            raise ValueError("no model directory given")
        classifier = kinds.load_classifier(config.model_dir)
    if not isinstance(classifier, IntentClassifier | CompoundClassifier):
        return _proba_engine(config, classifier)
    runtime, fallback = choose_runtime(config, classifier)
    if config.long_text != "truncate":
        kinds.kind_of_classifier(classifier).require(config.long_text,
                                                     config.model_dir or "the model")
    if fallback is not None and report is not None:
        report(fallback)
    if config.long_text == "chunk":
        # a long text is many windows in a row: keep glibc's heap from growing with them
        steady_heap()
    if isinstance(classifier, CompoundClassifier):
        return CompoundEngine(classifier, runtime, long_text=config.long_text,
                              max_rows=max(config.max_batch_size, 1))
    return InferenceEngine(classifier, runtime, long_text=config.long_text,
                           chunk_stride=config.chunk_stride,
                           max_rows=max(config.max_batch_size, 1))
