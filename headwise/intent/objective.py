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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from sklearn.metrics import f1_score
from torch import Tensor, nn


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
            the batch carries one (:func:`soft_target_loss`).

    Raises:
        ValueError: ``label_smoothing`` outside [0, 1), non-positive weights, ``gce_q``
            outside (0, 1], or ``teacher_weight`` outside [0, 1].
    """

    def __init__(self, model: nn.Module, label_smoothing: float = 0.0,
                 class_weights: Tensor | None = None, gce_q: float | None = None,
                 teacher_weight: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        if class_weights is not None and not bool((class_weights > 0).all()):
            raise ValueError("class weights must be positive")
        if gce_q is not None and not 0.0 < gce_q <= 1.0:
            raise ValueError(f"gce_q must be in (0, 1], got {gce_q}")
        if not 0.0 <= teacher_weight <= 1.0:
            raise ValueError(f"teacher_weight must be in [0, 1], got {teacher_weight}")
        self.model = model
        self.gce_q = gce_q
        self.teacher_weight = float(teacher_weight)
        self.label_smoothing = float(label_smoothing)
        self.register_buffer("class_weights", None if class_weights is None
                             else class_weights.float())

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                labels: Tensor | None = None, teacher: Tensor | None = None
                ) -> dict[str, Tensor]:
        """``{"logits"}``, plus ``"loss"`` (mean over the batch) when labels are given
        (``teacher``: optional (batch, classes) probabilities mixed into the target)."""
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask)["logits"]
        out = {"logits": logits}
        if labels is None:
            return out
        if self.gce_q is None and (teacher is None or not self.teacher_weight):
            out["loss"] = F.cross_entropy(logits.float(), labels, weight=self.class_weights,
                                          label_smoothing=self.label_smoothing)
        else:
            out["loss"] = soft_target_loss(logits, labels, q=self.gce_q,
                                           label_smoothing=self.label_smoothing,
                                           teacher=teacher, teacher_weight=self.teacher_weight,
                                           weight=self.class_weights)
        return out

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
