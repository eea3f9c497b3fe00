"""Classification metrics, calibration error and a confusion-matrix figure.

* :func:`classification_metrics`: accuracy, macro/weighted F1, macro precision/recall, a
  per-label report and the confusion matrix, all computed by scikit-learn.
* :func:`expected_calibration_error`: ECE with equal-width confidence bins
  (Naeini et al. 2015; Guo et al. 2017).
* :func:`confusion_matrix_png`: a heat map of a confusion matrix, readable with many
  labels and with Chinese label names when a CJK font is installed.

Inputs may be lists, NumPy arrays or tensors (on any device). scikit-learn and
matplotlib are imported on first use, so importing this module stays cheap.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# the CJK font choice is shared with the head-analysis report's figures
from headwise._fonts import installed_cjk_font as _installed_cjk_font
from headwise._fonts import quiet_fonts as _quiet_fonts


def _to_numpy(values: Any) -> np.ndarray:
    if hasattr(values, "detach"):  # a torch tensor, without importing torch here
        values = values.detach().cpu().numpy()
    return np.asarray(values)


def _as_labels(values: Any, name: str) -> np.ndarray:
    arr = _to_numpy(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one label per example), got shape {arr.shape}; "
                         f"for logits or probabilities pass their argmax")
    return arr


def classification_metrics(y_true: Any, y_pred: Any,
                           labels: Sequence[str] | None = None) -> dict[str, Any]:
    """Accuracy, F1, precision, recall, a per-label report and the confusion matrix.

    Labels are class ids (integers) or names (strings). With ``labels`` given, ids index
    into it and names must be in it; every listed label gets a row in the per-label
    report and the confusion matrix, in that order. Without it, the labels are the
    sorted union of the values in ``y_true`` and ``y_pred``.

    Macro averages run over the labels that occur in ``y_true`` or ``y_pred``
    (scikit-learn's default), so naming the full label set does not change them. A
    label only in ``y_true`` (never predicted) or only in ``y_pred`` (no support) counts
    with precision/recall 0 where undefined (``zero_division=0``) and is listed under
    ``"labels_only_in_true"`` / ``"labels_only_in_pred"``.

    Args:
        y_true: (n,) gold labels.
        y_pred: (n,) predicted labels.
        labels: label names, index = class id.

    Returns:
        A JSON-serialisable dict with ``num_examples``, ``accuracy``, ``macro_f1``,
        ``weighted_f1``, ``macro_precision``, ``macro_recall``, ``labels`` (names, the
        order of the rows below), ``per_label`` (name -> precision, recall, f1,
        support), ``confusion_matrix`` (nested list, rows = true, columns = predicted),
        ``labels_only_in_true``, ``labels_only_in_pred`` and ``labels_absent`` (listed
        but in neither).

    Raises:
        ValueError: inputs of different lengths, empty, not 1-D, ids outside
            ``labels``, or names missing from ``labels``.
    """
    from sklearn import metrics as skm  # scikit-learn is slow to import: do it on use

    t, p = _as_labels(y_true, "y_true"), _as_labels(y_pred, "y_pred")
    if len(t) != len(p):
        raise ValueError(f"y_true and y_pred differ in length: {len(t)} vs {len(p)}")
    if len(t) == 0:
        raise ValueError("no examples: y_true and y_pred are empty")
    t, p, names = _encode(t, p, labels)
    ids = list(range(len(names)))
    seen_t, seen_p = set(t.tolist()), set(p.tolist())
    present = sorted(seen_t | seen_p)
    macro = skm.precision_recall_fscore_support(t, p, labels=present, average="macro",
                                                zero_division=0)
    weighted = skm.precision_recall_fscore_support(t, p, labels=present, average="weighted",
                                                   zero_division=0)
    prec, rec, f1, support = skm.precision_recall_fscore_support(
        t, p, labels=ids, average=None, zero_division=0)
    cm = skm.confusion_matrix(t, p, labels=ids)
    return {
        "num_examples": len(t),
        "accuracy": float(skm.accuracy_score(t, p)),
        "macro_f1": float(macro[2]),
        "weighted_f1": float(weighted[2]),
        "macro_precision": float(macro[0]),
        "macro_recall": float(macro[1]),
        "labels": list(names),
        "per_label": {
            names[i]: {"precision": float(prec[i]), "recall": float(rec[i]),
                       "f1": float(f1[i]), "support": int(support[i])}
            for i in ids
        },
        "confusion_matrix": cm.tolist(),
        "labels_only_in_true": [names[i] for i in sorted(seen_t - seen_p)],
        "labels_only_in_pred": [names[i] for i in sorted(seen_p - seen_t)],
        "labels_absent": [names[i] for i in ids if i not in seen_t and i not in seen_p],
    }


def _encode(t: np.ndarray, p: np.ndarray, labels: Sequence[str] | None
            ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Map both label arrays to ids 0..k-1 and return the k names."""
    is_text = [a.dtype.kind in "USO" for a in (t, p)]
    if any(is_text):
        if not all(is_text):
            raise ValueError("y_true and y_pred mix label names and ids; use one kind")
        names = [str(x) for x in labels] if labels is not None else sorted(
            {str(x) for x in np.concatenate([t, p]).tolist()})
        index = {n: i for i, n in enumerate(names)}
        if len(index) != len(names):
            raise ValueError("labels contains duplicate names")
        unknown = sorted({str(x) for x in np.concatenate([t, p]).tolist()} - set(index))
        if unknown:
            raise ValueError(f"label names not in labels: {unknown[:10]}")
        enc = np.vectorize(lambda x: index[str(x)], otypes=[np.int64])
        return enc(t), enc(p), names
    for a, name in ((t, "y_true"), (p, "y_pred")):
        if a.dtype.kind not in "iub":
            raise ValueError(f"{name} must hold integer class ids or label names, got dtype "
                             f"{a.dtype}")
    t, p = t.astype(np.int64), p.astype(np.int64)
    if labels is not None:
        names = [str(x) for x in labels]
        bad = sorted({int(x) for x in np.concatenate([t, p]) if not 0 <= x < len(names)})
        if bad:
            raise ValueError(f"class ids outside labels (0..{len(names) - 1}): {bad[:10]}")
        return t, p, names
    values = np.unique(np.concatenate([t, p]))
    return np.searchsorted(values, t), np.searchsorted(values, p), [str(v) for v in values]


def expected_calibration_error(probs: Any, y_true: Any, n_bins: int = 15) -> float:
    """Expected calibration error of the top-class confidence.

    The confidences ``max_c probs[i, c]`` fall into ``n_bins`` equal-width bins
    ``(0, 1/n], (1/n, 2/n], ..., ((n-1)/n, 1]`` (a confidence of 0 joins the first). Then
    ``ECE = sum_b |B_b| / N * |accuracy(B_b) - mean confidence(B_b)|``, where accuracy
    is how often the argmax equals the gold label.

    Args:
        probs: (N, num_classes) class probabilities (rows summing to 1).
        y_true: (N,) gold class ids.
        n_bins: number of bins.

    Returns:
        The ECE, in [0, 1].

    Raises:
        ValueError: wrong shapes, no examples, ``n_bins < 1``, values that are not
            probabilities (e.g. logits), or class ids out of range.
    """
    probs_np = _to_numpy(probs).astype(np.float64)
    y = _as_labels(y_true, "y_true")
    if probs_np.ndim != 2:
        raise ValueError(f"probs must be (N, num_classes), got shape {probs_np.shape}")
    if probs_np.shape[0] != len(y) or len(y) == 0:
        raise ValueError(f"need matching, non-empty inputs: probs has {probs_np.shape[0]} rows, "
                         f"y_true {len(y)}")
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    if (not np.isfinite(probs_np).all() or probs_np.min() < 0 or probs_np.max() > 1
            or not np.allclose(probs_np.sum(axis=1), 1.0, atol=1e-2)):
        raise ValueError("probs must be probabilities in [0, 1] with rows summing to 1 "
                         "(apply softmax to logits first)")
    if y.dtype.kind not in "iu" or y.min() < 0 or y.max() >= probs_np.shape[1]:
        raise ValueError(f"y_true must hold class ids in [0, {probs_np.shape[1]})")
    confidence = probs_np.max(axis=1)
    correct = (probs_np.argmax(axis=1) == y).astype(np.float64)
    inner_edges = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    bins = np.searchsorted(inner_edges, confidence, side="left")  # right-closed bins
    ece = 0.0
    for b in range(n_bins):
        in_bin = bins == b
        if in_bin.any():
            ece += in_bin.mean() * abs(correct[in_bin].mean() - confidence[in_bin].mean())
    return float(ece)


def confusion_matrix_png(cm: Any, labels: Sequence[str], path: str | os.PathLike[str],
                         normalize: bool = True, *, title: str | None = None) -> Path:
    """Write a confusion matrix as a PNG heat map.

    The figure grows with the number of labels, column labels are rotated, cells are
    annotated with their values when there are at most 20 labels, and a colour bar shows
    the scale. Label names with Chinese (or other CJK) characters use an installed CJK
    font when one exists (Noto Sans CJK, WenQuanYi, ...); otherwise the default font is
    used and missing glyphs render as boxes, without warnings. Uses matplotlib's Agg
    canvas directly, so it neither needs a display nor touches pyplot's global state.

    Args:
        cm: (k, k) counts, rows = true labels, columns = predicted (nested list, array or
            tensor), e.g. ``classification_metrics(...)["confusion_matrix"]``.
        labels: the k label names.
        path: where to write the PNG; parent folders are created.
        normalize: divide each row by its total (rows without examples stay 0), so cells
            show recall per true label.
        title: figure title (default ``"Confusion matrix"``, noting normalisation).

    Returns:
        The path written.

    Raises:
        ValueError: a matrix that is not square or does not match ``labels``.
        ImportError: matplotlib is not installed.
    """
    try:
        from matplotlib import rc_context
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("confusion_matrix_png needs matplotlib: pip install matplotlib") \
            from err

    mat = _to_numpy(cm).astype(np.float64)
    names = [str(x) for x in labels]
    if mat.ndim != 2 or mat.shape[0] != mat.shape[1]:
        raise ValueError(f"cm must be a square (k, k) matrix, got shape {mat.shape}")
    if mat.shape[0] != len(names):
        raise ValueError(f"cm is {mat.shape[0]}x{mat.shape[0]} but {len(names)} labels given")
    k = len(names)
    if normalize:
        totals = mat.sum(axis=1, keepdims=True)
        mat = np.divide(mat, totals, out=np.zeros_like(mat), where=totals > 0)
    side = min(40.0, max(5.0, 0.32 * k + 3.0))
    tick_size = max(4.0, min(10.0, 360.0 / max(k, 1)))
    rc: dict[str, Any] = {}
    if any(ord(ch) > 0x2E7F for name in names for ch in name):
        font = _installed_cjk_font()
        if font is not None:
            rc = {"font.family": "sans-serif", "font.sans-serif": [font, "DejaVu Sans"]}
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with rc_context(rc), _quiet_fonts():
        fig = Figure(figsize=(side + 1.5, side), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        image = ax.imshow(mat, cmap="Blues", vmin=0.0, vmax=1.0 if normalize else None,
                          interpolation="nearest")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        ax.set_xticks(range(k))
        ax.set_yticks(range(k))
        ax.set_xticklabels(names, rotation=90 if k > 8 else 45,
                           ha="center" if k > 8 else "right", fontsize=tick_size)
        ax.set_yticklabels(names, fontsize=tick_size)
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
        ax.set_title(title or ("Confusion matrix (row-normalised)" if normalize
                               else "Confusion matrix"))
        if k <= 20:
            peak = mat.max() if mat.size else 0.0
            for i in range(k):
                for j in range(k):
                    text = f"{mat[i, j]:.2f}" if normalize else f"{mat[i, j]:.0f}"
                    dark = peak > 0 and mat[i, j] > 0.5 * peak
                    ax.text(j, i, text, ha="center", va="center", fontsize=tick_size,
                            color="white" if dark else "black")
        fig.savefig(out, format="png", bbox_inches="tight")
    return out
