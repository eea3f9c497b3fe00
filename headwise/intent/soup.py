"""Model soups: several fine-tuned classifiers' weights averaged into one model.

Fine-tuning runs that start from the same pretrained weights (and, with LP-FT, the same
linear-probe head) stay in one basin of the loss: the element-wise mean of their weights is
itself a good model, often better than any one of them (Wortsman et al. 2022, "Model soups:
averaging weights of multiple fine-tuned models improves accuracy without increasing
inference time"). Unlike an :class:`~headwise.intent.ensemble.EnsembleClassifier`, the soup
is one model: one forward pass per query, the members' latency and size.

Only runs that share the pretrained starting point make a useful soup. Classifiers trained
from scratch with different seeds sit in different basins, and their average is usually
worse than either; :func:`uniform_soup` cannot tell the two cases apart, so evaluate the
soup before using it. :func:`greedy_soup` (the paper's recipe) does that itself on held-out
data: members are tried best first and kept only when the soup does not get worse.

The members are single-label networks (:class:`~headwise.intent.classifier.IntentClassifier`)
or compound ones (:class:`~headwise.intent.compound.classifier.CompoundClassifier`: the
joint intent + slot networks of one architecture, tokenizer, intents and slot tags), never
a mix; a soup of compound members is a compound classifier. A compound greedy soup is
ordered and accepted on the exact match of annotated held-out rows (the intent sets), each
candidate with thresholds tuned on those rows, and the soup keeps thresholds tuned there.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import torch

from headwise.intent.classifier import IntentClassifier
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.compound.thresholds import Thresholds, tune_thresholds

__all__ = ["greedy_soup", "uniform_soup"]

#: a soup's member: a single-label network or a compound one
Member = IntentClassifier | CompoundClassifier


def _tokenizer_signature(clf: Member) -> tuple[Any, ...]:
    tok = clf.tokenizer
    return (tok.backend.to_str(), tuple(sorted(tok.special_tokens.items())),
            tok.number_pattern, tok.lowercase)


def _intents(clf: Member) -> list[str]:
    return clf.intents if isinstance(clf, CompoundClassifier) else clf.labels


def _kind(clf: Member) -> str:
    return "a compound classifier" if isinstance(clf, CompoundClassifier) else \
        "a single-label classifier"


def _checked_states(members: list[Member]) -> list[dict[str, torch.Tensor]]:
    """The members' state dicts, after checking that they can be averaged (see
    :func:`uniform_soup`'s Raises)."""
    if len(members) < 2:
        raise ValueError(f"a soup needs at least two members, got {len(members)}")
    first = members[0]
    for i, m in enumerate(members):
        if not isinstance(m, IntentClassifier | CompoundClassifier):
            raise TypeError(f"member {i} is a {type(m).__name__}; a soup averages networks "
                            f"(IntentClassifier or CompoundClassifier)")
    states = [m.model.state_dict() for m in members]
    for i, m in enumerate(members[1:], 1):
        if isinstance(m, CompoundClassifier) != isinstance(first, CompoundClassifier):
            raise ValueError(f"member {i} is {_kind(m)}, member 0 {_kind(first)}; a soup "
                             f"averages networks of one kind")
        if _intents(m) != _intents(first):
            raise ValueError(f"member {i} has other intents (or another order) than member 0")
        if isinstance(m, CompoundClassifier):
            if m.slot_tags != first.slot_tags:
                raise ValueError(f"member {i} has other slot tags (or another order) than "
                                 f"member 0: {m.slot_tags} against {first.slot_tags}")
            if m.model.multi_label != first.model.multi_label:
                raise ValueError(f"member {i} has a {_head(m)} intent head, member 0 a "
                                 f"{_head(first)} one")
        if m.max_length != first.max_length:
            raise ValueError(f"member {i} has max_length {m.max_length}, member 0 "
                             f"{first.max_length}")
        if type(m.model) is not type(first.model):
            raise ValueError(f"member {i} is a {type(m.model).__name__}, member 0 a "
                             f"{type(first.model).__name__}")
        if _tokenizer_signature(m) != _tokenizer_signature(first):
            raise ValueError(f"member {i} has another tokenizer than member 0")
        if list(states[i]) != list(states[0]):
            raise ValueError(f"member {i} has other parameter names than member 0 (another "
                             f"architecture)")
    for name, ref in states[0].items():  # shapes first: they say "another architecture"
        for i, state in enumerate(states[1:], 1):
            t = state[name]
            if t.shape != ref.shape:
                raise ValueError(f"{name}: member {i} has shape {tuple(t.shape)}, member 0 "
                                 f"{tuple(ref.shape)}")
    for name, ref in states[0].items():
        for state in states[1:]:
            if not (ref.is_floating_point() or ref.is_complex()) \
                    and not torch.equal(state[name].cpu(), ref.cpu()):
                raise ValueError(f"{name}: the integer buffer differs between members; they "
                                 f"cannot be averaged")
    return states


