"""Which predictor a model directory gets, on which runtime: :func:`load_predictor`.

It loads the directory (an intent classifier, ``intent.json``, a compound classifier,
``compound.json``, a TF-IDF model, ``tfidf.json``, or an ensemble, ``ensemble.json``;
pickle files and a config that does not match the weights are refused by the loader with
a message naming the problem) and, for the onnxruntime path, checks that the ONNX file was
exported from these very weights and that its float32 outputs equal PyTorch's within
:data:`ONNX_TOLERANCE` (a compound classifier's intent and slot-tag logits, and its
decisions: :func:`compare_joint`). A compound classifier reads a long text's first window
only; a TF-IDF model or an ensemble through
:class:`~headwise.intent.inference.proba.ProbabilityPredictor`, with no ONNX path and the
truncate policy only. ``headwise predict``, the file stream, Ray and ``headwise serve``
all get their predictor here.

``runtime="auto"`` (the default) runs a Transformer classifier (single-label or
compound) on onnxruntime with no
export step: from the ONNX file named (``onnx_path``) or ``MODEL/model.onnx`` when one
exists and passes those checks, else from the export it builds once into the user cache
(:func:`onnx_cache_path`: ``$HEADWISE_CACHE/onnx/``, keyed by the model files' hash, so a
read-only model directory is never written and a changed model gets a new export); on
PyTorch otherwise, saying why in one line (:func:`choose_runtime`). The export and its
check against PyTorch are :func:`export_checked_onnx`, the same that ``headwise export``
runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from headwise import __version__
from headwise._files import file_sha256
from headwise.intent import kinds
from headwise.intent.inference.bucketing import (
    CHUNK_POOLING,
    LONG_TEXT_POLICIES,
    architecture_of,
    check_chunk_length,
    check_windowed,
    default_long_text,
)
from headwise.intent.inference.compound import CompoundPredictor
from headwise.intent.inference.predictor import Predictor
from headwise.intent.inference.proba import ProbabilityPredictor
from headwise.intent.inference.runtime import OnnxRuntime, TorchRuntime
from headwise.intent.inference.single import SingleLabelPredictor
from headwise.models.catalog import cache_root
from headwise.models.heap import steady_heap
from headwise.models.io import CONFIG_NAME, WEIGHTS_NAME
from headwise.onnx.export import (
    DEFAULT_OPSET,
    META_WEIGHTS_SHA256,
    ExportableClassifier,
    JointRuntime,
    export_onnx,
    max_joint_difference,
    max_logit_difference,
    probe_batches,
)

__all__ = ["DEFAULT_ONNX_NAME", "ONNX_CACHE_DAYS", "ONNX_CACHE_DIR", "ONNX_TOLERANCE",
           "RUNTIMES", "capability_of", "check_onnx", "choose_runtime", "compare_joint",
           "export_checked_onnx",
           "load_predictor", "onnx_cache_path", "onnx_path_for", "onnx_unsupported"]

#: the runtimes a predictor can be asked for: ``"auto"`` resolves to ``"onnx"`` or
#: ``"torch"`` (:func:`choose_runtime`)
RUNTIMES = ("auto", "torch", "onnx")
#: largest |logit difference| accepted between a float32 ONNX file and PyTorch
ONNX_TOLERANCE = 1e-4
#: the ONNX file ``--runtime onnx`` reads when none is named
DEFAULT_ONNX_NAME = "model.onnx"
#: the folder of headwise's cache (:func:`~headwise.models.catalog.cache_root`) that holds
#: the exports runtime ``auto`` builds
ONNX_CACHE_DIR = "onnx"
#: a cached export not used for this many days is removed when another one is built (a
#: model retrained every week leaves one export a week behind it)
ONNX_CACHE_DAYS = 30


def onnx_path_for(model_dir: str | Path | None, onnx_path: str | Path | None = None) -> Path:
    """The ONNX file a predictor reads: ``onnx_path``, else ``MODEL/model.onnx``."""
    return Path(onnx_path) if onnx_path else Path(model_dir or ".") / DEFAULT_ONNX_NAME


def _decisions(classifier: Any, logits: np.ndarray, tag_logits: np.ndarray | None,
               mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A compound classifier's decisions on a padded batch, and where each is a near tie.

    Returns:
        ``(intents, intent_tie, tags, tag_tie)``: (n, intents) bool, the intents chosen by
        the classifier's saved thresholds; (n,) bool, rows with a probability within
        :data:`ONNX_TOLERANCE` of its threshold (or, for a softmax head, of the runner-up);
        the best tag of each real token (flat, padding left out; empty without a tagger)
        and whether its lead over the runner-up is within ``2 * ONNX_TOLERANCE``.
    """
    x = logits.astype(np.float64)
    if classifier.model.multi_label:
        probs = 1.0 / (1.0 + np.exp(-x))
    else:
        e = np.exp(x - x.max(1, keepdims=True))
        probs = e / e.sum(1, keepdims=True)
    intents = classifier.chosen_intents(probs, classifier.thresholds, False)
    limits = classifier.intent_thresholds(classifier.thresholds)
    tie = (np.abs(probs - limits) <= ONNX_TOLERANCE).any(1)
    if not classifier.model.multi_label and probs.shape[1] > 1:
        top2 = np.sort(probs, 1)[:, -2:]
        tie |= top2[:, 1] - top2[:, 0] <= ONNX_TOLERANCE
    if tag_logits is None:
        return intents, tie, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    real = tag_logits[np.asarray(mask) != 0].astype(np.float64)  # (tokens, tags)
    tags = real.argmax(1)
    top2 = np.sort(real, 1)[:, -2:] if real.shape[1] > 1 else np.full((len(real), 2), np.inf)
    return intents, tie, tags, top2[:, 1] - top2[:, 0] <= 2 * ONNX_TOLERANCE


