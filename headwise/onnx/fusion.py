"""Fused operators for onnxruntime: the attention written as one ``Attention`` node, and
onnxruntime's transformer optimizer over the rest.

``torch.onnx.export`` writes each attention layer as some twenty small nodes (split,
transposes, a scaled matmul, the padding mask as an additive bias, softmax, a NaN guard for
fully masked rows, ...), a shape onnxruntime's fusion passes do not recognise. At export
time :func:`fused_attention` swaps each layer's attention for a stand-in that calls a
custom operator, which the exporter translates (:data:`TRANSLATIONS`) into onnxruntime's
``com.microsoft.Attention``: the packed Q/K/V projection, every head and the padding mask
in one kernel whose weights are pre-packed when the session starts. :func:`optimize_graph`
then runs onnxruntime's transformer optimizer, which folds the residual adds into
``SkipLayerNormalization`` and the feed-forward bias and erf-GELU into ``BiasGelu``. Every
fusion computes the same float32 function (no GELU approximation); ``headwise export``
checks the written graph against PyTorch.

A graph with these operators runs on onnxruntime only (``com.microsoft`` contrib ops, CPU
execution provider included); ``headwise export --portable`` writes the plain graph.
The fused attention takes padding masks only, and a query row always has a real key to
attend (every text has at least its special tokens).
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headwise.attention.mha import MultiHeadAttention

log = logging.getLogger(__name__)

#: operator types written by the fusions, counted in the export report
FUSED_OPS = ("Attention", "SkipLayerNormalization", "BiasGelu", "EmbedLayerNormalization")


def unfusable_reason(model: nn.Module) -> str | None:
    """Why the attention of an encoder classifier cannot be exported as fused
    ``Attention`` nodes, or None when it can.

    The fused operator is plain multi-head self-attention with a packed Q/K/V projection
    and a padding mask: no grouped-query heads, rotary positions, GLU head fusion, head
    gates other than ones, additive score bias (ALiBi, number- or negation-aware heads), or
    a depthwise convolution after the embeddings.
    """
    encoder = getattr(model, "encoder", None)
    layers = getattr(encoder, "layers", None)
    if not layers:
        return "not a Transformer encoder"
    if getattr(encoder, "has_score_bias", False):
        return "the layers add a score bias (ALiBi, number- or negation-aware heads)"
    if getattr(encoder, "local_conv", None) is not None:
        return "a depthwise convolution sits between the embeddings and the first layer"
    for i, layer in enumerate(layers):
        attn = getattr(layer, "attn", None)
        if not isinstance(attn, MultiHeadAttention):
            return f"layer {i} has no MultiHeadAttention"
        if attn.in_proj is None or attn.in_proj.bias is None:
            return f"layer {i} has no packed, biased Q/K/V projection"
        if attn.num_kv_heads != attn.num_heads:
            return f"layer {i} has grouped-query heads"
        if attn.rope is not None:
            return f"layer {i} uses rotary positions"
        if attn.gate_proj is not None:
            return f"layer {i} fuses its heads with a GLU"
        if not bool((attn.head_gate == 1).all()):
            return f"layer {i} has head gates other than ones"
    return None


@functools.cache
def _packed_attention():
    """The custom operator the stand-ins call (registered with torch once, on first use)."""

    @torch.library.custom_op("headwise_export::packed_attention", mutates_args=())
    def packed_attention(x: Tensor, weight_t: Tensor, bias: Tensor, mask: Tensor,
                         num_heads: int) -> Tensor:
        b, s, _ = x.shape
        qkv = x @ weight_t + bias
        d = qkv.shape[-1] // (3 * num_heads)
        q, k, v = (t.transpose(1, 2) for t in
                   qkv.view(b, s, 3 * num_heads, d).split(num_heads, dim=2))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.bool()[:, None, None, :])
        return out.transpose(1, 2).reshape(b, s, num_heads * d)

    @packed_attention.register_fake
    def _(x, weight_t, bias, mask, num_heads):
        return x.new_empty(x.shape[0], x.shape[1], weight_t.shape[1] // 3)

    return packed_attention


@functools.cache
def _attention_node():
    """onnxruntime's ``com.microsoft.Attention`` as an onnxscript op (its schema lives in
    onnxruntime, not in ``onnx.defs``, so the part used here is declared)."""
    import onnxscript
    from onnx.defs import OpSchema

    schema = OpSchema(
        "Attention", "com.microsoft", 1,
        inputs=[OpSchema.FormalParameter("input", "T"),
                OpSchema.FormalParameter("weights", "T"),
                OpSchema.FormalParameter("bias", "T"),
                OpSchema.FormalParameter("mask_index", "M")],
        outputs=[OpSchema.FormalParameter("output", "T")],
        type_constraints=[("T", ["tensor(float)"], ""), ("M", ["tensor(int32)"], "")],
        attributes=[OpSchema.Attribute("num_heads", OpSchema.AttrType.INT, "", required=True)])
    return onnxscript.values.Op(onnxscript.values.Opset("com.microsoft", 1), "Attention",
                                schema)


def _translate_packed_attention(x, weight_t, bias, mask, num_heads: int):
    """The exporter's translation of the custom operator: one ``Attention`` node with a
    raw (batch, seq) int32 padding mask (1 = real token)."""
    return _attention_node()(x, weight_t, bias, mask, num_heads=num_heads)


def translations() -> dict:
    """``custom_translation_table`` for ``torch.onnx.export`` under :func:`fused_attention`."""
    _packed_attention()  # registers the operator
    return {torch.ops.headwise_export.packed_attention.default: _translate_packed_attention}


class FusedSelfAttention(nn.Module):
    """Export-time stand-in of a :class:`MultiHeadAttention`: the custom operator, then the
    layer's own output projection. Its ``mask`` is the (batch, seq) int32 padding mask.

    Args:
        attn: the layer it stands in for (see :func:`unfusable_reason`).
    """

    def __init__(self, attn: MultiHeadAttention) -> None:
        super().__init__()
        self.attn = attn
        # the layout the ONNX operator reads: (d_model, 3 * heads * head_dim), Q|K|V
        self.register_buffer("weight_t", attn.in_proj.weight.detach().t().contiguous())

    def forward(self, x: Tensor, context: Tensor | None = None, mask: Tensor | None = None,
                cache: object = None, *, positions: Tensor | None = None,
                bias: Tensor | None = None) -> Tensor:
        """x: (batch, seq, d_model) -> same shape."""
        if context is not None or cache is not None or bias is not None or mask is None:
            raise ValueError("the fused attention takes self-attention under a padding mask")
        out = _packed_attention()(x, self.weight_t, self.attn.in_proj.bias, mask,
                                  self.attn.num_heads)
        return self.attn.out_proj(out)


@contextmanager
def fused_attention(model: nn.Module) -> Iterator[None]:
    """Swap every encoder layer's attention for a :class:`FusedSelfAttention` (restored on
    exit). Under it the encoder's ``run`` takes the int32 (batch, seq) padding mask.

    Raises:
        ValueError: a model whose attention cannot be fused (:func:`unfusable_reason`).
    """
    reason = unfusable_reason(model)
    if reason is not None:
        raise ValueError(f"the attention cannot be fused: {reason}")
    layers = list(model.encoder.layers)
    originals = [layer.attn for layer in layers]
    try:
        for layer, attn in zip(layers, originals, strict=True):
            layer.attn = FusedSelfAttention(attn)
        yield
    finally:
        for layer, attn in zip(layers, originals, strict=True):
            layer.attn = attn


@contextlib.contextmanager
def quiet_loggers(*names: str) -> Iterator[None]:
    """Silence these loggers below ERROR for the duration of a call: the exporter's, the
    quantiser's and the optimizer's advice logged at WARNING (torchvision not installed,
    "consider pre-processing", "symbolic shape inference disabled or failed")."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def optimize_graph(path: str | Path, *, num_heads: int, hidden_size: int) -> None:
    """Run onnxruntime's transformer optimizer (BERT fusions, no approximations, no
    hardware-specific rewrites) on an exported classifier, in place.

    Args:
        path: the ``.onnx`` file.
        num_heads, hidden_size: the encoder's, for the attention fusion.
    """
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    options = FusionOptions("bert")
    options.enable_gelu_approximation = False  # exact erf-GELU only (the default, pinned)
    # the optimizer prints its own diagnostics ("failed in shape inference") on stdout, which
    # is the user's output (`headwise export ... | jq`): they go to the debug log instead
    chatter = io.StringIO()
    with contextlib.redirect_stdout(chatter), quiet_loggers("onnxruntime.transformers"):
        optimized = optimize_model(str(path), model_type="bert", num_heads=num_heads,
                                   hidden_size=hidden_size, optimization_options=options,
                                   opt_level=0, use_gpu=False)
    if chatter.getvalue().strip():
        log.debug("onnxruntime's transformer optimizer said: %s", chatter.getvalue().strip())
    optimized.save_model_to_file(str(path))


def fused_op_counts(path: str | Path) -> dict[str, int]:
    """How many nodes of each :data:`FUSED_OPS` type an ONNX file holds."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    counts = Counter(node.op_type for node in graph.node if node.domain == "com.microsoft")
    return {op: counts[op] for op in FUSED_OPS if counts[op]}
