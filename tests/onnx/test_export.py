"""The ONNX graph of an encoder classifier: onnxruntime equals PyTorch within 1e-4 with
number- and negation-aware heads, rotary, ALiBi and RoBERTa positions (tiny local
models, no network)."""

from __future__ import annotations

import torch
from tiny_corpus import INTENTS

from headwise.intent.inference import OnnxRuntime, TorchRuntime
from headwise.onnx.export import export_onnx, max_logit_difference, probe_batches


def _tiny_encoder(tok, **fields):
    """A fresh 2-layer encoder classifier over the tiny tokenizer (eval mode)."""
    from tiny_models import MAX_LENGTH

    from headwise.models import EncoderClassifier, ModelConfig

    torch.manual_seed(0)
    return EncoderClassifier(ModelConfig(vocab_size=tok.vocab_size, d_model=32, num_layers=2,
                                         num_heads=4, d_ff=64, num_labels=len(INTENTS),
                                         max_position=MAX_LENGTH, dropout=0.0,
                                         pad_token_id=tok.pad_token_id, **fields)).eval()


def test_number_and_negation_aware_heads_survive_the_export(tmp_path):
    """The exported graph keeps the learned number- and negation-key biases (set far from 0)."""
    from tiny_models import MAX_LENGTH, tiny_tokenizer

    from headwise.models import EncoderClassifier
    from headwise.text.number_tokens import number_token_ids

    tok = tiny_tokenizer()
    model = _tiny_encoder(tok, number_heads=[0, 2], negation_heads=[1, 2])
    ids = number_token_ids(tok)
    model.encoder.set_number_tokens(ids if ids else [tok.unk_token_id])
    model.encoder.set_negation_tokens([tok.unk_token_id, 7])
    with torch.no_grad():
        for nb in model.encoder.number_bias:
            nb.weight.copy_(torch.tensor([3.0, -2.0]))
        for nb in model.encoder.negation_bias:
            nb.weight.copy_(torch.tensor([2.5, 1.0]))
    path = export_onnx(model, tmp_path / "num.onnx")
    batches = probe_batches(tok.vocab_size, MAX_LENGTH, pad_id=tok.pad_token_id, seed=5)
    assert max_logit_difference(TorchRuntime(model), OnnxRuntime(path), batches) <= 1e-4
    plain = EncoderClassifier(model.config.replace(number_heads=None,
                                                   negation_heads=None)).eval()
    plain.load_state_dict({k: v for k, v in model.state_dict().items()
                           if "number" not in k and "negation" not in k}, strict=True)
    assert max_logit_difference(TorchRuntime(plain), OnnxRuntime(path), batches) > 1e-3


def test_rotary_position_models_export_exactly(tmp_path):
    """RoPE traces without a data-dependent position check, so RoPE encoders export."""
    from tiny_models import MAX_LENGTH, tiny_tokenizer


    tok = tiny_tokenizer()
    model = _tiny_encoder(tok, position="rope")
    path = export_onnx(model, tmp_path / "rope.onnx")
    batches = probe_batches(tok.vocab_size, MAX_LENGTH, pad_id=tok.pad_token_id, seed=3)
    assert max_logit_difference(TorchRuntime(model), OnnxRuntime(path), batches) <= 1e-4


def test_alibi_position_models_export_exactly(tmp_path):
    """ALiBi's distance bias is built from the traced length, so one graph answers every
    length as PyTorch does (the probe batches run lengths 1 to the maximum)."""
    from tiny_models import MAX_LENGTH, tiny_tokenizer

    tok = tiny_tokenizer()
    model = _tiny_encoder(tok, position="alibi", negation_heads=[1])
    model.encoder.set_negation_tokens([tok.unk_token_id, 7])
    path = export_onnx(model, tmp_path / "alibi.onnx")
    batches = probe_batches(tok.vocab_size, MAX_LENGTH, pad_id=tok.pad_token_id, seed=6)
    assert max_logit_difference(TorchRuntime(model), OnnxRuntime(path), batches) <= 1e-4


def test_depthwise_convolution_models_export_exactly(tmp_path):
    """The convolution before the first layer, with padding read from the pad id, traces
    into the graph: every probe length and padding answers as PyTorch does."""
    from tiny_models import MAX_LENGTH, tiny_tokenizer

    tok = tiny_tokenizer()
    model = _tiny_encoder(tok, conv_kernel=5)
    path = export_onnx(model, tmp_path / "conv.onnx")
    batches = probe_batches(tok.vocab_size, MAX_LENGTH, pad_id=tok.pad_token_id, seed=7)
    assert max_logit_difference(TorchRuntime(model), OnnxRuntime(path), batches) <= 1e-4


def test_roberta_positions_export_exactly(tmp_path):
    """XLM-R / RoBERTa positions (counted over non-padding tokens from pad_token_id + 1)
    trace into the graph: ONNX Runtime equals PyTorch on padded batches."""
    from tiny_models import MAX_LENGTH, tiny_tokenizer

    from headwise.models import EncoderClassifier, ModelConfig

    tok = tiny_tokenizer()
    torch.manual_seed(0)
    model = EncoderClassifier(ModelConfig(
        vocab_size=tok.vocab_size, d_model=32, num_layers=2, num_heads=4, d_ff=64,
        num_labels=len(INTENTS), max_position=MAX_LENGTH + 2, positions_from_padding=True,
        norm_first=False, embedding_norm=True, dropout=0.0, pad_token_id=1)).eval()
    path = export_onnx(model, tmp_path / "roberta.onnx")
    batches = probe_batches(tok.vocab_size, MAX_LENGTH, pad_id=1, seed=4)
    assert max_logit_difference(TorchRuntime(model), OnnxRuntime(path), batches) <= 1e-4


def test_clause_scoped_negation_heads_export_exactly(tmp_path):
    """Clause-scoped negation heads (a per-query bias computed from the ids) export: the
    graph equals PyTorch, and differs from the same weights scoped to the message."""
    from tiny_models import MAX_LENGTH, tiny_tokenizer

    tok = tiny_tokenizer()
    model = _tiny_encoder(tok, negation_heads=[1, 2], negation_scope="clause")
    model.encoder.set_negation_tokens([tok.unk_token_id, 7, 9])
    model.encoder.set_clause_breaks([11, 12])
    with torch.no_grad():
        for nb in model.encoder.negation_bias:
            nb.weight.copy_(torch.tensor([3.0, -2.0]))
    path = export_onnx(model, tmp_path / "clause.onnx")
    # random rows, and rows where cues and clause breaks meet (cue, break, cue: three clauses)
    import numpy as np

    rows = np.array([[20, 7, 30, 11, 40, 50, 12, 9, 60, 70, 80, 90],
                     [7, 11, 31, 32, 33, 34, 35, 12, 36, 9, 0, 0]], dtype=np.int64)
    batches = [*probe_batches(tok.vocab_size, MAX_LENGTH, pad_id=tok.pad_token_id, seed=5),
               (rows, (rows != 0).astype(np.int64))]
    assert max_logit_difference(TorchRuntime(model), OnnxRuntime(path), batches) <= 1e-4
    message = _tiny_encoder(tok, negation_heads=[1, 2])
    message.load_state_dict({k: v for k, v in model.state_dict().items()
                             if k != "encoder.is_clause_break"}, strict=True)
    assert max_logit_difference(TorchRuntime(message), OnnxRuntime(path), batches) > 1e-3
