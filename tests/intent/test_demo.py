"""The demo job end to end with tiny settings: files, summary, table."""

from __future__ import annotations

import json

from headwise.intent.classifier import IntentClassifier
from headwise.intent.demo import DemoSettings, comparison_table, run_demo


def test_demo_trains_compares_and_saves_both_models(tmp_path):
    lines = []
    s = DemoSettings(per_intent=6, epochs=1, d_model=32, num_layers=1, latency_queries=3)
    summary = run_demo(tmp_path, s, echo=lines.append)
    assert set(summary["models"]) == {"bilstm", "transformer"}
    for name in ("bilstm", "transformer"):
        r = summary["models"][name]
        assert 0.0 <= r["accuracy"] <= 1.0 and 0.0 <= r["macro_f1"] <= 1.0
        assert r["oos_recall"] is not None  # the corpus has out-of-scope rows in test
        assert r["latency"]["p50_ms"] > 0
        clf = IntentClassifier.load(tmp_path / name)
        assert len(clf.labels) == summary["corpus"]["intents"] >= 20
        assert (tmp_path / name / "eval" / "confusion.png").is_file()
    model = IntentClassifier.load(tmp_path / "transformer").model
    assert model.config.num_heads == 8 and model.config.number_heads == [0, 1]
    assert model.config.position == "rope"
    # the number-aware heads know the char tokenizer's number ids ([NUM], 3500, 三千 ...)
    assert model.encoder.is_number_token.any()
    for split in ("train", "valid", "test"):
        assert (tmp_path / "data" / f"{split}.csv").is_file()
    saved = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert saved["models"]["bilstm"]["accuracy"] == summary["models"]["bilstm"]["accuracy"]
    table = comparison_table(summary["models"])
    assert table in "\n".join(lines) and "| bilstm |" in table and "| transformer |" in table
    assert len(summary["examples"]) == 8


def test_compound_demo_trains_scores_and_shows_slots(tmp_path):
    from headwise.intent.compound import CompoundClassifier
    from headwise.intent.demo_compound import DEMO_NUMBER_HEADS, run_compound_demo
    from headwise.text.demo_values import REFERENCE_DATE

    lines = []
    summary = run_compound_demo(tmp_path, per_intent=6, epochs=1, d_model=32, num_layers=1,
                                echo=lines.append)
    report = summary["report"]
    assert 0.0 <= report["intents"]["micro_f1"] <= 1.0 and "span F1" in "\n".join(lines)
    # the normaliser alone gets every generated value right from the gold span text
    assert report["values"] and all(v["normaliser"] == 1.0 for v in report["values"].values())
    clf = CompoundClassifier.load(tmp_path / "compound")
    assert clf.model.config.number_heads == DEMO_NUMBER_HEADS
    assert clf.reference_date == REFERENCE_DATE and clf.model.multi_label
    assert summary["examples"] and all("slots" in a for a in summary["examples"])
    assert (tmp_path / "compound" / "summary.json").is_file()
