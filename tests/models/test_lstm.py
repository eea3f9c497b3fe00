"""BiLSTMClassifier against per-example torch.nn.LSTM runs and explicit LSTM-cell math."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from headwise.models.config import preset
from headwise.models.lstm import BiLSTMClassifier

VOCAB, LABELS = 20, 3


@pytest.fixture(autouse=True)
def _one_thread():
    """These tensors are tiny: intra-op threads only add overhead (a lot on a busy host)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model(pooling: str = "max", num_layers: int = 2, **kw) -> BiLSTMClassifier:
    torch.manual_seed(0)
    kw = {"embed_dim": 6, "hidden_size": 5, "dropout": 0.0, **kw}
    return BiLSTMClassifier(VOCAB, LABELS, num_layers=num_layers, pooling=pooling,
                            **kw).double().eval()


def _batch(lengths: list[int], seq: int | None = None, seed: int = 1):
    """Right-padded random ids (pad id 0), the rows as lists of real ids, and the mask."""
    g = torch.Generator().manual_seed(seed)
    seq = max(lengths) if seq is None else seq
    rows = [torch.randint(1, VOCAB, (n,), generator=g) for n in lengths]
    ids = torch.zeros(len(lengths), seq, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
    return ids, rows, ids != 0


def _torch_lstm_states(model: BiLSTMClassifier, row: torch.Tensor) -> torch.Tensor:
    """(len, 2H) states of one unpadded example from a fresh multi-layer torch.nn.LSTM."""
    n = len(model.layers)
    ref = torch.nn.LSTM(model.config["embed_dim"], model.hidden_size, num_layers=n,
                        bidirectional=True, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        for i, layer in enumerate(model.layers):
            for name, p in layer.named_parameters():  # weight_ih_l0[_reverse] -> _l{i}
                getattr(ref, name.replace("_l0", f"_l{i}")).copy_(p)
    x = model.embedding.weight[row].unsqueeze(0)
    return ref(x)[0][0]


def _manual_direction(x, w_ih, w_hh, b_ih, b_hh):
    """The LSTM recurrence written out (gate order i, f, g, o as in torch)."""
    h = x.new_zeros(w_hh.shape[1])
    c = x.new_zeros(w_hh.shape[1])
    out = []
    for x_t in x:
        i, f, g, o = (w_ih @ x_t + b_ih + w_hh @ h + b_hh).chunk(4)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        out.append(h)
    return torch.stack(out)


def _manual_states(model: BiLSTMClassifier, row: torch.Tensor) -> torch.Tensor:
    x = model.embedding.weight[row]
    for layer in model.layers:
        fwd = _manual_direction(x, layer.weight_ih_l0, layer.weight_hh_l0, layer.bias_ih_l0,
                                layer.bias_hh_l0)
        bwd = _manual_direction(x.flip(0), layer.weight_ih_l0_reverse,
                                layer.weight_hh_l0_reverse, layer.bias_ih_l0_reverse,
                                layer.bias_hh_l0_reverse).flip(0)
        x = torch.cat([fwd, bwd], dim=-1)
    return x


def _reference_logits(model: BiLSTMClassifier, states: torch.Tensor) -> torch.Tensor:
    """Pool one example's (len, 2H) states by hand, then apply the model's head."""
    hsz = model.hidden_size
    if model.pooling == "max":
        pooled = states.max(dim=0).values
    elif model.pooling == "last":
        pooled = torch.cat([states[-1, :hsz], states[0, hsz:]])
    else:
        w, b = model.pool_proj.weight, model.pool_proj.bias
        scores = torch.tanh(states @ w.T + b) @ model.pool_score.weight[0]
        pooled = torch.softmax(scores, dim=0) @ states
    return pooled @ model.classifier.weight.T + model.classifier.bias


@pytest.mark.parametrize("pooling", ["max", "attention", "last"])
def test_logits_match_unpadded_torch_lstm_per_example(pooling):
    model = _model(pooling)
    ids, rows, mask = _batch([5, 1, 7, 3])
    with torch.no_grad():
        got = model(ids, mask)["logits"]
        expect = torch.stack([_reference_logits(model, _torch_lstm_states(model, r))
                              for r in rows])
    assert got.shape == (4, LABELS)
    torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-10)


def test_states_match_written_out_lstm_cell_math():
    model = _model("last", num_layers=2)
    ids, rows, _ = _batch([4, 6, 2])
    with torch.no_grad():
        states = model.encode(ids)
        for i, r in enumerate(rows):
            expect = _manual_states(model, r)
            torch.testing.assert_close(states[i, : len(r)], expect, rtol=1e-10, atol=1e-10)
            torch.testing.assert_close(model(ids)["logits"][i], _reference_logits(model, expect))


@pytest.mark.parametrize("pooling", ["max", "attention", "last"])
def test_padding_never_changes_logits(pooling):
    model = _model(pooling)
    ids, _, mask = _batch([5, 2, 6])
    with torch.no_grad():
        base = model(ids)["logits"]
        longer = F.pad(ids, (0, 9))  # nine more padding columns
        torch.testing.assert_close(model(longer)["logits"], base, rtol=0, atol=1e-6)
        # whatever sits under the mask (even ids outside the vocabulary) is never read
        junk = ids.masked_fill(~mask, 999)
        torch.testing.assert_close(model(junk, mask)["logits"], base, rtol=0, atol=1e-6)
        # left padding reads the same tokens in the same order
        left = torch.stack([torch.cat([r[m], r[~m]]).roll(int((~m).sum())) for r, m in
                            zip(ids, mask, strict=True)])
        torch.testing.assert_close(model(left)["logits"], base, rtol=0, atol=1e-6)


def test_encode_and_pooled_shapes_and_zero_padding():
    model = _model("max", num_layers=1)
    ids, _, mask = _batch([3, 5], seq=7)
    with torch.no_grad():
        states = model.encode(ids)
        pooled = model.pooled(ids)
    assert states.shape == (2, 7, 10)
    assert pooled.shape == (2, 10)
    assert states[~mask].abs().max() == 0
    torch.testing.assert_close(pooled, states.masked_fill(~mask[..., None], -1e9).amax(1))


def test_attention_pool_weights_sum_to_one_over_real_tokens():
    model = _model("attention")
    ids, _, mask = _batch([4, 1, 6], seq=8)
    with torch.no_grad():
        out = model(ids, return_attention=True)
    weights = out["pool_weights"]
    assert weights.shape == (3, 8)
    assert weights[~mask].abs().max() == 0
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, dtype=torch.float64))
    assert (weights[mask] > 0).all()
    assert weights[1, 0] == 1  # a single token takes all the weight


