"""Classification metrics and ECE against hand-computed values; the confusion-matrix PNG."""

from __future__ import annotations

import struct
import warnings

import numpy as np
import pytest
import torch

from headwise.train import metrics
from headwise.train.metrics import (
    classification_metrics,
    confusion_matrix_png,
    expected_calibration_error,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_scores_match_hand_computation():
    # true 0 0 0 1 1 2 / pred 0 0 1 1 2 2
    # class 0: TP 2, FP 0, FN 1 -> P 1,   R 2/3, F1 4/5   (support 3)
    # class 1: TP 1, FP 1, FN 1 -> P 1/2, R 1/2, F1 1/2   (support 2)
    # class 2: TP 1, FP 1, FN 0 -> P 1/2, R 1,   F1 2/3   (support 1)
    out = classification_metrics([0, 0, 0, 1, 1, 2], [0, 0, 1, 1, 2, 2])
    assert out["num_examples"] == 6
    assert out["accuracy"] == pytest.approx(4 / 6)
    assert out["macro_f1"] == pytest.approx((4 / 5 + 1 / 2 + 2 / 3) / 3)  # 59/90
    assert out["weighted_f1"] == pytest.approx((3 * 4 / 5 + 2 * 1 / 2 + 1 * 2 / 3) / 6)
    assert out["macro_precision"] == pytest.approx((1 + 1 / 2 + 1 / 2) / 3)
    assert out["macro_recall"] == pytest.approx((2 / 3 + 1 / 2 + 1) / 3)
    assert out["labels"] == ["0", "1", "2"]
    assert out["per_label"]["0"] == pytest.approx(
        {"precision": 1.0, "recall": 2 / 3, "f1": 0.8, "support": 3})
    assert out["per_label"]["2"] == pytest.approx(
        {"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "support": 1})
    assert out["confusion_matrix"] == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]
    assert out["labels_only_in_true"] == out["labels_only_in_pred"] == []


def test_labels_only_in_true_only_in_pred_or_absent_are_reported():
    names = ["greet", "bye", "thanks", "refund", "other"]
    y_true = torch.tensor([0, 0, 1, 1, 3])
    y_pred = np.array([0, 2, 1, 1, 0])
    # greet: TP 1, FP 1, FN 1 -> F1 1/2; bye: F1 1; thanks: predicted, no support -> 0;
    # refund: never predicted -> 0; other: in neither -> left out of the macro average
    out = classification_metrics(y_true, y_pred, labels=names)
    assert out["accuracy"] == pytest.approx(3 / 5)
    assert out["macro_f1"] == pytest.approx((1 / 2 + 1 + 0 + 0) / 4)
    assert out["macro_precision"] == pytest.approx((1 / 2 + 1 + 0 + 0) / 4)
    assert out["labels_only_in_true"] == ["refund"]
    assert out["labels_only_in_pred"] == ["thanks"]
    assert out["labels_absent"] == ["other"]
    assert out["labels"] == names
    assert out["per_label"]["thanks"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                          "support": 0}
    assert out["per_label"]["refund"]["support"] == 1
    assert out["per_label"]["other"]["support"] == 0
    cm = np.array(out["confusion_matrix"])
    assert cm.shape == (5, 5) and cm.sum() == 5 and cm[3, 0] == 1 and cm[0, 2] == 1
    # naming the label set changes the report's rows, not the averages
    assert classification_metrics(y_true, y_pred)["macro_f1"] == out["macro_f1"]
    # the same through label names
    by_name = classification_metrics([names[i] for i in y_true], [names[i] for i in y_pred],
                                     labels=names)
    assert by_name == out


def test_classification_metrics_rejects_bad_inputs():
    with pytest.raises(ValueError, match="length"):
        classification_metrics([0, 1], [0])
    with pytest.raises(ValueError, match="empty"):
        classification_metrics([], [])
    with pytest.raises(ValueError, match="argmax"):
        classification_metrics([0, 1], torch.randn(2, 3))
    with pytest.raises(ValueError, match="outside labels"):
        classification_metrics([0, 3], [0, 1], labels=["a", "b"])
    with pytest.raises(ValueError, match="not in labels"):
        classification_metrics(["a", "c"], ["a", "b"], labels=["a", "b"])
    with pytest.raises(ValueError, match="mix"):
        classification_metrics(["a", "b"], [0, 1])


def test_expected_calibration_error_matches_hand_computation():
    probs = torch.tensor([[0.9, 0.1], [0.7, 0.3], [0.3, 0.7], [0.45, 0.55], [0.95, 0.05]])
    y = [0, 1, 1, 0, 0]
    # 5 bins of width 0.2. (0.8, 1]: conf .9, .95, both right -> |1 - .925| * 2/5 = 0.03
    # (0.6, 0.8]: conf .7 (wrong), .7 (right) -> |.5 - .7| * 2/5 = 0.08
    # (0.4, 0.6]: conf .55 (wrong) -> |0 - .55| * 1/5 = 0.11
    assert expected_calibration_error(probs, y, n_bins=5) == pytest.approx(0.22)
    # one bin: |accuracy 3/5 - mean confidence 3.8/5|
    assert expected_calibration_error(probs.numpy(), y, n_bins=1) == pytest.approx(0.16)
    # bins are closed on the right: 0.6 shares (0.4, 0.6] with 0.5 -> |1/2 - 0.55| = 0.05
    edge = [[0.6, 0.4], [0.5, 0.5]]
    assert expected_calibration_error(edge, [0, 1], n_bins=5) == pytest.approx(0.05)
    assert expected_calibration_error([[1.0, 0.0]], [0]) == 0.0


def test_expected_calibration_error_rejects_bad_inputs():
    with pytest.raises(ValueError, match="softmax"):
        expected_calibration_error(torch.randn(4, 3) * 5, [0, 1, 2, 0])
    with pytest.raises(ValueError, match="n_bins"):
        expected_calibration_error([[0.5, 0.5]], [0], n_bins=0)
    with pytest.raises(ValueError, match="class ids"):
        expected_calibration_error([[0.5, 0.5]], [2])
    with pytest.raises(ValueError, match="rows"):
        expected_calibration_error([[0.5, 0.5]], [0, 1])


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_confusion_matrix_png_is_written_and_grows_with_labels(tmp_path):
    pytest.importorskip("matplotlib")
    out = classification_metrics([0, 0, 1, 2], [0, 1, 1, 2], labels=["a", "b", "c"])
    small = confusion_matrix_png(out["confusion_matrix"], out["labels"],
                                 tmp_path / "figs" / "cm.png")
    assert small == tmp_path / "figs" / "cm.png"
    many = 40
    rng = np.random.default_rng(0)
    cm = torch.from_numpy(rng.integers(0, 9, (many, many)))
    big = confusion_matrix_png(cm, [f"intent_{i}" for i in range(many)], tmp_path / "big.png",
                               normalize=False)
    assert _png_size(big)[0] > 2 * _png_size(small)[0]


def test_confusion_matrix_png_with_chinese_labels(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    names = ["查询余额", "转账", "挂失银行卡"]
    cm = np.array([[3, 1, 0], [0, 2, 0], [1, 0, 4]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no missing-glyph noise, whatever fonts exist
        _png_size(confusion_matrix_png(cm, names, tmp_path / "zh.png"))
    # the CJK font path, with a stand-in font name
    monkeypatch.setattr(metrics, "_installed_cjk_font", lambda: "DejaVu Sans")
    _png_size(confusion_matrix_png(cm, names, tmp_path / "zh2.png"))


def test_cjk_font_choice_prefers_noto_and_falls_back_to_none():
    from headwise._fonts import pick_cjk_font

    found = pick_cjk_font(["DejaVu Sans", "WenQuanYi Zen Hei", "Noto Sans CJK JP"])
    assert found == "Noto Sans CJK JP"
    assert pick_cjk_font(["DejaVu Sans", "WenQuanYi Micro Hei"]) == "WenQuanYi Micro Hei"
    assert pick_cjk_font(["DejaVu Sans"]) is None


def test_confusion_matrix_png_rejects_mismatched_inputs(tmp_path):
    pytest.importorskip("matplotlib")
    with pytest.raises(ValueError, match="square"):
        confusion_matrix_png([[1, 2, 3]], ["a"], tmp_path / "x.png")
    with pytest.raises(ValueError, match="labels"):
        confusion_matrix_png([[1, 0], [0, 1]], ["a", "b", "c"], tmp_path / "x.png")
