"""The encoder classifier: shapes, padding invariance, training, options, presets."""

from __future__ import annotations

import pytest
import torch

from headwise.models import EncoderClassifier, ModelConfig, mean_pool, preset
from headwise.models.encoder import max_pool, pattern_from_config


def _model(**kw):
    torch.manual_seed(0)
    return EncoderClassifier(preset("tiny", num_labels=3, **kw)).double().eval()


def test_shapes_and_encode():
    model = _model()
    ids = torch.randint(3, 256, (2, 9))
    out = model(ids, labels=torch.tensor([0, 2]))
    assert out["logits"].shape == (2, 3) and out["loss"].ndim == 0
    assert model.encode(ids).shape == (2, 9, 32)


@pytest.mark.parametrize("options", [
    {}, {"pooling": "mean"}, {"position": "rope"}, {"position": "sinusoidal"},
    {"position": "alibi"}, {"conv_kernel": 3},
    {"num_kv_heads": 2, "fusion": "glu", "norm": "rmsnorm", "activation": "swiglu"},
    {"norm_first": False, "embedding_norm": True, "type_vocab_size": 2},
    {"attention_pattern": {"sliding_window": 3, "global_tokens": [0]}},
])
def test_padding_does_not_change_real_tokens(options):
    model = _model(**options)
    ids = torch.randint(3, 256, (2, 7))
    lengths = [7, 4]
    mask = (torch.arange(7)[None] < torch.tensor(lengths)[:, None]).long()
    ids = ids * mask  # pad id 0
    batch = model.encode(ids, mask)
    for i, n in enumerate(lengths):
        alone = model.encode(ids[i: i + 1, :n], mask[i: i + 1, :n])
        torch.testing.assert_close(batch[i: i + 1, :n], alone)
    longer = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], 1)
    longer_mask = torch.cat([mask, torch.zeros(2, 3, dtype=torch.long)], 1)
    torch.testing.assert_close(model(longer, longer_mask)["logits"], model(ids, mask)["logits"])


def test_alibi_positions_add_each_heads_distance_penalty():
    """An ALiBi encoder equals a position-free one whose layers get, by hand, the bias
    -slope_h * |i - j| with Press et al.'s slopes for 4 heads (1/4, 1/16, 1/64, 1/256)."""
    alibi = _model(position="alibi", num_layers=1)
    none = _model(position="none", num_layers=1)
    none.load_state_dict(alibi.state_dict())
    ids = torch.randint(3, 256, (2, 6))
    slopes = torch.tensor([1 / 4, 1 / 16, 1 / 64, 1 / 256], dtype=torch.float64)
    distance = (torch.arange(6)[None, :] - torch.arange(6)[:, None]).abs().double()
    bias = -slopes[None, :, None, None] * distance
    enc = none.encoder
    by_hand = enc.final_norm(enc.layers[0](enc.embeddings(ids), None, bias=bias))
    torch.testing.assert_close(alibi.encode(ids), by_hand)
    assert not torch.allclose(none.encode(ids), by_hand)
    assert alibi.encoder.has_score_bias and not none.encoder.has_score_bias


def test_alibi_is_refused_by_the_decoder():
    from headwise.models import EncoderDecoder

    with pytest.raises(ValueError, match="alibi"):
        EncoderDecoder(preset("tiny-seq2seq", position="alibi"))


def test_conv_kernel_runs_the_convolution_between_embeddings_and_layers():
    """An encoder with ``conv_kernel`` equals the same weights without it whose layers get,
    by hand, the embeddings through the depthwise convolution (padding read from
    ``pad_token_id``)."""
    with_conv = _model(conv_kernel=3)
    plain = _model()
    missing, unexpected = plain.load_state_dict(with_conv.state_dict(), strict=False)
    assert not missing and unexpected == ["encoder.local_conv.conv.weight",
                                          "encoder.local_conv.conv.bias"]
    ids = torch.randint(3, 256, (2, 6))
    ids[1, 4:] = 0
    mask = (ids != 0).long()
    enc = plain.encoder
    x = with_conv.encoder.local_conv(enc.embeddings(ids), ids != 0)
    for layer in enc.layers:
        x = layer(x, enc.attention_mask_for(mask, 6))
    torch.testing.assert_close(with_conv.encode(ids, mask), enc.final_norm(x))
    assert not torch.allclose(plain.encode(ids, mask), enc.final_norm(x))


