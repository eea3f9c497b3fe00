"""Tests for headwise.attention.bias against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from headwise.attention.bias import ALiBi, T5RelativePositionBias, alibi_slopes

# --------------------------------------------------------------------------- ALiBi slopes


def test_alibi_slopes_eight_heads() -> None:
    expected = torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])
    slopes = alibi_slopes(8)
    assert slopes.dtype == torch.float32
    assert torch.equal(slopes, expected)


def test_alibi_slopes_powers_of_two_by_hand() -> None:
    # n = 1: 2^-8; n = 2: 2^-4, 2^-8; n = 4: 2^-2, 2^-4, 2^-6, 2^-8.
    assert torch.equal(alibi_slopes(1), torch.tensor([2.0**-8]))
    assert torch.equal(alibi_slopes(2), torch.tensor([2.0**-4, 2.0**-8]))
    assert torch.equal(alibi_slopes(4), torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]))


def test_alibi_slopes_twelve_heads() -> None:
    # The 8 slopes 2^-1 .. 2^-8, then slopes 0, 2, 4, 6 of the 16-head sequence
    # 2^-0.5, 2^-1, 2^-1.5, ...: that is 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
    expected = [2.0**-k for k in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(expected), rtol=1e-7, atol=0)


def test_alibi_slopes_six_heads() -> None:
    # The 4-head slopes 2^-2, 2^-4, 2^-6, 2^-8, then slopes 0 and 2 of the 8-head
    # sequence 2^-1, 2^-2, 2^-3, ...: that is 2^-1, 2^-3.
    expected = [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    assert torch.equal(alibi_slopes(6), torch.tensor(expected))


@pytest.mark.parametrize("bad", [0, -3])
def test_alibi_slopes_rejects_non_positive(bad: int) -> None:
    with pytest.raises(ValueError, match="num_heads"):
        alibi_slopes(bad)


# --------------------------------------------------------------------------- ALiBi bias


def test_alibi_bias_tiny_case_by_hand() -> None:
    bias = ALiBi(2)(3, 3)  # slopes 1/16, 1/256
    assert bias.shape == (1, 2, 3, 3)
    distances = torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    assert torch.equal(bias[0, 0], -distances / 16)
    assert torch.equal(bias[0, 1], -distances / 256)


def test_alibi_bias_bottom_right_alignment() -> None:
    # 2 queries over 5 keys: the queries sit at positions 3 and 4.
    bias = ALiBi(1)(2, 5)  # slope 1/256
    expected = -torch.tensor([[3.0, 2.0, 1.0, 0.0, 1.0], [4.0, 3.0, 2.0, 1.0, 0.0]]) / 256
    assert bias.shape == (1, 1, 2, 5)
    assert torch.equal(bias[0, 0], expected)


def test_alibi_bias_causal_part_matches_paper_form() -> None:
    # Paper: bias[h, i, j] = slope[h] * (j - i) for j <= i.
    alibi = ALiBi(4)
    bias = alibi(6, 6, dtype=torch.float64)
    assert bias.dtype == torch.float64
    slopes = [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]
    for h, m in enumerate(slopes):
        for i in range(6):
            for j in range(i + 1):
                assert bias[0, h, i, j].item() == pytest.approx(m * (j - i), abs=1e-12)
    assert "slopes" not in alibi.state_dict()


# --------------------------------------------------------------------------- T5 buckets

# Bidirectional, num_buckets=32, max_distance=128: 16 buckets per direction,
# max_exact = 8. Keys after the query (rel > 0) add 16. For n = |rel| >= 8:
#   bucket = 8 + floor(log(n / 8) / log(128 / 8) * (16 - 8)) = 8 + floor(2 * log2(n / 8)),
# clamped to 15.
#   n = 11: 2 * log2(1.375) = 0.92  -> 8       n = 12: 2 * log2(1.5)   = 1.17 -> 9
#   n = 16: 2 * log2(2)     = 2     -> 10      n = 20: 2 * log2(2.5)   = 2.64 -> 10
#   n = 22: 2 * log2(2.75)  = 2.92  -> 10      n = 23: 2 * log2(2.875) = 3.05 -> 11
#   n = 32: 2 * log2(4)     = 4     -> 12      n = 64: 2 * log2(8)     = 6    -> 14
#   n = 90: 2 * log2(11.25) = 6.98  -> 14      n = 91: 2 * log2(11.375)= 7.02 -> 15
#   n = 127: 2 * log2(15.875) = 7.98 -> 15     n >= 128: 8 + 8 = 16 -> clamped to 15
BIDIRECTIONAL_32_128 = {
    0: 0,
    -1: 1,
    -7: 7,
    -8: 8,
    -11: 8,
    -12: 9,
    -16: 10,
    -20: 10,
    -22: 10,
    -23: 11,
    -32: 12,
    -64: 14,
    -90: 14,
    -91: 15,
    -127: 15,
    -128: 15,
    -500: 15,
    1: 17,
    7: 23,
    8: 24,
    20: 26,
    23: 27,
    91: 31,
    500: 31,
}

# Unidirectional, num_buckets=32, max_distance=128: rel > 0 -> bucket 0; n = -rel,
# max_exact = 16. For n >= 16:
#   bucket = 16 + floor(log(n / 16) / log(128 / 16) * 16) = 16 + floor(16/3 * log2(n / 16)),
# clamped to 31.
#   n = 20: 16/3 * 0.3219 = 1.72 -> 17     n = 32: 16/3 * 1      = 5.33  -> 21
#   n = 64: 16/3 * 2      = 10.67 -> 26    n = 100: 16/3 * 2.644 = 14.10 -> 30
#   n = 127: 16/3 * 2.989 = 15.94 -> 31    n = 200: clamped              -> 31
UNIDIRECTIONAL_32_128 = {
    5: 0,
    1: 0,
    0: 0,
    -5: 5,
    -15: 15,
    -16: 16,
    -20: 17,
    -32: 21,
    -64: 26,
    -100: 30,
    -127: 31,
    -200: 31,
}


@pytest.mark.parametrize(
    ("bidirectional", "table"),
    [(True, BIDIRECTIONAL_32_128), (False, UNIDIRECTIONAL_32_128)],
)
def test_t5_buckets_hand_table(bidirectional: bool, table: dict[int, int]) -> None:
    rel = torch.tensor(list(table))
    got = T5RelativePositionBias.relative_position_bucket(
        rel, bidirectional=bidirectional, num_buckets=32, max_distance=128
    )
    assert got.dtype == torch.long
    assert dict(zip(table, got.tolist(), strict=True)) == table


def test_t5_buckets_small_settings_by_hand() -> None:
    # Unidirectional, 8 buckets, max_distance 16: exact 0..3, then
    # 4 + floor(log2(n / 4) / log2(16 / 4) * 4) = 4 + floor(2 * log2(n / 4)):
    # n = 5 -> 4 (0.64), 6 -> 5 (1.17), 8 -> 6, 11 -> 6 (2.92), 12 -> 7 (3.17), 16 -> 8 -> 7.
    rel = torch.tensor([3, 0, -3, -4, -5, -6, -8, -11, -12, -16, -99])
    got = T5RelativePositionBias.relative_position_bucket(
        rel, bidirectional=False, num_buckets=8, max_distance=16
    )
    assert got.tolist() == [0, 0, 3, 4, 4, 5, 6, 6, 7, 7, 7]


def test_t5_buckets_monotone_and_in_range() -> None:
    rel = torch.arange(-1000, 1001)
    got = T5RelativePositionBias.relative_position_bucket(rel)
    assert got.min().item() == 0 and got.max().item() == 31
    past = got[:1001].flip(0)  # rel = 0, -1, ..., -1000
    future = got[1001:]  # rel = 1, 2, ..., 1000
    assert torch.all(past.diff() >= 0) and torch.all(future.diff() >= 0)
    assert set(past.tolist()) == set(range(16))
    assert set(future.tolist()) == set(range(17, 32))  # bucket 16 would be rel = +0


def test_t5_bias_shape_values_and_alignment() -> None:
    torch.manual_seed(0)
    t5 = T5RelativePositionBias(num_heads=3)
    bias = t5(2, 4)
    assert bias.shape == (1, 3, 2, 4)
    # Queries sit at positions 2 and 3; rel = key - query.
    weight = t5.relative_attention_bias.weight  # (num_buckets, heads)
    rel_to_bucket = {-3: 3, -2: 2, -1: 1, 0: 0, 1: 17}
    rels = [[-2, -1, 0, 1], [-3, -2, -1, 0]]
    for h in range(3):
        for i in range(2):
            for j in range(4):
                expected = weight[rel_to_bucket[rels[i][j]], h]
                assert bias[0, h, i, j].item() == expected.item()


def test_t5_bias_is_learnable() -> None:
    t5 = T5RelativePositionBias(num_heads=2, num_buckets=8, max_distance=16, bidirectional=False)
    bias = t5(3, 3)
    bias.sum().backward()
    grad = t5.relative_attention_bias.weight.grad
    assert grad is not None
    # Unidirectional 3x3: rel = j - i; future (3 cells) and rel 0 (3 cells) -> bucket 0,
    # rel -1 (2 cells) -> bucket 1, rel -2 (1 cell) -> bucket 2.
    expected = torch.zeros(8, 2)
    expected[0] = 6.0
    expected[1] = 2.0
    expected[2] = 1.0
    assert torch.equal(grad, expected)


def test_t5_invalid_settings() -> None:
    with pytest.raises(ValueError, match="num_buckets"):
        T5RelativePositionBias(num_heads=2, num_buckets=2, bidirectional=True)
    with pytest.raises(ValueError, match="max_distance"):
        T5RelativePositionBias(num_heads=2, num_buckets=32, max_distance=8)
    with pytest.raises(ValueError, match="num_heads"):
        T5RelativePositionBias(num_heads=0)
