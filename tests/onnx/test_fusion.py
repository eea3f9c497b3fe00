"""Fused ONNX export: one com.microsoft.Attention node per layer, skip-layer-norms and
bias-GELUs, and logits within 1e-4 of PyTorch (tiny local models, no network)."""

from __future__ import annotations

import pytest
import torch
from tiny_models import MAX_LENGTH, tiny_encoder, tiny_tokenizer

from headwise.attention.mha import MultiHeadAttention
from headwise.intent.inference import OnnxRuntime, TorchRuntime
from headwise.onnx.export import export_onnx, max_logit_difference, probe_batches
from headwise.onnx.fusion import (
    FusedSelfAttention,
    fused_attention,
    fused_op_counts,
    unfusable_reason,
)


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def _difference(model, path, tok, seed=7) -> float:
    batches = probe_batches(tok.vocab_size, MAX_LENGTH, pad_id=tok.pad_token_id, seed=seed)
    return max_logit_difference(TorchRuntime(model), OnnxRuntime(path), batches)


@pytest.mark.parametrize("overrides", [
    {},                                                              # pre-norm, cls pooling
    {"norm_first": False, "pooling": "mean", "norm_eps": 1e-12},     # BERT / MiniLM layout
])
def test_fused_export_is_exact(tok, tmp_path, overrides):
    model = tiny_encoder(tok, **overrides)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    path = export_onnx(model, tmp_path / "fused.onnx", max_length=MAX_LENGTH)
    layers = model.config.num_layers
    counts = fused_op_counts(path)
    assert counts["Attention"] == layers and counts["BiasGelu"] == layers
    assert counts["SkipLayerNormalization"] >= layers
    assert _difference(model, path, tok) <= 1e-4
    # the export put the model's own attention back and changed no weight
    assert all(type(layer.attn) is MultiHeadAttention for layer in model.encoder.layers)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


@pytest.mark.parametrize("fuse", [True, False])
def test_max_pooled_export_is_exact(tok, tmp_path, fuse):
    model = tiny_encoder(tok, pooling="max")
    path = export_onnx(model, tmp_path / "max.onnx", max_length=MAX_LENGTH, fuse=fuse)
    if fuse:  # the attention is still fused; the max over real tokens is plain operators
        assert fused_op_counts(path)["Attention"] == model.config.num_layers
    assert _difference(model, path, tok) <= 1e-4


def test_portable_export_has_standard_operators_only(tok, tmp_path):
    model = tiny_encoder(tok)
    path = export_onnx(model, tmp_path / "plain.onnx", max_length=MAX_LENGTH, fuse=False)
    assert fused_op_counts(path) == {}
    assert _difference(model, path, tok) <= 1e-4


def test_pruned_heads_are_fused_with_their_own_head_count(tok, tmp_path):
    model = tiny_encoder(tok)
    model.encoder.layers[0].attn.prune_heads([1, 2])
    assert unfusable_reason(model) is None
    path = export_onnx(model, tmp_path / "pruned.onnx", max_length=MAX_LENGTH)
    assert fused_op_counts(path)["Attention"] == model.config.num_layers
    assert _difference(model, path, tok) <= 1e-4


@pytest.mark.parametrize("overrides, reason", [
    ({"num_kv_heads": 2}, "grouped-query"),
    ({"fusion": "glu"}, "GLU"),
    ({"conv_kernel": 3}, "depthwise convolution"),
])
def test_unfusable_attention_is_exported_plain_and_exact(tok, tmp_path, overrides, reason):
    model = tiny_encoder(tok, **overrides)
    assert reason in unfusable_reason(model)
    with pytest.raises(ValueError, match=reason), fused_attention(model):
        pass
    path = export_onnx(model, tmp_path / "plain.onnx", max_length=MAX_LENGTH)
    assert "Attention" not in fused_op_counts(path)
    assert _difference(model, path, tok) <= 1e-4


def test_other_layers_the_fused_operator_cannot_express(tok):
    assert "rotary" in unfusable_reason(tiny_encoder(tok, position="rope"))
    model = tiny_encoder(tok)
    model.encoder.layers[1].attn.set_head_gates([1.0, 0.0, 1.0, 1.0])
    assert "head gates" in unfusable_reason(model)


def test_the_stand_in_computes_the_layers_attention(tok):
    """Eagerly, the custom operator behind the fused node equals the layer it replaces on
    every real (unpadded) position."""
    model = tiny_encoder(tok)
    attn = model.encoder.layers[0].attn
    torch.manual_seed(3)
    x = torch.randn(2, 6, model.config.d_model)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2], dtype=torch.int32)
    with torch.no_grad():
        want = attn(x, mask=mask.bool()[:, None, None, :])
        got = FusedSelfAttention(attn)(x, mask=mask)
    real = mask.bool()
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="padding mask"):
        FusedSelfAttention(attn)(x)


def test_a_failing_fused_export_falls_back_to_the_plain_graph(tok, tmp_path, monkeypatch):
    import headwise.onnx.export as onnx_export

    def broken():
        raise TypeError("no custom translations here")

    monkeypatch.setattr(onnx_export, "translations", broken)
    model = tiny_encoder(tok)
    with pytest.warns(UserWarning, match="no custom translations here"):
        path = export_onnx(model, tmp_path / "fallback.onnx", max_length=MAX_LENGTH)
    assert "Attention" not in fused_op_counts(path)
    assert _difference(model, path, tok) <= 1e-4
    assert all(type(layer.attn) is MultiHeadAttention for layer in model.encoder.layers)
