"""Linear probing (the LP of LP-FT) against scikit-learn's logistic regression."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from headwise.demo.corpus import generate_demo_corpus
from headwise.intent import IntentRecipe, train_intent_classifier
from headwise.intent.training.linear_probe import (
    fit_linear_probe,
    fit_logistic_regression,
    fit_multilabel_probe,
    fit_tag_probe,
    pooled_features,
    token_features,
)
from headwise.models import BiLSTMClassifier, EncoderClassifier, JointIntentSlotModel, preset


def _blobs(n=240, d=6, k=4, seed=0):
    g = np.random.default_rng(seed)
    centres = g.normal(size=(k, d)) * 1.5
    y = g.integers(0, k, n)
    return centres[y] + g.normal(size=(n, d)), y


@pytest.mark.parametrize("c", [0.1, 1.0, 10.0])
def test_logistic_regression_matches_scikit_learn(c):
    x, y = _blobs()
    w, b, iters, _ = fit_logistic_regression(torch.tensor(x), torch.tensor(y), 4, c=c)
    ref = LogisticRegression(C=c, tol=1e-10, max_iter=5000).fit(x, y)
    assert iters > 0
    np.testing.assert_allclose(w.numpy(), ref.coef_, atol=2e-4)
    # the bias is defined up to a shared constant (softmax), the probabilities are not
    ours = torch.softmax(torch.tensor(x) @ w.T + b, 1).numpy()
    np.testing.assert_allclose(ours, ref.predict_proba(x), atol=2e-5)


def test_logistic_regression_without_bias_keeps_it_zero():
    x, y = _blobs()
    w, b, _, _ = fit_logistic_regression(torch.tensor(x), torch.tensor(y), 4, bias=False)
    ref = LogisticRegression(C=1.0, fit_intercept=False, tol=1e-10, max_iter=5000).fit(x, y)
    assert torch.count_nonzero(b) == 0
    np.testing.assert_allclose(w.numpy(), ref.coef_, atol=2e-4)


@pytest.mark.parametrize("bias", [True, False])
def test_logistic_regression_with_fixed_rows_matches_scipy(bias):
    """Rows 0 and 2 held at given values, rows 1 and 3 fitted against them: the same
    objective minimised by scipy's L-BFGS-B in float64 (an independent optimiser), and the
    fixed rows come back as given."""
    from scipy.optimize import minimize

    x, y = _blobs(d=5)
    g = np.random.default_rng(3)
    w_fix, b_fix = g.normal(size=(2, 5)), (g.normal(size=2) if bias else np.zeros(2))
    c, n = 2.0, len(y)

    def objective(theta):
        wf = theta[:10].reshape(2, 5)
        bf = theta[10:] if bias else np.zeros(2)
        w = np.stack([w_fix[0], wf[0], w_fix[1], wf[1]])
        b = np.array([b_fix[0], bf[0], b_fix[1], bf[1]])
        z = x @ w.T + b
        z = z - z.max(1, keepdims=True)
        ce = -(z[np.arange(n), y] - np.log(np.exp(z).sum(1))).mean()
        return ce + (wf ** 2).sum() / (2 * c * n)

    ref = minimize(objective, np.zeros(12 if bias else 10), method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10000})
    w, b, _, loss = fit_logistic_regression(
        torch.tensor(x), torch.tensor(y), 4, c=c, bias=bias,
        fixed=([2, 0], torch.tensor(w_fix[::-1].copy()), torch.tensor(b_fix[::-1].copy())))
    np.testing.assert_array_equal(w[[0, 2]].numpy(), w_fix)
    np.testing.assert_array_equal(b[[0, 2]].numpy(), b_fix)
    np.testing.assert_allclose(w[[1, 3]].numpy(), ref.x[:10].reshape(2, 5), atol=1e-4)
    if bias:
        np.testing.assert_allclose(b[[1, 3]].numpy(), ref.x[10:], atol=1e-4)
    assert loss == pytest.approx(ref.fun, abs=1e-8)


@pytest.mark.parametrize("fixed", [([0, 0], 2), ([4], 1), ([0, 1, 2, 3], 4)])
def test_logistic_regression_refuses_bad_fixed_rows(fixed):
    x, y = _blobs(d=5)
    rows, k = fixed
    with pytest.raises(ValueError, match="fixed rows"):
        fit_logistic_regression(torch.tensor(x), torch.tensor(y), 4,
                                fixed=(rows, torch.zeros(k, 5), torch.zeros(k)))


def test_probe_keeps_the_rows_it_is_told_to_keep():
    """keep=[0, 1]: the trained rows stay bit for bit; row 2 is the fit against them."""
    model = _model()
    g = torch.Generator().manual_seed(0)
    ids = [[2, *torch.randint(4, 200, (int(n),), generator=g).tolist(), 3]
           for n in torch.randint(2, 9, (60,), generator=g)]
    labels = [i % 3 for i in range(60)]
    before_w = model.classifier.weight.detach().clone()
    before_b = model.classifier.bias.detach().clone()
    fit_linear_probe(model, ids, labels, c=10.0, keep=[0, 1])
    torch.testing.assert_close(model.classifier.weight.detach()[:2], before_w[:2], atol=0,
                               rtol=0)
    torch.testing.assert_close(model.classifier.bias.detach()[:2], before_b[:2], atol=0, rtol=0)
    x = pooled_features(model, ids)
    w, b, _, _ = fit_logistic_regression(x, torch.tensor(labels), 3, c=10.0,
                                         fixed=([0, 1], before_w[:2], before_b[:2]))
    torch.testing.assert_close(model.classifier.weight.detach()[2], w[2])
    torch.testing.assert_close(model.classifier.bias.detach()[2], b[2])


def _model():
    torch.manual_seed(0)
    return EncoderClassifier(preset("tiny", num_labels=3)).double()


def test_pooled_features_equal_one_text_at_a_time_and_restore_the_mode():
    model = _model().train()
    ids = [[2, 5, 9, 3], [2, 7, 3], [2, 8, 8, 8, 6, 3], [2, 4, 3]]
    got = pooled_features(model, ids, batch_size=3)
    assert model.training
    model.eval()
    for i, row in enumerate(ids):
        x = torch.tensor([row])
        ref = model.pool(model.encode(x, torch.ones_like(x, dtype=torch.bool)), None)
        torch.testing.assert_close(got[i], ref[0].double(), atol=1e-10, rtol=0)


def test_probe_writes_the_fitted_head():
    model = _model()
    g = torch.Generator().manual_seed(0)
    ids = [[2, *torch.randint(4, 200, (int(n),), generator=g).tolist(), 3]
           for n in torch.randint(2, 9, (60,), generator=g)]
    labels = [i % 3 for i in range(60)]
    result = fit_linear_probe(model, ids, labels, c=100.0)
    x = pooled_features(model, ids)
    w, b, _, _ = fit_logistic_regression(x, torch.tensor(labels), 3, c=100.0)
    torch.testing.assert_close(model.classifier.weight.detach(), w)
    torch.testing.assert_close(model.classifier.bias.detach(), b)
    pred = model.eval()(torch.tensor([ids[0]]))["logits"].argmax(1)
    assert int(pred) == int((x[0] @ w.T + b).argmax())
    assert result.train_accuracy == pytest.approx(
        float(((x @ w.T + b).argmax(1) == torch.tensor(labels)).double().mean()))


def test_the_probe_runs_the_frozen_encoder_once_per_text_without_gradients():
    """LP-FT's probe stage computes the frozen features once (one forward pass per batch
    of texts, no autograd graph) and fits the head on them, never re-running the encoder."""
    model = _model()
    g = torch.Generator().manual_seed(1)
    ids = [[2, *torch.randint(4, 200, (int(n),), generator=g).tolist(), 3]
           for n in torch.randint(2, 9, (50,), generator=g)]
    seen: list[int] = []
    encode = model.encode

    def counting(x, mask):
        out = encode(x, mask)
        seen.append(x.shape[0])
        assert not out.requires_grad
        return out

    model.encode = counting
    fit_linear_probe(model, ids, [i % 3 for i in range(50)], batch_size=16)
    assert sum(seen) == 50 and len(seen) == 4  # every text once, in ceil(50 / 16) passes


def test_probe_errors():
    lstm = BiLSTMClassifier(50, 3, embed_dim=8, hidden_size=8)
    with pytest.raises(TypeError, match="encode/pool"):
        fit_linear_probe(lstm, [[1, 2]], [0])
    with pytest.raises(ValueError, match="labels"):
        fit_linear_probe(_model(), [[2, 5, 3]], [0, 1])
    with pytest.raises(ValueError, match="non-empty"):
        pooled_features(_model(), [[]])
    with pytest.raises(ValueError, match="labels must lie"):
        fit_logistic_regression(torch.zeros(2, 3), torch.tensor([0, 5]), 3)
    with pytest.raises(ValueError, match="linear_probe"):
        IntentRecipe.from_dict({
            "architecture": {"type": "bilstm"},
            "levers": {"linear_probe": True}})
    with pytest.raises(ValueError, match="probe_c"):
        IntentRecipe.from_dict({"levers": {"probe_c": 0.0}})


def test_recipe_probes_then_fine_tunes(tmp_path):
    c = generate_demo_corpus(seed=0, per_intent=8)
    train = [(e.text, e.label) for e in c["train"]]
    valid = [(e.text, e.label) for e in c["valid"]]
    recipe = IntentRecipe.from_dict({
        "architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64,
                         "vocab_size": 400},
        "train": {"epochs": 1, "progress": False},
        "levers": {"linear_probe": True}})
    trained = train_intent_classifier(train, valid, recipe, out_dir=tmp_path / "m")
    info = trained.classifier.info["linear_probe"]
    assert info["iterations"] > 0 and 0.0 < info["train_accuracy"] <= 1.0
    assert trained.classifier.info["recipe"]["levers"]["linear_probe"] is True


# --- the multi-label probe: one scikit-learn logistic regression per intent ----------------
def _joint(intents=4):
    torch.manual_seed(0)
    return JointIntentSlotModel(preset("tiny", num_labels=intents,
                                       model_type="joint_intent_slot", multi_label=True,
                                       slot_tags=["O", "B-x", "I-x"]))


def _multilabel_rows(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = [[2, *torch.randint(4, 200, (int(k),), generator=g).tolist(), 3]
           for k in torch.randint(2, 9, (n,), generator=g)]
    # intent 0 follows the first token, 1 and 2 drawn at random, 3 never present
    targets = [[float(row[1] < 100), float(i % 3 == 0), float(i % 4 == 1), 0.0]
               for i, row in enumerate(ids)]
    return ids, targets


@pytest.mark.parametrize("balanced", [False, True])
def test_multilabel_probe_head_is_the_per_intent_regressions(balanced):
    """Before fine-tuning, the head's logits on the training texts' pooled vectors are each
    intent's scikit-learn decision function; an intent no text has starts at its clipped
    prior with no weights."""
    model = _joint()
    ids, targets = _multilabel_rows()
    result = fit_multilabel_probe(model, ids, targets, c=10.0, balanced=balanced)
    x = pooled_features(model, ids)
    y = np.array(targets, dtype=int)
    logits = model.classifier(x.float()).detach().double().numpy()
    for j in range(3):
        ref = LogisticRegression(C=10.0, max_iter=1000,
                                 class_weight="balanced" if balanced else None)
        ref.fit(x.numpy(), y[:, j])
        np.testing.assert_allclose(logits[:, j], ref.decision_function(x.numpy()), atol=1e-4)
    assert not model.classifier.weight[3].any()
    assert float(model.classifier.bias[3].detach()) == pytest.approx(np.log(1e-4 / (1 - 1e-4)))
    # the whole model in eval mode answers with the same logits
    out = model.eval()(torch.tensor([ids[0]]))["logits"][0].detach().double().numpy()
    np.testing.assert_allclose(out, logits[0], atol=1e-4)
    assert result.iterations > 0 and 0.0 <= result.train_accuracy <= 1.0
    exact = ((logits > 0) == y.astype(bool)).all(1).mean()
    assert result.train_accuracy == pytest.approx(exact)


def test_multilabel_probe_fits_only_the_rows_it_is_given():
    """only=[1, 2]: rows 0 and 3 stay bit for bit, rows 1 and 2 are scikit-learn's
    regressions on their columns (each intent's fit is its own)."""
    model = _joint()
    ids, targets = _multilabel_rows()
    before_w = model.classifier.weight.detach().clone()
    before_b = model.classifier.bias.detach().clone()
    fit_multilabel_probe(model, ids, targets, c=10.0, only=[2, 1])
    for j in (0, 3):
        assert torch.equal(model.classifier.weight.detach()[j], before_w[j])
        assert torch.equal(model.classifier.bias.detach()[j], before_b[j])
    x = pooled_features(model, ids)
    y = np.array(targets, dtype=int)
    logits = model.classifier(x.float()).detach().double().numpy()
    for j in (1, 2):
        ref = LogisticRegression(C=10.0, max_iter=1000).fit(x.numpy(), y[:, j])
        np.testing.assert_allclose(logits[:, j], ref.decision_function(x.numpy()), atol=1e-4)
    with pytest.raises(ValueError, match="only must name rows"):
        fit_multilabel_probe(model, ids, targets, only=[4])


def test_multilabel_probe_errors():
    ids, targets = _multilabel_rows(n=8)
    with pytest.raises(ValueError, match="targets must be"):
        fit_multilabel_probe(_joint(), ids, [t[:3] for t in targets])
    with pytest.raises(ValueError, match="0 or 1"):
        fit_multilabel_probe(_joint(), ids, [[0.5, 0, 0, 0]] * 8)
    with pytest.raises(ValueError, match="c must be positive"):
        fit_multilabel_probe(_joint(), ids, targets, c=0.0)
    with pytest.raises(TypeError, match="encode/pool"):
        fit_multilabel_probe(BiLSTMClassifier(50, 4, embed_dim=8, hidden_size=8), ids,
                             targets)


def test_multilabel_recipe_probes_then_fine_tunes(tmp_path, compound_corpus):
    """LP-FT for the multi_label task: the recipe accepts it, the probe alone already
    separates the tiny corpus's intents better than the prior start, and fine-tuning from
    it learns them."""
    recipe = IntentRecipe.from_dict({
        "architecture": {"type": "transformer", "tokenizer": "wordpiece", "vocab_size": 120,
                         "max_length": 24, "d_model": 32, "num_layers": 1, "num_heads": 4,
                         "d_ff": 64, "dropout": 0.0, "attention_dropout": 0.0},
        "train": {"epochs": 10, "batch_size": 8, "lr": 3e-3, "patience": None,
                  "progress": False},
        "levers": {"linear_probe": True, "probe_c": 10.0},
        "task": {"type": "multi_label"}})
    assert recipe.linear_probe
    default = {"architecture": {"type": "pretrained", "name": "/x"},
               "task": {"type": "multi_label"}}
    assert IntentRecipe.from_dict(default).linear_probe  # a pretrained encoder's default
    assert not IntentRecipe.from_dict({"task": {"type": "multi_label"}}).linear_probe
    trained = train_intent_classifier(compound_corpus, compound_corpus, recipe,
                                      out_dir=tmp_path / "m")
    info = trained.classifier.info["linear_probe"]
    assert info["iterations"] > 0 and info["train_accuracy"] > 0.2
    assert info["tagger"] is None or info["tagger"]["train_accuracy"] > 0.5
    assert trained.classifier.info["recipe"]["levers"]["linear_probe"] is True
    assert trained.valid_metrics["micro_f1"] > 0.95


def _tagged_rows(n=60, seed=0):
    """Token ids with BIO tags: a token below 60 is B-x, the token after it I-x, the rest
    O; the first and last (special) tokens are not scored."""
    ids, _ = _multilabel_rows(n, seed)
    tags = []
    for row in ids:
        t = [-100] + [0] * (len(row) - 2) + [-100]
        for k in range(1, len(row) - 1):
            if row[k] < 60:
                t[k] = 1
                if k + 1 < len(row) - 1:
                    t[k + 1] = 2
        tags.append(t)
    return ids, tags


def test_tag_probe_tagger_is_the_multinomial_regression():
    """Before fine-tuning, the tagger's logits on the scored tokens' states are scikit-learn's
    multinomial decision function (up to a constant per token, which softmax ignores), and
    the whole model in eval mode answers with them."""
    model = _joint()
    ids, tags = _tagged_rows()
    result = fit_tag_probe(model, ids, tags, c=10.0)
    x, y = token_features(model, ids, tags)
    assert len(y) == sum(t != -100 for row in tags for t in row)
    ref = LogisticRegression(C=10.0, max_iter=1000).fit(x.numpy(), y.numpy())
    logits = model.tagger(x.float()).detach().double().numpy()
    want = ref.decision_function(x.numpy())
    np.testing.assert_allclose(logits - logits.mean(1, keepdims=True),
                               want - want.mean(1, keepdims=True), atol=1e-3)
    assert result.train_accuracy == pytest.approx(ref.score(x.numpy(), y.numpy()), abs=1e-3)
    out = model.eval()(torch.tensor([ids[0]]))["tag_logits"][0].detach().double().numpy()
    scored = [k for k, t in enumerate(tags[0]) if t != -100]
    first = model.tagger(token_features(model, ids[:1], tags[:1])[0].float()).detach()
    np.testing.assert_allclose(out[scored], first.double().numpy(), atol=1e-4)


def test_tag_probe_keeps_the_tags_it_is_told_to_keep():
    """keep=[0, 1] (O and B-x, a parent's trained rows): they stay bit for bit; the I-x row
    is the regression fitted against them; no scored token: nothing to fit."""
    model = _joint()
    ids, tags = _tagged_rows()
    before_w = model.tagger.weight.detach().clone()
    before_b = model.tagger.bias.detach().clone()
    result = fit_tag_probe(model, ids, tags, c=10.0, keep=[0, 1])
    assert torch.equal(model.tagger.weight.detach()[:2], before_w[:2])
    assert torch.equal(model.tagger.bias.detach()[:2], before_b[:2])
    x, y = token_features(model, ids, tags)
    w, b, _, _ = fit_logistic_regression(x, y, 3, c=10.0, fixed=(
        [0, 1], before_w[:2].double(), before_b[:2].double()))
    torch.testing.assert_close(model.tagger.weight.detach()[2].double(), w[2],
                               atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(model.tagger.bias.detach()[2].double(), b[2],
                               atol=1e-6, rtol=1e-5)
    logits = x @ w.T + b
    assert result.train_accuracy == pytest.approx(float((logits.argmax(1) == y).double()
                                                        .mean()))
    none = [[-100] * len(row) for row in tags]
    assert fit_tag_probe(model, ids, none, keep=[0, 1]) is None


def test_tag_probe_keeps_absent_tags_unlikely_and_skips_one_tag():
    model = _joint()
    ids, tags = _tagged_rows()
    no_inside = [[0 if t == 2 else t for t in row] for row in tags]  # I-x never seen
    fit_tag_probe(model, ids, no_inside, c=10.0)
    assert not model.tagger.weight[2].any()
    x, _ = token_features(model, ids, no_inside)
    probs = torch.softmax(model.tagger(x.float()).detach(), -1)
    assert float(probs[:, 2].max()) < 1e-6
    before = model.tagger.weight.detach().clone()
    only_o = [[-100 if t == -100 else 0 for t in row] for row in tags]
    assert fit_tag_probe(model, ids, only_o) is None
    assert torch.equal(model.tagger.weight, before)
    with pytest.raises(ValueError, match="tag ids"):
        fit_tag_probe(model, ids, [[5 if t == 1 else t for t in row] for row in tags])
    with pytest.raises(ValueError, match="one tag"):
        fit_tag_probe(model, ids, [row[:-1] for row in tags])
