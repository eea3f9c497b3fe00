"""Pieces to words: grouping by the tokenizer's words, sums over keys, means over queries."""

from __future__ import annotations

import numpy as np
import pytest

from headwise.inspect.words import segment, to_units, words_only
from headwise.text.char_level import train_char_tokenizer
from headwise.text.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def wordpiece():
    texts = ["i want to cancel my card payment", "cancel the transfer please"] * 10
    return Tokenizer.train_wordpiece(texts + ["cancellation payments"], 60)


def test_wordpiece_pieces_group_into_words(wordpiece):
    seg = segment(wordpiece, "I don't want cancellation", max_length=64)
    assert seg.units[0] == "[CLS]" and seg.units[-1] == "[SEP]"
    assert list(seg.special) == [True] + [False] * (len(seg.units) - 2) + [True]
    assert "cancellation" in seg.units and seg.tokens.count("[CLS]") == 1
    k = seg.units.index("cancellation")
    assert seg.sizes[k] > 1  # several pieces, one word
    for unit, (s, e), sp in zip(seg.units, seg.spans, seg.special, strict=True):
        if not sp:
            assert seg.text[s:e] == unit
    assert seg.sizes.sum() == seg.num_tokens == len(seg.tokens)


def test_char_tokenizer_keeps_numbers_as_one_unit():
    tok = train_char_tokenizer(["我要转3,500元", "不要分期"])
    seg = segment(tok, "我不要转3,500元", max_length=32)
    assert seg.units == ("[CLS]", "我", "不", "要", "转", "3,500", "元", "[SEP]")
    assert (seg.sizes == 1).all()


def test_truncation_follows_the_model_input():
    tok = train_char_tokenizer(["我想提前还款可以吗"])
    seg = segment(tok, "我想提前还款可以吗", max_length=5)
    assert seg.units == ("[CLS]", "我", "想", "提", "[SEP]")


def test_an_input_prefix_is_one_special_unit_after_cls(wordpiece):
    """A prefixed tokenizer (e5's ``"query: "``) writes the prefix's tokens after [CLS]:
    they are one special unit, and the words keep their token positions and spans."""
    prefixed = wordpiece.with_prefix("cancel my")
    k = len(prefixed.prefix_ids)
    assert k >= 2
    plain = segment(wordpiece, "want cancellation", max_length=64)
    seg = segment(prefixed, "want cancellation", max_length=64)
    ids = prefixed(["want cancellation"], max_length=64)["input_ids"][0].tolist()
    assert seg.num_tokens == len(ids) == plain.num_tokens + k
    assert seg.units == ("[CLS]", "cancel my", *plain.units[1:])
    assert list(seg.special) == [True, True, *plain.special[1:]]
    assert list(seg.starts) == [0, 1, *(plain.starts[1:] + k)]
    assert seg.spans[2:] == plain.spans[1:]
    assert seg.tokens[1:1 + k] == tuple(prefixed.backend.id_to_token(i)
                                        for i in prefixed.prefix_ids)
    # truncation counts the prefix: 6 tokens leave 6 - 2 - k pieces
    short = segment(prefixed, "want cancellation", max_length=2 + k + 1)
    assert short.num_tokens == 2 + k + 1 and short.units[:2] == ("[CLS]", "cancel my")


def test_to_units_sums_keys_and_averages_queries(wordpiece):
    seg = segment(wordpiece, "cancellation", max_length=64)
    n = seg.num_tokens
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(n), size=(2, n))  # (heads, q, k)
    got = to_units(w, seg)
    groups = [list(range(s, s + z)) for s, z in zip(seg.starts, seg.sizes, strict=True)]
    want = np.array([[[np.mean([sum(w[h, q, k] for k in gk) for q in gq]) for gk in groups]
                      for gq in groups] for h in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got.sum(-1), 1.0)


def test_words_only_renormalises_without_specials():
    w = np.array([[0.5, 0.25, 0.25, 0.0],
                  [0.5, 0.1, 0.3, 0.1],
                  [0.9, 0.0, 0.0, 0.1],
                  [1.0, 0.0, 0.0, 0.0]])
    special = np.array([True, False, False, True])
    got = words_only(w, special)
    np.testing.assert_allclose(got, [[0.25, 0.75], [0.0, 0.0]])
