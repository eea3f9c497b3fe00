"""The training objective of an intent classifier: label-smoothed cross-entropy, or its
noise-robust generalisation.

:class:`SmoothedClassification` wraps any classifier returning ``{"logits"}`` so the
:class:`~headwise.train.Trainer` trains it with label smoothing (Szegedy et al. 2016):
the target puts ``1 - eps`` on the true intent and spreads ``eps`` uniformly, which keeps
a small-data classifier from becoming over-confident. Optional per-intent weights
(:func:`balanced_class_weights`) make rare intents count as much as frequent ones, which is
what macro-F1 rewards on imbalanced data. The wrapped model is trained in place; after
training use it directly.

With ``gce_q`` set, the loss is the generalized cross-entropy of Zhang & Sabuncu (2018),
``(1 - p_y ** q) / q`` (:func:`generalized_cross_entropy`): cross-entropy as ``q -> 0``, the
mean absolute error ``1 - p_y`` at ``q = 1``. Its gradient is cross-entropy's scaled by
``p_y ** q``, so examples the model finds implausible -- often the mislabelled ones of a
noisy training set -- pull less.

Distillation from any teacher (Hinton et al. 2015; :mod:`headwise.intent.training.distillation`):
:func:`distillation_loss` is the KL divergence between the teacher's and the student's
distributions at a temperature ``T``, scaled by ``T**2``, mixed with the label's
cross-entropy where the row has a gold label; :class:`SoftTargets` carries a teacher's
targets into :func:`~headwise.intent.training.pipeline.train_intent_classifier`.

Outlier exposure (Hendrycks, Mazeika & Dietterich, "Deep Anomaly Detection with Outlier
Exposure", ICLR 2019): out-of-scope training rows, labelled :data:`OUT_OF_SCOPE`, are
pulled towards the uniform distribution over the intents
(:func:`outlier_exposure_loss`, ``lambda`` times the mean over those rows), while the other
rows keep their loss (the mean over them); the network's outputs stay the intents, so
it learns to be unsure of a text unlike its intents' rather than to name an extra class.

The multi-label (compound) objective: :class:`CompoundObjective` wraps a joint intent +
slot model, its intent loss :func:`multilabel_intent_loss` (one sigmoid an intent, with the
same label smoothing, and per-intent weights from :func:`balanced_multilabel_weights`).
Both objectives take word dropout on their inputs
(:mod:`headwise.intent.training.token_dropout`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import f1_score
from torch import Tensor, nn

from headwise.models.joint_heads import JointHeads

#: the label of a training row that has none (its loss is the soft term alone): PyTorch's
#: ``ignore_index``
NO_LABEL = -100
#: the label of an out-of-scope training row under outlier exposure: its loss is
#: :func:`outlier_exposure_loss` alone (:class:`SmoothedClassification`)
OUT_OF_SCOPE = -1


def balanced_class_weights(labels: Sequence[int], num_classes: int) -> Tensor:
    """scikit-learn's "balanced" weights: ``n / (num_classes * count_c)`` per class
    (classes absent from ``labels`` get weight 1).

    Raises:
        ValueError: no labels, or an id outside ``[0, num_classes)``.
    """
    y = torch.as_tensor(list(labels), dtype=torch.long)
    if y.numel() == 0:
        raise ValueError("balanced_class_weights needs labels")
    if int(y.min()) < 0 or int(y.max()) >= num_classes:
        raise ValueError(f"label ids must be in [0, {num_classes})")
    counts = torch.bincount(y, minlength=num_classes).double()
    weights = torch.where(counts > 0, y.numel() / (num_classes * counts.clamp_min(1)),
                          torch.ones_like(counts))
    return weights.float()


def generalized_cross_entropy(logits: Tensor, labels: Tensor, q: float, *,
                              label_smoothing: float = 0.0,
                              weight: Tensor | None = None) -> Tensor:
    """The generalized cross-entropy ``sum_k t_k (1 - p_k ** q) / q``, averaged over the batch.

    ``t`` is the one-hot target, label-smoothed like :func:`torch.nn.functional.cross_entropy`
    (``1 - eps`` on the label plus ``eps / classes`` everywhere). With ``weight``, each
    example counts ``weight[label]`` and the mean divides by the sum of those weights (as
    cross-entropy does without smoothing; PyTorch's smoothed cross-entropy weights each
    smoothing term by its own class instead). Computed in float32 or wider, from
    log-probabilities.

    Args:
        logits: (batch, classes).
        labels: (batch,) class ids.
        q: in (0, 1]; the limit ``q -> 0`` is cross-entropy.
        label_smoothing: ``eps`` in [0, 1).
        weight: optional (classes,) per-class weights.

    Raises:
        ValueError: ``q`` outside (0, 1].
    """
    if not 0.0 < q <= 1.0:
        raise ValueError(f"the generalized cross-entropy needs q in (0, 1], got {q}")
    return soft_target_loss(logits, labels, q=q, label_smoothing=label_smoothing,
                            weight=weight)


def soft_target_loss(logits: Tensor, labels: Tensor, *, q: float | None = None,
                     label_smoothing: float = 0.0, teacher: Tensor | None = None,
                     teacher_weight: float = 0.0, weight: Tensor | None = None) -> Tensor:
    """``sum_k t_k l_k`` averaged over the batch, for a target distribution ``t`` and
    per-class losses ``l_k``: ``-log p_k`` (cross-entropy, ``q`` None) or
    ``(1 - p_k ** q) / q`` (generalized cross-entropy).

    The target mixes the label-smoothed one-hot label with a teacher's distribution:
    ``t = (1 - teacher_weight) * smooth(one_hot(label)) + teacher_weight * teacher`` (Hinton
    et al.'s distillation target; with a teacher that did not see the example, a noisy
    label is pulled towards what the rest of the data says). Example weights and the mean
    are as in :func:`generalized_cross_entropy`.

    Args:
        logits: (batch, classes).
        labels: (batch,) class ids.
        q: None, or the generalized cross-entropy's ``q`` in (0, 1].
        label_smoothing: ``eps`` in [0, 1).
        teacher: optional (batch, classes) probabilities.
        teacher_weight: the teacher's share of the target, in [0, 1].
        weight: optional (classes,) per-class weights.
    """
    wide = logits if logits.dtype == torch.float64 else logits.float()
    logp = F.log_softmax(wide, dim=-1)
    per_class = -logp if q is None else -torch.expm1(q * logp) / q  # (1 - p ** q) / q
    target = F.one_hot(labels, logits.shape[-1]).to(per_class.dtype)
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / logits.shape[-1]
    if teacher is not None and teacher_weight:
        target = (1 - teacher_weight) * target + teacher_weight * teacher.to(target.dtype)
    loss = (target * per_class).sum(-1)
    if weight is None:
        return loss.mean()
    w = weight.to(loss.dtype)[labels]
    return (w * loss).sum() / w.sum()


def distillation_loss(logits: Tensor, teacher_logits: Tensor, labels: Tensor, *,
                      temperature: float = 1.0, alpha: float = 0.5,
                      label_smoothing: float = 0.0, weight: Tensor | None = None) -> Tensor:
    """Hinton et al.'s distillation objective, averaged over the batch.

    Per row: ``a * T**2 * KL(q_T || p_T) + (1 - a) * CE(p, y)``, where ``q_T`` and ``p_T``
    are the teacher's and the student's softmax at temperature ``T`` (``T**2`` keeps the
    soft term's gradients at the scale of the hard term's as ``T`` grows), ``CE`` is the
    label-smoothed cross-entropy of the student at temperature 1, and ``a`` is ``alpha``
    on a row with a gold label and 1 on a row without one (``labels == NO_LABEL``: the
    soft term alone). With ``weight``, each row counts ``weight[c]`` for its class ``c``
    (the gold label, else the teacher's top intent) and the mean divides by the sum of
    those weights. Computed in float32 or wider, from log-probabilities.

    Args:
        logits: (batch, classes) the student's logits.
        teacher_logits: (batch, classes) the teacher's logits or log-probabilities (any
            shift per row gives the same loss).
        labels: (batch,) class ids, :data:`NO_LABEL` for rows without a gold label.
        temperature: ``T`` > 0.
        alpha: the soft term's share on labelled rows, in [0, 1].
        label_smoothing: ``eps`` in [0, 1) of the hard term.
        weight: optional (classes,) per-class weights.

    Raises:
        ValueError: ``temperature`` not positive, ``alpha`` outside [0, 1], or shapes that
            do not match.
    """
    if not temperature > 0:
        raise ValueError(f"the distillation temperature must be positive, got {temperature}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha (the soft term's share) must be in [0, 1], got {alpha}")
    if teacher_logits.shape != logits.shape or labels.shape != logits.shape[:1]:
        raise ValueError(f"logits {tuple(logits.shape)}, teacher logits "
                         f"{tuple(teacher_logits.shape)} and labels {tuple(labels.shape)} "
                         f"do not match")
    wide = logits if logits.dtype == torch.float64 else logits.float()
    t = temperature
    log_p = F.log_softmax(wide / t, dim=-1)
    log_q = F.log_softmax(teacher_logits.to(wide.dtype) / t, dim=-1)
    soft = (log_q.exp() * (log_q - log_p)).sum(-1) * t * t
    labelled = labels != NO_LABEL
    gold = torch.where(labelled, labels, torch.zeros_like(labels))
    hard = F.cross_entropy(wide, gold, reduction="none", label_smoothing=label_smoothing)
    share = torch.where(labelled, torch.full_like(soft, alpha), torch.ones_like(soft))
    loss = share * soft + (1 - share) * hard  # share 1 (soft term alone) without a label
    if weight is None:
        return loss.mean()
    w = weight.to(loss.dtype)[torch.where(labelled, labels, teacher_logits.argmax(-1))]
    return (w * loss).sum() / w.sum()


def outlier_exposure_loss(logits: Tensor) -> Tensor:
    """The cross-entropy between the uniform distribution over the classes and the softmax,
    ``-mean_k log_softmax(logits)_k``, averaged over the rows (Hendrycks et al. 2019's
    outlier exposure term for a classifier). It is ``log(classes)`` plus the KL divergence
    from the uniform distribution to the softmax: least, ``log(classes)``, when every class
    is equally likely. Computed in float32 or wider, from log-probabilities.

    Args:
        logits: (rows, classes), the rows out of scope.

    Raises:
        ValueError: no row, or logits that are not (rows, classes).
    """
    if logits.ndim != 2 or logits.shape[0] == 0:
        raise ValueError(f"outlier_exposure_loss needs (rows, classes) logits with a row, got "
                         f"shape {tuple(logits.shape)}")
    wide = logits if logits.dtype == torch.float64 else logits.float()
    return -F.log_softmax(wide, dim=-1).mean(-1).mean()


@dataclass
class SoftTargets:
    """A teacher's soft targets for a student, as
    :func:`~headwise.intent.training.pipeline.train_intent_classifier` takes them (``soft_targets``;
    built by :func:`headwise.intent.training.distillation.distill`).

    Attributes:
        labels: the teacher's intents, the column order of ``logits``; the student gets
            these intents in this order (every gold training label must be one of them).
        texts: every text that has a target, each once.
        logits: (len(texts), len(labels)) the teacher's log-probabilities (or logits) of
            each text, float64.
        extra: training rows beyond the labelled ones, ``(text, label or None)``:
            unlabelled texts (None: the soft term alone) and augmented copies.
        temperature: the distillation temperature ``T`` (:func:`distillation_loss`).
        alpha: the soft term's share of a labelled row's loss.
        info: recorded as the student's ``info["distill"]``.

    Raises:
        ValueError: shapes that do not match, duplicate texts or labels, an extra row
            without a target, or ``temperature`` / ``alpha`` out of range.
    """

    labels: list[str]
    texts: list[str]
    logits: np.ndarray
    extra: list[tuple[str, str | None]] = field(default_factory=list)
    temperature: float = 1.0
    alpha: float = 0.5
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.logits = np.asarray(self.logits, dtype=np.float64)
        if self.logits.shape != (len(self.texts), len(self.labels)):
            raise ValueError(f"soft-target logits of shape {self.logits.shape} for "
                             f"{len(self.texts)} texts and {len(self.labels)} intents")
        if len(set(self.labels)) != len(self.labels) or len(set(self.texts)) != len(self.texts):
            raise ValueError("soft targets need unique intents and unique texts")
        if not np.isfinite(self.logits).all():
            raise ValueError("soft-target logits must be finite")
        if not self.temperature > 0:
            raise ValueError(f"the distillation temperature must be positive, got "
                             f"{self.temperature}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha}")
        self._row = {t: i for i, t in enumerate(self.texts)}
        self.logits_for([t for t, _ in self.extra])

    def logits_for(self, texts: Sequence[str]) -> np.ndarray:
        """The teacher's logits of ``texts`` (n, intents).

        Raises:
            ValueError: a text without a target (the message quotes it).
        """
        missing = next((t for t in texts if t not in self._row), None)
        if missing is not None:
            raise ValueError(f"no soft target for the text {missing[:60]!r}")
        return self.logits[[self._row[t] for t in texts]].reshape(len(texts), len(self.labels))


class SmoothedClassification(nn.Module):
    """``model`` plus a label-smoothed cross-entropy loss.

    Args:
        model: a classifier whose ``forward(input_ids, attention_mask)`` returns
            ``{"logits": (batch, classes)}``.
        label_smoothing: the smoothing ``eps`` in [0, 1).
        class_weights: optional (classes,) loss weight per intent (a buffer: it follows
            the module to the device and is saved in training checkpoints).
        gce_q: None for cross-entropy; a ``q`` in (0, 1] for the noise-robust
            :func:`generalized_cross_entropy` (with the same smoothing and weights).
        teacher_weight: the share of the target given to a ``teacher`` distribution when
            the batch carries one (:func:`soft_target_loss`); with ``distill_temperature``,
            the soft term's share (``alpha`` of :func:`distillation_loss`).
        distill_temperature: None, or the temperature ``T`` of :func:`distillation_loss`:
            a batch's ``teacher`` then holds the teacher's logits, and rows labelled
            :data:`NO_LABEL` learn from them alone.
        outlier_exposure: the weight ``lambda`` of outlier exposure: rows labelled
            :data:`OUT_OF_SCOPE` add ``lambda`` times :func:`outlier_exposure_loss` (their
            mean) to the loss of the other rows (their mean, as without them). 0: off
            (no row may then be so labelled: cross-entropy refuses the label).
        token_dropout: word dropout on the inputs in training mode
            (:class:`~headwise.intent.training.token_dropout.TokenDropout`), or None.

    Raises:
        ValueError: ``label_smoothing`` outside [0, 1), non-positive weights, ``gce_q``
            outside (0, 1], ``teacher_weight`` outside [0, 1], a non-positive
            ``distill_temperature`` or one with ``gce_q``, a negative ``outlier_exposure``
            or one with ``distill_temperature`` (a teacher's logits on every row).
    """

    def __init__(self, model: nn.Module, label_smoothing: float = 0.0,
                 class_weights: Tensor | None = None, gce_q: float | None = None,
                 teacher_weight: float = 0.0, *,
                 distill_temperature: float | None = None,
                 outlier_exposure: float = 0.0, token_dropout: nn.Module | None = None
                 ) -> None:
        super().__init__()
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        if class_weights is not None and not bool((class_weights > 0).all()):
            raise ValueError("class weights must be positive")
        if gce_q is not None and not 0.0 < gce_q <= 1.0:
            raise ValueError(f"gce_q must be in (0, 1], got {gce_q}")
        if not 0.0 <= teacher_weight <= 1.0:
            raise ValueError(f"teacher_weight must be in [0, 1], got {teacher_weight}")
        if distill_temperature is not None and not distill_temperature > 0:
            raise ValueError(f"distill_temperature must be positive, got "
                             f"{distill_temperature}")
        if distill_temperature is not None and gce_q is not None:
            raise ValueError("distillation (distill_temperature) trains on the KL divergence; "
                             "it does not combine with gce_q")
        if not 0.0 <= outlier_exposure < float("inf"):
            raise ValueError(f"outlier_exposure must be a number >= 0, got {outlier_exposure}")
        if outlier_exposure and distill_temperature is not None:
            raise ValueError("outlier exposure does not combine with distillation "
                             "(distill_temperature): the student learns its teacher's "
                             "distribution on every row")
        self.model = model
        self.token_dropout = token_dropout
        self.outlier_exposure = float(outlier_exposure)
        self.distill_temperature = distill_temperature
        self.gce_q = gce_q
        self.teacher_weight = float(teacher_weight)
        self.label_smoothing = float(label_smoothing)
        self.register_buffer("class_weights", None if class_weights is None
                             else class_weights.float())

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                labels: Tensor | None = None, teacher: Tensor | None = None
                ) -> dict[str, Tensor]:
        """``{"logits"}``, plus ``"loss"`` (mean over the batch) when labels are given
        (``teacher``: optional (batch, classes) probabilities mixed into the target, or the
        teacher's logits with ``distill_temperature``; with ``outlier_exposure``, rows
        labelled :data:`OUT_OF_SCOPE` add its term, the others' loss a mean over them; with
        ``token_dropout``, training-mode inputs lose some tokens first)."""
        if self.token_dropout is not None:
            input_ids = self.token_dropout(input_ids, attention_mask)
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask)["logits"]
        out = {"logits": logits}
        if labels is None:
            return out
        outside = labels == OUT_OF_SCOPE if self.outlier_exposure else None
        if outside is None or not bool(outside.any()):
            out["loss"] = self._in_scope_loss(logits, labels, teacher)
            return out
        loss = self.outlier_exposure * outlier_exposure_loss(logits[outside])
        inside = ~outside
        if bool(inside.any()):  # a batch of out-of-scope rows alone has their term alone
            loss = loss + self._in_scope_loss(logits[inside], labels[inside],
                                              None if teacher is None else teacher[inside])
        out["loss"] = loss
        return out

    def _in_scope_loss(self, logits: Tensor, labels: Tensor, teacher: Tensor | None
                       ) -> Tensor:
        """The loss of rows with an intent (or :data:`NO_LABEL` under distillation), a mean
        over them."""
        if self.distill_temperature is not None and teacher is not None:
            return distillation_loss(logits, teacher, labels,
                                     temperature=self.distill_temperature,
                                     alpha=self.teacher_weight,
                                     label_smoothing=self.label_smoothing,
                                     weight=self.class_weights)
        if self.gce_q is None and (teacher is None or not self.teacher_weight):
            return F.cross_entropy(logits.float(), labels, weight=self.class_weights,
                                   label_smoothing=self.label_smoothing)
        return soft_target_loss(logits, labels, q=self.gce_q,
                                label_smoothing=self.label_smoothing,
                                teacher=teacher, teacher_weight=self.teacher_weight,
                                weight=self.class_weights)

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Forward to the wrapped model (the Trainer's gradient checkpointing switch)."""
        fn = getattr(self.model, "set_gradient_checkpointing", None)
        if fn is None:
            raise TypeError(f"{type(self.model).__name__} has no gradient checkpointing")
        fn(enabled)


@torch.no_grad()
def validation_metrics(model: nn.Module, loader: Iterable[dict[str, Tensor]]
                       ) -> dict[str, float]:
    """The Trainer's ``evaluate_fn`` for a :class:`SmoothedClassification`: validation
    ``accuracy``, ``macro_f1`` (over the intents present in gold or predictions) and the
    mean ``loss``."""
    preds, golds, loss, n = [], [], 0.0, 0
    device = next(model.parameters()).device
    for batch in loader:
        out = model(**{k: v.to(device) for k, v in batch.items()})
        loss += float(out["loss"]) * len(batch["labels"])
        n += len(batch["labels"])
        preds.append(out["logits"].argmax(-1).cpu())
        golds.append(batch["labels"])
    p, g = torch.cat(preds).numpy(), torch.cat(golds).numpy()
    return {"accuracy": float((p == g).mean()), "loss": loss / max(n, 1),
            "macro_f1": float(f1_score(g, p, average="macro", zero_division=0))}


def balanced_multilabel_weights(targets: Sequence[Sequence[float]]) -> Tensor:
    """scikit-learn's "balanced" weights for each intent as its own two-class problem:
    ``(2, intents)``, row 0 the weight of an example without the intent, ``n / (2 *
    negatives)``, row 1 of one with it, ``n / (2 * positives)``; an intent that every
    example has, or none, weighs 1 both ways.

    Raises:
        ValueError: no targets, or targets that are not 0/1.
    """
    y = torch.as_tensor([list(t) for t in targets], dtype=torch.float64)
    if y.ndim != 2 or y.shape[0] == 0:
        raise ValueError("balanced_multilabel_weights needs a non-empty (examples, intents) "
                         "table of 0/1 targets")
    if not bool(((y == 0) | (y == 1)).all()):
        raise ValueError("multi-label targets must be 0 or 1")
    n = y.shape[0]
    pos = y.sum(0)
    neg = n - pos
    both = (pos > 0) & (neg > 0)
    ones = torch.ones_like(pos)
    return torch.stack([torch.where(both, n / (2 * neg.clamp_min(1)), ones),
                        torch.where(both, n / (2 * pos.clamp_min(1)), ones)]).float()


def multilabel_intent_loss(logits: Tensor, targets: Tensor, *, label_smoothing: float = 0.0,
                           weights: Tensor | None = None) -> Tensor:
    """The joint model's intent loss with the recipe's smoothing and weights: binary
    cross-entropy summed over intents and averaged over the batch, against the smoothed
    targets ``y * (1 - eps) + eps / 2`` (each intent's two-class target smoothed as
    cross-entropy smooths it), each term weighted by ``weights[y, intent]``
    (:func:`balanced_multilabel_weights`). With neither, it is
    the joint models' own intent loss (:class:`~headwise.models.joint_heads.JointHeads`).

    Args:
        logits: (batch, intents).
        targets: (batch, intents) 0/1.
        label_smoothing: ``eps`` in [0, 1).
        weights: optional (2, intents).
    """
    z, y = logits.float(), targets.float()
    smoothed = y * (1 - label_smoothing) + label_smoothing / 2 if label_smoothing else y
    w = None if weights is None else torch.where(y > 0.5, weights[1].to(z), weights[0].to(z))
    return F.binary_cross_entropy_with_logits(z, smoothed, weight=w,
                                              reduction="sum") / z.shape[0]


class CompoundObjective(nn.Module):
    """A joint model (:class:`~headwise.models.joint_heads.JointHeads`) whose intent loss
    takes the recipe's label smoothing and class weights (:func:`multilabel_intent_loss`); the slot
    loss and the sum ``intent + slot_loss_weight * tag`` are the model's. Trained by the
    Trainer in place of the model; the model is trained in place.

    Args:
        model: a multi-label joint model.
        label_smoothing: ``eps`` in [0, 1).
        weights: optional (2, intents) weights (a buffer: saved in training checkpoints).
        token_dropout: word dropout on the inputs in training mode
            (:class:`~headwise.intent.training.token_dropout.TokenDropout`; a dropped token
            keeps its slot tag), or None.

    Raises:
        ValueError: a single-label model, ``label_smoothing`` outside [0, 1), or weights
            that are not positive or not ``(2, intents)``.
    """

    def __init__(self, model: JointHeads, label_smoothing: float = 0.0,
                 weights: Tensor | None = None, token_dropout: nn.Module | None = None
                 ) -> None:
        super().__init__()
        if not model.multi_label:
            raise ValueError("CompoundObjective is for a multi-label joint model")
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        intents = model.classifier.out_features
        if weights is not None and (tuple(weights.shape) != (2, intents)
                                    or not bool((weights > 0).all())):
            raise ValueError(f"weights must be positive and (2, {intents}), got "
                             f"{tuple(weights.shape)}")
        self.model = model
        self.token_dropout = token_dropout
        self.label_smoothing = float(label_smoothing)
        self.register_buffer("weights", None if weights is None else weights.float())

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                labels: Tensor | None = None, tag_labels: Tensor | None = None
                ) -> dict[str, Tensor]:
        """The model's outputs, with ``"intent_loss"`` and ``"loss"`` recomputed when
        ``labels`` are given (with ``token_dropout``, training-mode inputs lose some tokens
        first)."""
        if self.token_dropout is not None:
            input_ids = self.token_dropout(input_ids, attention_mask)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         tag_labels=tag_labels)
        if labels is None:
            return out
        if labels.shape != out["logits"].shape:
            raise ValueError(f"multi-label targets must be {tuple(out['logits'].shape)}, got "
                             f"{tuple(labels.shape)}")
        out["intent_loss"] = multilabel_intent_loss(out["logits"], labels,
                                                    label_smoothing=self.label_smoothing,
                                                    weights=self.weights)
        out["loss"] = out["intent_loss"]
        if "tag_loss" in out:
            out["loss"] = out["loss"] + self.model.config.slot_loss_weight * out["tag_loss"]
        return out

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Forward to the wrapped model (the Trainer's gradient checkpointing switch)."""
        self.model.set_gradient_checkpointing(enabled)
