"""Tests for headwise.attention.positions against independent float64 references."""

from __future__ import annotations

import cmath
import math

import numpy as np
import pytest
import torch

from headwise.attention.positions import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    apply_rotary,
)

# --------------------------------------------------------------------------- sinusoidal


def _paper_pe(pos: int, k: int, d_model: int) -> float:
    """PE[pos, k] straight from "Attention Is All You Need", in Python floats."""
    i = k // 2
    angle = pos / 10000.0 ** (2 * i / d_model)
    return math.sin(angle) if k % 2 == 0 else math.cos(angle)


def test_sinusoidal_table_matches_paper_formula() -> None:
    d_model = 16
    pe = SinusoidalPositionalEncoding(d_model, max_len=64)
    table = pe.encoding(64)
    assert table.shape == (64, d_model)
    assert table.dtype == torch.float32
    for pos, k in [(0, 0), (0, 1), (1, 0), (1, 1), (5, 2), (7, 3), (31, 14), (63, 15)]:
        assert table[pos, k].item() == pytest.approx(_paper_pe(pos, k, d_model), abs=1e-6)
    # Position 0: sin(0) = 0 at even features, cos(0) = 1 at odd ones.
    assert torch.equal(table[0, 0::2], torch.zeros(d_model // 2))
    assert torch.equal(table[0, 1::2], torch.ones(d_model // 2))


def test_sinusoidal_full_table_against_numpy_float64() -> None:
    d_model, length = 32, 200
    pos = np.arange(length, dtype=np.float64)[:, None]
    two_i = np.arange(0, d_model, 2, dtype=np.float64)
    angle = pos / np.power(10000.0, two_i / d_model)
    ref = np.empty((length, d_model))
    ref[:, 0::2] = np.sin(angle)
    ref[:, 1::2] = np.cos(angle)
    got = SinusoidalPositionalEncoding(d_model, max_len=length).encoding(length).double().numpy()
    # Only the final float32 rounding separates them.
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-7)


def test_sinusoidal_forward_adds_offset_rows() -> None:
    d_model = 8
    pe = SinusoidalPositionalEncoding(d_model, max_len=32)
    x = torch.randn(2, 5, d_model)
    out = pe(x, offset=3)
    expected = torch.tensor(
        [[_paper_pe(p, k, d_model) for k in range(d_model)] for p in range(3, 8)]
    )
    torch.testing.assert_close(out - x, expected.expand(2, 5, d_model), rtol=0, atol=1e-6)


def test_sinusoidal_grows_past_max_len() -> None:
    d_model = 6
    pe = SinusoidalPositionalEncoding(d_model, max_len=4)
    out = pe(torch.zeros(1, 3, d_model), offset=10)  # needs positions 10..12
    assert pe.pe.shape[0] >= 13
    for row, p in enumerate(range(10, 13)):
        for k in range(d_model):
            assert out[0, row, k].item() == pytest.approx(_paper_pe(p, k, d_model), abs=1e-6)
    # Growing does not change earlier rows.
    small = SinusoidalPositionalEncoding(d_model, max_len=4).encoding(4)
    assert torch.equal(pe.encoding(4), small)
    # The table is not part of the checkpoint.
    assert "pe" not in pe.state_dict()


def test_sinusoidal_keeps_input_dtype() -> None:
    pe = SinusoidalPositionalEncoding(8)
    x = torch.zeros(1, 4, 8, dtype=torch.bfloat16)
    out = pe(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), pe.encoding(4)[None], rtol=1e-2, atol=1e-2)


def test_sinusoidal_odd_d_model_raises() -> None:
    with pytest.raises(ValueError, match="even d_model"):
        SinusoidalPositionalEncoding(7)


# --------------------------------------------------------------------------- learned


def test_learned_embedding_offset_and_init() -> None:
    torch.manual_seed(0)
    emb = LearnedPositionalEmbedding(max_len=10, d_model=4)
    # Independent check of the std 0.02 normal init (loose: 40 samples).
    assert 0.005 < emb.embedding.weight.std().item() < 0.05
    x = torch.randn(3, 4, 4)
    out = emb(x, offset=6)  # positions 6, 7, 8, 9: exactly fills max_len
    torch.testing.assert_close(out - x, emb.embedding.weight[6:10].expand(3, 4, 4))


def test_learned_embedding_overflow_message_names_both_numbers() -> None:
    emb = LearnedPositionalEmbedding(max_len=10, d_model=4)
    with pytest.raises(ValueError, match=r"12.*max_len=10"):
        emb(torch.zeros(1, 5, 4), offset=7)
    with pytest.raises(ValueError, match=r"11.*max_len=10"):
        emb(torch.zeros(1, 11, 4))


def test_learned_embedding_trains() -> None:
    emb = LearnedPositionalEmbedding(max_len=8, d_model=4)
    emb(torch.zeros(1, 3, 4), offset=2).sum().backward()
    grad = emb.embedding.weight.grad
    assert grad is not None
    assert torch.equal(grad[2:5], torch.ones(3, 4))
    assert torch.equal(grad[[0, 1, 5, 6, 7]], torch.zeros(5, 4))


# --------------------------------------------------------------------------- rotary


def _rope_reference(
    x: torch.Tensor, positions: list[int], base: float, interleaved: bool
) -> torch.Tensor:
    """Float64 RoPE via complex numbers: pair j is multiplied by exp(i * pos * theta_j).

    ``x`` is (batch, heads, seq, head_dim); ``positions`` gives one position per seq index.
    """
    head_dim = x.shape[-1]
    half = head_dim // 2
    out = torch.empty(x.shape, dtype=torch.float64)
    xd = x.double()
    for s, pos in enumerate(positions):
        for j in range(half):
            theta = base ** (-2 * j / head_dim)
            rot = cmath.exp(1j * pos * theta)
            a_idx, b_idx = (2 * j, 2 * j + 1) if interleaved else (j, j + half)
            a = xd[..., s, a_idx]
            b = xd[..., s, b_idx]
            out[..., s, a_idx] = a * rot.real - b * rot.imag
            out[..., s, b_idx] = a * rot.imag + b * rot.real
    return out


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_matches_complex_reference(interleaved: bool) -> None:
    torch.manual_seed(1)
    rope = RotaryEmbedding(8, base=10000.0, max_len=64, interleaved=interleaved)
    x = torch.randn(2, 3, 5, 8)
    torch.testing.assert_close(
        rope(x).double(),
        _rope_reference(x, list(range(5)), 10000.0, interleaved),
        rtol=0,
        atol=1e-5,
    )
    positions = [0, 17, 3, 1000, 40]
    out = rope(x, torch.tensor(positions))  # 1000 > max_len: the cache grows
    assert rope.cached_len > 1000
    torch.testing.assert_close(
        out.double(), _rope_reference(x, positions, 10000.0, interleaved), rtol=0, atol=1e-5
    )


def test_rope_layouts_differ_and_other_base() -> None:
    torch.manual_seed(2)
    x = torch.randn(1, 1, 4, 6)
    half = RotaryEmbedding(6, base=500.0)(x)
    inter = RotaryEmbedding(6, base=500.0, interleaved=True)(x)
    assert not torch.allclose(half, inter)
    torch.testing.assert_close(
        inter.double(), _rope_reference(x, [0, 1, 2, 3], 500.0, True), rtol=0, atol=1e-5
    )


def test_rope_inv_freq_and_position_zero_is_identity() -> None:
    rope = RotaryEmbedding(4, base=100.0)
    torch.testing.assert_close(rope.inv_freq, torch.tensor([1.0, 0.1]))
    x = torch.randn(1, 2, 1, 4)
    torch.testing.assert_close(rope(x), x, rtol=0, atol=0)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_preserves_norm(interleaved: bool) -> None:
    torch.manual_seed(3)
    rope = RotaryEmbedding(16, interleaved=interleaved)
    x = torch.randn(2, 4, 9, 16)
    out = rope(x, torch.arange(100, 109))
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_score_depends_only_on_relative_position(interleaved: bool) -> None:
    torch.manual_seed(4)
    head_dim = 32
    rope = RotaryEmbedding(head_dim, interleaved=interleaved)
    q = torch.randn(1, 1, 1, head_dim)
    k = torch.randn(1, 1, 1, head_dim)

    def score(m: int, n: int) -> float:
        qm = rope(q, torch.tensor([m]))
        kn = rope(k, torch.tensor([n]))
        return (qm * kn).sum().item()

    for offset in (0, 3, -5, 50):
        pairs = [(m, m - offset) for m in (60, 100, 257, 1000) if m - offset >= 0]
        scores = [score(m, n) for m, n in pairs]
        assert max(scores) - min(scores) < 1e-4 * max(1.0, abs(scores[0])), (offset, scores)
    # Different offsets give different scores.
    by_offset = [score(100, 100 - d) for d in (0, 1, 3, 7)]
    assert min(abs(a - b) for i, a in enumerate(by_offset) for b in by_offset[i + 1 :]) > 1e-3


def test_rope_batch_positions() -> None:
    torch.manual_seed(5)
    rope = RotaryEmbedding(8)
    x = torch.randn(2, 3, 4, 8)
    positions = torch.tensor([[0, 1, 2, 3], [10, 11, 12, 13]])
    out = rope(x, positions)
    cos, sin = rope.cos_sin(positions)
    assert cos.shape == sin.shape == (2, 1, 4, 8)
    assert rope.cos_sin(torch.arange(4))[0].shape == (1, 1, 4, 8)
    for b in range(2):
        expected = _rope_reference(x[b : b + 1], positions[b].tolist(), 10000.0, False)
        torch.testing.assert_close(out[b : b + 1].double(), expected, rtol=0, atol=1e-5)


def test_rope_bfloat16_in_bfloat16_out() -> None:
    torch.manual_seed(6)
    rope = RotaryEmbedding(16)
    x = torch.randn(2, 2, 8, 16)
    positions = torch.arange(500, 508)
    ref = rope(x.bfloat16().float(), positions)
    out = rope(x.bfloat16(), positions)
    assert out.dtype == torch.bfloat16
    # One bfloat16 rounding of the float32 rotation: relative error <= 2^-8.
    torch.testing.assert_close(out.float(), ref, rtol=2**-8, atol=1e-2)


def test_rope_cache_survives_module_dtype_cast() -> None:
    rope = RotaryEmbedding(8).to(torch.bfloat16)
    x = torch.randn(1, 1, 3, 8)
    out = rope(x, torch.tensor([2000, 2001, 2002]))
    assert rope.cos_cached.dtype == torch.float32
    torch.testing.assert_close(
        out.double(), _rope_reference(x, [2000, 2001, 2002], 10000.0, False), rtol=0, atol=1e-5
    )


def test_apply_rotary_matches_module() -> None:
    torch.manual_seed(7)
    rope = RotaryEmbedding(8, interleaved=True)
    x = torch.randn(1, 2, 3, 8)
    cos, sin = rope.cos_sin(torch.tensor([4, 5, 6]))
    torch.testing.assert_close(
        apply_rotary(x, cos, sin, interleaved=True), rope(x, torch.tensor([4, 5, 6]))
    )


def test_rope_errors() -> None:
    with pytest.raises(ValueError, match="even"):
        RotaryEmbedding(7)
    rope = RotaryEmbedding(8)
    with pytest.raises(ValueError, match="seq"):
        rope(torch.zeros(1, 1, 3, 8), torch.arange(4))
    with pytest.raises(TypeError):
        rope.cos_sin(torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=">= 0"):
        rope.cos_sin(torch.tensor([-1, 0]))
    with pytest.raises(ValueError, match="even"):
        apply_rotary(torch.zeros(1, 1, 1, 3), torch.zeros(1, 3), torch.zeros(1, 3))
