"""The generalized cross-entropy against hand-computed float64 values and its limits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from headwise.intent.training.losses import SmoothedClassification, generalized_cross_entropy


class Fixed(torch.nn.Module):
    """A "model" that returns the same logits whatever the input."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, input_ids, attention_mask=None):
        return {"logits": self.logits}


def _reference(logits: np.ndarray, y: np.ndarray, q: float, eps: float = 0.0,
               w: np.ndarray | None = None) -> float:
    """sum_k t_k (1 - p_k^q) / q per example, in float64 numpy."""
    z = logits - logits.max(1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    k = logits.shape[1]
    t = np.full_like(p, eps / k)
    t[np.arange(len(y)), y] += 1 - eps
    per = (t * (1 - p ** q) / q).sum(1)
    ww = np.ones(len(y)) if w is None else w[y]
    return float((ww * per).sum() / ww.sum())


@pytest.mark.parametrize("q", [0.3, 0.7, 1.0])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_matches_the_formula(q, eps):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 5, generator=g, dtype=torch.float64) * 3
    y = torch.tensor([0, 1, 4, 4, 2, 3])
    w = torch.tensor([0.5, 1.0, 2.0, 1.0, 3.0], dtype=torch.float64)
    got = generalized_cross_entropy(logits, y, q, label_smoothing=eps, weight=w)
    want = _reference(logits.numpy(), y.numpy(), q, eps, w.numpy())
    assert float(got) == pytest.approx(want, rel=1e-12)


def test_limits_and_gradient_scaling():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(8, 4, generator=g, dtype=torch.float64)
    y = torch.randint(0, 4, (8,), generator=g)
    # q -> 0 is cross-entropy, with smoothing or with weights (PyTorch weights smoothing
    # terms by their own class, this loss by the example's label: the two differ when both)
    w = torch.tensor([1.0, 2.0, 0.5, 1.0], dtype=torch.float64)
    for eps, ww in ((0.1, None), (0.0, w)):
        ce = F.cross_entropy(logits, y, weight=ww, label_smoothing=eps)
        gce = generalized_cross_entropy(logits, y, 1e-7, label_smoothing=eps, weight=ww)
        assert float(gce) == pytest.approx(float(ce), rel=1e-6)
    # q = 1 is the mean absolute error 1 - p_y
    p = logits.softmax(-1)[torch.arange(8), y]
    assert float(generalized_cross_entropy(logits, y, 1.0)) == pytest.approx(
        float((1 - p).mean()), rel=1e-12)
    # per example, d GCE / d logits = p_y^q * d CE / d logits
    for i in range(3):
        a = logits[i:i + 1].clone().requires_grad_(True)
        generalized_cross_entropy(a, y[i:i + 1], 0.7).backward()
        b = logits[i:i + 1].clone().requires_grad_(True)
        F.cross_entropy(b, y[i:i + 1]).backward()
        scale = float(b.detach().softmax(-1)[0, y[i]]) ** 0.7
        torch.testing.assert_close(a.grad, b.grad * scale)


def test_wrapper_uses_it_and_checks_q():
    logits = torch.randn(4, 3)
    y = torch.tensor([0, 2, 1, 1])
    out = SmoothedClassification(Fixed(logits), 0.1, gce_q=0.5)(torch.zeros(4, 2), labels=y)
    torch.testing.assert_close(out["loss"], generalized_cross_entropy(logits, y, 0.5,
                                                                      label_smoothing=0.1))
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="gce_q"):
            SmoothedClassification(Fixed(logits), gce_q=bad)
    with pytest.raises(ValueError, match="q in"):
        generalized_cross_entropy(logits, y, -1.0)


