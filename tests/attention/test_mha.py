"""MultiHeadAttention against torch.nn.MultiheadAttention and explicit float64 math."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from headwise.attention import ALiBi, MultiHeadAttention, RotaryEmbedding
from headwise.attention import masks as M


def _copy_into_torch(ours: MultiHeadAttention) -> torch.nn.MultiheadAttention:
    ref = torch.nn.MultiheadAttention(ours.d_model, ours.num_heads, batch_first=True,
                                      dtype=ours.in_proj.weight.dtype)
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.in_proj.weight)
        ref.in_proj_bias.copy_(ours.in_proj.bias)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ref.eval()


def test_self_attention_reproduces_torch_multihead_attention():
    torch.manual_seed(0)
    ours = MultiHeadAttention(32, 4).double().eval()
    ref = _copy_into_torch(ours)
    x = torch.randn(3, 7, 32, dtype=torch.float64)
    lengths = torch.tensor([7, 4, 1])
    pad = torch.arange(7)[None] >= lengths[:, None]  # torch: True = ignore
    causal = torch.ones(7, 7, dtype=torch.bool).triu(1)  # torch: True = forbidden
    for backend in ("math", "sdpa", "tiled"):
        ours.backend = backend
        expect, _ = ref(x, x, x, key_padding_mask=pad, need_weights=False)
        got = ours(x, mask=M.key_padding(lengths))
        torch.testing.assert_close(got, expect)
        expect, _ = ref(x, x, x, attn_mask=causal, need_weights=False)
        torch.testing.assert_close(ours(x, mask=M.causal()), expect)


def test_cross_attention_reproduces_torch_multihead_attention():
    torch.manual_seed(1)
    ours = MultiHeadAttention(16, 2).double().eval()
    ref = _copy_into_torch(ours)
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    ctx = torch.randn(2, 9, 16, dtype=torch.float64)
    expect, w = ref(x, ctx, ctx, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(ours(x, context=ctx), expect)


def _explicit(mha: MultiHeadAttention, x: torch.Tensor, gate_heads=None) -> torch.Tensor:
    """Float64 reference written from the paper, heads repeated explicitly for GQA."""
    h, hk, d = mha.num_heads, mha.num_kv_heads, mha.head_dim
    w, b = mha.in_proj.weight.double(), mha.in_proj.bias.double()
    x = x.double()
    q = (x @ w[: h * d].T + b[: h * d]).view(*x.shape[:2], h, d).transpose(1, 2)
    k = (x @ w[h * d: (h + hk) * d].T + b[h * d: (h + hk) * d]).view(*x.shape[:2], hk, d)
    v = (x @ w[(h + hk) * d:].T + b[(h + hk) * d:]).view(*x.shape[:2], hk, d)
    k = k.transpose(1, 2).repeat_interleave(h // hk, dim=1)
    v = v.transpose(1, 2).repeat_interleave(h // hk, dim=1)
    heads = torch.softmax(q @ k.transpose(-1, -2) / d**0.5, -1) @ v  # (B, H, T, d)
    heads = heads * mha.head_gate.double().view(1, h, 1, 1)
    concat = heads.transpose(1, 2).reshape(*x.shape[:2], h * d)
    if mha.fusion == "glu":
        g = torch.sigmoid(concat @ mha.gate_proj.weight.double().T + mha.gate_proj.bias.double())
        concat = (heads.transpose(1, 2) * g.unsqueeze(-1)).reshape(*x.shape[:2], h * d)
    return concat @ mha.out_proj.weight.double().T + mha.out_proj.bias.double()


@pytest.mark.parametrize("kv_heads", [8, 4, 2, 1])
def test_grouped_query_attention_matches_repeated_kv(kv_heads):
    torch.manual_seed(2)
    mha = MultiHeadAttention(64, 8, num_kv_heads=kv_heads).double()
    assert mha.in_proj.weight.shape == ((8 + 2 * kv_heads) * 8, 64)
    x = torch.randn(2, 11, 64, dtype=torch.float64)
    for backend in ("math", "sdpa", "tiled"):
        mha.backend = backend
        torch.testing.assert_close(mha(x), _explicit(mha, x))


def test_glu_fusion_matches_explicit_gated_heads():
    torch.manual_seed(3)
    mha = MultiHeadAttention(32, 4, fusion="glu").double()
    x = torch.randn(2, 6, 32, dtype=torch.float64)
    torch.testing.assert_close(mha(x), _explicit(mha, x))


def test_rope_inside_makes_attention_shift_invariant():
    torch.manual_seed(4)
    mha = MultiHeadAttention(32, 4, rope=True).double()
    x = torch.randn(1, 9, 32, dtype=torch.float64)
    base = mha(x, mask=M.causal(), positions=torch.arange(9))
    shifted = mha(x, mask=M.causal(), positions=torch.arange(9) + 123)
    torch.testing.assert_close(base, shifted)
    plain = MultiHeadAttention(32, 4).double()
    plain.load_state_dict(mha.state_dict())
    assert not torch.allclose(plain(x, mask=M.causal()), base)  # RoPE really acts
    shared = RotaryEmbedding(8)
    assert MultiHeadAttention(32, 4, rope=shared).rope is shared


@pytest.mark.parametrize("fusion", ["concat", "glu"])
@pytest.mark.parametrize("kv_heads", [6, 3])
def test_pruning_equals_gating_the_heads_off(fusion, kv_heads):
    torch.manual_seed(5)
    mha = MultiHeadAttention(48, 6, num_kv_heads=kv_heads, fusion=fusion).double().eval()
    x = torch.randn(2, 5, 48, dtype=torch.float64)
    drop = [1, 3, 4] if kv_heads == 3 else [0, 4, 5]  # GQA: one head from every group of 2
    gates = torch.ones(6, dtype=torch.float64)
    gates[drop] = 0
    mha.set_head_gates(gates)
    gated = mha(x)
    torch.testing.assert_close(gated, _explicit(mha, x))
    mha.set_head_gates(torch.ones(6))
    mha.prune_heads(drop)
    assert mha.num_heads == 6 - len(drop)
    assert mha.out_proj.weight.shape == (48, 8 * mha.num_heads)
    assert mha.head_ids.tolist() == [i for i in range(6) if i not in drop]
    torch.testing.assert_close(mha(x), gated)


def test_pruning_whole_gqa_group_removes_its_kv_head_and_refuses_uneven_groups():
    mha = MultiHeadAttention(32, 4, num_kv_heads=2)
    mha.prune_heads([2, 3])
    assert (mha.num_heads, mha.num_kv_heads) == (2, 1)
    with pytest.raises(ValueError, match="unequal query heads"):
        MultiHeadAttention(32, 4, num_kv_heads=2).prune_heads([0])
    with pytest.raises(ValueError, match="cannot prune every head"):
        MultiHeadAttention(32, 2).prune_heads([0, 1])


def test_backends_agree_and_bias_is_applied():
    torch.manual_seed(6)
    mha = MultiHeadAttention(32, 4).double()
    x = torch.randn(2, 20, 32, dtype=torch.float64)
    bias = ALiBi(4)(20, 20, dtype=torch.float64)
    outs = []
    for backend in ("math", "sdpa", "tiled"):
        mha.backend = backend
        outs.append(mha(x, mask=M.causal(), bias=bias))
    for o in outs[1:]:
        torch.testing.assert_close(o, outs[0])
    mha.backend = "auto"
    assert not torch.allclose(mha(x, mask=M.causal()), outs[0])


def test_xavier_initialisation_and_zero_biases():
    torch.manual_seed(7)
    mha = MultiHeadAttention(256, 8)
    w = mha.in_proj.weight
    bound = (6 / (256 + 256)) ** 0.5  # xavier for each (256 x 256) block of Q, K, V
    assert w.abs().max() <= bound
    assert abs(w.std().item() - bound / 3**0.5) < 0.01
    assert (mha.in_proj.bias == 0).all() and (mha.out_proj.bias == 0).all()


def test_dropout_only_in_training():
    torch.manual_seed(8)
    mha = MultiHeadAttention(32, 4, dropout=0.5)
    x = torch.randn(2, 6, 32)
    mha.eval()
    torch.testing.assert_close(mha(x), mha(x))
    mha.train()
    assert not torch.allclose(mha(x), mha(x))


def test_separate_context_width():
    torch.manual_seed(9)
    mha = MultiHeadAttention(16, 2, context_dim=24).double()
    x, ctx = torch.randn(2, 3, 16, dtype=torch.float64), torch.randn(2, 5, 24, dtype=torch.float64)
    out = mha(x, context=ctx)
    q = (x @ mha.q_proj.weight.T + mha.q_proj.bias).view(2, 3, 2, 8).transpose(1, 2)
    kv = (ctx @ mha.kv_proj.weight.T + mha.kv_proj.bias).view(2, 5, 4, 8).transpose(1, 2)
    heads = F.scaled_dot_product_attention(q, kv[:, :2], kv[:, 2:])
    expect = heads.transpose(1, 2).reshape(2, 3, 16) @ mha.out_proj.weight.T + mha.out_proj.bias
    torch.testing.assert_close(out, expect)
    with pytest.raises(ValueError, match="pass context"):
        mha(x)


def test_gates_survive_state_dict_round_trip_and_give_gradients():
    torch.manual_seed(10)
    src = MultiHeadAttention(32, 4).double()
    src.set_head_gates([1.0, 0.0, 1.0, 0.5])
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    dst = MultiHeadAttention(32, 4).double()
    dst.load_state_dict(src.state_dict())
    torch.testing.assert_close(dst(x), _explicit(src, x))
    # gradient-based head importance: d loss / d gate
    plain = MultiHeadAttention(32, 4).double()
    plain.head_gate.requires_grad_(True)
    plain(x).pow(2).sum().backward()
    assert plain.head_gate.grad is not None and plain.head_gate.grad.abs().sum() > 0


@pytest.mark.parametrize("backend", ["auto", "sdpa"])
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_key_padding_short_path_matches_the_math_backend(backend, kv_heads):
    """An encoder's key-padding pattern goes to SDPA without the dispatcher (lengths or a
    keep-mask, grouped heads, a batch row with no key at all): the float64 math backend's
    output, zeros from attention in the row with no key."""
    torch.manual_seed(3)
    mha = MultiHeadAttention(32, 4, num_kv_heads=kv_heads, backend=backend).double().eval()
    x = torch.randn(3, 9, 32, dtype=torch.float64)
    keep = torch.arange(9)[None] < torch.tensor([9, 4, 0])[:, None]
    for mask in (M.key_padding(torch.tensor([9, 4, 0])), M.key_padding(keep)):
        got = mha(x, mask=mask)
        mha.backend = "math"
        expect = mha(x, mask=mask)
        mha.backend = backend
        torch.testing.assert_close(got, expect)
        torch.testing.assert_close(got[2], mha.out_proj.bias.expand(9, 32))
    with pytest.raises(ValueError, match="keep-mask has 9 keys"):
        mha(x[:, :8], mask=M.key_padding(keep))
