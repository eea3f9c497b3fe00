"""Linear probing before fine-tuning (LP-FT) for a pretrained encoder.

Fine-tuning a pretrained encoder with a freshly initialised head first back-propagates the
random head's large errors into the encoder and distorts features that were already good;
fitting the head alone on the frozen features first ("linear probing"), then fine-tuning
everything from there, keeps more of them and generalises better (Kumar et al. 2022,
"Fine-Tuning can Distort Pretrained Features and Underperform Out-of-Distribution").

:func:`fit_linear_probe` computes the encoder's pooled vectors of the training texts once,
in eval mode, fits a multinomial logistic regression on them (L2-regularised cross-entropy,
full-batch L-BFGS in float64: the objective of scikit-learn's ``LogisticRegression``) and
writes the result into the model's ``classifier`` layer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headwise.text.batching import pad_collate

__all__ = ["ProbeResult", "fit_linear_probe", "fit_logistic_regression", "pooled_features"]


@dataclass
class ProbeResult:
    """What the linear probe did.

    Attributes:
        train_accuracy: the probe's accuracy on the features it was fitted on.
        iterations: L-BFGS iterations.
        loss: final regularised objective (mean cross-entropy + penalty).
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
                            tol: float = 1e-7) -> tuple[Tensor, Tensor, int, float]:
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

    Returns:
        ``(weight (num_classes, d), bias (num_classes,), iterations, loss)``, float64.

    Raises:
        ValueError: mismatched shapes, labels out of range, or ``c`` not positive.
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
    w = torch.zeros(num_classes, d, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(num_classes, dtype=torch.float64, requires_grad=bias)
    opt = torch.optim.LBFGS([w, b] if bias else [w], max_iter=max_iter, tolerance_grad=tol,
                            tolerance_change=1e-12, history_size=20,
                            line_search_fn="strong_wolfe")

    def objective() -> Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(x @ w.T + b, y) + (w * w).sum() / (2 * c * n)
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(objective)
        loss = float(objective().detach())
    iterations = int(opt.state[w].get("n_iter", 0))
    return w.detach(), b.detach(), iterations, loss


def fit_linear_probe(model: nn.Module, ids: Sequence[Sequence[int]], labels: Sequence[int], *,
                     pad_id: int = 0, c: float = 1.0, batch_size: int = 64) -> ProbeResult:
    """Fit ``model.classifier`` on the frozen encoder's pooled vectors (the LP of LP-FT).

    Args:
        model: an encoder classifier (``encode``, ``pool``, a linear ``classifier``).
        ids: token ids of the training texts.
        labels: their class indices.
        pad_id: the padding id.
        c: inverse L2 strength (scikit-learn's ``C``).
        batch_size: texts per forward pass when computing the features.

    Returns:
        The :class:`ProbeResult`; the head's weight and bias are replaced in place.

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
    w, b, iterations, loss = fit_logistic_regression(x, y, head.out_features, c=c,
                                                     bias=head.bias is not None)
    with torch.no_grad():
        head.weight.copy_(w.to(head.weight.dtype))
        if head.bias is not None:
            head.bias.copy_(b.to(head.bias.dtype))
    accuracy = float(((x @ w.T + b).argmax(1) == y).double().mean())
    return ProbeResult(train_accuracy=accuracy, iterations=iterations, loss=loss,
                       seconds=time.perf_counter() - start)