def test_loss_is_cross_entropy_and_token_type_ids_are_accepted():
    model = _model("max")
    ids, _, mask = _batch([3, 4])
    labels = torch.tensor([2, 0])
    out = model(ids, mask.long(), labels, token_type_ids=torch.zeros_like(ids))
    torch.testing.assert_close(out["loss"], F.cross_entropy(out["logits"], labels))
    assert out["loss"].requires_grad


def test_adamw_learns_whether_a_token_occurs():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(3, 9, (96,), generator=g)
    ids = torch.randint(1, 10, (96, 8), generator=g)
    ids[torch.arange(8)[None] >= lengths[:, None]] = 0
    labels = (ids == 5).any(1).long()
    assert 0.3 < labels.float().mean() < 0.7
    torch.manual_seed(0)
    model = BiLSTMClassifier(10, 2, embed_dim=16, hidden_size=16, dropout=0.0)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-2)
    losses = []
    for _ in range(30):
        loss = model(ids, labels=labels)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 0.5
    assert losses[-1] < 0.05, losses[::5]
    model.eval()
    with torch.no_grad():
        acc = (model(ids)["logits"].argmax(-1) == labels).float().mean()
    assert acc > 0.95


def test_gradient_checkpointing_recomputes_layers_with_identical_gradients():
    torch.manual_seed(0)
    model = BiLSTMClassifier(VOCAB, LABELS, embed_dim=6, hidden_size=5, num_layers=2,
                             pooling="attention", dropout=0.3).double().train()
    ids, _, _ = _batch([5, 2, 7])
    labels = torch.tensor([0, 1, 2])
    calls = []
    model.layers[0].register_forward_pre_hook(lambda *_: calls.append(1))

    def grads(enabled: bool):
        model.set_gradient_checkpointing(enabled)
        model.zero_grad()
        calls.clear()
        torch.manual_seed(123)  # same dropout masks in both runs
        model(ids, labels=labels)["loss"].backward()
        return [p.grad.clone() for p in model.parameters()], len(calls)

    plain, plain_calls = grads(False)
    ckpt, ckpt_calls = grads(True)
    assert (plain_calls, ckpt_calls) == (1, 2)  # the checkpointed layer ran again in backward
    for a, b in zip(plain, ckpt, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_dropout_between_layers_only_while_training():
    torch.manual_seed(0)
    model = BiLSTMClassifier(VOCAB, LABELS, embed_dim=6, hidden_size=32, num_layers=2,
                             dropout=0.5)
    ids, _, _ = _batch([7, 5, 6])
    seen = []
    model.layers[1].register_forward_pre_hook(lambda _, args: seen.append(args[0].data))
    model(ids)
    zeros = (seen[-1] == 0).float().mean()
    assert 0.35 < zeros < 0.65  # about half of the second layer's inputs dropped
    model.eval()
    model(ids)
    assert (seen[-1] == 0).sum() == 0


def test_config_round_trips_through_json_and_model_config():
    model = _model("attention", num_layers=2)
    config = json.loads(json.dumps(model.config))
    rebuilt = BiLSTMClassifier.from_config(config).double().eval()
    rebuilt.load_state_dict(model.state_dict())
    ids, _, _ = _batch([3, 5])
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(ids)["logits"], model(ids)["logits"])
    assert BiLSTMClassifier.from_config({**config, "model_type": "bilstm"}).config == config

    shared = preset("bilstm", vocab_size=50, num_labels=4, lstm_hidden=8, lstm_layers=2,
                    lstm_pooling="last", dropout=0.0)
    for source in (shared, shared.to_dict()):
        m = BiLSTMClassifier.from_config(source)
        assert m.config == {"vocab_size": 50, "num_labels": 4, "embed_dim": 128,
                            "hidden_size": 8, "num_layers": 2, "pooling": "last",
                            "dropout": 0.0, "pad_token_id": 0}
    with pytest.raises(ValueError, match="unknown"):
        BiLSTMClassifier.from_config({**config, "heads": 2})
    with pytest.raises(ValueError, match="model_type"):
        BiLSTMClassifier.from_config({**config, "model_type": "seq2seq"})
    with pytest.raises(ValueError, match="model_type"):
        BiLSTMClassifier.from_config(preset("tiny"))


