"""Linear probing before fine-tuning (LP-FT) for a pretrained encoder.

Fine-tuning a pretrained encoder with a freshly initialised head first back-propagates the
random head's large errors into the encoder and distorts features that were already good;
fitting the head alone on the frozen features first ("linear probing"), then fine-tuning
everything from there, keeps more of them and generalises better (Kumar et al. 2022,
"Fine-Tuning can Distort Pretrained Features and Underperform Out-of-Distribution").

:func:`fit_linear_probe` computes the encoder's pooled vectors of the training texts once,
in eval mode, fits a multinomial logistic regression on them (L2-regularised cross-entropy,
full-batch L-BFGS in float64: the objective of scikit-learn's ``LogisticRegression``) and
writes the result into the model's ``classifier`` layer. :func:`fit_multilabel_probe` is
the same for a multi-label joint model (one sigmoid per intent): one binary logistic
regression per intent, fitted with scikit-learn on the same frozen features.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headwise.text.batching import pad_collate
from headwise.text.bio import IGNORE_INDEX

#: how far below the fitted tags' lowest bias a tag no training token has starts
_ABSENT_MARGIN = 20.0

__all__ = ["ProbeResult", "fit_linear_probe", "fit_logistic_regression", "fit_multilabel_probe",
           "fit_tag_probe", "pooled_features", "token_features"]


@dataclass
class ProbeResult:
    """What the linear probe did.

    Attributes:
        train_accuracy: the probe's accuracy on the features it was fitted on (multi-label:
            exact match at probability 0.5, every intent of a text right).
        iterations: L-BFGS iterations (multi-label: the most any intent's fit took).
        loss: final regularised objective (mean cross-entropy + penalty; multi-label: the
            binary cross-entropy summed over intents, averaged over the texts, unweighted
            and without the penalty).
        seconds: wall time, features included.
    """

    train_accuracy: float
    iterations: int
    loss: float
    seconds: float


@torch.no_grad()
def pooled_features(model: nn.Module, ids: Sequence[Sequence[int]], *, pad_id: int = 0,
                    batch_size: int = 64) -> Tensor:
    """The pooled vectors (n, d) float64 that ``model.classifier`` reads, in eval mode.

    Args:
        model: an encoder classifier with ``encode(input_ids, attention_mask)`` and
            ``pool(hidden, attention_mask)``.
        ids: token ids of each text (special tokens included, no padding).
        pad_id: the padding id.
        batch_size: texts per forward pass (sorted by length, so little padding).

    Raises:
        TypeError: a model without ``encode`` and ``pool``.
        ValueError: no texts, or an empty one.
    """
    if not (callable(getattr(model, "encode", None)) and callable(getattr(model, "pool", None))):
        raise TypeError(f"{type(model).__name__} has no encode/pool: linear probing needs an "
                        f"encoder classifier")
    if not ids or any(len(row) == 0 for row in ids):
        raise ValueError("linear probing needs non-empty token sequences")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out: Tensor | None = None
    try:
        for start in range(0, len(order), batch_size):
            group = order[start:start + batch_size]
            batch = pad_collate([{"input_ids": ids[i]} for i in group], pad_id)
            x, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)
            pooled = model.pool(model.encode(x, mask), mask).double().cpu()
            if out is None:
                out = torch.empty(len(ids), pooled.shape[1], dtype=torch.float64)
            out[torch.tensor(group)] = pooled
    finally:
        model.train(was_training)
    assert out is not None
    return out


def fit_logistic_regression(features: Tensor, labels: Tensor, num_classes: int, *,
                            c: float = 1.0, bias: bool = True, max_iter: int = 500,
                            tol: float = 1e-7,
                            fixed: tuple[Sequence[int], Tensor, Tensor] | None = None
                            ) -> tuple[Tensor, Tensor, int, float]:
    """Multinomial logistic regression: minimise ``mean CE + |W|^2 / (2 c n)`` (the bias
    is not penalised), which is scikit-learn's ``C * sum CE + |W|^2 / 2`` divided by ``c n``.

    Args:
        features: (n, d) float.
        labels: (n,) class indices.
        num_classes: classes (columns of the logits).
        c: inverse regularisation strength, as scikit-learn's ``C``.
        bias: fit a bias (else it stays zero).
        max_iter: L-BFGS iteration limit.
        tol: stop when the gradient's largest entry is below it.
        fixed: ``(rows, weight, bias)``: these classes' rows of the result are ``weight``
            (``(len(rows), d)``) and ``bias``, held fixed in the softmax while the other
            rows are fitted against them (and only those are penalised): new classes added
            to a trained head, whose rows stay as they are.

    Returns:
        ``(weight (num_classes, d), bias (num_classes,), iterations, loss)``, float64.

    Raises:
        ValueError: mismatched shapes, labels out of range, ``c`` not positive, or fixed
            rows out of range, repeated, of the wrong shape, or all of them.
    """
    x = features.double()
    y = labels.long()
    if x.ndim != 2 or y.shape != (x.shape[0],) or x.shape[0] == 0:
        raise ValueError(f"features must be (n, d) and labels (n,), got {tuple(x.shape)} and "
                         f"{tuple(y.shape)}")
    if int(y.min()) < 0 or int(y.max()) >= num_classes:
        raise ValueError(f"labels must lie in [0, {num_classes})")
    if not c > 0:
        raise ValueError(f"c must be positive, got {c}")
    n, d = x.shape
    kept = sorted(fixed[0]) if fixed is not None else []
    if fixed is not None:
        rows = list(fixed[0])
        if len(set(rows)) != len(rows) or any(not 0 <= r < num_classes for r in rows) \
                or len(rows) == num_classes:
            raise ValueError(f"fixed rows must be distinct classes in [0, {num_classes}) and "
                             f"leave some to fit, got {rows}")
        if tuple(fixed[1].shape) != (len(rows), d) or tuple(fixed[2].shape) != (len(rows),):
            raise ValueError(f"fixed weight must be ({len(rows)}, {d}) and bias "
                             f"({len(rows)},), got {tuple(fixed[1].shape)} and "
                             f"{tuple(fixed[2].shape)}")
        order = sorted(range(len(rows)), key=rows.__getitem__)
        w_fixed, b_fixed = fixed[1].double()[order], fixed[2].double()[order]
    free = [k for k in range(num_classes) if k not in set(kept)]
    w = torch.zeros(len(free), d, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(len(free), dtype=torch.float64, requires_grad=bias)
    opt = torch.optim.LBFGS([w, b] if bias else [w], max_iter=max_iter, tolerance_grad=tol,
                            tolerance_change=1e-12, history_size=20,
                            line_search_fn="strong_wolfe")
    free_index = torch.tensor(free, dtype=torch.long)

    def full() -> tuple[Tensor, Tensor]:
        if not kept:
            return w, b
        weight = torch.zeros(num_classes, d, dtype=torch.float64)
        shift = torch.zeros(num_classes, dtype=torch.float64)
        weight = weight.index_copy(0, torch.tensor(kept), w_fixed).index_copy(0, free_index, w)
        shift = shift.index_copy(0, torch.tensor(kept), b_fixed).index_copy(0, free_index, b)
        return weight, shift

    def objective() -> Tensor:
        opt.zero_grad()
        weight, shift = full()
        loss = F.cross_entropy(x @ weight.T + shift, y) + (w * w).sum() / (2 * c * n)
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(objective)
        loss = float(objective().detach())
    iterations = int(opt.state[w].get("n_iter", 0))
    weight, shift = full()
    return weight.detach(), shift.detach(), iterations, loss


def _kept_rows(head: nn.Linear, keep: Sequence[int]) -> tuple[list[int], Tensor, Tensor]:
    """``fit_logistic_regression``'s ``fixed``: a head's rows ``keep`` as they are, float64
    (a head without a bias keeps zeros)."""
    rows = list(keep)
    bias = head.bias.detach()[rows] if head.bias is not None else torch.zeros(len(rows))
    return rows, head.weight.detach()[rows].double(), bias.double()


def fit_linear_probe(model: nn.Module, ids: Sequence[Sequence[int]], labels: Sequence[int], *,
                     pad_id: int = 0, c: float = 1.0, batch_size: int = 64,
                     keep: Sequence[int] | None = None) -> ProbeResult:
    """Fit ``model.classifier`` on the frozen encoder's pooled vectors (the LP of LP-FT).

    Args:
        model: an encoder classifier (``encode``, ``pool``, a linear ``classifier``).
        ids: token ids of the training texts.
        labels: their class indices.
        pad_id: the padding id.
        c: inverse L2 strength (scikit-learn's ``C``).
        batch_size: texts per forward pass when computing the features.
        keep: classes whose rows of the head stay as they are, fixed in the softmax while
            the other rows are fitted against them (a warm start's new intents beside the
            parent's trained rows).

    Returns:
        The :class:`ProbeResult`; the head's weight and bias are replaced in place (the
        rows not in ``keep``).

    Raises:
        TypeError: a model without ``encode``/``pool`` or a non-linear ``classifier``.
        ValueError: as :func:`pooled_features` and :func:`fit_logistic_regression`.
    """
    head = getattr(model, "classifier", None)
    if not isinstance(head, nn.Linear):
        raise TypeError(f"{type(model).__name__}.classifier must be an nn.Linear for linear "
                        f"probing")
    if len(labels) != len(ids):
        raise ValueError(f"{len(ids)} texts but {len(labels)} labels")
    start = time.perf_counter()
    x = pooled_features(model, ids, pad_id=pad_id, batch_size=batch_size)
    y = torch.as_tensor(list(labels), dtype=torch.long)
    w, b, iterations, loss = fit_logistic_regression(
        x, y, head.out_features, c=c, bias=head.bias is not None,
        fixed=_kept_rows(head, keep) if keep else None)
    with torch.no_grad():
        head.weight.copy_(w.to(head.weight.dtype))
        if head.bias is not None:
            head.bias.copy_(b.to(head.bias.dtype))
    accuracy = float(((x @ w.T + b).argmax(1) == y).double().mean())
    return ProbeResult(train_accuracy=accuracy, iterations=iterations, loss=loss,
                       seconds=time.perf_counter() - start)


def fit_multilabel_probe(model: nn.Module, ids: Sequence[Sequence[int]],
                         targets: Sequence[Sequence[float]], *, pad_id: int = 0, c: float = 1.0,
                         balanced: bool = False, batch_size: int = 64,
                         only: Sequence[int] | None = None) -> ProbeResult:
    """Fit a multi-label ``model.classifier`` (one sigmoid per intent) on the frozen
    encoder's pooled vectors: the LP of LP-FT for the multi-label task.

    Each intent gets its own binary logistic regression (scikit-learn's
    ``LogisticRegression``, L2 with inverse strength ``c``, the bias not penalised by
    L-BFGS) on the pooled vectors of :func:`pooled_features`; its coefficients and intercept
    become the intent's row of the head, so the head's logits on those vectors are the
    regressions' decision functions. An intent that every text has, or none, cannot be
    fitted: its row is zero and its bias the log-odds of its training frequency clipped to
    [1e-4, 1 - 1e-4] (the prior start of
    :func:`~headwise.intent.training.compound.init_prior_bias`).

    Args:
        model: a multi-label joint model (``encode``, ``pool``, a linear ``classifier``
            with a bias).
        ids: token ids of the training texts.
        targets: their multi-hot intent targets, one 0/1 per head output.
        pad_id: the padding id.
        c: inverse L2 strength (scikit-learn's ``C``).
        balanced: weight each intent's positives and negatives to count equally
            (scikit-learn's ``class_weight="balanced"``, as the recipe's
            ``class_weighting="balanced"`` weights the fine-tuning loss).
        batch_size: texts per forward pass when computing the features.
        only: fit these intents' rows and keep the others as they are (a warm start's new
            intents beside the parent's trained rows; each intent's regression is its own,
            so a kept row changes nothing in a fitted one).

    Returns:
        The :class:`ProbeResult` (its loss and accuracy over every row of the head); the
        head's weight and bias are replaced in place.

    Raises:
        TypeError: a model without ``encode``/``pool`` or without a linear ``classifier``
            with a bias.
        ValueError: targets that are not 0/1, or of the wrong shape; ``c`` not positive;
            ``only`` rows outside the head; as :func:`pooled_features`.
    """
    from sklearn.linear_model import LogisticRegression

    head = getattr(model, "classifier", None)
    if not isinstance(head, nn.Linear) or head.bias is None:
        raise TypeError(f"{type(model).__name__}.classifier must be an nn.Linear with a bias "
                        f"for linear probing")
    y = torch.as_tensor([list(t) for t in targets], dtype=torch.float64)
    if y.ndim != 2 or y.shape != (len(ids), head.out_features):
        raise ValueError(f"targets must be ({len(ids)}, {head.out_features}), got "
                         f"{tuple(y.shape)}")
    if not bool(((y == 0) | (y == 1)).all()):
        raise ValueError("multi-label targets must be 0 or 1")
    if not c > 0:
        raise ValueError(f"c must be positive, got {c}")
    rows = range(head.out_features) if only is None else sorted(set(only))
    if any(not 0 <= j < head.out_features for j in rows):
        raise ValueError(f"only must name rows in [0, {head.out_features}), got {list(only)}")
    start = time.perf_counter()
    x = pooled_features(model, ids, pad_id=pad_id, batch_size=batch_size)
    features, labels = x.numpy(), y.numpy().astype(int)
    w = head.weight.detach().double().clone()
    b = head.bias.detach().double().clone()
    iterations = 0
    for j in rows:
        w[j] = 0.0
        column = labels[:, j]
        if column.min() == column.max():  # one class only: the clipped prior, no weights
            p = min(max(float(column.mean()), 1e-4), 1 - 1e-4)
            b[j] = float(torch.tensor(p / (1 - p), dtype=torch.float64).log())
            continue
        fit = LogisticRegression(C=c, max_iter=1000,
                                 class_weight="balanced" if balanced else None)
        fit.fit(features, column)
        w[j] = torch.from_numpy(fit.coef_[0])
        b[j] = float(fit.intercept_[0])
        iterations = max(iterations, int(fit.n_iter_[0]))
    with torch.no_grad():
        head.weight.copy_(w.to(head.weight.dtype))
        head.bias.copy_(b.to(head.bias.dtype))
    logits = x @ w.T + b
    loss = float(F.binary_cross_entropy_with_logits(logits, y, reduction="sum")) / len(ids)
    exact = float(((logits > 0).double() == y).all(1).double().mean())
    return ProbeResult(train_accuracy=exact, iterations=iterations, loss=loss,
                       seconds=time.perf_counter() - start)


@torch.no_grad()
def token_features(model: nn.Module, ids: Sequence[Sequence[int]],
                   tags: Sequence[Sequence[int]], *, pad_id: int = 0, batch_size: int = 64
                   ) -> tuple[Tensor, Tensor]:
    """The token states (n, d) float64 that a joint model's ``tagger`` reads, of every token
    with a tag (``-100`` marks the ones not scored), and those tags (n,), in eval mode.

    Raises:
        TypeError: a model without ``encode``.
        ValueError: ``tags`` of another length than their ``ids``; no texts.
    """
    if not callable(getattr(model, "encode", None)):
        raise TypeError(f"{type(model).__name__} has no encode: probing its tagger needs an "
                        f"encoder")
    if not ids or len(ids) != len(tags) or any(
            len(a) != len(t) for a, t in zip(ids, tags, strict=True)):
        raise ValueError("every text needs one tag (or -100) per token id")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    states, labels = [], []
    try:
        for start in range(0, len(order), batch_size):
            group = order[start:start + batch_size]
            batch = pad_collate([{"input_ids": ids[i]} for i in group], pad_id)
            x, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)
            hidden = model.encode(x, mask).double().cpu()
            target = torch.full(x.shape, IGNORE_INDEX, dtype=torch.long)
            for row, i in enumerate(group):
                target[row, :len(tags[i])] = torch.as_tensor(tags[i], dtype=torch.long)
            keep = target != IGNORE_INDEX
            states.append(hidden[keep])
            labels.append(target[keep])
    finally:
        model.train(was_training)
    return torch.cat(states), torch.cat(labels)


def fit_tag_probe(model: nn.Module, ids: Sequence[Sequence[int]],
                  tags: Sequence[Sequence[int]], *, pad_id: int = 0, c: float = 1.0,
                  batch_size: int = 64, keep: Sequence[int] | None = None
                  ) -> ProbeResult | None:
    """Fit a joint model's slot ``tagger`` on the frozen encoder's token states: the LP of
    LP-FT for the tag head, as :func:`fit_multilabel_probe` is for the intent head.

    One multinomial logistic regression over the BIO tags (scikit-learn's
    ``LogisticRegression``, L2 with inverse strength ``c``) on the states of every scored
    token (:func:`token_features`); its coefficients and intercepts become the tagger's
    rows, so the tagger's logits on those states are the regression's decision function.
    A tag no training token has gets no weights and a bias far below the others (its
    probability stays near zero until fine-tuning sees it). A fresh tagger trained only by
    fine-tuning at a pretrained encoder's learning rate learns slowly in the few steps of a
    small data set (BENCHMARKS ``compound:cpu``); the probe starts it where a linear model
    on the frozen states can get.

    Args:
        model: a joint model with ``encode`` and a linear ``tagger`` with a bias.
        ids: token ids of the training texts.
        tags: their tag ids, one per token id, ``-100`` where not scored.
        pad_id: the padding id.
        c: inverse L2 strength (scikit-learn's ``C``).
        batch_size: texts per forward pass when computing the states.
        keep: tags whose rows of the tagger stay as they are, fixed in the softmax while
            the other rows are fitted against them (:func:`fit_logistic_regression`'s
            ``fixed``): a warm start's new slot tags beside the parent's trained ones.

    Returns:
        The :class:`ProbeResult` (``train_accuracy``: the share of scored tokens tagged
        right), or None when there is nothing to fit (the tagger is left as it is): the
        training tokens have fewer than two tags, or, with ``keep``, no tokens at all.

    Raises:
        TypeError: a model without ``encode`` or without a linear ``tagger`` with a bias.
        ValueError: a tag id outside the tagger's; ``c`` not positive; as
            :func:`token_features`.
    """
    from sklearn.linear_model import LogisticRegression

    head = getattr(model, "tagger", None)
    if not isinstance(head, nn.Linear) or head.bias is None:
        raise TypeError(f"{type(model).__name__}.tagger must be an nn.Linear with a bias for "
                        f"linear probing")
    if not c > 0:
        raise ValueError(f"c must be positive, got {c}")
    start = time.perf_counter()
    x, y = token_features(model, ids, tags, pad_id=pad_id, batch_size=batch_size)
    if len(y) and (int(y.min()) < 0 or int(y.max()) >= head.out_features):
        raise ValueError(f"tag ids must be in [0, {head.out_features}) or -100")
    if keep:
        if not len(y):
            return None
        w, b, iterations, _ = fit_logistic_regression(x, y, head.out_features, c=c,
                                                      fixed=_kept_rows(head, keep))
        return _set_tagger(head, w, b, x, y, iterations=iterations, start=start)
    present = torch.unique(y).tolist()
    if len(present) < 2:
        return None
    fit = LogisticRegression(C=c, max_iter=1000)
    fit.fit(x.numpy(), y.numpy())
    coef = torch.from_numpy(fit.coef_)
    intercept = torch.from_numpy(fit.intercept_)
    if len(present) == 2:  # scikit-learn keeps one row for two classes: logits (0, z)
        coef = torch.cat([torch.zeros_like(coef), coef])
        intercept = torch.cat([torch.zeros_like(intercept), intercept])
    w = torch.zeros(head.out_features, x.shape[1], dtype=torch.float64)
    b = torch.full((head.out_features,), float(intercept.min()) - _ABSENT_MARGIN,
                   dtype=torch.float64)
    w[present], b[present] = coef, intercept
    return _set_tagger(head, w, b, x, y, iterations=int(fit.n_iter_.max()), start=start)


def _set_tagger(head: nn.Linear, w: Tensor, b: Tensor, x: Tensor, y: Tensor, *,
                iterations: int, start: float) -> ProbeResult:
    """Copy a fitted tag regression into the tagger; its fit on the probed tokens."""
    with torch.no_grad():
        head.weight.copy_(w.to(head.weight.dtype))
        head.bias.copy_(b.to(head.bias.dtype))
    logits = x @ w.T + b
    loss = float(F.cross_entropy(logits, y))
    accuracy = float((logits.argmax(1) == y).double().mean())
    return ProbeResult(train_accuracy=accuracy, iterations=iterations, loss=loss,
                       seconds=time.perf_counter() - start)
