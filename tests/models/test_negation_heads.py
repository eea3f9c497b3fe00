"""Negation-aware heads: cue tokens from the vocabulary, and the key bias in the encoder."""

from __future__ import annotations

import pytest
import torch
from model_helpers import first_layer_weights

from headwise.models import ModelConfig, TransformerEncoder
from headwise.text import train_tokenizer
from headwise.text.negation_tokens import is_negation_piece, negation_token_ids


@pytest.mark.parametrize("token, cue", [
    ("不", True), ("没", True), ("别", True), ("无", True), ("未", True), ("是", False),
    ("不是", False),  # a word vocabulary's compound: its own entry, not a negator character
    ("not", True), ("Never", True), ("didn", True), ("n't", True), ("without", True),
    ("##not", False), ("note", False), ("know", False), ("", False),
])
def test_negation_pieces(token, cue):
    assert is_negation_piece(token) is cue


def test_negation_ids_of_a_character_and_a_wordpiece_vocabulary():
    zh = train_tokenizer(["我不要了", "没有收到", "是的，帮我查一下"], kind="char")
    ids = negation_token_ids(zh)
    assert {zh.token_to_id("不"), zh.token_to_id("没")} == set(ids)
    en = train_tokenizer(["i did not get it", "never again", "note this down"] * 5,
                         kind="wordpiece", vocab_size=120)
    words = {en.backend.id_to_token(i) for i in negation_token_ids(en)}
    assert {"not", "never"} <= words and "note" not in words


def _encoders():
    cfg = ModelConfig(vocab_size=20, d_model=16, num_layers=1, num_heads=4, d_ff=32,
                      dropout=0.0, max_position=16)
    torch.manual_seed(0)
    plain = TransformerEncoder(cfg).eval()
    both = TransformerEncoder(cfg.replace(number_heads=[0], negation_heads=[0, 1])).eval()
    missing, unexpected = both.load_state_dict(plain.state_dict(), strict=False)
    assert unexpected == [] and sorted(missing) == [
        "is_negation_token", "is_number_token", "negation_bias.0.weight", "number_bias.0.weight"]
    both.set_number_tokens([5])
    both.set_negation_tokens([7])
    return plain, both


def test_number_and_negation_biases_add_up():
    """Head 0 gets exp(b_num) on number keys and exp(b_neg) on cue keys; head 1 only the
    cue bias; heads 2-3 are the plain encoder's."""
    plain, both = _encoders()
    assert both.has_score_bias and not plain.has_score_bias
    with torch.no_grad():
        both.number_bias[0].weight.copy_(torch.tensor([0.7]))
        both.negation_bias[0].weight.copy_(torch.tensor([1.5, -1.0]))
    ids = torch.tensor([[1, 5, 7, 3, 7, 2, 0]])
    mask = ids != 0
    w0 = first_layer_weights(plain, ids, mask)
    wb = first_layer_weights(both, ids, mask)
    is_num = (ids[0] == 5).double()
    is_neg = (ids[0] == 7).double()
    b = (torch.tensor([0.7, 0.0, 0.0, 0.0], dtype=torch.float64)[:, None] * is_num
         + torch.tensor([1.5, -1.0, 0.0, 0.0], dtype=torch.float64)[:, None] * is_neg)
    scaled = w0 * torch.exp(b[None, :, None, :])
    torch.testing.assert_close(wb, scaled / scaled.sum(-1, keepdim=True), rtol=0, atol=1e-5)


def test_negation_tokens_need_negation_heads_and_valid_ids():
    plain, both = _encoders()
    with pytest.raises(ValueError, match="no negation_heads"):
        plain.set_negation_tokens([1])
    with pytest.raises(ValueError, match=r"negation token ids must lie in \[0, 20\)"):
        both.set_negation_tokens([20])
