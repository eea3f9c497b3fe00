"""The joint intent + slot model: losses against torch's own, padding, training, save/load."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from headwise.models import ModelConfig, build_model, load_model, save_model
from headwise.models.joint import JointIntentSlotModel

TAGS = ["O", "B-amount", "I-amount", "B-date", "I-date"]


def _config(**kw):
    base = dict(model_type="joint_intent_slot", vocab_size=30, d_model=16, num_layers=1,
                num_heads=4, d_ff=32, dropout=0.0, max_position=16, num_labels=3,
                multi_label=True, slot_tags=TAGS, pooling="mean")
    return ModelConfig(**{**base, **kw})


def _batch():
    ids = torch.tensor([[1, 7, 8, 9, 2, 0], [1, 5, 2, 0, 0, 0]])
    mask = ids != 0
    labels = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    tags = torch.tensor([[-100, 1, 2, 0, -100, 0], [-100, 3, -100, 0, 0, 0]])
    return ids, mask, labels, tags


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
    assert out["tag_logits"].shape == (2, 6, len(TAGS))


def test_single_label_head_uses_cross_entropy():
    model = build_model(_config(multi_label=False)).eval()
    ids, mask, _, _ = _batch()
    y = torch.tensor([2, 0])
    out = model(ids, mask, labels=y)
    torch.testing.assert_close(out["loss"], F.cross_entropy(out["logits"], y))
    with pytest.raises(ValueError, match="single-label"):
        model(ids, mask, labels=torch.zeros(2, 3))


def test_padding_does_not_change_real_tokens():
    model = build_model(_config()).eval()
    ids = torch.tensor([[1, 7, 8, 2]])
    padded = torch.tensor([[1, 7, 8, 2, 0, 0, 0]])
    a = model(ids)
    b = model(padded, padded != 0)
    torch.testing.assert_close(a["logits"], b["logits"], atol=1e-6, rtol=0)
    torch.testing.assert_close(a["tag_logits"], b["tag_logits"][:, :4], atol=1e-6, rtol=0)


def test_a_few_steps_reduce_both_losses_and_round_trip(tmp_path):
    torch.manual_seed(0)
    model = build_model(_config(number_heads=[1]))
    model.encoder.set_number_tokens([7, 8])
    ids, mask, labels, tags = _batch()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    first = None
    for _ in range(30):
        out = model(ids, mask, labels=labels, tag_labels=tags)
        first = first or (out["intent_loss"].item(), out["tag_loss"].item())
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
    assert out["intent_loss"].item() < first[0] / 2 and out["tag_loss"].item() < first[1] / 2
    model.eval()
    save_model(model, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert isinstance(back, JointIntentSlotModel)
    for k, v in model.state_dict().items():
        assert torch.equal(v, back.state_dict()[k]), k
    torch.testing.assert_close(back(ids, mask)["tag_logits"], model(ids, mask)["tag_logits"],
                               rtol=0, atol=0)


def test_bad_configs_and_targets():
    with pytest.raises(ValueError, match="'O'"):
        JointIntentSlotModel(_config(slot_tags=["B-x", "O"]))
    with pytest.raises(ValueError, match="joint_intent_slot"):
        JointIntentSlotModel(_config(model_type="encoder_classifier"))
    model = build_model(_config(slot_tags=None)).eval()
    ids, mask, labels, tags = _batch()
    assert "tag_logits" not in model(ids, mask)
    with pytest.raises(ValueError, match="no slot tagger"):
        model(ids, mask, tag_labels=tags)
    with pytest.raises(ValueError, match="multi-label targets"):
        model(ids, mask, labels=labels[:, :2])