def test_recipe_trains_with_gce_and_selects_on_macro_f1(tmp_path):
    from headwise.intent import IntentRecipe, train_intent_classifier

    with pytest.raises(ValueError, match="gce_q"):
        IntentRecipe.from_dict({"levers": {"gce_q": 0.0}})
    with pytest.raises(ValueError, match="select_on"):
        IntentRecipe.from_dict({"task": {"select_on": "f1"}})
    rows = [(f"{w} card please {i}", "card") for i, w in enumerate(["lost", "stolen", "new"])]
    rows += [(f"send {w} money {i}", "transfer") for i, w in enumerate(["some", "more", "all"])]
    rows += [(f"my balance {w} {i}", "balance") for i, w in enumerate(["now", "today", "left"])]
    recipe = IntentRecipe.from_dict({
        "architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "vocab_size": 100},
        "train": {"epochs": 3, "batch_size": 4, "patience": None, "progress": False},
        "levers": {"gce_q": 0.7},
        "task": {"select_on": "macro_f1"}})
    run = train_intent_classifier(rows * 3, rows, recipe, out_dir=tmp_path / "m")
    scores = [r["eval_macro_f1"] for r in run.history if "eval_macro_f1" in r]
    assert len(scores) == 3
    # the kept weights are those of the best validation macro-F1
    assert run.valid_metrics["macro_f1"] == pytest.approx(max(scores))
    assert run.classifier.info["recipe"]["levers"]["gce_q"] == 0.7


def test_teacher_target_matches_the_formula_and_reaches_the_model():
    from headwise.intent.training.losses import soft_target_loss

    g = torch.Generator().manual_seed(2)
    logits = torch.randn(5, 4, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 3, 1, 1, 2])
    teacher = torch.softmax(torch.randn(5, 4, generator=g, dtype=torch.float64), -1)
    w = torch.tensor([1.0, 2.0, 0.5, 1.5], dtype=torch.float64)
    got = soft_target_loss(logits, y, label_smoothing=0.1, teacher=teacher, teacher_weight=0.3,
                           weight=w)
    logp = np.log(torch.softmax(logits, -1).numpy())
    onehot = np.eye(4)[y.numpy()] * 0.9 + 0.1 / 4
    t = 0.7 * onehot + 0.3 * teacher.numpy()
    ww = w.numpy()[y.numpy()]
    want = float((ww * -(t * logp).sum(1)).sum() / ww.sum())
    assert float(got) == pytest.approx(want, rel=1e-12)
    # a one-hot teacher with all the weight is plain cross-entropy
    hard = F.one_hot(y, 4).double()
    assert float(soft_target_loss(logits, y, teacher=hard, teacher_weight=1.0)) == \
        pytest.approx(float(F.cross_entropy(logits, y)), rel=1e-12)

    wrap = SmoothedClassification(Fixed(logits), 0.1, teacher_weight=0.3)
    out = wrap(torch.zeros(5, 2), labels=y, teacher=teacher)
    assert float(out["loss"]) == pytest.approx(float(soft_target_loss(
        logits, y, label_smoothing=0.1, teacher=teacher, teacher_weight=0.3)), rel=1e-12)
    with pytest.raises(ValueError, match="teacher_weight"):
        SmoothedClassification(Fixed(logits), teacher_weight=1.5)


def test_recipe_distils_from_out_of_fold_tfidf(tmp_path, monkeypatch):
    from headwise.intent import IntentRecipe, train_intent_classifier
    from headwise.intent.training import losses as objective

    seen = []
    real = objective.soft_target_loss

    def spy(logits, labels, **kw):
        seen.append((kw["teacher"].shape, kw["teacher_weight"]))
        return real(logits, labels, **kw)

    monkeypatch.setattr(objective, "soft_target_loss", spy)

    with pytest.raises(ValueError, match="distill"):
        IntentRecipe.from_dict({"levers": {"distill": "bert"}})
    words = {"card": ["lost", "stolen", "blocked", "new"], "transfer": ["send", "wire", "pay",
                                                                      "move"],
             "balance": ["balance", "left", "total", "statement"]}
    rows = [(f"{w} {k} please", k) for k, ws in words.items() for w in ws] * 2
    recipe = IntentRecipe.from_dict({
        "architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "vocab_size": 100},
        "train": {"epochs": 2, "batch_size": 4, "progress": False},
        "levers": {"distill": "tfidf", "distill_weight": 0.5}})
    run = train_intent_classifier(rows, rows[:6], recipe, out_dir=tmp_path / "m")
    assert run.classifier.info["recipe"]["levers"]["distill"] == "tfidf"
    assert run.classifier.info["distill"]["seconds"] >= 0
    assert all(np.isfinite(r["loss"]) for r in run.history if "loss" in r)
    # every training batch carried the teacher's (batch, intents) probabilities
    assert seen and all(shape[1] == 3 and weight == 0.5 for shape, weight in seen)