def compare_joint(classifier: Any, reference: JointRuntime, other: JointRuntime,
                  batches: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """How far a compound classifier's network on ``other`` (its ONNX export, fp32 or
    int8) is from ``reference`` (PyTorch) on padded batches: the outputs and the decisions.

    Args:
        classifier: the compound classifier (its thresholds and head decide the intents).
        reference, other: runtimes with ``forward_joint``.
        batches: ``(input_ids, attention_mask)`` pairs (:func:`probe_batches`).

    Returns:
        ``max_abs_logit_diff`` and ``max_abs_tag_logit_diff`` (real tokens only);
        ``intent_sets_equal``, the share of rows whose chosen intents (the saved
        thresholds) are the same; ``tags_equal``, the share of real tokens whose best BIO
        tag is the same; ``clear_disagreements``, the rows and tokens that differ where
        ``reference``'s decision is not a near tie (float rounding may flip a tie within
        :data:`ONNX_TOLERANCE`; nothing else may, in float32).

    Raises:
        ValueError: one runtime gives tag logits and the other none.
    """
    logit_diff, tag_diff = max_joint_difference(reference, other, batches)
    rows = same_rows = tokens = same_tokens = clear = 0
    for ids, mask in batches:
        ref = _decisions(classifier, *reference.forward_joint(ids, mask), mask)
        got = _decisions(classifier, *other.forward_joint(ids, mask), mask)
        same_set = (ref[0] == got[0]).all(1)
        same_tag = ref[2] == got[2]
        rows, same_rows = rows + len(same_set), same_rows + int(same_set.sum())
        tokens, same_tokens = tokens + len(same_tag), same_tokens + int(same_tag.sum())
        clear += int((~same_set & ~ref[1]).sum()) + int((~same_tag & ~ref[3]).sum())
    return {"max_abs_logit_diff": logit_diff, "max_abs_tag_logit_diff": tag_diff,
            "intent_sets_equal": same_rows / max(rows, 1),
            "tags_equal": same_tokens / max(tokens, 1) if tokens else 1.0,
            "clear_disagreements": float(clear)}


def check_onnx(classifier: Any, runtime: OnnxRuntime, model_dir: str | Path | None, *,
               weights_sha256: str | None = None) -> float:
    """Refuse an ONNX file made from other weights or (float32) disagreeing with PyTorch.

    For a compound classifier the file must carry the slot-tag logits when the network
    has a tagger, and in float32 its intent and tag logits must both be within
    :data:`ONNX_TOLERANCE` of PyTorch's and its decisions (the intent sets by the saved
    thresholds, the BIO tags) equal wherever PyTorch's is not a near tie
    (:func:`compare_joint`).

    Args:
        classifier: the loaded classifier the file must reproduce.
        runtime: the ONNX file on onnxruntime.
        model_dir: the classifier's directory (its ``model.safetensors``).
        weights_sha256: that file's SHA-256 when already computed.

    Returns:
        The largest |logit difference| on random probe batches (a compound classifier's:
        of its intent or its tag logits; not checked for int8).

    Raises:
        ValueError: a weights hash that differs from the directory's ``model.safetensors``,
            float32 outputs further than :data:`ONNX_TOLERANCE` from PyTorch's, or a
            compound classifier's file without its tag logits or with other decisions.
    """
    recorded = runtime.metadata.get(META_WEIGHTS_SHA256)
    weights = Path(model_dir or ".") / WEIGHTS_NAME
    if recorded and weights.is_file() and recorded != (weights_sha256 or file_sha256(weights)):
        raise ValueError(f"{runtime.path} was exported from other weights than "
                         f"{weights}; export again with `headwise export {model_dir} --onnx "
                         f"{runtime.path}`")
    tok = classifier.tokenizer
    batches = probe_batches(tok.vocab_size, classifier.max_length, pad_id=tok.pad_token_id)
    kind = _kind(classifier)
    if kind is not None and kind.multi_label:
        return _check_joint(classifier, runtime, batches, model_dir)
    diff = max_logit_difference(TorchRuntime(classifier.model), runtime, batches)
    if not runtime.quantized and diff > ONNX_TOLERANCE:
        raise ValueError(f"{runtime.path} does not reproduce the model in {model_dir}: logits "
                         f"differ by up to {diff:.3g} (> {ONNX_TOLERANCE}); export again")
    return diff


def _check_joint(classifier: Any, runtime: OnnxRuntime,
                 batches: Sequence[tuple[np.ndarray, np.ndarray]],
                 model_dir: str | Path | None) -> float:
    """:func:`check_onnx` of a compound classifier: the largest |intent or tag logit
    difference| (:func:`compare_joint`)."""
    tagged = getattr(classifier.model, "tagger", None) is not None
    if tagged != runtime.tagged:
        raise ValueError(f"{runtime.path} does not reproduce the model in {model_dir}: the "
                         f"network {'has' if tagged else 'has no'} slot tagger and the file "
                         f"{'carries' if runtime.tagged else 'carries no'} tag logits; "
                         f"export again")
    found = compare_joint(classifier, TorchRuntime(classifier.model), runtime, batches)
    diff = max(found["max_abs_logit_diff"], found["max_abs_tag_logit_diff"])
    if runtime.quantized:
        return diff
    if diff > ONNX_TOLERANCE:
        raise ValueError(f"{runtime.path} does not reproduce the model in {model_dir}: intent "
                         f"logits differ by up to {found['max_abs_logit_diff']:.3g} and tag "
                         f"logits by up to {found['max_abs_tag_logit_diff']:.3g} (> "
                         f"{ONNX_TOLERANCE}); export again")
    if found["clear_disagreements"]:
        raise ValueError(f"{runtime.path} does not reproduce the model in {model_dir}: "
                         f"{int(found['clear_disagreements'])} intent sets or BIO tags of "
                         f"the probe batches differ from PyTorch's; export again")
    return diff


def export_checked_onnx(classifier: Any, out: str | Path, *,
                        model_dir: str | Path | None, opset: int = DEFAULT_OPSET,
                        fuse: bool = True, threads: int = 0,
                        weights_sha256: str | None = None) -> tuple[OnnxRuntime, float]:
    """Export a Transformer classifier (single-label, or a compound classifier's joint
    network with its tag logits) to ``out`` and check it against PyTorch
    (:func:`check_onnx`): what ``headwise export`` writes and runtime ``auto`` caches.

    The graph is written beside ``out`` under a temporary name and moved into place only
    once checked, so ``out`` is never a half-written or failing file, and processes
    building the same file at once each leave a whole one.

    Args:
        classifier: the loaded intent or compound classifier.
        out: the ``.onnx`` file to write (its folder is created).
        model_dir: the classifier's directory: the SHA-256 of its ``model.safetensors``
            goes into the file's metadata.
        opset: ONNX opset.
        fuse: onnxruntime's fused operators (:func:`~headwise.onnx.export.export_onnx`).
        threads: intra-op threads of the returned runtime (0: onnxruntime's default).
        weights_sha256: the weights' SHA-256 when already computed.

    Returns:
        ``(runtime, diff)``: ``out`` on onnxruntime and the largest |logit difference|
        from PyTorch on the probe batches.

    Raises:
        ValueError: a classifier the exporter does not support, or a graph whose logits
            differ from PyTorch's by more than :data:`ONNX_TOLERANCE` (nothing is left
            at ``out`` then).
    """
    out = Path(out)
    weights = Path(model_dir or ".") / WEIGHTS_NAME
    if weights_sha256 is None and weights.is_file():
        weights_sha256 = file_sha256(weights)
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = out.with_name(f".{out.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        export_onnx(classifier.model, staged, opset=opset, max_length=classifier.max_length,
                    weights_sha256=weights_sha256, fuse=fuse)
        try:
            diff = check_onnx(classifier, OnnxRuntime(staged), model_dir,
                              weights_sha256=weights_sha256)
        except ValueError as e:  # named as the file it was to become
            raise ValueError(f"not written: {str(e).replace(str(staged), str(out))}") from None
        os.replace(staged, out)
    finally:
        staged.unlink(missing_ok=True)
    return OnnxRuntime(out, threads=threads), diff


def onnx_cache_path(classifier: Any, model_dir: str | Path, *,
                    weights_sha256: str | None = None) -> Path:
    """Where runtime ``auto`` keeps the export of a model directory that has none:
    ``<cache>/onnx/<key>/model.onnx`` under :func:`~headwise.models.catalog.cache_root`
    (``$HEADWISE_CACHE``, else the user cache folder), never in the model directory (a
    mounted volume may be read-only).

    The key is a hash of what the graph is made from: the weights' and the architecture's
    files (``model.safetensors``, ``config.json``), the longest input and the headwise
    version; a model saved again with other weights gets a new export, not the old one.
    Exports not used for :data:`ONNX_CACHE_DAYS` days are removed when another is built.
    """
    directory = Path(model_dir)
    config = directory / CONFIG_NAME
    parts = [weights_sha256 or file_sha256(directory / WEIGHTS_NAME),
             file_sha256(config) if config.is_file() else "-",
             f"max_length={classifier.max_length}", f"headwise={__version__}"]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]
    return cache_root() / ONNX_CACHE_DIR / key / DEFAULT_ONNX_NAME


