"""Leave-one-out importance against masking each word by hand; tau from scipy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import kendalltau

from headwise.inspect.faithfulness import faithfulness, word_scores
from headwise.inspect.words import segment


def test_leave_one_out_masks_each_word(tiny_clf64, demo_examples):
    clf = tiny_clf64
    seg = segment(clf.tokenizer, demo_examples[0].text, clf.max_length)
    s = word_scores(clf, seg, chunk=3)
    batch = clf.tokenizer([seg.text], max_length=clf.max_length)
    ids, mask = batch["input_ids"], batch["attention_mask"].bool()

    def prob(m):
        with torch.no_grad():
            logits = clf.model(input_ids=ids, attention_mask=m)["logits"][0]
        return torch.softmax(logits / clf.temperature, -1)

    full = prob(mask)
    pred = int(full.argmax())
    assert s["predicted"] == pred
    want = []
    for unit in seg.words:
        m = mask.clone()
        m[0, seg.starts[unit]:seg.starts[unit] + seg.sizes[unit]] = False
        want.append(float(full[pred] - prob(m)[pred]))
    np.testing.assert_allclose(s["loo"], want, rtol=1e-9, atol=1e-12)
    assert len(s["attention"]) == len(s["rollout"]) == len(seg.words)
    assert (s["rollout"] > 0).all() and s["rollout"].sum() < 1.0  # specials hold the rest


def test_faithfulness_reports_scipy_tau(tiny_clf, demo_examples):
    clf = tiny_clf
    segs = [segment(clf.tokenizer, e.text, clf.max_length) for e in demo_examples[:3]]
    out = faithfulness(clf, segs)
    assert out["examples"] == 3
    first = word_scores(clf, segs[0])
    tau = kendalltau(first["loo"], first["rollout"]).statistic
    assert out["per_example"][0]["rollout"] == pytest.approx(tau)
    assert -1 <= out["attention"]["mean_tau"] <= 1
