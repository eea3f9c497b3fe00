"""Mask patterns against hand-written loops (the independent reference)."""

from __future__ import annotations

import pytest
import torch

from headwise.attention import masks as M


def _loop(q_len, k_len, rule, batch=1):
    out = torch.zeros(batch, 1, q_len, k_len, dtype=torch.bool)
    for b in range(batch):
        for i in range(q_len):
            for j in range(k_len):
                out[b, 0, i, j] = bool(rule(b, i, j))
    return out


@pytest.mark.parametrize("q_len,k_len", [(6, 6), (3, 7), (7, 3)])
def test_causal_alignments(q_len, k_len):
    tl = M.causal("top_left").to_dense(q_len, k_len)
    br = M.causal("bottom_right").to_dense(q_len, k_len)
    assert torch.equal(tl, _loop(q_len, k_len, lambda b, i, j: j <= i))
    assert torch.equal(br, _loop(q_len, k_len, lambda b, i, j: j <= i + k_len - q_len))
    assert torch.equal(tl, torch.ones(q_len, k_len, dtype=torch.bool).tril()[None, None])


def test_key_padding():
    m = M.key_padding([3, 0, 5]).to_dense(4, 5)
    lengths = [3, 0, 5]
    assert torch.equal(m, _loop(4, 5, lambda b, i, j: j < lengths[b], batch=3))


def test_key_padding_from_a_keep_mask():
    keep = torch.tensor([[True, False, True], [False, False, False]])
    m = M.key_padding(keep).to_dense(2, 3)
    assert torch.equal(m, _loop(2, 3, lambda b, i, j: bool(keep[b, j]), batch=2))
    with pytest.raises(ValueError, match="keep-mask has 3 keys"):
        M.key_padding(keep).to_dense(2, 4)


def test_sliding_window_and_its_causal_form():
    w = 3
    sym = M.sliding_window(w).to_dense(9)
    assert torch.equal(sym, _loop(9, 9, lambda b, i, j: abs(i - j) < w))
    left = (M.sliding_window(w) & M.causal()).to_dense(9)
    assert torch.equal(left, _loop(9, 9, lambda b, i, j: 0 <= i - j < w))
    assert int(left[0, 0, 8].sum()) == w  # the last `window` keys, itself included
    br = M.sliding_window(2, align="bottom_right").to_dense(2, 6)
    assert torch.equal(br, _loop(2, 6, lambda b, i, j: abs(i + 4 - j) < 2))


def test_global_tokens():
    g = {0, 4}
    m = M.global_tokens([0, 4]).to_dense(6, 7)
    assert torch.equal(m, _loop(6, 7, lambda b, i, j: i in g or j in g))
    assert not M.global_tokens([]).to_dense(3).any()


def test_documents_shared_and_per_row():
    m = M.documents([2, 3]).to_dense(6)
    doc = [0, 0, 1, 1, 1, -1]
    assert torch.equal(m, _loop(6, 6, lambda b, i, j: doc[i] == doc[j] and doc[i] >= 0))
    per_row = M.documents([[1, 2], [3]]).to_dense(3)
    docs = [[0, 1, 1], [0, 0, 0]]
    assert torch.equal(per_row, _loop(3, 3, lambda b, i, j: docs[b][i] == docs[b][j], batch=2))


