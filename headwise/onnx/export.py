"""Export an intent classifier to ONNX, check it against PyTorch, quantise it to int8.

The exported graph takes ``input_ids`` and ``attention_mask`` (int64, dynamic batch and
length) and returns ``logits`` and ``pooled`` (the vector the classification head reads,
which the service averages over windows for chunk-and-pool); a joint intent + slot model
(:class:`~headwise.models.joint.JointIntentSlotModel`, the network of a compound
classifier) also returns ``tag_logits`` (batch, seq, tags), its slot tagger's scores of
every token. It is written with PyTorch's
``torch.export``-based exporter, by default with onnxruntime's fused operators
(:mod:`headwise.onnx.fusion`: one ``Attention`` node per layer, skip-layer-norms,
bias-GELUs), the same float32 function in about a quarter of the nodes; ``fuse=False``
writes standard ONNX operators only. The file's metadata records the SHA-256 of the
weights it was made from, so ``headwise serve`` can refuse an ONNX file that belongs to
another model.
A BiLSTM (single-label or joint) is not exported: it reads packed sequences, whose
lengths are data the exported graph cannot hold; it is served with PyTorch.
"""

from __future__ import annotations

import contextlib
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import Tensor, nn

from headwise.attention.mha import MultiHeadAttention
from headwise.onnx.fusion import (
    fused_attention,
    optimize_graph,
    quiet_loggers,
    translations,
    unfusable_reason,
)

__all__ = ["DEFAULT_OPSET", "META_QUANTIZED", "META_WEIGHTS_SHA256", "ExportableClassifier",
           "JointRuntime", "LogitsRuntime", "accuracy", "export_onnx", "max_joint_difference",
           "max_logit_difference", "probe_batches", "quantize_int8"]

#: the opset the exporter targets
DEFAULT_OPSET = 18
#: ONNX metadata keys written by :func:`export_onnx`: the SHA-256 of the weights the graph
#: was made from, and whether its weights are quantised (``none`` or ``int8``)
META_WEIGHTS_SHA256 = "headwise.weights_sha256"
META_QUANTIZED = "headwise.quantized"


class LogitsRuntime(Protocol):
    """What the comparisons here run: a padded batch of token ids to ``(logits, pooled)``
    (the PyTorch and the onnxruntime runtimes both are)."""

    def forward(self, input_ids: np.ndarray, attention_mask: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]: ...


class JointRuntime(Protocol):
    """What the comparisons of joint intent + slot models run: a padded batch of token ids
    to ``(logits, tag_logits)`` (``tag_logits`` None without a slot tagger)."""

    def forward_joint(self, input_ids: np.ndarray, attention_mask: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray | None]: ...


