"""The multi-label intent head of compound training: label smoothing and balanced class
weights against PyTorch's and scikit-learn's own (:mod:`headwise.intent.training.compound`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.utils.class_weight import compute_class_weight
from tiny_corpus import INTENTS

from headwise.intent.training.builders import build_intent_model
from headwise.intent.training.losses import (
    CompoundObjective,
    balanced_multilabel_weights,
    multilabel_intent_loss,
)
from headwise.intent.training.recipe import IntentRecipe, Transformer
from headwise.text import train_tokenizer

ROWS = [(t, k) for k, ts in INTENTS.items() for t in ts]


# --- the compound intent head: smoothing and balanced weights against references ----------
def _joint(intents=4, tags=("O", "B-x", "I-x")):
    tok = train_tokenizer([t for t, _ in ROWS], kind="wordpiece", vocab_size=120)
    assert tok.vocab_size > 40  # the ids of _batch
    torch.manual_seed(0)
    recipe = IntentRecipe(architecture=Transformer(d_model=16, num_layers=1, num_heads=2,
                                                   d_ff=32, dropout=0.0, attention_dropout=0.0))
    return build_intent_model(recipe, tok, [f"i{k}" for k in range(intents)],
                              model_type="joint_intent_slot", multi_label=True,
                              slot_tags=list(tags)).eval()


def _batch(seed=0, n=5, intents=4, length=7):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 40, (n, length), generator=g)
    mask = torch.ones(n, length, dtype=torch.bool)
    mask[0, 5:] = False
    labels = (torch.rand(n, intents, generator=g) < 0.4).float()
    tags = torch.randint(0, 3, (n, length), generator=g)
    tags[:, 0] = -100
    return ids, mask, labels, tags


def test_without_smoothing_or_weights_the_objective_is_the_models_own_loss():
    model = _joint()
    ids, mask, labels, tags = _batch()
    own = model(input_ids=ids, attention_mask=mask, labels=labels, tag_labels=tags)
    ours = CompoundObjective(model)(input_ids=ids, attention_mask=mask, labels=labels,
                                    tag_labels=tags)
    torch.testing.assert_close(ours["intent_loss"], own["intent_loss"], rtol=0, atol=1e-6)
    torch.testing.assert_close(ours["loss"], own["loss"], rtol=0, atol=1e-6)


def test_smoothing_is_two_class_cross_entropy_smoothing_per_intent():
    torch.manual_seed(1)
    logits = torch.randn(6, 4, dtype=torch.float64)
    labels = (torch.rand(6, 4) < 0.5).double()
    eps = 0.2
    got = multilabel_intent_loss(logits, labels, label_smoothing=eps)
    # each intent is a two-class problem with logits [0, z]: PyTorch's own smoothed CE
    two = torch.stack([torch.zeros_like(logits), logits], -1).reshape(-1, 2)
    want = F.cross_entropy(two, labels.long().reshape(-1), label_smoothing=eps,
                           reduction="sum") / logits.shape[0]
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)
    model = _joint()
    ids, mask, labels, tags = _batch(seed=2)
    out = CompoundObjective(model, label_smoothing=eps)(input_ids=ids, attention_mask=mask,
                                                       labels=labels, tag_labels=tags)
    z = out["logits"].double()
    t = labels.double() * (1 - eps) + eps / 2
    by_hand = -(t * torch.log(torch.sigmoid(z)) + (1 - t) * torch.log(torch.sigmoid(-z)))
    torch.testing.assert_close(out["intent_loss"].double(), by_hand.sum() / len(z),
                               rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out["loss"], out["intent_loss"] + out["tag_loss"])


def test_balanced_weights_are_sklearns_per_intent_and_weigh_the_loss():
    targets = [[1, 0, 0, 1], [0, 0, 1, 1], [0, 0, 0, 1], [1, 0, 0, 1], [0, 0, 0, 1]]
    w = balanced_multilabel_weights(targets).double().numpy()
    y = np.asarray(targets)
    for j in (0, 2):
        np.testing.assert_allclose(w[:, j], compute_class_weight("balanced", classes=np.array(
            [0, 1]), y=y[:, j]), rtol=1e-6)
    # intent 1 (never) and 3 (always) are one-class: weight 1 both ways
    np.testing.assert_array_equal(w[:, 1], [1, 1])
    np.testing.assert_array_equal(w[:, 3], [1, 1])
    torch.manual_seed(3)
    logits = torch.randn(5, 4, dtype=torch.float64)
    got = multilabel_intent_loss(logits, torch.tensor(y, dtype=torch.float64),
                                 label_smoothing=0.1, weights=torch.tensor(w))
    z, t = logits.numpy(), y * 0.9 + 0.05
    per = np.where(y == 1, w[1], w[0]) * -(t * np.log(1 / (1 + np.exp(-z)))
                                           + (1 - t) * np.log(1 / (1 + np.exp(z))))
    assert math.isclose(float(got), per.sum() / 5, rel_tol=1e-6)
    with pytest.raises(ValueError, match="0 or 1"):
        balanced_multilabel_weights([[0.5, 1.0]])
    with pytest.raises(ValueError, match=r"positive and \(2, 4\)"):
        CompoundObjective(_joint(), weights=torch.ones(2, 3))
