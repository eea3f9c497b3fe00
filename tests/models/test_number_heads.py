"""Number-aware heads: the learned number-key bias, in the module and inside the encoder."""

from __future__ import annotations

import pytest
import torch
from model_helpers import first_layer_weights

from headwise.attention.number_bias import NumberKeyBias
from headwise.models import ModelConfig, TransformerEncoder
from headwise.text.number_tokens import is_number_piece, number_token_ids
from headwise.text.tokenizer import Tokenizer


def test_bias_is_learned_only_for_chosen_heads():
    nb = NumberKeyBias(4, [1, 3])
    with torch.no_grad():
        nb.weight.copy_(torch.tensor([2.0, -1.5]))
    assert nb.per_head().tolist() == [0.0, 2.0, 0.0, -1.5]
    is_num = torch.tensor([[True, False, True]])
    out = nb(is_num)
    assert out.shape == (1, 4, 1, 3)
    expected = torch.tensor([0.0, 2.0, 0.0, -1.5])[:, None] * torch.tensor([1.0, 0.0, 1.0])
    torch.testing.assert_close(out[0, :, 0], expected)


@pytest.mark.parametrize("heads", [[], [0, 0], [4], [-1]])
def test_bad_heads_are_refused(heads):
    with pytest.raises(ValueError):
        NumberKeyBias(4, heads)


def _encoders(seed=0):
    cfg = ModelConfig(vocab_size=20, d_model=16, num_layers=1, num_heads=4, d_ff=32,
                      dropout=0.0, max_position=16)
    torch.manual_seed(seed)
    plain = TransformerEncoder(cfg).eval()
    numbered = TransformerEncoder(cfg.replace(number_heads=[0, 2], number_bias_init=0.0)).eval()
    missing, unexpected = numbered.load_state_dict(plain.state_dict(), strict=False)
    assert unexpected == [] and sorted(missing) == ["is_number_token", "number_bias.0.weight"]
    numbered.set_number_tokens([5, 6])
    return plain, numbered


def test_the_bias_starts_at_number_bias_init():
    cfg = ModelConfig(vocab_size=20, d_model=16, num_layers=2, num_heads=4, d_ff=32,
                      number_heads=[1, 3])
    enc = TransformerEncoder(cfg)
    assert [nb.per_head().tolist() for nb in enc.number_bias] == [[0.0, 1.0, 0.0, 1.0]] * 2


def test_zero_bias_is_the_plain_encoder():
    plain, numbered = _encoders()
    ids = torch.tensor([[1, 5, 3, 6, 2], [1, 4, 4, 2, 0]])
    mask = ids != 0
    torch.testing.assert_close(numbered(ids, mask), plain(ids, mask), rtol=0, atol=1e-6)


def test_bias_reweights_number_keys_by_exp_b():
    """Head h's weights become w * exp(b_h) on number keys, renormalised per query."""
    plain, numbered = _encoders()
    with torch.no_grad():
        numbered.number_bias[0].weight.copy_(torch.tensor([1.5, -2.0]))
    ids = torch.tensor([[1, 5, 3, 6, 2, 0]])
    mask = ids != 0
    w0 = first_layer_weights(plain, ids, mask)
    wb = first_layer_weights(numbered, ids, mask)
    is_num = torch.tensor([0, 1, 0, 1, 0, 0], dtype=torch.float64)
    b = torch.tensor([1.5, 0.0, -2.0, 0.0], dtype=torch.float64)
    scaled = w0 * torch.exp(b[None, :, None, None] * is_num)
    expected = scaled / scaled.sum(-1, keepdim=True)
    torch.testing.assert_close(wb, expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(wb[:, [1, 3]], w0[:, [1, 3]], rtol=0, atol=1e-6)


def test_bias_gets_a_gradient_and_set_number_tokens_checks_ids():
    _, numbered = _encoders()
    numbered.train()
    ids = torch.tensor([[1, 5, 3, 6, 2]])
    numbered(ids).pow(2).sum().backward()
    assert numbered.number_bias[0].weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="number token ids"):
        numbered.set_number_tokens([25])
    plain, _ = _encoders()
    with pytest.raises(ValueError, match="no number_heads"):
        plain.set_number_tokens([1])


def test_number_pieces():
    yes = ["3", "3,500", "3,500.00", "##00", "25%", "三千五百", "两", "十二", "一", ".5",
           "三点八五"]
    no = ["元", "bp", "##ing", "第", "期", "", "##", "one", "%"]
    assert all(is_number_piece(t) for t in yes)
    assert not any(is_number_piece(t) for t in no)


def test_number_token_ids_of_a_wordpiece_vocab():
    tok = Tokenizer.train_wordpiece(["pay 3500 now", "transfer 20 pounds", "card 1234"] * 5,
                                    vocab_size=120)
    ids = set(number_token_ids(tok))
    vocab = tok.backend.get_vocab()
    assert vocab["pay"] not in ids and ids
    assert all(any(ch.isdigit() for ch in t) for t, i in vocab.items() if i in ids)
