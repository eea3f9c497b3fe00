"""The whole head analysis of a classifier over a dataset, as one JSON-serialisable dict.

:func:`inspect_classifier` runs the model once over the data with attention capture,
aggregates the statistics in Python (nothing per example is kept but a few numbers per
head), then measures head importance, pruning, faithfulness, roles and bad cases (the
listed ones with their token attribution), whether the negation heads agree with the
attribution on negated texts, and finally captures the few examples the report shows
(their word-level attention, quantised to bytes). :mod:`headwise.inspect.report` writes the
result as HTML, PNG and JSON.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from headwise.inspect.attribution import case_views, role_agreement
from headwise.inspect.badcases import bad_cases
from headwise.inspect.categories import CategoryLexicon, categories_from_spans, default_lexicon
from headwise.inspect.faithfulness import faithfulness
from headwise.inspect.forward import attention_layers, iter_attention, label_ids, pooling_of
from headwise.inspect.importance import ablation, gradient_importance, pruning_curve
from headwise.inspect.roles import RoleThresholds, head_roles, heads_with_role
from headwise.inspect.rollout import attention_rollout, head_rollout
from headwise.inspect.stats import HeadStatistics
from headwise.inspect.words import Segmented, segment, to_units
from headwise.intent.classifier import IntentClassifier

#: (start, end, category) character spans of one text
SpanList = Sequence[tuple[int, int, str]]


@dataclass(frozen=True)
class InspectOptions:
    """What :func:`inspect_classifier` measures, and how much of it.

    Attributes:
        batch_size: texts per forward pass.
        max_examples: analyse a seeded sample of at most this many texts (None: all).
        show_examples: examples whose attention the report embeds.
        view_units: the report's heat maps show at most this many units per example.
        embed_bytes: the most bytes of embedded weights (fewer units per example when
            the model has many heads: 12 x 12 heads x 12 examples get 48 units).
        importance_examples: examples for the gate-gradient importance.
        ablation_examples: examples scored per single-head ablation and pruning step.
        ablation: measure single-head ablation.
        pruning: measure the pruning curves.
        pruning_step: share of the heads removed per pruning step.
        random_repeats: random pruning orders averaged.
        faithfulness_examples: examples scored by leave-one-out (one pass per word).
        attribution_cases: bad cases given the attribution view (integrated gradients).
        agreement_examples: texts with a negation word on which the negation heads are
            compared with the attribution (:func:`~headwise.inspect.attribution.
            role_agreement`).
        seed: seed of every sample.
        thresholds: the head-role rules.
    """

    batch_size: int = 32
    max_examples: int | None = None
    show_examples: int = 12
    view_units: int = 64
    embed_bytes: int = 4_000_000
    importance_examples: int = 500
    ablation_examples: int = 2000
    ablation: bool = True
    pruning: bool = True
    pruning_step: float = 0.1
    random_repeats: int = 3
    faithfulness_examples: int = 100
    attribution_cases: int = 20
    agreement_examples: int = 50
    seed: int = 0
    thresholds: RoleThresholds = field(default_factory=RoleThresholds)


def _sample(n: int, k: int | None, rng: np.random.Generator) -> np.ndarray:
    return np.arange(n) if k is None or k >= n else np.sort(rng.choice(n, k, replace=False))


def inspect_classifier(clf: IntentClassifier, texts: Sequence[str],
                       labels: Sequence[str | None] | None = None, *,
                       spans: Sequence[SpanList] | None = None,
                       span_categories: Sequence[str] = ("negation", "number", "domain"),
                       lexicon: CategoryLexicon | None = None,
                       options: InspectOptions | None = None,
                       echo: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Analyse a Transformer classifier's heads on a dataset.

    Args:
        clf: the classifier (a Transformer; the BiLSTM has no heads).
        texts: the dataset's texts.
        labels: gold intents (None: no accuracy, importance, pruning or bad cases).
        spans: gold category spans per text (the demo corpus's); they replace the lexicon.
        span_categories: the categories of ``spans``, in report order.
        lexicon: category lexicons (default: Chinese or English by the texts' script).
        options: sizes and switches (default :class:`InspectOptions`).
        echo: progress lines go here (e.g. ``print``).

    Returns:
        The analysis (see :mod:`headwise.inspect.report` for how it is shown): ``model``,
        ``data``, ``accuracy``, ``categories``, ``stats``, ``rollout``, ``importance``,
        ``ablation``, ``pruning``, ``roles``, ``faithfulness``, ``bad_cases`` (the first
        ``attribution_cases`` with their ``attribution`` view), ``negation_agreement``
        (whether the negation heads attend to what the attribution finds deciding on
        texts with a negation word; None without a negation category), ``examples``.

    Raises:
        ValueError: no texts, mismatched lengths, or a model without attention heads.
    """
    o = options or InspectOptions()
    say = echo or (lambda _msg: None)
    texts = list(texts)
    if not texts:
        raise ValueError("no texts to inspect")
    for name, seq in (("labels", labels), ("spans", spans)):
        if seq is not None and len(seq) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(seq)} {name}")
    layers = attention_layers(clf.model)
    pooling = pooling_of(clf.model)
    rng = np.random.default_rng(o.seed)
    keep = _sample(len(texts), o.max_examples, rng)
    texts = [texts[i] for i in keep]
    labels = None if labels is None else [labels[i] for i in keep]
    spans = None if spans is None else [spans[i] for i in keep]
    gold = label_ids(clf, labels) if labels is not None else np.full(len(texts), -1)
    if spans is not None:
        names, source = list(span_categories), "spans"
    else:
        lexicon = lexicon or default_lexicon(texts)
        names, source = lexicon.names, "lexicon"
    say(f"inspecting {len(texts)} texts: {len(layers)} layers x {layers[0].num_heads} heads, "
        f"categories {', '.join(names)} (from {source})")
    segs = [segment(clf.tokenizer, t, clf.max_length) for t in texts]
    cats = [categories_from_spans(spans[i], names, s.spans, s.special) if spans is not None
            else lexicon.mark(s.text, s.spans, s.special) for i, s in enumerate(segs)]

    shape = (len(layers), layers[0].num_heads)
    stats = HeadStatistics(*shape, names)
    c = len(names)
    features = np.zeros((len(texts), 2 * c + 1, *shape), dtype=np.float32)
    roll_sums = {"special": 0.0, "mass": np.zeros(c), "share": np.zeros(c), "n": 0}
    predicted = np.zeros(len(texts), dtype=np.int64)
    for batch in iter_attention(clf, texts, batch_size=o.batch_size):
        predicted[batch.indices] = batch.logits.argmax(1)
        for row, i in enumerate(batch.indices):
            seg, n = segs[i], segs[i].num_tokens
            att = np.stack([w[row, :, :n, :n].double().numpy() for w in batch.weights])
            per = stats.add(to_units(att, seg), seg.special, cats[i])
            hr = np.add.reduceat(head_rollout(att, pooling), seg.starts, axis=-1)  # L,H,U
            features[i, :c] = per["mass"]
            features[i, c:2 * c] = np.einsum("lhu,cu->clh", hr, cats[i].astype(np.float64))
            features[i, 2 * c] = per["special"]
            roll = np.add.reduceat(attention_rollout(att, pooling), seg.starts)
            roll_sums["special"] += roll[seg.special].sum()
            roll_sums["mass"] += cats[i].astype(np.float64) @ roll
            roll_sums["share"] += cats[i].sum(1) / len(seg.units)
            roll_sums["n"] += 1
    feature_names = [f"mass:{n}" for n in names] + [f"rollout:{n}" for n in names] + \
        ["mass:special"]
    result: dict[str, Any] = {
        "format": "headwise-inspect", "version": 1,
        "model": {"type": type(clf.model).__name__, "layers": shape[0], "heads": shape[1],
                  "pooling": pooling, "intents": len(clf.labels), "max_length": clf.max_length},
        "data": {"examples": len(texts), "labelled": int((gold >= 0).sum()),
                 "mean_units": float(np.mean([len(s.units) for s in segs])),
                 "max_tokens": int(max(s.num_tokens for s in segs))},
        "categories": names, "category_source": source,
        "lexicon": lexicon.to_dict() if source == "lexicon" else None,
        "stats": stats.result(),
        "rollout": _rollout_summary(roll_sums, names),
    }
    known = np.flatnonzero(gold >= 0)
    result["accuracy"] = float((predicted[known] == gold[known]).mean()) if len(known) else None
    result["importance"] = result["ablation"] = result["pruning"] = None
    if len(known):
        imp = _sample(len(known), o.importance_examples, rng)
        say(f"head importance (gate gradients) on {len(imp)} examples")
        imp_texts, imp_gold = [texts[i] for i in known[imp]], gold[known[imp]]
        result["importance"] = {"gradient": gradient_importance(clf, imp_texts, imp_gold)
                                .tolist(), "examples": int(len(imp)), "normalised": "layer L2"}
        ev = known[_sample(len(known), o.ablation_examples, rng)]
        ev_texts, ev_gold = [texts[i] for i in ev], gold[ev]
        if o.ablation:
            say(f"single-head ablation on {len(ev)} examples")
            result["ablation"] = {**ablation(clf, ev_texts, ev_gold, batch_size=64),
                                  "examples": int(len(ev))}
        if o.pruning:
            say("pruning curves (importance-guided and random)")
            result["pruning"] = {**pruning_curve(
                clf, ev_texts, ev_gold, importance_texts=imp_texts, importance_gold=imp_gold,
                step=o.pruning_step, random_repeats=o.random_repeats, seed=o.seed),
                "examples": int(len(ev))}
    result["roles"] = head_roles(result["stats"], o.thresholds)
    result["thresholds"] = o.thresholds.to_dict()
    faith = _sample(len(texts), o.faithfulness_examples, rng)
    say(f"faithfulness (leave-one-out) on {len(faith)} examples")
    result["faithfulness"] = faithfulness(clf, [segs[i] for i in faith])
    for row in result["faithfulness"]["per_example"]:
        row["index"] = int(faith[row["index"]])
    result["bad_cases"] = bad_cases(features, feature_names, gold, predicted, texts=texts,
                                    labels=clf.labels)
    cases = result["bad_cases"]["cases"][:o.attribution_cases]
    say(f"attribution (integrated gradients) of {len(cases)} bad cases")
    for case, view in zip(cases, case_views(clf, [segs[c["index"]] for c in cases]),
                          strict=True):
        case["attribution"] = view
    result["negation_agreement"] = None
    if "negation" in names:
        k = names.index("negation")
        negated = np.array([i for i in range(len(texts)) if cats[i][k].any()], dtype=np.int64)
        pick = negated[_sample(len(negated), o.agreement_examples,
                               np.random.default_rng(o.seed + 1))]
        say(f"negation heads against the attribution on {len(pick)} negated texts")
        result["negation_agreement"] = role_agreement(
            clf, [segs[i] for i in pick], [cats[i][k] for i in pick],
            heads_with_role(result["roles"], "negation"))
    shown = _pick_examples(result["bad_cases"], gold, predicted, o.show_examples)
    per_unit2 = max(len(shown), 1) * shape[0] * shape[1]
    units = max(8, min(o.view_units, int((o.embed_bytes / per_unit2) ** 0.5)))
    result["examples"] = example_views(clf, [segs[i] for i in shown], [cats[i] for i in shown],
                                       names, view_units=units, pooling=pooling)
    for ex, i in zip(result["examples"], shown, strict=True):
        ex.update(index=int(i), gold=clf.labels[gold[i]] if gold[i] >= 0 else
                  (labels[i] if labels is not None else None),
                  predicted=clf.labels[predicted[i]], correct=bool(gold[i] == predicted[i]))
    return result


