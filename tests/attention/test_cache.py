"""Incremental decoding with a KV cache equals the full forward pass."""

from __future__ import annotations

import pytest
import torch

from headwise.attention import KVCache, MultiHeadAttention
from headwise.attention import masks as M

N = 13


def _decode(mha, x, cache, chunks):
    outs, pos = [], 0
    for c in chunks:
        outs.append(mha(x[:, pos: pos + c], cache=cache))
        pos += c
    return torch.cat(outs, 1)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize("chunks", [[1] * N, [5] + [1] * (N - 5), [3, 4, 6]])
def test_preallocated_cache_matches_full_recompute(kv_heads, chunks):
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, num_kv_heads=kv_heads, rope=True).double().eval()
    x = torch.randn(2, N, 32, dtype=torch.float64)
    full = mha(x, mask=M.causal())
    cache = KVCache(2, 32, kv_heads, 8, dtype=torch.float64)
    inc = _decode(mha, x, cache, chunks)
    assert cache.length == N
    torch.testing.assert_close(inc, full)
    # every prefix 1..N: step t's output equals a full pass over the first t tokens
    for t in (1, 5, N):
        torch.testing.assert_close(inc[:, :t], mha(x[:, :t], mask=M.causal()))


@pytest.mark.parametrize("window", [1, 3, 4])
@pytest.mark.parametrize("chunks", [[1] * N, [6] + [1] * (N - 6), [2, 2, 9]])
def test_ring_buffer_cache_matches_sliding_window_forward(window, chunks):
    torch.manual_seed(1)
    mha = MultiHeadAttention(32, 4, num_kv_heads=2, rope=True).double().eval()
    x = torch.randn(2, N, 32, dtype=torch.float64)
    full = mha(x, mask=M.causal() & M.sliding_window(window))
    cache = KVCache(2, N, 2, 8, window=window, dtype=torch.float64)
    assert cache.k.shape[2] == window  # the ring holds only the window
    torch.testing.assert_close(_decode(mha, x, cache, chunks), full)


def test_cache_with_user_mask_and_backends():
    torch.manual_seed(2)
    mha = MultiHeadAttention(32, 4).double().eval()
    x = torch.randn(2, N, 32, dtype=torch.float64)
    pad = M.key_padding([N, 4])
    full = mha(x, mask=M.causal() & pad)
    for backend in ("math", "sdpa", "tiled"):
        mha.backend = backend
        cache = KVCache(2, N, 4, 8, dtype=torch.float64)
        outs = [mha(x[:, :6], cache=cache, mask=pad)]
        for t in range(6, N):
            outs.append(mha(x[:, t: t + 1], cache=cache, mask=pad))
        torch.testing.assert_close(torch.cat(outs, 1), full)


def test_cross_attention_cache_projects_context_once(monkeypatch):
    torch.manual_seed(3)
    mha = MultiHeadAttention(16, 2).double().eval()
    x = torch.randn(2, 4, 16, dtype=torch.float64)
    ctx = torch.randn(2, 7, 16, dtype=torch.float64)
    full = mha(x, context=ctx)
    calls = []
    original = mha._project_kv
    monkeypatch.setattr(mha, "_project_kv", lambda c: calls.append(1) or original(c))
    cache = KVCache(2, 7, 2, 8, dtype=torch.float64)
    steps = [mha(x[:, t: t + 1], context=ctx, cache=cache) for t in range(4)]
    torch.testing.assert_close(torch.cat(steps, 1), full)
    assert len(calls) == 1


def test_overflow_reorder_and_errors():
    cache = KVCache(2, 3, 1, 4)
    k = torch.randn(2, 1, 2, 4)
    cache.update(k, k)
    with pytest.raises(ValueError, match="KV cache full: 2 \\+ 2 tokens exceed max_len=3"):
        cache.update(k, k)
    with pytest.raises(ValueError, match="cache holds"):
        cache.update(torch.randn(2, 2, 1, 4), torch.randn(2, 2, 1, 4))
    cache.reorder(torch.tensor([1, 1]))
    torch.testing.assert_close(cache.keys[0], k[1])
    cache.reset()
    assert cache.length == 0 and cache.keys.shape[2] == 0
    with pytest.raises(ValueError, match="window must be positive"):
        KVCache(1, 4, 1, 4, window=0)
    ring = KVCache(1, 4, 1, 4, window=2)
    mha = MultiHeadAttention(4, 1)
    with pytest.raises(ValueError, match="ring-buffer"):
        mha(torch.randn(1, 1, 4), cache=ring, mask=M.key_padding([1]))


def test_float32_cache_under_bfloat16_autocast():
    torch.manual_seed(4)
    mha = MultiHeadAttention(32, 4).eval()
    x = torch.randn(1, 5, 32)
    cache = KVCache(1, 5, 4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        steps = [mha(x[:, t: t + 1], cache=cache) for t in range(5)]
        full = mha(x, mask=M.causal())
    torch.testing.assert_close(torch.cat(steps, 1).float(), full.float(), atol=3e-2, rtol=0)


def test_impossible_cache_shapes_are_refused_at_construction():
    with pytest.raises(ValueError, match="window=9 exceeds the cache's capacity max_len=8"):
        KVCache(1, 8, 1, 4, window=9)
    KVCache(1, 8, 1, 4, window=8)  # a window of the whole capacity is fine
    with pytest.raises(ValueError, match="v_dim must be positive, got 0"):
        KVCache(1, 8, 1, 4, v_dim=0)
    with pytest.raises(ValueError, match="max_len must be an int, got 8.0"):
        KVCache(1, 8.0, 1, 4)
    with pytest.raises(ValueError, match="window must be an int, got True"):
        KVCache(1, 8, 1, 4, window=True)


def test_ring_buffer_without_causality_masks_empty_slots_and_refuses_overflow():
    torch.manual_seed(5)
    ring = KVCache(1, 8, 1, 4, window=6, dtype=torch.float64)
    k, v = torch.randn(2, 1, 1, 5, 4, dtype=torch.float64)
    keys, values, mask = ring.update(k, v, causal=False)
    # attending over the returned keys with the returned mask sees exactly the 5 new keys
    visible = keys[0, 0][mask[0, 0, 0]] if mask is not None else keys[0, 0]
    torch.testing.assert_close(visible, k[0, 0])
    k1, v1 = torch.randn(2, 1, 1, 1, 4, dtype=torch.float64)
    keys, values, mask = ring.update(k1, v1, causal=False)  # fills the ring: all visible
    assert mask is None and keys.shape[2] == 6
    torch.testing.assert_close(keys[0, 0], torch.cat([k, k1], 2)[0, 0])
    with pytest.raises(ValueError, match="holds only window=6 tokens: got 6 \\+ 1"):
        ring.update(k1, v1, causal=False)
    mha = MultiHeadAttention(16, 2)
    with pytest.raises(ValueError, match="holds only window=3"):  # a context longer than it
        mha(torch.randn(1, 1, 16), context=torch.randn(1, 5, 16),
            cache=KVCache(1, 5, 2, 8, window=3))