class ExportableClassifier(nn.Module):
    """An ``EncoderClassifier``'s forward pass in a form ``torch.export`` can trace.

    It runs the classifier's own modules in the same order as
    ``TransformerEncoder.forward``, but always applies the padding mask (the encoder skips
    an all-ones mask with a data-dependent branch, which an exported graph cannot hold;
    an all-ones mask gives the same result). Returns ``(logits, pooled)``, and for a joint
    intent + slot model with a slot tagger ``(logits, pooled, tag_logits)``
    (:attr:`output_names`).

    Args:
        model: an ``EncoderClassifier`` (a ``JointIntentSlotModel`` included) without a
            sparse attention pattern.
        fused: the layers' attention is swapped for the fused stand-ins
            (:func:`~headwise.onnx.fusion.fused_attention`), which take the padding
            mask as (batch, seq) int32.

    Raises:
        ValueError: a model that is not a Transformer encoder classifier (a BiLSTM), or
            one with a sparse attention pattern (not exportable here).
    """

    def __init__(self, model: nn.Module, *, fused: bool = False) -> None:
        super().__init__()
        encoder = getattr(model, "encoder", None)
        if encoder is None or not hasattr(encoder, "layers") or not hasattr(model, "pool"):
            raise ValueError(f"ONNX export supports Transformer encoder classifiers only (joint "
                             f"intent + slot ones included), not {type(model).__name__}: a "
                             f"BiLSTM reads packed sequences, whose lengths a static ONNX "
                             f"graph cannot hold; it runs on PyTorch")
        if getattr(encoder, "pattern", None) is not None:
            raise ValueError("ONNX export does not support sparse attention patterns; serve "
                             "this model with the torch runtime")
        self.model = model
        self.fused = fused

    @property
    def output_names(self) -> list[str]:
        """The graph's outputs: ``logits``, ``pooled`` and, for a joint model with a slot
        tagger, ``tag_logits``."""
        tagged = getattr(self.model, "tagger", None) is not None
        return ["logits", "pooled", "tag_logits"] if tagged else ["logits", "pooled"]

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, ...]:
        keep = attention_mask.bool()
        mask = attention_mask.to(torch.int32) if self.fused else keep[:, None, None, :]
        x = self.model.encoder.run(input_ids, mask)
        pooled = self.model.pool(x, keep)
        tagger = getattr(self.model, "tagger", None)
        if tagger is None:
            return self.model.classifier(pooled), pooled
        # the joint heads' own order (JointHeads.heads), dropout being off in eval mode
        return self.model.classifier(pooled), pooled, tagger(x)


def _set_metadata(path: Path, metadata: dict[str, str]) -> None:
    import onnx

    proto = onnx.load(str(path))
    existing = {p.key: p for p in proto.metadata_props}
    for key, value in metadata.items():
        if key in existing:
            existing[key].value = value
        else:
            proto.metadata_props.add(key=key, value=value)
    onnx.save(proto, str(path))


def _first_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def _write_graph(model: nn.Module, out: Path, *, opset: int, max_length: int, fused: bool
                 ) -> None:
    """``torch.onnx.export`` of an eval-mode classifier to ``out``, with the attention
    fused (:func:`~headwise.onnx.fusion.fused_attention`) or as the layers run it."""
    wrapper = ExportableClassifier(model, fused=fused).eval()
    vocab = model.encoder.embeddings.vocab_size
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, max(vocab, 2), (2, 8), generator=gen)
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 5:] = 0
    batch = torch.export.Dim("batch", max=1 << 16)
    seq = torch.export.Dim("seq", max=max(max_length, 9))
    swap = fused_attention(model) if fused else contextlib.nullcontext()
    with warnings.catch_warnings(), quiet_loggers("torch.onnx", "torch.export"), swap:
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            wrapper, (ids, mask), input_names=["input_ids", "attention_mask"],
            output_names=wrapper.output_names,
            dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}),
            opset_version=opset, dynamo=True, verbose=False,
            custom_translation_table=translations() if fused else None)
    program.save(str(out))