def test_bigbird_structure_and_seed():
    bb = M.bigbird(4, num_random_blocks=2, seed=5)
    table = bb.block_table(40, 40)  # 10 x 10 blocks
    nb = 10
    for i in range(nb):
        window = {j for j in (i - 1, i, i + 1) if 0 <= j < nb}
        assert all(table[i, j] for j in window)
        assert table[i, 0] and table[0, i]  # the global block
        if i >= 1:
            extra = int(table[i].sum()) - len(window | {0})
            assert extra == 2  # exactly the random blocks, none double counted
    dense = bb.to_dense(40)
    expect = _loop(40, 40, lambda b, i, j: bool(table[i // 4, j // 4]))
    assert torch.equal(dense, expect)
    again = M.bigbird(4, 2, seed=5).block_table(40, 40)
    other = M.bigbird(4, 2, seed=6).block_table(40, 40)
    assert torch.equal(table, again) and not torch.equal(table, other)
    rand_only = M.bigbird(4, 1, seed=0, num_window_blocks=0, num_global_blocks=0)
    assert (rand_only.block_table(40, 40).sum(1) == 1).all()


def test_combinations():
    a, b = M.causal(), M.sliding_window(2)
    da, db = a.to_dense(5), b.to_dense(5)
    assert torch.equal((a & b).to_dense(5), da & db)
    assert torch.equal((a | b).to_dense(5), da | db)
    assert torch.equal((~a).to_dense(5), ~da)
    t = torch.rand(1, 1, 5, 5) > 0.5
    assert torch.equal((a & t).to_dense(5), da & t)
    padded = (a & M.key_padding([2, 5])).to_dense(5)
    assert padded.shape == (2, 1, 5, 5)
    with pytest.raises(ValueError, match="batch 2 and 3"):
        M.key_padding([1, 2]) & M.key_padding([1, 2, 3])


@pytest.mark.parametrize("pattern", [
    M.causal(), M.sliding_window(7) | M.global_tokens([3]), M.bigbird(8, 1, seed=0),
    M.documents([[20, 30], [50]]) & M.key_padding([45, 33]),
])
def test_block_layout_is_the_reduction_of_the_dense_mask(pattern):
    dense = pattern.to_dense(50, 45)[:, 0]
    any_, all_ = pattern.block_layout(50, 45, 16, 8)
    for i in range(4):
        for j in range(6):
            tile = dense[:, i * 16:(i + 1) * 16, j * 8:(j + 1) * 8]
            assert torch.equal(any_[:, i, j], tile.flatten(1).any(1))
            assert torch.equal(all_[:, i, j], tile.flatten(1).all(1))


def test_flex_block_mask_covers_exactly_the_allowed_blocks():
    pattern = M.sliding_window(100) | M.global_tokens([0])
    bm = pattern.to_block_mask(512, 512, device="cpu")
    any_, _ = pattern.block_layout(512, 512, 128, 128)
    assert torch.equal(bm.to_dense()[0, 0].bool(), any_[0])
    assert pattern.to_block_mask(512, 512, device="cpu") is bm  # cached


def test_bind_agrees_with_allowed():
    pattern = (M.bigbird(4, 1, seed=2) & M.documents([10, 6])) | ~M.key_padding([3])
    q = torch.arange(16).view(1, 1, -1, 1)
    k = torch.arange(16).view(1, 1, 1, -1)
    z = torch.zeros(1, 1, 1, 1, dtype=torch.long)
    assert torch.equal(pattern.bind(16, 16)(z, z, q, k), pattern.allowed(z, z, q, k, 16, 16))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="window must be a positive int"):
        M.sliding_window(0)
    with pytest.raises(ValueError, match="window must be a positive int"):
        M.sliding_window(-3)
    with pytest.raises(ValueError, match="align must be one of"):
        M.causal("middle")
    with pytest.raises(ValueError, match="lengths must be >= 0"):
        M.key_padding([3, -1])
    with pytest.raises(ValueError, match="block_size"):
        M.bigbird(0, 1, 0)
    with pytest.raises(ValueError, match="positive"):
        M.documents([3, 0])
    with pytest.raises(TypeError, match="boolean"):
        M.from_tensor(torch.zeros(2, 2))
    with pytest.raises(TypeError, match="AttentionPattern or a boolean tensor"):
        M.causal() & 3


@pytest.mark.parametrize("pattern,shape", [
    (M.key_padding([3, 0, 5]), (3, 1, 1, 6)),
    (M.key_padding(torch.tensor([[True, False] * 3, [False] * 6])), (2, 1, 1, 6)),
    (M.causal(), (1, 1, 4, 6)),
    (M.causal() & M.key_padding([2, 6]), (2, 1, 4, 6)),
    (M.sliding_window(2) | M.global_tokens([1]), (1, 1, 4, 6)),
])
def test_to_broadcast_is_the_dense_mask_before_broadcasting(pattern, shape):
    """The compact rendering keeps only the dimensions the pattern depends on and
    broadcasts to exactly the dense mask (SDPA is given this form)."""
    small = pattern.to_broadcast(4, 6)
    assert small.dtype == torch.bool and tuple(small.shape) == shape
    dense = pattern.to_dense(4, 6)
    assert torch.equal(small.expand_as(dense), dense)


def test_sdpa_is_given_a_key_padding_pattern_as_one_row_of_keys(monkeypatch):
    """The SDPA backend hands a key-padding pattern to PyTorch as (batch, 1, 1, k_len), as a
    hand-written call would (not q_len x k_len per row), with the same output as the
    dense mask gives."""
    import torch.nn.functional as F

    from headwise.attention import attend

    q, k, v = (torch.randn(2, 4, 9, 8, dtype=torch.float64) for _ in range(3))
    pattern = M.key_padding([5, 9])
    seen = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        seen.append(kwargs.get("attn_mask"))
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    out = attend(q, k, v, pattern, backend="sdpa")
    assert tuple(seen[0].shape) == (2, 1, 1, 9)
    ref = real(q, k, v, attn_mask=pattern.to_dense(9, 9).contiguous())
    torch.testing.assert_close(out, ref)