def _cached_onnx(classifier: Any, model_dir: str | Path, *, threads: int
                 ) -> tuple[OnnxRuntime, str | None]:
    """The cached export of a model directory (:func:`onnx_cache_path`), built and
    checked the first time (:func:`export_checked_onnx`) and again when the cached file
    does not pass :func:`check_onnx`.

    Returns:
        ``(runtime, note)``: ``note`` says, in one line, that the export was built now.

    Raises:
        OSError: the cache folder cannot be written; ValueError, ImportError: as
            :func:`export_checked_onnx`.
    """
    weights = file_sha256(Path(model_dir) / WEIGHTS_NAME)
    path = onnx_cache_path(classifier, model_dir, weights_sha256=weights)
    rebuilt = ""
    if path.is_file():
        try:
            cached = OnnxRuntime(path, threads=threads)
            check_onnx(classifier, cached, model_dir, weights_sha256=weights)
            with contextlib.suppress(OSError):  # its last use (a read-only cache keeps it)
                os.utime(path)
            return cached, None
        except ValueError as e:  # a damaged or foreign file: build it again
            rebuilt = f" (the cached file was not usable: {' '.join(str(e).split())})"
    start = time.perf_counter()
    built, diff = export_checked_onnx(classifier, path, model_dir=model_dir, threads=threads,
                                      weights_sha256=weights)
    _drop_unused_exports(path.parent.parent, keep=path.parent)
    return built, (f"runtime auto: exported {model_dir} to ONNX once, into {path}{rebuilt} "
                   f"({time.perf_counter() - start:.1f} s; logits within {diff:.1e} of "
                   f"PyTorch)")


