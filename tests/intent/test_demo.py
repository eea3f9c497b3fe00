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
    assert IntentClassifier.load(tmp_path / "transformer").model.config.num_heads == 8
    for split in ("train", "valid", "test"):
        assert (tmp_path / "data" / f"{split}.csv").is_file()
    saved = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert saved["models"]["bilstm"]["accuracy"] == summary["models"]["bilstm"]["accuracy"]
    table = comparison_table(summary["models"])
    assert table in "\n".join(lines) and "| bilstm |" in table and "| transformer |" in table
    assert len(summary["examples"]) == 8
