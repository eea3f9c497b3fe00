"""The whole head analysis of a classifier over a dataset, as one JSON-serialisable dict.

:func:`inspect_classifier` reads a single-label Transformer classifier or a compound
(multi-label) one, a joint Transformer or pretrained joint model: the two differ only in how
an answer is scored and what the gold is (:mod:`headwise.inspect.forward`: one intent, or
the set of a text's intents, right when it is the gold set). A compound model's analysis
adds two token categories, the words that join its requests and the numbers of its second
request (:mod:`headwise.inspect.categories`), and names the heads that attend to them.

It runs the model once over the data with attention capture,
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
import torch

from headwise.inspect.badcases import bad_cases, link_slices
from headwise.inspect.categories import (
    JOIN,
    NUMBER_IN_SECOND,
    CategoryLexicon,
    categories_from_spans,
    default_lexicon,
    join_lexicon,
    numbers_after_join,
)
from headwise.inspect.faithfulness import deletion_curves, faithfulness, rank_methods
from headwise.inspect.forward import (
    answer_names,
    answer_probability,
    attention_layers,
    decide,
    intent_names,
    is_correct,
    is_multi_label,
    iter_attention,
    known_rows,
    label_ids,
    pooling_of,
    scored_answer,
)
from headwise.inspect.head_attribution import case_views, role_agreement
from headwise.inspect.importance import ablation, gradient_importance, pruning_curve
from headwise.inspect.roles import RoleThresholds, head_roles, heads_with_role
from headwise.inspect.rollout import attention_rollout, head_rollout
from headwise.inspect.stats import HeadStatistics
from headwise.inspect.words import Segmented, segment, to_units

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
        deletion_examples: examples on which the explanation methods (integrated
            gradients, attention rollout, last-layer attention, random) are ranked by
            their deletion curves (:func:`~headwise.inspect.faithfulness.rank_methods`);
            0 skips it. Single-label classifiers only.
        attribution_cases: bad cases given the attribution view (integrated gradients).
        agreement_examples: texts with a negation word on which the negation heads are
            compared with the attribution (:func:`~headwise.inspect.head_attribution.
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
    deletion_examples: int = 50
    attribution_cases: int = 20
    agreement_examples: int = 50
    seed: int = 0
    thresholds: RoleThresholds = field(default_factory=RoleThresholds)


def _sample(n: int, k: int | None, rng: np.random.Generator) -> np.ndarray:
    return np.arange(n) if k is None or k >= n else np.sort(rng.choice(n, k, replace=False))


def inspect_classifier(clf: Any, texts: Sequence[str],
                       labels: Sequence[Any] | None = None, *,
                       spans: Sequence[SpanList] | None = None,
                       span_categories: Sequence[str] = ("negation", "number", "domain"),
                       lexicon: CategoryLexicon | None = None,
                       joins: CategoryLexicon | None = None,
                       slices: Sequence[Sequence[str] | None] | None = None,
                       options: InspectOptions | None = None,
                       echo: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Analyse a Transformer classifier's heads on a dataset.

    Args:
        clf: the classifier: a single-label ``IntentClassifier`` or a compound
            ``CompoundClassifier`` (a Transformer or pretrained encoder; the BiLSTM has no
            heads).
        texts: the dataset's texts.
        labels: the gold (None: no accuracy, importance, pruning or bad cases): one
            intent per text (single-label), or the intents of each text (compound; an
            empty one is out of scope). A compound model's accuracy is the exact match of
            the intent sets, and a bad case is a text whose answered set is not its gold
            set.
        spans: gold category spans per text (the demo corpus's); they replace the lexicon.
        span_categories: the categories of ``spans``, in report order.
        lexicon: category lexicons (default: Chinese or English by the texts' script).
        joins: a compound model's join words: a lexicon whose first category holds them
            (default: the lexicon's :data:`~headwise.inspect.categories.JOIN` category when
            it has one, else :func:`~headwise.inspect.categories.join_lexicon`). Ignored for
            a single-label model.
        slices: the slice names (phenomena) of each text, or None: each bad case lists
            its text's, and the bad cases are counted per slice
            (:func:`~headwise.inspect.badcases.link_slices`).
        options: sizes and switches (default :class:`InspectOptions`).
        echo: progress lines go here (e.g. ``print``).

    Returns:
        The analysis (see :mod:`headwise.inspect.report` for how it is shown): ``model``
        (``task``: ``"single_label"`` or ``"multi_label"``), ``data``, ``score`` (what
        ``accuracy`` measures: ``"accuracy"`` or ``"exact match"``), ``accuracy``,
        ``categories``, ``stats``, ``rollout``, ``importance``, ``ablation``,
        ``pruning``, ``roles``, ``faithfulness``, ``methods`` (the explanation methods
        ranked by their deletion curves on ``deletion_examples`` texts,
        :func:`~headwise.inspect.faithfulness.rank_methods`, with the ``fractions``
        removed; None for a compound model or when skipped), ``bad_cases`` (the first
        ``attribution_cases`` with their ``attribution`` view; with ``slices``, each case's
        slices and ``by_slice``), ``negation_agreement`` (whether the negation heads attend
        to what the attribution finds deciding on texts with a negation word; None
        without a negation category), ``compound`` (a compound model's join and
        number-in-second heads and how many texts have such words; None for a
        single-label model), ``examples``.

    Raises:
        ValueError: no texts, mismatched lengths, or a model without attention heads.
    """
    o = options or InspectOptions()
    say = echo or (lambda _msg: None)
    texts = list(texts)
    if not texts:
        raise ValueError("no texts to inspect")
    for name, seq in (("labels", labels), ("spans", spans), ("slices", slices)):
        if seq is not None and len(seq) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(seq)} {name}")
    layers = attention_layers(clf.model)
    pooling = pooling_of(clf.model)
    multi = is_multi_label(clf)
    intents = intent_names(clf)
    rng = np.random.default_rng(o.seed)
    keep = _sample(len(texts), o.max_examples, rng)
    texts = [texts[i] for i in keep]
    labels = None if labels is None else [labels[i] for i in keep]
    spans = None if spans is None else [spans[i] for i in keep]
    slices = None if slices is None else [slices[i] for i in keep]
    gold = label_ids(clf, labels) if labels is not None else \
        np.full((len(texts), len(intents)) if multi else len(texts), -1)
    if spans is not None:
        names, source = list(span_categories), "spans"
    else:
        lexicon = lexicon or default_lexicon(texts)
        names, source = lexicon.names, "lexicon"
    segs = [segment(clf.tokenizer, t, clf.max_length) for t in texts]
    cats = [categories_from_spans(spans[i], names, s.spans, s.special) if spans is not None
            else lexicon.mark(s.text, s.spans, s.special) for i, s in enumerate(segs)]
    join_words = None
    if multi:
        names, cats, join_words = _compound_categories(names, cats, segs, lexicon
                                                       if source == "lexicon" else None, joins)
    say(f"inspecting {len(texts)} texts: {len(layers)} layers x {layers[0].num_heads} heads, "
        f"categories {', '.join(names)} (from {source}"
        f"{'; join words from a lexicon' if multi else ''})")

    shape = (len(layers), layers[0].num_heads)
    stats = HeadStatistics(*shape, names)
    c = len(names)
    features = np.zeros((len(texts), 2 * c + 1, *shape), dtype=np.float32)
    roll_sums = {"special": 0.0, "mass": np.zeros(c), "share": np.zeros(c), "n": 0}
    predicted = np.zeros(gold.shape, dtype=np.int64)
    for batch in iter_attention(clf, texts, batch_size=o.batch_size):
        predicted[batch.indices] = decide(clf, batch.logits)
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
                  "pooling": pooling, "intents": len(intents), "max_length": clf.max_length,
                  "task": "multi_label" if multi else "single_label"},
        "data": {"examples": len(texts), "labelled": int(known_rows(gold).sum()),
                 "mean_units": float(np.mean([len(s.units) for s in segs])),
                 "max_tokens": int(max(s.num_tokens for s in segs))},
        "categories": names, "category_source": source,
        "lexicon": lexicon.to_dict() if source == "lexicon" else None,
        "score": "exact match" if multi else "accuracy",
        "stats": stats.result(),
        "rollout": _rollout_summary(roll_sums, names),
    }
    known = np.flatnonzero(known_rows(gold))
    right = is_correct(predicted, gold)
    result["accuracy"] = float(right[known].mean()) if len(known) else None
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
    result["methods"] = None
    if o.deletion_examples and not multi:
        pick = _sample(len(texts), o.deletion_examples, np.random.default_rng(o.seed + 2))
        say(f"explanation methods ranked by deletion curves on {len(pick)} examples")
        curves = deletion_curves(clf, [texts[i] for i in pick], seed=o.seed)
        result["methods"] = {**rank_methods({m: [a] for m, a in curves["area"].items()},
                                            seed=o.seed),
                             "fractions": curves["fractions"]}
    gold_ids, predicted_ids, answers = _as_classes(clf, gold, predicted)
    result["bad_cases"] = bad_cases(features, feature_names, gold_ids, predicted_ids,
                                    texts=texts, labels=answers)
    if slices is not None:
        link_slices(result["bad_cases"], slices, wrong=known_rows(gold) & ~right,
                    known=known_rows(gold))
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
    result["compound"] = None
    if multi:
        result["compound"] = {
            "join_heads": [list(h) for h in heads_with_role(result["roles"], JOIN)],
            "number_in_second_heads": [list(h) for h in heads_with_role(result["roles"],
                                                                        NUMBER_IN_SECOND)],
            "texts_with_join": int(sum(c[names.index(JOIN)].any() for c in cats)),
            "texts_with_number_in_second": int(sum(c[names.index(NUMBER_IN_SECOND)].any()
                                                   for c in cats))
            if NUMBER_IN_SECOND in names else 0,
            "joins": join_words}
    shown = _pick_examples(result["bad_cases"], gold_ids, predicted_ids, o.show_examples)
    per_unit2 = max(len(shown), 1) * shape[0] * shape[1]
    units = max(8, min(o.view_units, int((o.embed_bytes / per_unit2) ** 0.5)))
    result["examples"] = example_views(clf, [segs[i] for i in shown], [cats[i] for i in shown],
                                       names, view_units=units, pooling=pooling)
    for ex, i in zip(result["examples"], shown, strict=True):
        ex.update(index=int(i), gold=answers[gold_ids[i]] if gold_ids[i] >= 0 else
                  (_label_text(labels[i]) if labels is not None else None),
                  predicted=answers[predicted_ids[i]], correct=bool(right[i]))
    return result