def _drop_unused_exports(folder: Path, *, keep: Path) -> None:
    """Remove the cached exports under ``folder`` not used for :data:`ONNX_CACHE_DAYS`
    days (by their file's modification time, which each use renews), except ``keep``; a
    folder with no export yet (one being built) is left alone."""
    cutoff = time.time() - ONNX_CACHE_DAYS * 86400
    for entry in folder.iterdir():
        with contextlib.suppress(OSError):  # another process may be removing it too
            if entry != keep and (entry / DEFAULT_ONNX_NAME).stat().st_mtime < cutoff:
                shutil.rmtree(entry)


def onnx_unsupported(classifier: Any) -> str | None:
    """Why ``headwise export`` cannot write an ONNX graph of this classifier's network
    (a BiLSTM, single-label or joint; a sparse attention pattern), in its words; None when
    it can."""
    try:
        ExportableClassifier(classifier.model)
    except ValueError as e:
        return " ".join(str(e).split())
    return None


def choose_runtime(classifier: Any, runtime: str = "auto", *,
                   model_dir: str | Path | None = None, onnx_path: str | Path | None = None,
                   threads: int = 0) -> tuple[TorchRuntime | OnnxRuntime, str | None]:
    """The runtime asked for, resolving ``"auto"``.

    The ONNX file is ``onnx_path``, else ``MODEL/model.onnx`` when it exists, else the
    export cached for this model directory (:func:`onnx_cache_path`), built and checked
    the first time (:func:`export_checked_onnx`). ``"auto"`` takes onnxruntime with that
    file when the classifier is a Transformer classifier (single-label or compound; a
    BiLSTM has no export), onnxruntime is
    importable and the file passes :func:`check_onnx` (these very weights, float32 logits
    within :data:`ONNX_TOLERANCE` of PyTorch); otherwise PyTorch. ``"onnx"`` takes the
    same file and refuses what ``"auto"`` steps around. ``"torch"`` takes PyTorch.

    Args:
        classifier: the loaded network (intent or compound classifier).
        runtime: ``"auto"``, ``"torch"`` or ``"onnx"``.
        model_dir: the classifier's directory (its ``model.onnx``, the weights' hash and
            the cache key); without one there is no cached export.
        onnx_path: the ONNX file (default ``MODEL/model.onnx``, else the cached export).
        threads: intra-op threads of the runtime (0: the library's default).

    Returns:
        ``(runtime, note)``: ``note`` is one line to report: why ``"auto"`` fell back to
        PyTorch, or that the cached export was built now; else None.

    Raises:
        FileNotFoundError, ValueError, OSError: ``runtime="onnx"`` with a missing or
            mismatching file, an export that cannot be built or cached, or a network that
            has no export (a BiLSTM, as :func:`load_predictor`).
    """
    if runtime == "torch":
        return TorchRuntime(classifier.model, threads=threads), None
    path = onnx_path_for(model_dir, onnx_path)
    # no file named and none beside the weights: the export cached for the directory
    cache = onnx_path is None and model_dir is not None and not path.is_file()
    kind = kinds.kind_of_classifier(classifier)
    if runtime == "onnx":
        kind.require("onnx", model_dir or "the model")
        unsupported = onnx_unsupported(classifier)
        if unsupported is not None:
            raise ValueError(f"{model_dir or 'the model'} cannot be served with "
                             f"--runtime onnx: {unsupported}; serve it with --runtime torch")
        if cache:
            return _cached_onnx(classifier, model_dir, threads=threads)
        onnx = OnnxRuntime(path, threads=threads)
        check_onnx(classifier, onnx, model_dir)
        return onnx, None
    unsupported = None if not kind.supports("onnx") else onnx_unsupported(classifier)
    if not kind.supports("onnx"):
        reason = f"{kind.description} has no ONNX path ({kind.missing['onnx']})"
    elif unsupported is not None:
        # a file beside it is not this model's (export never writes one): say so
        stale = f"; {path} is ignored" if path.is_file() else ""
        reason = f"no ONNX path for this model ({unsupported}){stale}"
    elif not path.is_file() and not cache:
        reason = (f"no ONNX export at {path} (`headwise export {model_dir or 'MODEL'} "
                  f"--onnx {path}` writes one)")
    else:
        try:
            if cache:
                return _cached_onnx(classifier, model_dir, threads=threads)
            onnx = OnnxRuntime(path, threads=threads)
            check_onnx(classifier, onnx, model_dir)
            return onnx, None
        except ImportError as e:
            reason = f"onnxruntime cannot be imported ({e})"
        except OSError as e:  # a cache folder that cannot be written, a full disk
            reason = (f"no ONNX export at {path}, and none can be cached under "
                      f"{cache_root() / ONNX_CACHE_DIR} ({type(e).__name__}: "
                      f"{' '.join(str(e).split())}; set HEADWISE_CACHE to a writable "
                      f"folder, or `headwise export {model_dir} --onnx FILE`)")
        except Exception as e:  # whatever keeps "auto" from running the file: fall back
            reason = " ".join(str(e).split())
    return (TorchRuntime(classifier.model, threads=threads),
            f"runtime auto: using torch: {reason}")


