"""Running a classifier for inspection: its attention layers, weights and predictions.

The inspect layer reads a model only through :func:`~headwise.attention.capture_attention`
and the per-head gates of :class:`~headwise.attention.MultiHeadAttention`.

Two kinds of classifier are inspected, and they differ only in how an answer is scored
and what the gold is (the kind registry says which, :func:`is_multi_label`):

* a single-label :class:`~headwise.intent.classifier.IntentClassifier`: the gold is one
  class id per text (:func:`label_ids`), the answer the top logit, the loss the
  cross-entropy, the answer's probability the softmax over the temperature;
* a compound :class:`~headwise.intent.compound.CompoundClassifier` (a joint Transformer or
  pretrained joint model): the gold is the set of a text's intents, as a 0/1 row per text,
  the answer the set of intents past their tuned thresholds (the classifier's own
  ``chosen_intents``), the loss the binary cross-entropy summed over intents (its training
  objective), the answer's probability the mean sigmoid of the answered intents. An answer
  is right when its set is the gold set (exact match).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headwise.attention import MultiHeadAttention, capture_attention
from headwise.intent.kinds import kind_of_classifier


class NoAttentionError(ValueError):
    """The model has no attention heads to analyse or explain (e.g. the BiLSTM baseline)."""


def attention_layers(model: nn.Module) -> list[MultiHeadAttention]:
    """The model's self-attention layers, input side first: the one finder that the head
    analysis and the service's ``/v1/explain`` share.

    Raises:
        NoAttentionError: a model without multi-head attention (the BiLSTM).
        ValueError: layers with different head counts.
    """
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not layers:
        raise NoAttentionError(f"this model ({type(model).__name__}) has no attention heads: "
                               f"no multi-head attention layers to inspect or explain (the "
                               f"head analysis and /v1/explain need a Transformer "
                               f"classifier)")
    if len({m.num_heads for m in layers}) != 1:
        raise ValueError("the head analysis needs the same number of heads in every layer "
                         "(was the model pruned?)")
    return layers


def max_pool_mix(model: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> np.ndarray:
    """(n,) for one example of a max-pooled model: the share of the pooled vector's
    dimensions each position supplies (the token whose state is the maximum there), the
    mix of positions attention rollout starts from.

    Args:
        model: a Transformer with ``encode`` and ``config.pooling == "max"``.
        input_ids, attention_mask: (1, n) one example.
    """
    with torch.no_grad():
        hidden = model.encode(input_ids, attention_mask)[0].double()
    keep = attention_mask[0].bool().to(hidden.device)
    winners = hidden.masked_fill(~keep[:, None], float("-inf")).argmax(0)
    return np.bincount(winners.cpu().numpy(), minlength=hidden.shape[0]) / hidden.shape[1]


def pooling_of(model: nn.Module) -> str:
    """``"cls"``, ``"mean"`` or ``"max"``: how the classifier pools the sequence."""
    config = getattr(model, "config", None)
    return getattr(config, "pooling", "cls") if config is not None else "cls"


def is_multi_label(clf: Any) -> bool:
    """Whether ``clf`` is of a multi-label kind (the compound classifier), by the kind
    registry."""
    return kind_of_classifier(clf).multi_label


def intent_names(clf: Any) -> list[str]:
    """The classifier's intents, in the order of its logits."""
    return list(clf.intents if is_multi_label(clf) else clf.labels)


def label_ids(clf: Any, labels: Sequence[Any]) -> np.ndarray:
    """The gold of each text, as the classifier's outputs index it.

    Single-label: (n,) the class index of each label; -1 for labels the classifier does
    not know (out-of-scope rows, unseen intents, None). Multi-label: ``labels`` are the
    intent sets of the texts (a sequence of intent names each; an empty one is out of
    scope, a valid gold), and the result is (n, intents) 0/1; a row with an intent the
    classifier does not know, or None, is all -1.
    """
    names = intent_names(clf)
    index = {name: i for i, name in enumerate(names)}
    if not is_multi_label(clf):
        return np.array([index.get(y, -1) if y is not None else -1 for y in labels],
                        dtype=np.int64)
    out = np.zeros((len(labels), len(names)), dtype=np.int64)
    for row, intents in enumerate(labels):
        if intents is None or isinstance(intents, str) or \
                any(i not in index for i in intents):
            out[row] = -1
            continue
        out[row, [index[i] for i in intents]] = 1
    return out


