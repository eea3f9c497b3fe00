"""capture_attention records per-head weights only while active."""

from __future__ import annotations

import torch
from torch import nn

import headwise.attention.mha as mha_module
from headwise.attention import MultiHeadAttention, capture_attention
from headwise.attention import masks as M


class TwoLayers(nn.Module):
    def __init__(self, fusion="concat"):
        super().__init__()
        self.layers = nn.ModuleList([MultiHeadAttention(16, 4, fusion=fusion) for _ in range(2)])

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = x + layer(x, mask=mask)
        return x


def test_records_weights_per_module_and_output_is_unchanged():
    torch.manual_seed(0)
    model = TwoLayers().double().eval()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    mask = M.key_padding([5, 3])
    plain = model(x, mask)
    with capture_attention() as cap:
        captured = model(x, mask)
        model(x, mask)
    torch.testing.assert_close(captured, plain)
    assert set(cap) == set(model.layers)
    first = cap[model.layers[0]]
    assert len(first) == 2 and first[0].shape == (2, 4, 5, 5)
    assert not first[0].requires_grad
    assert (first[0][1, :, :, 3:] == 0).all()  # padding keys get no weight
    # the recorded weights are the layer's own softmax(q k^T / sqrt(d))
    layer = model.layers[0]
    q, k, _ = layer.in_proj(x).view(2, 5, 12, 4).transpose(1, 2).split(4, dim=1)
    scores = (q @ k.transpose(-1, -2)) / 2.0
    scores = scores.masked_fill(~mask.to_dense(5, 5), float("-inf"))
    torch.testing.assert_close(first[0], torch.softmax(scores, -1))
    assert set(cap.named(model)) == {"layers.0", "layers.1"}


def test_nothing_recorded_outside_and_fused_path_untouched(monkeypatch):
    model = TwoLayers().eval()
    calls = []
    real_attend, real_sdpa = mha_module.attend, mha_module.F.scaled_dot_product_attention

    def spy_attend(*args, **kwargs):
        calls.append(kwargs.get("backend"))
        return real_attend(*args, **kwargs)

    def spy_sdpa(*args, **kwargs):
        calls.append("direct-sdpa")  # F.scaled_dot_product_attention itself
        return real_sdpa(*args, **kwargs)

    monkeypatch.setattr(mha_module, "attend", spy_attend)
    monkeypatch.setattr(mha_module.F, "scaled_dot_product_attention", spy_sdpa)
    # inference, as served (with gradients on, short keys take the math kernel on the CPU:
    # the dispatcher's rule for gradients)
    with torch.no_grad():
        x = torch.randn(1, 4, 16)
        with capture_attention() as cap:
            pass
        model(x)  # no mask: straight onto SDPA, no dispatcher
        assert len(cap) == 0 and calls == ["direct-sdpa", "direct-sdpa"]
        model(x, M.causal())
        assert calls[2:] == ["direct-sdpa", "direct-sdpa"]
        model(x, M.key_padding([3]))  # the encoder's padding pattern: straight onto SDPA too
        assert calls[4:] == ["direct-sdpa", "direct-sdpa"]
        long = torch.randn(1, 1024, 16)
        model(long, M.key_padding([1000]))  # long, but dense: the dispatcher would pick SDPA
        assert calls[6:] == ["direct-sdpa", "direct-sdpa"]
        # a pattern the dispatcher gives a sparse kernel goes through it (no SDPA call)
        model(long, M.sliding_window(16))
        assert calls[8:] == ["auto", "auto"]
        del calls[:]
        with capture_attention(modules=[model.layers[1]]) as cap:
            model(x)
        assert calls == ["direct-sdpa", "math"] and list(cap) == [model.layers[1]]


def test_direct_sdpa_path_equals_dispatcher():
    torch.manual_seed(0)
    for num_kv, mask in [(4, None), (2, M.causal()), (1, M.causal("bottom_right")),
                         (2, M.sliding_window(3) & M.key_padding([7, 4]))]:
        layer = MultiHeadAttention(16, 4, num_kv_heads=num_kv).eval()
        x = torch.randn(2, 7, 16)
        ref = MultiHeadAttention(16, 4, num_kv_heads=num_kv, backend="math").eval()
        ref.load_state_dict(layer.state_dict())
        torch.testing.assert_close(layer(x, mask=mask), ref(x, mask=mask))


def test_glu_gates_are_recorded():
    model = TwoLayers(fusion="glu").eval()
    with capture_attention(to_cpu=True) as cap:
        model(torch.randn(3, 6, 16))
    gate = cap.gates[model.layers[0]][0]
    assert gate.shape == (3, 6, 4) and ((gate > 0) & (gate < 1)).all()


def test_capture_can_keep_the_graph_for_gradients():
    model = TwoLayers()
    x = torch.randn(1, 4, 16)
    with capture_attention(detach=False) as cap:
        model(x)
    w = cap[model.layers[0]][0]
    (g,) = torch.autograd.grad(w[..., 0].sum(), model.layers[0].in_proj.weight)
    assert g.abs().sum() > 0