def _label_text(label: Any) -> str | None:
    """A gold label as the report shows it (an intent set joined by `` + ``)."""
    if label is None or isinstance(label, str):
        return label
    return " + ".join(label) or "(none)"


def _as_classes(clf: Any, gold: np.ndarray, predicted: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Gold and answers as class ids of one list of names (what :func:`bad_cases` groups
    and compares): the intents of a single-label model; for a compound model each distinct
    intent set, gold or answered, is a class (unknown gold -1)."""
    if gold.ndim == 1:
        return gold, predicted, intent_names(clf)
    gold_names = answer_names(clf, gold)
    answered = answer_names(clf, predicted)
    names = sorted(set(answered) | {g for g in gold_names if g != "?"})
    index = {name: k for k, name in enumerate(names)}
    return (np.array([index.get(g, -1) for g in gold_names], dtype=np.int64),
            np.array([index[a] for a in answered], dtype=np.int64), names)


def _compound_categories(names: list[str], cats: list[np.ndarray], segs: Sequence[Segmented],
                         lexicon: CategoryLexicon | None, joins: CategoryLexicon | None
                         ) -> tuple[list[str], list[np.ndarray], dict[str, Any]]:
    """A compound model's categories: ``names`` with :data:`JOIN` (from ``joins``, else the
    lexicon's own join category, else the built-in :func:`join_lexicon`) and, when there is
    a number category, :data:`NUMBER_IN_SECOND` (:func:`numbers_after_join`)."""
    out_names, out = list(names), list(cats)
    if JOIN in names and joins is None:
        words = lexicon.to_dict()[JOIN] if lexicon is not None else None
        marks = [c[names.index(JOIN)] for c in cats]
    else:
        joins = joins or join_lexicon([s.text for s in segs])
        first = joins.names[0]
        words = joins.to_dict()[first]
        marks = [joins.mark(s.text, s.spans, s.special)[0] for s in segs]
        if JOIN in names:
            out = [np.vstack([c[:names.index(JOIN)], c[names.index(JOIN) + 1:]]) for c in out]
            out_names.remove(JOIN)
        out_names.append(JOIN)
        out = [np.vstack([c, m[None]]) for c, m in zip(out, marks, strict=True)]
    if "number" in out_names:
        k = out_names.index("number")
        out_names.append(NUMBER_IN_SECOND)
        out = [np.vstack([c, numbers_after_join(m, c[k], s.special)[None]])
               for c, m, s in zip(out, marks, segs, strict=True)]
    return out_names, out, words


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


def example_views(clf: Any, segs: Sequence[Segmented], cats: Sequence[np.ndarray],
                  names: Sequence[str], *, view_units: int = 64,
                  pooling: str = "cls") -> list[dict[str, Any]]:
    """Word-level attention of a few examples, for the report's heat maps.

    Returns:
        One dict per example: ``text``, ``units`` (shown units' text), ``special``,
        ``categories`` (name -> unit indices), ``rollout`` (per shown unit),
        ``confidence`` (the top probability; a compound model's: the mean probability of
        its answered intents, of its most probable one when it answers none),
        ``truncated`` (units beyond ``view_units`` left out) and
        ``weights``: base64 of uint8 ``round(255 * w)`` in (layers, heads, units, units)
        order.
    """
    if not segs:
        return []
    out: list[dict[str, Any]] = [{} for _ in segs]
    multi = is_multi_label(clf)
    for batch in iter_attention(clf, [s.text for s in segs], batch_size=8):
        probs = np.exp(batch.logits - batch.logits.max(1, keepdims=True))
        probs /= probs.sum(1, keepdims=True)
        for row, i in enumerate(batch.indices):
            confidence = float(probs[row].max()) if not multi else float(answer_probability(
                clf, torch.from_numpy(batch.logits[row:row + 1]),
                scored_answer(clf, batch.logits[row]))[0])
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
                      "confidence": confidence,
                      "truncated": int(len(seg.units) - u),
                      "weights": base64.b64encode(q.tobytes()).decode("ascii")}
    return out