def _rollout_summary(sums: dict[str, Any], names: list[str]) -> dict[str, Any]:
    n = max(sums["n"], 1)
    cats = {}
    for k, name in enumerate(names):
        mass, share = sums["mass"][k] / n, sums["share"][k] / n
        cats[name] = {"mass": float(mass), "share": float(share),
                      "lift": float(mass / share) if share > 0 else None}
    return {"special": float(sums["special"] / n), "categories": cats}


def _pick_examples(bad: dict[str, Any], gold: np.ndarray, predicted: np.ndarray,
                   k: int) -> list[int]:
    """Misclassified examples (up to half), then correct ones of different intents."""
    picked = [c["index"] for c in bad["cases"][: k // 2]]
    seen: set[int] = set()
    for i in range(len(gold)):
        if len(picked) >= k:
            break
        if i not in picked and (gold[i] < 0 or gold[i] == predicted[i]) \
                and int(gold[i]) not in seen:
            seen.add(int(gold[i]))
            picked.append(i)
    for i in range(len(gold)):  # fill up when there are few intents
        if len(picked) >= k:
            break
        if i not in picked:
            picked.append(i)
    return picked


def example_views(clf: IntentClassifier, segs: Sequence[Segmented], cats: Sequence[np.ndarray],
                  names: Sequence[str], *, view_units: int = 64,
                  pooling: str = "cls") -> list[dict[str, Any]]:
    """Word-level attention of a few examples, for the report's heat maps.

    Returns:
        One dict per example: ``text``, ``units`` (shown units' text), ``special``,
        ``categories`` (name -> unit indices), ``rollout`` (per shown unit),
        ``confidence``, ``truncated`` (units beyond ``view_units`` left out) and
        ``weights``: base64 of uint8 ``round(255 * w)`` in (layers, heads, units, units)
        order.
    """
    if not segs:
        return []
    out: list[dict[str, Any]] = [{} for _ in segs]
    for batch in iter_attention(clf, [s.text for s in segs], batch_size=8):
        probs = np.exp(batch.logits - batch.logits.max(1, keepdims=True))
        probs /= probs.sum(1, keepdims=True)
        for row, i in enumerate(batch.indices):
            seg, n = segs[i], segs[i].num_tokens
            att = np.stack([w[row, :, :n, :n].double().numpy() for w in batch.weights])
            units = to_units(att, seg)
            u = min(len(seg.units), view_units)
            roll = np.add.reduceat(attention_rollout(att, pooling), seg.starts)
            q = np.clip(np.rint(units[:, :, :u, :u] * 255), 0, 255).astype(np.uint8)
            out[i] = {"text": seg.text, "units": list(seg.units[:u]),
                      "special": seg.special[:u].tolist(),
                      "categories": {name: np.flatnonzero(cats[i][k][:u]).tolist()
                                     for k, name in enumerate(names)},
                      "rollout": [round(float(x), 4) for x in roll[:u]],
                      "confidence": float(probs[row].max()),
                      "truncated": int(len(seg.units) - u),
                      "weights": base64.b64encode(q.tobytes()).decode("ascii")}
    return out