def export_onnx(model: nn.Module, out: str | Path, *, weights_sha256: str | None = None,
                opset: int = DEFAULT_OPSET, max_length: int = 512, fuse: bool = True) -> Path:
    """Write ``model`` as an ONNX graph with dynamic batch size and length.

    Args:
        model: an ``EncoderClassifier``, or a ``JointIntentSlotModel`` (whose graph also
            returns ``tag_logits``); put in eval mode for the export.
        out: the ``.onnx`` file to write (its folder is created).
        weights_sha256: recorded in the metadata (the SHA-256 of ``model.safetensors``).
        opset: ONNX opset version.
        max_length: the longest sequence the graph must accept.
        fuse: write onnxruntime's fused operators (:mod:`headwise.onnx.fusion`;
            the attention stays unfused where the layers do not allow it, e.g. with
            number-aware heads). False: standard ONNX operators only, for any runtime.

    Returns:
        The written path.

    Raises:
        ValueError: a model the exporter does not support (see
            :class:`ExportableClassifier`).
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ExportableClassifier(model)  # refuses what cannot be exported, before any work
    was_training = model.training
    model.eval()
    # with a score bias (ALiBi, number- or negation-aware heads) the layers would call SDPA with a
    # float mask, whose decomposition under torch.export claims an output layout it does
    # not produce; the reference "math" backend traces to the same operations without that step
    biased = [m for m in model.modules() if isinstance(m, MultiHeadAttention)] \
        if getattr(model.encoder, "has_score_bias", False) else []
    backends = [m.backend for m in biased]
    for m in biased:
        m.backend = "math"
    try:
        fused = fuse and unfusable_reason(model) is None
        if fused:
            try:
                _write_graph(model, out, opset=opset, max_length=max_length, fused=True)
            except Exception as e:  # an exporter without custom translations, say
                warnings.warn(f"exporting the attention as fused Attention nodes failed "
                              f"({_first_line(e)}); writing it unfused", stacklevel=2)
                fused = False
        if not fused:
            _write_graph(model, out, opset=opset, max_length=max_length, fused=False)
    finally:
        model.train(was_training)
        for m, b in zip(biased, backends, strict=True):
            m.backend = b
    if fuse:
        try:
            with warnings.catch_warnings(), quiet_loggers("onnxruntime"):
                warnings.simplefilter("ignore")
                optimize_graph(out, num_heads=model.config.num_heads,
                               hidden_size=model.config.d_model)
        except Exception as e:  # the graph already written stays valid, only less fused
            warnings.warn(f"onnxruntime's transformer optimizer failed ({_first_line(e)}); "
                          f"the graph keeps its unfused layer norms and GELUs", stacklevel=2)
    meta = {META_QUANTIZED: "none"}
    if weights_sha256:
        meta[META_WEIGHTS_SHA256] = weights_sha256
    _set_metadata(out, meta)
    return out


def quantize_int8(src: str | Path, dst: str | Path) -> Path:
    """Dynamic int8 quantisation (weights int8, activations quantised per batch at run
    time) of an exported classifier, with onnxruntime's quantiser.

    Weights get one scale per output channel (``per_channel``), not one per matrix: a
    fine-tuned 12-layer encoder's matrices hold a few large columns that a single scale
    crushes the rest against. Chosen on DataCLUE CIC's validation rows (never its test
    split) with multilingual-e5-small fine-tuned: per channel, the int8 model's top intent
    agreed with fp32's more often and its accuracy moved less than per matrix, at the same
    file size; leaving the embeddings or every operator but MatMul in float did no better
    and doubled the file (BENCHMARKS ``int8:choice``).

    Weights use 7 bits of the 8 (``reduce_range``), so that the file is right on every x86
    CPU it may be copied to. On a CPU without VNNI (AVX2 only, or AVX-512 before Cascade
    Lake) onnxruntime multiplies unsigned-8-bit activations by signed-8-bit weights with an
    instruction whose 16-bit pair sums saturate; full-range weights then move some
    probabilities far from fp32's (``tests/serve/test_onnx.py`` fails on such a machine
    without it). On the validation rows the scheme was chosen on, 7-bit weights agreed with
    fp32 more often than 8-bit ones on an AVX2 machine (the paired interval clears zero);
    an earlier run, on a machine whose CPU was not recorded, had 8-bit slightly ahead
    (BENCHMARKS ``int8:choice`` shows both): a file that is right everywhere wins.

    Args:
        src: the float32 ``.onnx`` written by :func:`export_onnx`.
        dst: the quantised file to write.

    Returns:
        ``dst``; its metadata keeps the weights' hash and says ``int8``.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    meta = {p.key: p.value for p in onnx.load(str(src), load_external_data=False)
            .metadata_props}
    with tempfile.TemporaryDirectory() as tmp:
        # the quantiser writes shape-inferred intermediates; keep them out of dst's folder
        staged = Path(tmp) / dst.name
        with quiet_loggers("", "onnxruntime"):
            quantize_dynamic(str(src), str(staged), weight_type=QuantType.QInt8,
                             per_channel=True, reduce_range=True)
        _set_metadata(staged, {**meta, META_QUANTIZED: "int8"})
        staged.replace(dst)
    return dst