def _head(clf: CompoundClassifier) -> str:
    return "multi-label (sigmoid)" if clf.model.multi_label else "single-label (softmax)"


def _averaged_model(members: list[Member], states: list[dict[str, torch.Tensor]]
                    ) -> torch.nn.Module:
    """A copy of the first member's network holding the float64 mean of the members'
    floating-point weights and buffers (integer buffers: the first member's, equal in
    all)."""
    averaged: dict[str, torch.Tensor] = {}
    for name, ref in states[0].items():
        if ref.is_floating_point() or ref.is_complex():
            mean = torch.stack([s[name].detach().cpu().double() for s in states]).mean(0)
            averaged[name] = mean.to(ref.dtype)
        else:  # equal in every member (checked)
            averaged[name] = ref.detach().cpu().clone()
    model = copy.deepcopy(members[0].model).cpu()
    model.load_state_dict(averaged)
    return model


def _threshold_metric(members: list[CompoundClassifier]) -> str:
    """The one metric the members' thresholds were tuned for.

    Raises:
        ValueError: members tuned for different metrics.
    """
    metrics = sorted({m.thresholds.metric for m in members})
    if len(metrics) > 1:
        raise ValueError(f"the members' thresholds were tuned for different metrics "
                         f"({', '.join(metrics)}; task.threshold_metric): soup members "
                         f"trained with one recipe")
    return metrics[0]


def _mean_thresholds(members: list[CompoundClassifier]) -> Thresholds:
    """The mean of the members' thresholds: per intent when any member has per-intent ones
    (the others' global one standing for each intent); with an additional-intent threshold
    in any member, the mean of those (a member without one standing with its global one);
    else the global one. Tuned for the members' one metric.

    Raises:
        ValueError: members tuned for different metrics.
    """
    metric = _threshold_metric(members)
    glob = float(np.mean([m.thresholds.threshold for m in members]))
    if any(m.thresholds.additional is not None for m in members):
        extra = np.mean([m.thresholds.threshold if m.thresholds.additional is None
                         else m.thresholds.additional for m in members])
        return Thresholds(glob, None, float(extra), metric)
    if all(m.thresholds.per_intent is None for m in members):
        return Thresholds(glob, metric=metric)
    n = len(members[0].intents)
    per = np.mean([m.thresholds.for_intents(n) for m in members], axis=0)
    return Thresholds(glob, [float(t) for t in per], metric=metric)