def _kind(classifier: Any) -> kinds.ModelKind | None:
    """The classifier's registered kind, or None for an unregistered class."""
    try:
        return kinds.kind_of_classifier(classifier)
    except TypeError:
        return None


def _probability_predictor(classifier: Any, *, runtime: str, long_text: str,
                           chunk_length: float | int | None, chunk_stride: int | str | None,
                           threads: int, where: str) -> ProbabilityPredictor:
    """The predictor of a TF-IDF model, an ensemble or any kind answered by its own
    ``predict_proba``, refusing what its kind cannot do (:mod:`headwise.intent.kinds`)."""
    kind = _kind(classifier)
    if runtime == "onnx":
        if kind is not None:
            kind.require("onnx", where)
        raise ValueError(f"{where} is {kind.description if kind else 'not a network'}, which "
                         f"the onnx runtime does not run; use --runtime auto")
    if long_text not in ("auto", "truncate"):
        if kind is not None:
            kind.require(capability_of(long_text), where)
        raise ValueError(f"{where}: the {long_text} long-text policy needs a network")
    for name, value, what in (("chunk_length", chunk_length, "width"),
                              ("chunk_stride", chunk_stride, "stride")):
        if value is not None:
            if kind is not None:
                kind.require("chunk", where)
            raise ValueError(f"{where}: {name} (the {what} of a chunked policy's windows) "
                             f"needs a network")
    return ProbabilityPredictor(classifier, threads=threads)