def probe_batches(vocab_size: int, max_length: int, *, pad_id: int = 0, seed: int = 0,
                  ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random padded batches of several shapes for comparing two runtimes.

    Returns:
        ``[(input_ids, attention_mask), ...]`` int64 arrays; rows have random lengths
        (at least 1) and are padded with ``pad_id``.
    """
    rng = np.random.default_rng(seed)
    out = []
    for batch, length in ((1, 1), (1, min(7, max_length)), (4, min(16, max_length)),
                          (8, min(max_length, 64)), (2, max_length)):
        lengths = rng.integers(1, length + 1, size=batch)
        lengths[0] = length
        ids = rng.integers(0, vocab_size, size=(batch, length), dtype=np.int64)
        mask = (np.arange(length)[None] < lengths[:, None]).astype(np.int64)
        out.append((np.where(mask == 1, ids, pad_id), mask))
    return out


def max_logit_difference(a: LogitsRuntime, b: LogitsRuntime,
                         batches: Sequence[tuple[np.ndarray, np.ndarray]]) -> float:
    """Largest absolute difference of the logits of two runtimes over ``batches``."""
    worst = 0.0
    for ids, mask in batches:
        la, _ = a.forward(ids, mask)
        lb, _ = b.forward(ids, mask)
        worst = max(worst, float(np.abs(la.astype(np.float64) - lb).max()))
    return worst


def max_joint_difference(a: JointRuntime, b: JointRuntime,
                         batches: Sequence[tuple[np.ndarray, np.ndarray]]
                         ) -> tuple[float, float]:
    """Largest absolute differences of the intent logits and of the tag logits (on real
    tokens; padding is never decoded) of two joint runtimes over ``batches``.

    Returns:
        ``(logits, tag_logits)``; the latter 0.0 for models without a slot tagger.

    Raises:
        ValueError: one runtime gives tag logits and the other none.
    """
    worst_logits = worst_tags = 0.0
    for ids, mask in batches:
        la, ta = a.forward_joint(ids, mask)
        lb, tb = b.forward_joint(ids, mask)
        worst_logits = max(worst_logits, float(np.abs(la.astype(np.float64) - lb).max()))
        if (ta is None) != (tb is None):
            raise ValueError("one runtime gives slot-tag logits and the other none")
        if ta is not None:
            real = np.asarray(mask) != 0
            worst_tags = max(worst_tags, float(np.abs(ta[real].astype(np.float64)
                                                      - tb[real]).max()))
    return worst_logits, worst_tags


def accuracy(runtime: LogitsRuntime, tokenizer, texts: Sequence[str],
             labels: Sequence[int], *, max_length: int, batch_size: int = 64) -> float:
    """Top-1 accuracy of a runtime on tokenized texts with known class ids.

    Args:
        runtime: what to evaluate.
        tokenizer: the classifier's tokenizer.
        texts: the texts.
        labels: their class ids.
        max_length: truncation length in tokens.
        batch_size: texts per forward pass.

    Raises:
        ValueError: no texts, or texts and labels of different lengths.
    """
    if not texts or len(texts) != len(labels):
        raise ValueError(f"need equally many texts and labels (>0), got {len(texts)} and "
                         f"{len(labels)}")
    right = 0
    for start in range(0, len(texts), batch_size):
        enc = tokenizer(list(texts[start:start + batch_size]), max_length=max_length)
        logits, _ = runtime.forward(enc["input_ids"].numpy(), enc["attention_mask"].numpy())
        right += int((logits.argmax(1) == np.asarray(labels[start:start + batch_size])).sum())
    return right / len(texts)
