"""Calibrating a saved classifier again (`recalibrate`, `headwise calibrate`): the fitted
temperature against a grid search of the negative log-likelihood in float64 numpy, the
threshold rules, ensembles, errors and the command end to end."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from tiny_corpus import INTENTS

from headwise.cli import main
from headwise.intent.ensemble import EnsembleClassifier
from headwise.intent.kinds import load_classifier
from headwise.intent.posthoc.recalibration import recalibrate, save_calibration
from headwise.intent.tfidf import TfidfClassifier

TRAIN = [(t, k) for k, ts in INTENTS.items() for t in ts]
# held-out rows: paraphrases (one deliberately ambiguous), an unknown intent, two oos
HELD = [("i think my card is lost", "card_lost"), ("send 20 pounds to my mum", "transfer"),
        ("how much is in my account", "balance"), ("money missing from my card", "transfer"),
        ("card stolen at the station", "card_lost"), ("what's left on my account", "balance"),
        ("i want a mortgage", "mortgage"), ("what's the weather", "oos"),
        ("tell me a joke", "oos")]


def _nll_numpy(logits: np.ndarray, gold: np.ndarray, t: float) -> float:
    z = logits / t
    z = z - z.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return float(-logp[np.arange(len(gold)), gold].mean())


@pytest.fixture()
def tfidf():
    return TfidfClassifier.fit([t for t, _ in TRAIN], [y for _, y in TRAIN], c=1.0)


def test_temperature_minimises_the_nll_and_the_report_is_right(tfidf):
    texts, labels = [t for t, _ in HELD], [y for _, y in HELD]
    r = recalibrate(tfidf, texts, labels, max_reject=0.02)
    assert (r.in_scope_rows, r.oos_rows, r.unknown_rows) == (6, 2, 1)
    known = [i for i, y in enumerate(labels) if y in tfidf.labels]
    logits = tfidf.logits([texts[i] for i in known])
    gold = np.array([tfidf.labels.index(labels[i]) for i in known])
    grid = np.exp(np.linspace(np.log(0.05), np.log(20.0), 4001))
    best = grid[np.argmin([_nll_numpy(logits, gold, t) for t in grid])]
    assert r.temperature_before == 1.0 and r.temperature_after == tfidf.temperature
    assert tfidf.temperature == pytest.approx(best, rel=2e-3)
    assert r.nll_before == pytest.approx(_nll_numpy(logits, gold, 1.0), rel=1e-9)
    assert r.nll_after == pytest.approx(_nll_numpy(logits, gold, tfidf.temperature), rel=1e-9)
    assert r.nll_after <= r.nll_before
    assert r.accuracy == pytest.approx(np.mean(logits.argmax(1) == gold))
    # out-of-scope rows present: the balanced rule, and the threshold is now the model's
    assert r.threshold.method == "balanced" and r.threshold.n_oos == 2
    assert tfidf.threshold == r.threshold.threshold and r.threshold_before == 0.0


def test_ensemble_gets_a_threshold_and_keeps_its_members(tfidf):
    other = TfidfClassifier.fit([t for t, _ in TRAIN], [y for _, y in TRAIN], c=10.0)
    ens = EnsembleClassifier([tfidf, other])
    r = recalibrate(ens, [t for t, _ in HELD], [y for _, y in HELD])
    assert r.temperature_before is None and r.temperature_after is None
    assert r.nll_before == r.nll_after and r.ece_before == r.ece_after
    assert tfidf.temperature == other.temperature == 1.0
    assert ens.threshold == r.threshold.threshold


def test_errors(tfidf, tmp_path):
    tfidf.save(tmp_path / "m")
    two = TfidfClassifier.fit(["lost card", "card gone", "send cash", "pay john"],
                              ["card_lost", "card_lost", "transfer", "transfer"])
    with pytest.raises(ValueError, match="other intents"):
        save_calibration(two, tmp_path / "m")
    with pytest.raises(FileNotFoundError, match="no saved classifier"):
        save_calibration(tfidf, tmp_path)
    with pytest.raises(ValueError, match="intent the classifier knows"):
        recalibrate(tfidf, ["a mortgage", "the weather"], ["mortgage", "oos"])
    with pytest.raises(ValueError, match="2 texts but 1 labels"):
        recalibrate(tfidf, ["a", "b"], ["card_lost"])


def _write(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "label"), *rows])
    return path


def test_command_calibrates_a_no_valid_model(tmp_path, capsys):
    train = _write(tmp_path / "train.csv", TRAIN * 4)
    held = _write(tmp_path / "held.csv", HELD)
    cfg = tmp_path / "recipe.json"
    cfg.write_text(json.dumps({"architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4,
                                                "d_ff": 64, "vocab_size": 200},
                               "train": {"epochs": 3, "batch_size": 8, "lr": 3e-3}}))
    model = tmp_path / "model"
    assert main(["train", "--data", str(train), "--config", str(cfg), "--out", str(model),
                 "--quiet", "--no-valid", "--model", "transformer"]) == 0
    weights = (model / "model.safetensors").read_bytes()
    copy = tmp_path / "copy"
    assert main(["calibrate", str(model), "--data", str(held), "--out", str(copy)]) == 0
    out = capsys.readouterr().out
    assert "6 in-scope rows, 2 out-of-scope, 1 with intents the model does not know" in out
    assert "temperature 1.000 ->" in out and f"saved to {copy}" in out
    assert load_classifier(model).temperature == 1.0  # --out leaves MODEL as it was
    calibrated = load_classifier(copy)
    record = calibrated.info["calibration"]
    assert calibrated.temperature == record["temperature_after"] != 1.0
    assert calibrated.threshold == record["threshold"]["threshold"]
    assert record["threshold"]["method"] == "balanced" and record["data"] == str(held)
    # in place: the metadata changes, the weights stay byte for byte
    assert main(["calibrate", str(model), "--data", str(held), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["saved_to"] == str(model)
    assert load_classifier(model).temperature == pytest.approx(calibrated.temperature)
    assert (model / "model.safetensors").read_bytes() == weights
    bad = _write(tmp_path / "bad.csv", [("a mortgage please", "mortgage")])
    assert main(["calibrate", str(model), "--data", str(bad)]) == 1
    assert "intent the classifier knows" in capsys.readouterr().err


def test_tiny_validation_never_sharpens_and_says_so(tmp_path, capsys):
    """60 rows, 3 intents: the automatic split leaves 6 validation rows, all right, whose
    fitted temperature would be near 0 (a model sure of everything); training keeps it at
    1 or above, records why and prints a warning."""
    from headwise.cli import main
    from headwise.intent import IntentClassifier
    from headwise.intent.posthoc.recalibration import MIN_CALIBRATION_ROWS

    rows = [(f"{w} please {i}", k) for i in range(20)
            for w, k in (("card lost", "card"), ("refund order", "refund"),
                         ("balance check", "balance"))]
    train = tmp_path / "train60.csv"
    train.write_text("text,label\n" + "".join(f"{t},{k}\n" for t, k in rows), encoding="utf-8")
    cfg = tmp_path / "recipe.json"
    cfg.write_text(json.dumps({"architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4,
                                                "d_ff": 64, "vocab_size": 200},
                               "train": {"epochs": 5, "batch_size": 8, "lr": 3e-3}}))
    assert main(["train", "--data", str(train), "--config", str(cfg), "--out",
                 str(tmp_path / "m"), "--quiet", "--model", "transformer"]) == 0
    out = capsys.readouterr().out
    assert "warning: only 6 in-scope validation rows" in out
    clf = IntentClassifier.load(tmp_path / "m")
    assert clf.temperature >= 1.0
    note = clf.info["valid"]["small_validation"]
    assert note["in_scope_rows"] == 6 and note["minimum"] == MIN_CALIBRATION_ROWS


def test_command_keeps_the_reject_budget_with_the_confidence_asked(tfidf, tmp_path, capsys):
    model = tfidf.save(tmp_path / "tfidf")
    held = _write(tmp_path / "held.csv", HELD)
    assert main(["calibrate", str(model), "--data", str(held)]) == 0
    out = capsys.readouterr().out
    record = load_classifier(model).info["calibration"]["threshold"]
    # six in-scope rows: rejecting none of them still bounds the rate by 1 - 0.05 ** (1/6)
    assert record["reject_confidence"] == 0.95 and record["reject_budget"] == 0.05
    assert record["reject_bound"] == pytest.approx(1 - 0.05 ** (1 / 6))
    assert record["reject_rate"] == 0.0
    assert f"95% upper bound {record['reject_bound']:.1%}, budget 5%" in out
    assert "6 in-scope rows are too few to keep the budget with any rejection" in out
    assert main(["calibrate", str(model), "--data", str(held), "--reject-confidence", "0.8",
                 "--reject-budget", "0.5", "--json"]) == 0
    record = load_classifier(model).info["calibration"]["threshold"]
    assert record["reject_confidence"] == 0.8 and record["reject_budget"] == 0.5
    assert record["reject_bound"] == pytest.approx(
        1 - 0.2 ** (1 / 6) if record["reject_rate"] == 0 else record["reject_bound"])
    assert record["reject_bound"] <= 0.5 or record["reject_rate"] == 0
    capsys.readouterr()
    assert main(["calibrate", str(model), "--data", str(held), "--reject-confidence",
                 "none"]) == 0
    record = load_classifier(model).info["calibration"]["threshold"]
    assert record["reject_confidence"] is None and record["reject_bound"] is None
    assert "upper bound" not in capsys.readouterr().out
    for bad in ("1", "0", "sure"):
        with pytest.raises(SystemExit):
            main(["calibrate", str(model), "--data", str(held), "--reject-confidence", bad])
    assert "--reject-confidence" in capsys.readouterr().err
