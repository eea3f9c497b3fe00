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


def test_clause_scoped_negation_heads_bias_only_their_own_clause():
    """With ``negation_scope="clause"`` a negation head's query gets the bias on a cue key
    only when no clause break lies between them (the break belongs to the clause it ends);
    checked against the plain encoder's weights rescaled by hand."""
    cfg = ModelConfig(vocab_size=20, d_model=16, num_layers=1, num_heads=4, d_ff=32,
                      dropout=0.0, max_position=16)
    torch.manual_seed(0)
    plain = TransformerEncoder(cfg).eval()
    scoped = TransformerEncoder(cfg.replace(negation_heads=[1], negation_scope="clause")).eval()
    missing, unexpected = scoped.load_state_dict(plain.state_dict(), strict=False)
    assert unexpected == [] and sorted(missing) == [
        "is_clause_break", "is_negation_token", "negation_bias.0.weight"]
    scoped.set_negation_tokens([7])
    scoped.set_clause_breaks([9])
    with torch.no_grad():
        scoped.negation_bias[0].weight.copy_(torch.tensor([2.0]))
    # clauses: [1 7 3 9] [4 5 9] [7 6] then padding
    ids = torch.tensor([[1, 7, 3, 9, 4, 5, 9, 7, 6, 0]])
    mask = ids != 0
    clause_of = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    flags = torch.zeros(10, 10, dtype=torch.float64)
    for i in range(10):
        for j in range(10):
            flags[i, j] = float(ids[0, j] == 7 and clause_of[i] == clause_of[j])
    torch.testing.assert_close(scoped.negation_flags(ids)[0].double(), flags)
    w0 = first_layer_weights(plain, ids, mask)
    ws = first_layer_weights(scoped, ids, mask)
    head_bias = torch.tensor([0.0, 2.0, 0.0, 0.0], dtype=torch.float64)
    scaled = w0 * torch.exp(head_bias[:, None, None] * flags[None])
    torch.testing.assert_close(ws, scaled / scaled.sum(-1, keepdim=True), rtol=0, atol=1e-5)
    # the message scope puts the same bias on every query
    message = TransformerEncoder(cfg.replace(negation_heads=[1])).eval()
    message.load_state_dict(plain.state_dict(), strict=False)
    message.set_negation_tokens([7])
    torch.testing.assert_close(message.negation_flags(ids), (ids == 7))


def test_clause_breaks_need_clause_scoped_negation_heads():
    cfg = ModelConfig(vocab_size=20, d_model=16, num_layers=1, num_heads=4, d_ff=32)
    with pytest.raises(ValueError, match="not scoped to the clause"):
        TransformerEncoder(cfg.replace(negation_heads=[0])).set_clause_breaks([3])
    with pytest.raises(ValueError, match="clause-break token ids must lie"):
        TransformerEncoder(cfg.replace(negation_heads=[0], negation_scope="clause")
                           ).set_clause_breaks([20])
    with pytest.raises(ValueError, match="negation_scope must be one of"):
        cfg.replace(negation_scope="sentence")


def test_clause_break_ids_of_a_character_and_a_wordpiece_vocabulary():
    from headwise.text.negation_tokens import clause_break_token_ids

    # the character tokenizer folds full-width punctuation to ASCII (NFKC), all but 。
    zh = train_tokenizer(["我不要了，帮我查一下。", "没有收到？", "好的！谢谢；再见"], kind="char")
    got = {zh.backend.id_to_token(i) for i in clause_break_token_ids(zh)}
    assert got == {",", "。", "?", "!", ";"}
    en = train_tokenizer(["i did not, get it. ok?", "never again!"] * 5, kind="wordpiece",
                         vocab_size=120)
    got = {en.backend.id_to_token(i) for i in clause_break_token_ids(en)}
    assert {",", ".", "?", "!"} <= got and all(len(t) == 1 for t in got)


def test_training_marks_cues_and_clause_breaks_from_the_tokenizer():
    """``mark_cue_tokens`` (what every training run calls) sets a clause-scoped encoder's
    cues and clause breaks from its tokenizer; the flags then scope each cue to its clause."""
    from headwise.intent.training.builders import mark_cue_tokens
    from headwise.models import EncoderClassifier

    tok = train_tokenizer(["我不是要注销卡，是要解冻", "自动扣款就不用了，帮我改一下还款日"],
                          kind="char")
    model = EncoderClassifier(ModelConfig(vocab_size=tok.vocab_size, d_model=16, num_layers=1,
                                          num_heads=4, d_ff=32, negation_heads=[2],
                                          negation_scope="clause"))
    mark_cue_tokens(model, tok)
    ids = tok("我不是要注销卡，是要解冻")["input_ids"]
    pieces = [tok.backend.id_to_token(int(i)) for i in ids[0]]
    flags = model.encoder.negation_flags(ids)[0]
    cue = pieces.index("不")
    comma = pieces.index(",")
    assert flags[:, cue].tolist() == [i <= comma for i in range(len(pieces))]
    assert int(flags.sum()) == comma + 1  # one cue, read by the queries of its clause