@pytest.mark.parametrize("kwargs", [
    {"vocab_size": 0}, {"num_labels": 0}, {"hidden_size": -1}, {"num_layers": 0},
    {"embed_dim": 2.5}, {"pooling": "mean"}, {"dropout": 1.0}, {"dropout": -0.1},
    {"pad_token_id": 20}, {"pad_token_id": -1},
])
def test_bad_constructor_arguments_raise(kwargs):
    args = {"vocab_size": VOCAB, "num_labels": LABELS, **kwargs}
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        BiLSTMClassifier(args.pop("vocab_size"), args.pop("num_labels"), **args)


def test_bad_inputs_raise_clear_errors():
    model = _model("max")
    ids, _, mask = _batch([3, 4])
    with pytest.raises(ValueError, match=r"rows \[1\]"):
        model(torch.tensor([[3, 4], [0, 0]]))
    with pytest.raises(ValueError, match="empty batch"):
        model(ids[:0])
    with pytest.raises(ValueError, match="input_ids must be"):
        model(ids[0])
    with pytest.raises(ValueError, match="integer"):
        model(ids.double())
    with pytest.raises(ValueError, match="attention_mask"):
        model(ids, mask[:, :2])
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 20\)"):
        model(ids.masked_fill(mask, 25))
    with pytest.raises(ValueError, match="labels"):
        model(ids, labels=torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="pooling='attention'"):
        model(ids, return_attention=True)