def uniform_soup(members: Sequence[Member], *, info: dict[str, Any] | None = None) -> Member:
    """The uniform soup of ``members``: every floating-point weight and buffer averaged.

    The mean is taken in float64 and cast back to each tensor's dtype. Integer buffers
    (position ids, counters) must be equal in all members and are kept. A single-label
    soup's temperature is the geometric mean of the members' temperatures and its
    out-of-scope threshold their mean; a compound soup's thresholds are the mean of the
    members' (per intent when any member has per-intent ones). The soup has, in general,
    trained on every member's validation split, so no held-out data is left to recalibrate
    it on here; :func:`greedy_soup` tunes a compound soup's thresholds on the held-out rows
    it is given.

    Args:
        members: two or more classifiers of one kind and architecture, with the same
            intents (in the same order), tokenizer and ``max_length``; compound members
            also the same slot tags and intent head. They are not modified.
        info: free-form summary stored with the soup (``info["soup"]`` records the
            members' temperatures and thresholds).

    Returns:
        A new :class:`IntentClassifier`, or :class:`CompoundClassifier` for compound
        members (a deep copy of the first member's model holding the averaged weights).

    Raises:
        ValueError: fewer than two members, or members that differ in kind, intents, slot
            tags, intent head, tokenizer, ``max_length``, model class, parameter names or
            shapes, or integer buffers.
        TypeError: a member that is not a network classifier.
    """
    members = list(members)
    states = _checked_states(members)
    model = _averaged_model(members, states)
    first = members[0]
    if isinstance(first, CompoundClassifier):
        compound = [m for m in members if isinstance(m, CompoundClassifier)]
        meta = {**(info or {}), "soup": {"members": len(members), "thresholds": [
            m.thresholds.to_dict() for m in compound]}}
        return CompoundClassifier(model, copy.deepcopy(first.tokenizer), first.intents,
                                  thresholds=_mean_thresholds(compound),
                                  max_length=first.max_length,
                                  reference_date=first.reference_date, info=meta)
    temperatures = [m.temperature for m in members]
    thresholds = [m.threshold for m in members]
    meta = {**(info or {}), "soup": {"members": len(members), "temperatures": temperatures,
                                     "thresholds": thresholds}}
    return IntentClassifier(
        model, copy.deepcopy(first.tokenizer), first.labels,
        temperature=math.exp(sum(math.log(t) for t in temperatures) / len(temperatures)),
        threshold=sum(thresholds) / len(thresholds), max_length=first.max_length, info=meta)


def _accuracy(clf: IntentClassifier, texts: Sequence[str], labels: Sequence[str]) -> float:
    """Share of ``texts`` whose argmax intent is the label (unknown labels count wrong)."""
    predicted = clf.logits(texts).argmax(1)
    return sum(clf.labels[j] == y for j, y in zip(predicted, labels, strict=True)) / len(labels)


def _gold_sets(intents: list[str], labels: Sequence[Collection[str]]) -> np.ndarray:
    """(rows, intents) bool: each row's gold intents (names the members do not know are
    left out, so such a row is never matched exactly)."""
    index = {name: i for i, name in enumerate(intents)}
    gold = np.zeros((len(labels), len(intents)), dtype=bool)
    for r, names in enumerate(labels):
        if isinstance(names, str):
            raise ValueError(f"held-out row {r}: a compound soup's labels are each row's set "
                             f"of intents (an annotated example's intents), got the string "
                             f"{names!r}")
        for name in names:
            if name in index:
                gold[r, index[name]] = True
    return gold


def _tuned_exact_match(clf: CompoundClassifier, texts: Sequence[str], gold: np.ndarray,
                       unknown: np.ndarray, per_intent: bool, metric: str
                       ) -> tuple[float, Thresholds]:
    """The exact match of ``clf`` on the held-out rows with thresholds tuned there for
    ``metric`` (rows with an intent no member knows, ``unknown``, count wrong), and those
    thresholds."""
    probs, _ = clf.analyse(list(texts))
    thresholds = tune_thresholds(probs, gold, per_intent=per_intent, metric=metric)
    chosen = clf.chosen_intents(probs, thresholds, False)
    hits = (chosen == gold).all(axis=1) & ~unknown
    return float(hits.mean()), thresholds


