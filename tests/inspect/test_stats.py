"""The head statistics against a straightforward float64 recomputation, row by row."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from headwise.attention import capture_attention
from headwise.inspect import InspectOptions, deletion_curves, inspect_classifier, rank_methods
from headwise.inspect.forward import attention_layers
from headwise.inspect.stats import HeadStatistics

CATS = ("negation", "number", "domain")


def _reference(clf, examples):
    """Pooled means over query words, computed one row at a time with plain Python."""
    layers = attention_layers(clf.model)
    acc: dict = {}

    def add(key, value):
        s, n = acc.get(key, (0.0, 0))
        acc[key] = (s + value, n + 1)

    for ex in examples:
        batch = clf.tokenizer([ex.text], max_length=clf.max_length)
        with torch.no_grad(), capture_attention(layers) as cap:
            clf.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        offsets = clf.tokenizer.offsets(ex.text)
        n = batch["input_ids"].shape[1]
        spans = [(0, 0)] + [tuple(o) for o in offsets[:n - 2]] + [(0, 0)]
        cat = {c: [k not in (0, n - 1) and any(s < e2 and s2 < e and c2 == c
                                                for s2, e2, c2 in
                                                [(x.start, x.end, x.category) for x in ex.spans])
                   for k, (s, e) in enumerate(spans)] for c in CATS}
        for li, m in enumerate(layers):
            w = cap[m][0][0].double().tolist()
            for h in range(len(w)):
                for q in range(1, n - 1):
                    raw = w[h][q]
                    words = raw[1:n - 1]
                    total = sum(words)
                    words = [x / total for x in words]
                    for view, row, offset in (("raw", raw, 0), ("words", words, 1)):
                        i = q - offset
                        k = len(row)
                        ent = -sum(x * math.log(x) for x in row if x > 0)
                        add((view, "entropy", li, h), ent)
                        add((view, "entropy_norm", li, h), ent / math.log(k))
                        add((view, "confidence", li, h), max(row))
                        add((view, "distance", li, h), sum(x * abs(i - j)
                                                           for j, x in enumerate(row)))
                        add((view, "prev", li, h), row[i - 1] if i >= 1 else 0.0)
                        add((view, "same", li, h), row[i])
                        add((view, "next", li, h), row[i + 1] if i + 1 < k else 0.0)
                        if view == "raw":
                            add((view, "special", li, h), row[0] + row[n - 1])
                        for c in CATS:
                            flags = cat[c] if view == "raw" else cat[c][1:n - 1]
                            mass = sum(x for x, f in zip(row, flags, strict=True) if f)
                            share = sum(flags) / k
                            top = flags[max(range(k), key=lambda j: row[j])]
                            add((view, f"mass:{c}", li, h), mass)
                            add((view, f"share:{c}", li, h), share)
                            add((view, f"top:{c}", li, h), float(top))
    return {k: s / n for k, (s, n) in acc.items()}


def test_statistics_match_a_float64_recomputation(tiny_clf64, demo_examples):
    examples = [e for e in demo_examples if e.spans][:5]
    result = inspect_classifier(
        tiny_clf64, [e.text for e in examples],
        spans=[[(s.start, s.end, s.category) for s in e.spans] for e in examples],
        options=InspectOptions(faithfulness_examples=0, show_examples=2, deletion_examples=5))
    # the methods' ranking is rank_methods of the deletion curves of the five texts
    curves = deletion_curves(tiny_clf64, [e.text for e in examples])
    again = rank_methods({m: [a] for m, a in curves["area"].items()})
    assert result["methods"] == {**again, "fractions": curves["fractions"]}
    ref = _reference(tiny_clf64, examples)
    stats = result["stats"]
    assert stats["examples"] == 5 and result["importance"] is None
    checked = 0
    for (view, key, layer, head), want in ref.items():
        v = stats["views"][view]
        if ":" in key:
            kind, cat = key.split(":")
            got = v["categories"][cat]["top_share" if kind == "top" else kind][layer][head]
        else:
            got = v[key][layer][head]
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), (view, key, layer, head)
        checked += 1
    assert checked > 100
    for view in ("raw", "words"):
        for cat in CATS:
            c = stats["views"][view]["categories"][cat]
            for layer in range(2):
                for head in range(4):
                    mass_ref = ref[(view, f"mass:{cat}", layer, head)]
                    share_ref = ref[(view, f"share:{cat}", layer, head)]
                    if share_ref > 0:
                        assert c["lift"][layer][head] == pytest.approx(mass_ref / share_ref)


def test_hand_computed_positional_example():
    # units [CLS] a b [SEP]; every word puts 0.8 on the unit before it
    w = np.array([[0.25, 0.25, 0.25, 0.25],
                  [0.8, 0.1, 0.1, 0.0],
                  [0.1, 0.8, 0.1, 0.0],
                  [0.25, 0.25, 0.25, 0.25]])[None, None]
    stats = HeadStatistics(1, 1, ["negation"])
    per = stats.add(w, np.array([True, False, False, True]),
                    np.array([[False, True, False, False]]))
    out = stats.result()
    raw, words = out["views"]["raw"], out["views"]["words"]
    assert raw["prev"][0][0] == pytest.approx(0.8)
    assert raw["special"][0][0] == pytest.approx((0.8 + 0.1) / 2)
    # words view: a -> (0.5, 0.5); b -> (8/9, 1/9); a has no previous word
    assert words["prev"][0][0] == pytest.approx((0 + 8 / 9) / 2)
    assert words["same"][0][0] == pytest.approx((0.5 + 1 / 9) / 2)
    assert words["entropy_norm"][0][0] == pytest.approx(
        (1.0 + (-(8 / 9) * math.log(8 / 9) - (1 / 9) * math.log(1 / 9)) / math.log(2)) / 2)
    neg = words["categories"]["negation"]
    assert neg["mass"][0][0] == pytest.approx((0.5 + 8 / 9) / 2)
    assert neg["share"][0][0] == pytest.approx(0.5)
    assert neg["lift"][0][0] == pytest.approx((0.5 + 8 / 9) / 2 / 0.5)
    assert neg["top_share"][0][0] == pytest.approx(1.0)  # both rows: strongest key is a
    assert per["mass"][0, 0, 0] == pytest.approx((0.5 + 8 / 9) / 2)
    assert neg["mass_present"][0][0] == pytest.approx((0.5 + 8 / 9) / 2)
    # a second text without the category: mass halves, mass where present does not
    stats.add(w, np.array([True, False, False, True]), np.array([[False, False, False, False]]))
    neg = stats.result()["views"]["words"]["categories"]["negation"]
    assert neg["mass"][0][0] == pytest.approx((0.5 + 8 / 9) / 4)
    assert neg["mass_present"][0][0] == pytest.approx((0.5 + 8 / 9) / 2)
    assert neg["rows_present"][0][0] == 2
    assert neg["lift"][0][0] == pytest.approx((0.5 + 8 / 9) / 2 / 0.5)  # unchanged
