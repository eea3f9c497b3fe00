"""Head roles from statistics and bad-case heads, on hand-made numbers."""

from __future__ import annotations

import numpy as np

from headwise.inspect.badcases import bad_cases
from headwise.inspect.roles import RoleThresholds, head_roles, heads_with_role


def _grid(value, special=None):
    g = [[value, value]]
    if special:
        g[0][special[0]] = special[1]
    return g


def _stats():
    cat = {"mass": _grid(0.1, (1, 0.5)), "share": _grid(0.1), "lift": _grid(1.0, (1, 5.0)),
           "top_share": _grid(0.1, (1, 0.8)), "top_lift": _grid(1.0)}
    words = {"rows": _grid(10), "prev": _grid(0.1, (0, 0.7)), "next": _grid(0.1),
             "entropy_norm": _grid(0.5), "categories": {"negation": cat}}
    raw = {"special": _grid(0.1), "categories": {"negation": cat}}
    return {"views": {"words": words, "raw": raw}}


def test_roles_come_with_their_numbers():
    roles = head_roles(_stats())
    assert [r["role"] for r in roles[0][0]] == ["previous"]
    assert "70%" in roles[0][0][0]["evidence"]
    neg = roles[0][1][0]
    assert neg["role"] == "negation" and neg["lift"] == 5.0 and "lift 5.00" in neg["evidence"]
    assert heads_with_role(roles, "negation") == [(0, 1)]
    strict = head_roles(_stats(), RoleThresholds(lift=6.0, positional=0.8))
    assert strict[0][0] == [] and strict[0][1] == []


def test_bad_cases_name_the_head_that_differs():
    rng = np.random.default_rng(0)
    feats = rng.normal(0.3, 0.01, size=(6, 2, 2, 3))
    feats[5, 1, 1, 2] = 0.9  # the misclassified example's outlier head
    gold = np.array([0, 0, 0, 1, 1, 0])
    pred = np.array([0, 0, 0, 1, 1, 1])
    out = bad_cases(feats, ["mass:negation", "rollout:negation"], gold, pred,
                    texts=list("abcdef"), labels=["x", "y"])
    assert out["misclassified"] == 1
    case = out["cases"][0]
    assert (case["index"], case["gold"], case["predicted"], case["references"]) == (5, "x", "y", 3)
    top = case["heads"][0]
    assert (top["layer"], top["head"], top["feature"]) == (1, 2, "rollout:negation")
    assert abs(top["reference"] - feats[:3, 1, 1, 2].mean()) < 1e-12
    assert out["heads"][0]["layer"] == 1 and out["heads"][0]["head"] == 2