def greedy_soup(members: Sequence[Member], texts: Sequence[str],
                labels: Sequence[str] | Sequence[Collection[str]], *,
                info: dict[str, Any] | None = None) -> Member:
    """The greedy soup of ``members`` on held-out data (Wortsman et al. 2022, recipe 1).

    Members are sorted by their score on ``(texts, labels)``, best first (ties keep the
    given order). The best one starts the soup; each next member is added when the uniform
    soup with it scores at least as well on that data as the soup without it, and left out
    otherwise. The held-out data must be data no member trained on, or the choice only
    measures memorisation.

    The score of single-label members is the accuracy of their argmax intent. The score of
    compound members is the exact match of their intent sets (:func:`~headwise.intent.
    compound.thresholds.multilabel_metrics`' ``exact_match``) with thresholds tuned on the
    held-out rows for each candidate (per intent when any member has per-intent
    thresholds), since averaged weights move the probabilities the members' thresholds
    were tuned for; the soup returned keeps the thresholds tuned for it there.

    Args:
        members: two or more classifiers, as for :func:`uniform_soup`.
        texts: held-out texts.
        labels: their intents: one intent per text for single-label members; each text's
            collection of intents (an annotated example's ``intents``, empty for none) for
            compound members.
        info: free-form summary stored with the soup; ``info["soup"]["greedy"]`` records
            each member's held-out score (``member_accuracy`` / ``member_exact_match``),
            the order tried, the members kept (indices into ``members``) and the soup's
            held-out score (``accuracy`` / ``exact_match``).

    Returns:
        The uniform soup of the kept members (a copy of the best member when no other was
        kept; a compound one with the thresholds tuned on the held-out rows).

    Raises:
        ValueError: fewer than two members, no texts, texts and labels of different
            lengths, a string label for compound members, or members that cannot be
            averaged (see :func:`uniform_soup`).
    """
    members = list(members)
    if not texts or len(texts) != len(labels):
        raise ValueError(f"greedy_soup needs held-out texts with one label each, got "
                         f"{len(texts)} texts and {len(labels)} labels")
    _checked_states(members)  # before any time is spent scoring
    if isinstance(members[0], CompoundClassifier):
        return _greedy_compound([m for m in members if isinstance(m, CompoundClassifier)],
                                texts, labels, info)
    alone = [_accuracy(m, texts, labels) for m in members]
    order = sorted(range(len(members)), key=lambda i: -alone[i])
    kept, best = [order[0]], alone[order[0]]
    for i in order[1:]:
        candidate = uniform_soup([members[j] for j in [*kept, i]])
        score = _accuracy(candidate, texts, labels)
        if score >= best:
            kept, best = [*kept, i], score
    record = {"member_accuracy": alone, "order": order, "kept": kept, "accuracy": best}
    if len(kept) == 1:
        first = members[kept[0]]
        return IntentClassifier(copy.deepcopy(first.model).cpu(),
                                copy.deepcopy(first.tokenizer), first.labels,
                                temperature=first.temperature, threshold=first.threshold,
                                max_length=first.max_length,
                                info={**(info or {}), "soup": {"members": 1,
                                                               "greedy": record}})
    soup = uniform_soup([members[j] for j in kept], info=info)
    soup.info["soup"]["greedy"] = record
    return soup


def _greedy_compound(members: list[CompoundClassifier], texts: Sequence[str],
                     labels: Sequence[Collection[str]], info: dict[str, Any] | None
                     ) -> CompoundClassifier:
    """:func:`greedy_soup` of compound members: scored on exact match, thresholds tuned on
    the held-out rows."""
    gold = _gold_sets(members[0].intents, labels)
    known = set(members[0].intents)
    unknown = np.array([any(name not in known for name in names) for names in labels],
                       dtype=bool)
    per_intent = any(m.thresholds.per_intent is not None for m in members)
    metric = _threshold_metric(members)
    scored = [_tuned_exact_match(m, texts, gold, unknown, per_intent, metric)
              for m in members]
    alone = [s for s, _ in scored]
    order = sorted(range(len(members)), key=lambda i: -alone[i])
    kept, (best, thresholds) = [order[0]], scored[order[0]]
    for i in order[1:]:
        candidate = uniform_soup([members[j] for j in [*kept, i]])
        score, tuned = _tuned_exact_match(candidate, texts, gold, unknown, per_intent,
                                          metric)
        if score >= best:
            kept, best, thresholds = [*kept, i], score, tuned
    record = {"member_exact_match": alone, "order": order, "kept": kept,
              "exact_match": best, "rows": len(texts), "per_intent": per_intent,
              "unknown_intent_rows": int(unknown.sum())}
    if len(kept) == 1:
        first = members[kept[0]]
        soup = CompoundClassifier(copy.deepcopy(first.model).cpu(),
                                  copy.deepcopy(first.tokenizer), first.intents,
                                  max_length=first.max_length,
                                  reference_date=first.reference_date,
                                  info={**(info or {}), "soup": {"members": 1}})
    else:
        soup = uniform_soup([members[j] for j in kept], info=info)
        assert isinstance(soup, CompoundClassifier)
    soup.info["soup"]["greedy"] = record
    soup.thresholds = thresholds
    return soup