def test_conv_kernel_is_refused_where_it_would_be_ignored():
    from headwise.models import EncoderDecoder

    with pytest.raises(ValueError, match="odd"):
        preset("tiny", conv_kernel=2)
    with pytest.raises(ValueError, match="conv_kernel is for Transformer"):
        ModelConfig(model_type="bilstm", conv_kernel=3)
    with pytest.raises(ValueError, match="conv_kernel is for encoder models"):
        EncoderDecoder(preset("tiny-seq2seq", conv_kernel=3))


def test_a_few_steps_learn_a_tiny_task():
    torch.manual_seed(1)
    model = EncoderClassifier(preset("tiny", num_labels=2, pooling="mean"))
    ids = torch.randint(3, 50, (64, 8))
    labels = (ids == 7).any(1).long()
    ids[::2, 3] = 7
    labels = (ids == 7).any(1).long()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = None
    for _ in range(60):
        loss = model(ids, labels=labels)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.3 * first


def test_gradient_checkpointing_same_gradients():
    model = _model()
    model.train()
    ids = torch.randint(3, 256, (2, 6))
    grads = []
    for enabled in (False, True):
        model.set_gradient_checkpointing(enabled)
        model.zero_grad()
        model(ids, labels=torch.tensor([1, 0]))["loss"].backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)


def test_mean_pool_ignores_padding():
    h = torch.arange(12.0).view(1, 4, 3)
    torch.testing.assert_close(mean_pool(h, torch.tensor([[1, 1, 0, 0]])),
                               torch.tensor([[1.5, 2.5, 3.5]]))


def test_max_pool_takes_each_dimensions_largest_real_token():
    h = torch.tensor([[[1.0, -5.0, 2.0], [0.5, -1.0, 3.0], [9.0, 9.0, 9.0]],
                      [[-3.0, -2.0, -1.0], [7.0, 7.0, 7.0], [7.0, 7.0, 7.0]],
                      [[4.0, 4.0, 4.0], [4.0, 4.0, 4.0], [4.0, 4.0, 4.0]]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    # padding (the 9s and 7s) never wins; a row with no real token has no maximum
    low = torch.finfo(h.dtype).min
    torch.testing.assert_close(max_pool(h, mask), torch.tensor(
        [[1.0, -1.0, 3.0], [-3.0, -2.0, -1.0], [low, low, low]]))
    torch.testing.assert_close(max_pool(h), h.amax(1))


def test_max_pooled_classifier_ignores_padding_and_trains():
    model = _model(pooling="max")
    ids = torch.randint(3, 256, (2, 7))
    alone = model(ids[:1, :4])["logits"]
    padded = ids.clone()
    padded[0, 4:] = 0
    mask = torch.tensor([[1, 1, 1, 1, 0, 0, 0], [1] * 7])
    torch.testing.assert_close(model(padded, mask)["logits"][:1], alone)
    # the loss reaches the classifier and, through the tokens that won a dimension, the encoder
    model.train()
    model(padded, mask, labels=torch.tensor([0, 2]))["loss"].backward()
    assert all(p.grad is not None for p in model.classifier.parameters())
    assert sum(float(p.grad.abs().sum()) for p in model.encoder.parameters()
               if p.grad is not None) > 0
    with pytest.raises(ValueError, match="pooling must be one of"):
        EncoderClassifier(preset("tiny", num_labels=3, pooling="median"))


def test_config_json_round_trip_presets_and_errors(tmp_path):
    cfg = preset("minilm-l6", num_labels=4, labels=["a", "b", "c", "d"])
    cfg.save(tmp_path / "config.json")
    assert ModelConfig.load(tmp_path / "config.json") == cfg
    base = preset("transformer-base")
    assert (base.num_layers, base.num_decoder_layers, base.d_model, base.num_heads) == \
        (6, 6, 512, 8)
    with pytest.raises(KeyError, match="unknown preset"):
        preset("gpt-5")
    with pytest.raises(ValueError, match="unknown config keys"):
        ModelConfig.from_dict({"d_model": 8, "colour": "red"})
    with pytest.raises(ValueError, match="divisible by num_heads"):
        ModelConfig(d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="unknown attention_pattern keys"):
        pattern_from_config({"windows": 3})
    with pytest.raises(ValueError, match="attention_mask must be"):
        _model().encode(torch.ones(2, 5, dtype=torch.long), torch.ones(2, 4))