def capability_of(long_text: str) -> str:
    """The kind capability (:data:`~headwise.intent.kinds.CAPABILITIES`) a long-text
    policy needs: ``"chunk"`` for every policy that reads more than a text's first window
    (``"head_tail"`` and the chunked ones of
    :data:`~headwise.intent.inference.bucketing.CHUNK_POOLING`), else the policy's own
    name."""
    return "chunk" if long_text == "head_tail" or long_text in CHUNK_POOLING else long_text


def load_predictor(model: str | Path | Any, *, model_dir: str | Path | None = None,
                   runtime: str = "auto", onnx_path: str | Path | None = None,
                   threads: int = 0, long_text: str = "auto",
                   chunk_length: float | int | None = None,
                   chunk_stride: int | str | None = None, max_rows: int = 64,
                   report: Callable[[str], None] | None = None) -> Predictor:
    """The predictor of a model directory or a loaded classifier.

    Args:
        model: the model directory (loaded with
            :func:`~headwise.intent.kinds.load_classifier`), or a loaded classifier.
        model_dir: the directory of a loaded ``model`` (its ``model.onnx`` and the weights'
            hash the ONNX file must carry); a directory ``model`` is its own.
        runtime: ``"auto"``, ``"torch"`` or ``"onnx"`` (:func:`choose_runtime`).
        onnx_path: the ONNX file (default ``MODEL/model.onnx``, else the cached export).
        threads: intra-op threads of the runtime (0: the library's default; the setting is
            per process).
        long_text: one of :data:`~headwise.intent.inference.bucketing.LONG_TEXT_POLICIES`:
            ``"auto"`` (the default) is the policy of a single network's architecture
            (:data:`~headwise.intent.inference.bucketing.DEFAULT_LONG_TEXT`) and
            ``"truncate"`` for the other kinds.
        chunk_length: the width of the chunked policies' windows (a single network's
            ``"auto"`` is one): a float in (0, 1], a fraction of the model's maximum
            length, or an int, a count of tokens, special tokens included
            (:func:`~headwise.intent.inference.bucketing.window_length`); None:
            :data:`~headwise.intent.inference.bucketing.DEFAULT_CHUNK_LENGTH`. Refused
            with a policy that does not chunk, and for the kinds that do not chunk (the
            registry's reason, :mod:`headwise.intent.kinds`).
        chunk_stride: tokens between window starts for the chunked policies, or
            :data:`~headwise.intent.inference.bucketing.SENTENCE_STRIDE` (windows that
            start at the text's sentences); refused like ``chunk_length``. None: a single
            network's ``"auto"`` takes its architecture's
            (:data:`~headwise.intent.inference.bucketing.DEFAULT_CHUNK_STRIDE`), a policy
            named explicitly windows half a body apart.
        max_rows: most rows in one forward pass.
        report: receives :func:`choose_runtime`'s one-line note: why ``runtime="auto"``
            fell back to PyTorch, or that the cached ONNX export was built now (None:
            silent).

    Returns:
        A :class:`~headwise.intent.inference.single.SingleLabelPredictor` for an intent
        classifier, a :class:`~headwise.intent.inference.compound.CompoundPredictor` for a
        compound one, a :class:`~headwise.intent.inference.proba.ProbabilityPredictor` for
        a TF-IDF model or an ensemble.

    Raises:
        FileNotFoundError: no model directory, one of no known kind, or no ONNX file.
        ValueError: an unknown runtime or policy, pickle files in the directory
            (``UnsafeCheckpointError``), a config that does not match the weights, an ONNX
            file that does not match (with ``runtime="onnx"``; ``"auto"`` falls back to
            PyTorch), a BiLSTM with ``runtime="onnx"``, a compound classifier with a
            policy that reads more than the first window (``"head_tail"`` or a chunked
            one), or a TF-IDF model or an ensemble with ``runtime="onnx"``
            or a long-text policy other than ``"auto"`` and ``"truncate"``; a
            ``chunk_length`` that is not a width, too wide or too narrow for the model,
            given with a policy that does not chunk or for a kind that does not chunk; a
            ``chunk_stride`` in the same cases.

    With a chunked policy (a single network's ``"auto"`` is one) it also fixes
    glibc's mmap threshold for the process (:func:`~headwise.models.heap.steady_heap`):
    the windows of long texts then do not leave the C heap's resident memory growing.
    """
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if long_text not in LONG_TEXT_POLICIES:
        raise ValueError(f"long_text must be one of {', '.join(LONG_TEXT_POLICIES)}, got "
                         f"{long_text!r}")
    if chunk_length is not None:
        check_chunk_length(chunk_length)
    if isinstance(model, str | Path):
        model_dir = model if model_dir is None else model_dir
        classifier = kinds.load_classifier(model)
    else:
        classifier = model
    where = str(model_dir) if model_dir else "the model"
    kind = _kind(classifier)
    if kind not in (kinds.NETWORK, kinds.COMPOUND):
        return _probability_predictor(classifier, runtime=runtime, long_text=long_text,
                                      chunk_length=chunk_length, chunk_stride=chunk_stride,
                                      threads=threads, where=where)
    # "auto" resolved once for a single network (a compound one's: truncate, below)
    policy = default_long_text(architecture_of(classifier)) if long_text == "auto" \
        else long_text
    if chunk_length is not None or chunk_stride is not None:
        # refused before a runtime is chosen (an export built)
        kind.require("chunk", where)  # a compound model reads the first window only
        check_windowed(policy, chunk_length, chunk_stride)
    chosen, note = choose_runtime(classifier, runtime, model_dir=model_dir,
                                  onnx_path=onnx_path, threads=threads)
    if kind is kinds.COMPOUND and long_text == "auto":
        long_text = "truncate"
    if long_text not in ("auto", "truncate"):
        kind.require(capability_of(long_text), where)
    if note is not None and report is not None:
        report(note)
    if kind is kinds.NETWORK and policy in CHUNK_POOLING:
        # a long text is many windows in a row: keep glibc's heap from growing with them
        steady_heap()
    if kind is kinds.COMPOUND:
        return CompoundPredictor(classifier, chosen, long_text=long_text,
                                 max_rows=max(max_rows, 1))
    # "auto" again: the predictor resolves the architecture's policy with its stride
    return SingleLabelPredictor(classifier, chosen, long_text=long_text,
                                chunk_length=chunk_length, chunk_stride=chunk_stride,
                                max_rows=max(max_rows, 1))
