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
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import torch

from headwise.intent.classifier import IntentClassifier

__all__ = ["greedy_soup", "uniform_soup"]


def _tokenizer_signature(clf: IntentClassifier) -> tuple[Any, ...]:
    tok = clf.tokenizer
    return (tok.backend.to_str(), tuple(sorted(tok.special_tokens.items())),
            tok.number_pattern, tok.lowercase)


def _checked_states(members: list[IntentClassifier]) -> list[dict[str, torch.Tensor]]:
    """The members' state dicts, after checking that they can be averaged (see
    :func:`uniform_soup`'s Raises)."""
    if len(members) < 2:
        raise ValueError(f"a soup needs at least two members, got {len(members)}")
    first = members[0]
    states = [m.model.state_dict() for m in members]
    for i, m in enumerate(members[1:], 1):
        if m.labels != first.labels:
            raise ValueError(f"member {i} has other intents (or another order) than member 0")
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
    for name, ref in states[0].items():
        for i, state in enumerate(states[1:], 1):
            t = state[name]
            if t.shape != ref.shape:
                raise ValueError(f"{name}: member {i} has shape {tuple(t.shape)}, member 0 "
                                 f"{tuple(ref.shape)}")
            if not (ref.is_floating_point() or ref.is_complex()) \
                    and not torch.equal(t.cpu(), ref.cpu()):
                raise ValueError(f"{name}: the integer buffer differs between members; they "
                                 f"cannot be averaged")
    return states


def uniform_soup(members: Sequence[IntentClassifier], *,
                 info: dict[str, Any] | None = None) -> IntentClassifier:
    """The uniform soup of ``members``: every floating-point weight and buffer averaged.

    The mean is taken in float64 and cast back to each tensor's dtype. Integer buffers
    (position ids, counters) must be equal in all members and are kept. The soup's
    temperature is the geometric mean of the members' temperatures and its out-of-scope
    threshold their mean: the soup has, in general, trained on every member's validation
    split, so no held-out data is left to recalibrate it on.

    Args:
        members: two or more classifiers of one architecture, with the same intents (in the
            same order), tokenizer and ``max_length``. They are not modified.
        info: free-form summary stored with the soup (``info["soup"]`` records the
            members' temperatures and thresholds).

    Returns:
        A new :class:`IntentClassifier` (a deep copy of the first member's model holding
        the averaged weights).

    Raises:
        ValueError: fewer than two members, or members that differ in intents, tokenizer,
            ``max_length``, model class, parameter names or shapes, or integer buffers.
    """
    members = list(members)
    states = _checked_states(members)
    averaged: dict[str, torch.Tensor] = {}
    for name, ref in states[0].items():
        if ref.is_floating_point() or ref.is_complex():
            mean = torch.stack([s[name].detach().cpu().double() for s in states]).mean(0)
            averaged[name] = mean.to(ref.dtype)
        else:  # equal in every member (checked)
            averaged[name] = ref.detach().cpu().clone()
    first = members[0]
    model = copy.deepcopy(first.model).cpu()
    model.load_state_dict(averaged)
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


def greedy_soup(members: Sequence[IntentClassifier], texts: Sequence[str],
                labels: Sequence[str], *, info: dict[str, Any] | None = None
                ) -> IntentClassifier:
    """The greedy soup of ``members`` on held-out data (Wortsman et al. 2022, recipe 1).

    Members are sorted by their accuracy on ``(texts, labels)``, best first (ties keep the
    given order). The best one starts the soup; each next member is added when the uniform
    soup with it is at least as accurate on that data as the soup without it, and left out
    otherwise. The held-out data must be data no member trained on, or the choice only
    measures memorisation.

    Args:
        members: two or more classifiers, as for :func:`uniform_soup`.
        texts: held-out texts.
        labels: their intents.
        info: free-form summary stored with the soup; ``info["soup"]["greedy"]`` records
            each member's held-out accuracy, the order tried, the members kept (indices
            into ``members``) and the soup's held-out accuracy.

    Returns:
        The uniform soup of the kept members (a copy of the best member when no other was
        kept).

    Raises:
        ValueError: fewer than two members, no texts, texts and labels of different
            lengths, or members that cannot be averaged (see :func:`uniform_soup`).
    """
    members = list(members)
    if not texts or len(texts) != len(labels):
        raise ValueError(f"greedy_soup needs held-out texts with one label each, got "
                         f"{len(texts)} texts and {len(labels)} labels")
    _checked_states(members)  # before any time is spent scoring
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