def known_rows(gold: np.ndarray) -> np.ndarray:
    """(n,) bool: the rows of :func:`label_ids`'s result whose gold is known."""
    gold = np.asarray(gold)
    return gold >= 0 if gold.ndim == 1 else (gold >= 0).all(1)


def decide(clf: Any, logits: np.ndarray) -> np.ndarray:
    """The answers of raw logits (n, intents): (n,) the top class (single-label), or
    (n, intents) bool, the intents past their thresholds (multi-label; none is out of
    scope)."""
    logits = np.asarray(logits, dtype=np.float64)
    if not is_multi_label(clf):
        return logits.argmax(1)
    return clf.chosen_intents(_probabilities(clf, torch.from_numpy(logits)).numpy(),
                              clf.thresholds, False)


def is_correct(answers: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """(n,) bool: the answer is the gold (the same class, or the same set of intents);
    False on rows of unknown gold."""
    answers, gold = np.asarray(answers), np.asarray(gold)
    same = answers == gold if gold.ndim == 1 else (answers.astype(np.int64) == gold).all(1)
    return same & known_rows(gold)


def answer_names(clf: Any, answers: np.ndarray) -> list[str]:
    """How the report names each answer or gold: the intent, or the intents of a set
    joined by `` + `` (``"(none)"`` for the empty set, out of scope; ``"?"`` for an unknown
    gold)."""
    names = intent_names(clf)
    answers = np.asarray(answers)
    if answers.ndim == 1:
        return [names[int(a)] if a >= 0 else "?" for a in answers]
    return ["?" if (row < 0).any() else " + ".join(names[j] for j in np.flatnonzero(row))
            or "(none)" for row in answers.astype(np.int64)]


def _probabilities(clf: Any, logits: Tensor) -> Tensor:
    """Calibrated probabilities of raw logits: softmax over the temperature
    (single-label); a sigmoid per intent (multi-label head) or a softmax (a compound
    classifier's single-label head), as its predictor gives them."""
    if not is_multi_label(clf):
        return torch.softmax(logits / clf.temperature, -1)
    return torch.sigmoid(logits) if clf.model.multi_label else torch.softmax(logits, -1)


def scored_answer(clf: Any, logits: np.ndarray) -> Any:
    """What a probability is read of, for one text's raw logits (intents,): its answer
    (:func:`decide`), and for a multi-label answer of no intent (out of scope) its most
    probable intent."""
    answer = decide(clf, np.asarray(logits, dtype=np.float64)[None])[0]
    if np.ndim(answer) == 1 and not answer.any():
        answer = np.zeros_like(answer)
        answer[int(np.argmax(logits))] = True
    return answer


def answer_probability(clf: Any, logits: Tensor, answer: Any) -> Tensor:
    """The probability of ``answer`` (a class id, or a non-empty (intents,) bool set:
    :func:`scored_answer`) under each row of ``logits`` (batch, intents): the class's
    probability, or the mean probability of the set's intents.

    Returns:
        (batch,) float64.

    Raises:
        ValueError: an empty set.
    """
    probs = _probabilities(clf, logits.double())
    if not is_multi_label(clf):
        return probs[:, int(answer)]
    chosen = np.flatnonzero(np.asarray(answer, dtype=bool))
    if not len(chosen):
        raise ValueError("the probability of an empty set of intents is not defined; "
                         "score its most probable intent (scored_answer)")
    return probs[:, torch.from_numpy(chosen).to(probs.device)].mean(-1)


def loss_of(clf: Any, logits: Tensor, gold: np.ndarray) -> Tensor:
    """The training loss of logits (batch, intents) against their gold rows (known ones):
    the cross-entropy (single-label), or a compound model's own intent loss
    (``intent_loss`` of its joint heads: the binary cross-entropy summed over intents and
    averaged over the batch; a single-label head's cross-entropy against the one gold
    intent).

    Raises:
        ValueError: a single-label head's gold set that is not one intent.
    """
    gold = np.asarray(gold)
    device = logits.device
    if not is_multi_label(clf):
        return F.cross_entropy(logits.float(), torch.as_tensor(gold, device=device))
    if clf.model.multi_label:
        return clf.model.intent_loss(logits, torch.as_tensor(gold, dtype=torch.float32,
                                                             device=device))
    if (gold.sum(1) != 1).any():
        raise ValueError("a single-label head scores texts of one intent only")
    return clf.model.intent_loss(logits, torch.as_tensor(gold.argmax(1), device=device))


def logits_of(clf: Any, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
    """Raw logits (n, intents) float64 of texts truncated to the maximum length, batched by
    length (the classifier's predictor on PyTorch)."""
    if not is_multi_label(clf):
        return clf.logits(texts, batch_size=batch_size)
    predictor = clf.predictor(batch_size=batch_size)
    rows = predictor.run(predictor.encode_truncated(list(texts)))
    return np.stack([np.asarray(r.logits, dtype=np.float64) for r in rows])


@dataclass
class AttentionBatch:
    """One batch of :func:`iter_attention`.

    Attributes:
        indices: positions of the batch's texts in the input list.
        logits: (batch, classes) float64.
        weights: per layer, (batch, heads, seq, seq) CPU tensors (the model's dtype).
        lengths: (batch,) real tokens of each row (special tokens included).
    """

    indices: list[int]
    logits: np.ndarray
    weights: list[torch.Tensor]
    lengths: list[int]


@torch.inference_mode()
def iter_attention(clf: Any, texts: Sequence[str], *, batch_size: int = 32,
                   max_weights: int = 1 << 26) -> Iterator[AttentionBatch]:
    """Forward ``texts`` in length-sorted batches, recording every layer's weights.

    Args:
        clf: a Transformer classifier (single-label or compound).
        texts: the inputs.
        batch_size: the most texts per forward pass.
        max_weights: the most attention weights recorded per pass (all layers and heads);
            long inputs get smaller batches (512 tokens, 2 x 8 heads: 16 texts).

    Yields:
        :class:`AttentionBatch` objects (every text once, in length order).
    """
    layers = attention_layers(clf.model)
    per_token = len(layers) * layers[0].num_heads
    device = next(clf.model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    start = 0
    while start < len(order):
        idx = order[start:start + batch_size]
        batch = clf.tokenizer([texts[i] for i in idx], max_length=clf.max_length)
        seq = batch["input_ids"].shape[1]
        fits = max(1, max_weights // (per_token * seq * seq))
        if fits < len(idx):
            idx = idx[:fits]
            batch = {k: v[:fits] for k, v in batch.items()}
        start += len(idx)
        with capture_attention(layers, to_cpu=True) as cap:
            logits = clf.model(input_ids=batch["input_ids"].to(device),
                               attention_mask=batch["attention_mask"].bool().to(device))["logits"]
        weights = [cap[m][0] for m in layers]
        yield AttentionBatch(idx, logits.double().cpu().numpy(), weights,
                             batch["attention_mask"].sum(1).tolist())


def accuracy(clf: Any, texts: Sequence[str], gold: np.ndarray, *,
             batch_size: int = 64) -> float:
    """Share of ``texts`` answered right (rows of unknown gold left out): the top logit is
    the gold class, or the answered set is the gold set (exact match, multi-label).

    Raises:
        ValueError: no row with a known gold.
    """
    keep = np.flatnonzero(known_rows(gold))
    if len(keep) == 0:
        raise ValueError("no example has an intent the classifier knows")
    logits = logits_of(clf, [texts[i] for i in keep], batch_size=batch_size)
    return float(is_correct(decide(clf, logits), np.asarray(gold)[keep]).mean())
