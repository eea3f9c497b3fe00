"""The BiLSTM joint intent + slot model: heads on the BiLSTM's states, losses against
torch's own, padding, training, save/load, refusals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from headwise.models import (
    BiLSTMClassifier,
    BiLSTMJointModel,
    JointHeads,
    ModelConfig,
    build_model,
    load_model,
    save_model,
)

TAGS = ["O", "B-amount", "I-amount", "B-date", "I-date"]


def _config(**kw):
    base = dict(model_type="bilstm_joint", vocab_size=30, lstm_embed_dim=12, lstm_hidden=8,
                lstm_layers=2, dropout=0.0, num_labels=3, multi_label=True, slot_tags=TAGS)
    return ModelConfig(**{**base, **kw})


def _batch():
    ids = torch.tensor([[1, 7, 8, 9, 2, 0], [1, 5, 2, 0, 0, 0]])
    mask = ids != 0
    labels = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    tags = torch.tensor([[-100, 1, 2, 0, -100, 0], [-100, 3, -100, 0, 0, 0]])
    return ids, mask, labels, tags


@pytest.mark.parametrize("pooling", ["max", "attention", "last"])
def test_heads_read_the_bilstm_states_and_pooled_vector(pooling):
    torch.manual_seed(0)
    model = build_model(_config(lstm_pooling=pooling)).eval()
    assert isinstance(model, BiLSTMJointModel) and isinstance(model, JointHeads)
    ids, mask, _, _ = _batch()
    out = model(ids, mask)
    # the same BiLSTM, read through the classifier's own public methods
    torch.testing.assert_close(out["logits"], model.classifier(model.pooled(ids, mask)))
    torch.testing.assert_close(out["tag_logits"], model.tagger(model.encode(ids, mask)))
    assert out["tag_logits"].shape == (2, 6, len(TAGS))
    # and an independent BiLSTM classifier with the same weights pools the same vector
    plain = BiLSTMClassifier(30, 3, embed_dim=12, hidden_size=8, num_layers=2,
                             pooling=pooling, dropout=0.0).eval()
    plain.load_state_dict({k: v for k, v in model.state_dict().items()
                           if not k.startswith("tagger.")})
    torch.testing.assert_close(out["logits"], plain(ids, mask)["logits"])


def test_losses_equal_torch_reference():
    torch.manual_seed(0)
    model = build_model(_config(slot_loss_weight=0.5)).eval()
    ids, mask, labels, tags = _batch()
    out = model(ids, mask, labels=labels, tag_labels=tags)
    ref_intent = torch.nn.BCEWithLogitsLoss(reduction="sum")(out["logits"], labels) / 2
    scored = mask & (tags != -100)  # padding is never scored, whatever its tag says
    ref_tag = F.cross_entropy(out["tag_logits"][scored], tags[scored], reduction="sum") / 2
    torch.testing.assert_close(out["intent_loss"], ref_intent)
    torch.testing.assert_close(out["tag_loss"], ref_tag)
    torch.testing.assert_close(out["loss"], ref_intent + 0.5 * ref_tag)
    # without a mask the pad id marks padding, so the padding tag (0) is not scored either
    torch.testing.assert_close(model(ids, labels=labels, tag_labels=tags)["loss"], out["loss"])


def test_single_label_head_uses_cross_entropy():
    model = build_model(_config(multi_label=False)).eval()
    ids, mask, _, _ = _batch()
    y = torch.tensor([2, 0])
    out = model(ids, mask, labels=y)
    torch.testing.assert_close(out["loss"], F.cross_entropy(out["logits"], y))
    with pytest.raises(ValueError, match="single-label"):
        model(ids, mask, labels=torch.zeros(2, 3))


def test_padding_does_not_change_the_outputs_of_real_tokens():
    torch.manual_seed(0)
    model = build_model(_config()).eval()
    ids = torch.tensor([[1, 7, 8, 2]])
    right = torch.tensor([[1, 7, 8, 2, 0, 0, 0]])
    left = torch.tensor([[0, 0, 1, 7, 8, 2]])
    a, b, c = model(ids), model(right, right != 0), model(left, left != 0)
    torch.testing.assert_close(a["logits"], b["logits"], atol=1e-6, rtol=0)
    torch.testing.assert_close(a["logits"], c["logits"], atol=1e-6, rtol=0)
    torch.testing.assert_close(a["tag_logits"], b["tag_logits"][:, :4], atol=1e-6, rtol=0)
    torch.testing.assert_close(a["tag_logits"], c["tag_logits"][:, 2:], atol=1e-6, rtol=0)


def test_a_few_steps_reduce_both_losses_and_round_trip(tmp_path):
    torch.manual_seed(0)
    model = build_model(_config(lstm_pooling="attention"))
    ids, mask, labels, tags = _batch()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    first = None
    for _ in range(40):
        out = model(ids, mask, labels=labels, tag_labels=tags)
        first = first or (out["intent_loss"].item(), out["tag_loss"].item())
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
    assert out["intent_loss"].item() < first[0] / 2 and out["tag_loss"].item() < first[1] / 2
    model.eval()
    save_model(model, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert isinstance(back, BiLSTMJointModel) and back.config == model.config
    for k, v in model.state_dict().items():
        assert torch.equal(v, back.state_dict()[k]), k
    torch.testing.assert_close(back(ids, mask)["tag_logits"], model(ids, mask)["tag_logits"],
                               rtol=0, atol=0)


def test_gradient_checkpointing_keeps_the_gradients():
    torch.manual_seed(0)
    model = build_model(_config(dropout=0.0)).train()
    ids, mask, labels, tags = _batch()

    def grads():
        model.zero_grad()
        model(ids, mask, labels=labels, tag_labels=tags)["loss"].backward()
        return [p.grad.clone() for p in model.parameters()]

    plain = grads()
    model.set_gradient_checkpointing(True)
    for a, b in zip(plain, grads(), strict=True):
        torch.testing.assert_close(a, b)


def test_bad_configs_and_targets():
    with pytest.raises(ValueError, match="'O'"):
        BiLSTMJointModel(_config(slot_tags=["B-x", "O"]))
    with pytest.raises(ValueError, match="bilstm_joint"):
        BiLSTMJointModel(_config(model_type="bilstm"))
    with pytest.raises(ValueError, match="a BiLSTM has none"):
        BiLSTMJointModel(_config(number_heads=[0]))
    model = build_model(_config(slot_tags=None)).eval()
    ids, mask, labels, tags = _batch()
    assert "tag_logits" not in model(ids, mask)
    with pytest.raises(ValueError, match="no slot tagger"):
        model(ids, mask, tag_labels=tags)
    with pytest.raises(ValueError, match="multi-label targets"):
        model(ids, mask, labels=labels[:, :2])
    with pytest.raises(ValueError, match="tag_labels must be"):
        build_model(_config()).eval()(ids, mask, tag_labels=tags[:, :3])
