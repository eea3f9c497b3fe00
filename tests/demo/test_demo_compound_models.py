"""The compound part of ``headwise demo`` with tiny settings: one model directory per
architecture (the pretrained row on a tiny Chinese BERT standing in for
multilingual-e5-small), each loaded by the one loader and answering ``predict --json``;
the comparison table and the case study's figures; ``eval`` reproducing the demo's
numbers from the written corpus."""

from __future__ import annotations

import json

import pytest

from headwise.cli import main
from headwise.demo.compound import DEMO_NUMBER_HEADS, compound_table, run_compound_demo
from headwise.demo.corpus import generate_demo_corpus, write_demo_corpus
from headwise.demo.runner import DemoSettings
from headwise.demo.values import REFERENCE_DATE
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.kinds import load_classifier

pytest.importorskip("transformers")
from hf_checkpoints import chinese_bert  # noqa: E402

SETTINGS = DemoSettings(per_intent=4, epochs=1, d_model=32, num_layers=1, latency_queries=3)
NAMES = ["bilstm", "transformer", "pretrained"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    d = tmp_path_factory.mktemp("compound-demo")
    lines: list[str] = []
    summary = run_compound_demo(d, SETTINGS, pretrained=str(chinese_bert(d / "bert")),
                                echo=lines.append)
    return d, summary, "\n".join(lines)


def test_each_architecture_is_saved_and_answers_predict_json(demo, capsys):
    d, summary, _ = demo
    assert list(summary["models"]) == NAMES
    for name in NAMES:
        directory = d / "compound" / name
        clf = load_classifier(directory)
        assert isinstance(clf, CompoundClassifier) and clf.model.multi_label
        # evaluated against the corpus's own today, which the saved model keeps
        assert clf.reference_date == REFERENCE_DATE
        assert (directory / "eval" / "report.json").is_file()
        assert main(["predict", str(directory), "尾号2937的卡被锁了，顺便帮我查一下余额",
                     "--json"]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert {"intents", "out_of_scope", "slots"} <= set(answer)
        confidences = [x["confidence"] for x in answer["intents"]]
        assert all(set(x) >= {"intent", "confidence"} for x in answer["intents"])
        assert confidences == sorted(confidences, reverse=True)
        assert answer["out_of_scope"] == (not answer["intents"])
    models = {n: load_classifier(d / "compound" / n).model for n in NAMES}
    assert type(models["bilstm"]).__name__ == "BiLSTMJointModel"
    assert models["transformer"].config.num_heads == 8
    assert models["transformer"].config.number_heads == DEMO_NUMBER_HEADS
    assert summary["models"]["pretrained"]["report"]["num_examples"] == \
        summary["corpus"]["test"]["questions"]


def test_the_table_compares_every_model_beside_the_case_study(demo):
    d, summary, text = demo
    table = summary["table"]
    assert table == compound_table(summary["models"]) and table in text
    for name in NAMES:
        r = summary["models"][name]
        m = r["report"]["intents"]
        low, high = m["exact_match_interval"]
        assert 0.0 <= low <= m["exact_match"] <= high <= 1.0 and high > low
        assert f"| {name} (" in table and f"{m['exact_match']:.1%} [{low:.1%}, {high:.1%}]" \
            in table
        # the normaliser alone gets every generated value right from the gold span text
        assert all(v["normaliser"] == 1.0 for v in r["report"]["values"].values())
    assert "exact match [95 % CI]" in table and "slot-span F1" in table
    assert "| amount |" in summary["values"] and summary["values"] in text
    # exact match per slice of the test split, every question first
    assert summary["slices"] in text and "| compound |" in summary["slices"]
    for r in summary["models"].values():
        first = r["report"]["slices"][0]
        assert first["slice"] == "all" and first["n"] == summary["corpus"]["test"]["questions"]
        compound = next(x for x in r["report"]["slices"] if x["slice"] == "compound")
        assert compound["n"] == summary["corpus"]["test"]["compound"]
    assert "the case study's figures, not measured here" in text
    assert "BiLSTM 73 %" in text and "8-head Transformer 89 %" in text
    # the corpus has compound questions in every split (a quarter of each)
    assert all(c["compound"] >= 0.2 * c["questions"] for c in summary["corpus"].values())
    saved = json.loads((d / "compound" / "summary.json").read_text(encoding="utf-8"))
    assert saved["table"] == table
    assert (d / "compound" / "comparison.md").read_text(encoding="utf-8").startswith(table)
    assert summary["examples"] and all("slots" in a for a in summary["examples"])


def test_eval_on_the_written_corpus_reproduces_the_demo(demo, tmp_path):
    d, summary, _ = demo
    files = write_demo_corpus(tmp_path / "data", per_intent=SETTINGS.per_intent,
                              compound_share=SETTINGS.compound_share)
    assert main(["eval", str(d / "compound" / "transformer"), "--data",
                 str(files["test.jsonl"]), "--out", str(tmp_path / "ev"), "--json"]) == 0
    again = json.loads((tmp_path / "ev" / "report.json").read_text(encoding="utf-8"))
    report = summary["models"]["transformer"]["report"]
    assert "date" in report["values"]
    assert again["values"] == report["values"] and again["intents"] == report["intents"]
    assert again["slots"] == report["slots"]


def test_the_files_hold_both_parts_data(tmp_path):
    kwargs = {"seed": 0, "per_intent": 6}
    files = write_demo_corpus(tmp_path, compound_share=0.25, **kwargs)
    single = generate_demo_corpus(**kwargs)
    full = generate_demo_corpus(compound_share=0.25, **kwargs)
    for split in ("train", "valid", "test"):
        rows = [json.loads(line) for line in
                files[f"{split}.jsonl"].read_text(encoding="utf-8").splitlines()]
        assert [r["text"] for r in rows] == [e.text for e in full[split]]
        assert all("intents" in r and "slots" in r for r in rows)
        assert any(len(r["intents"]) > 1 for r in rows)
        # the CSV is the single-label part: the corpus without its joined messages
        csv_texts = files[f"{split}.csv"].read_text(encoding="utf-8").splitlines()[1:]
        assert len(csv_texts) == len(single[split])
        assert {e.text for e in single[split]} == {r["text"] for r in rows
                                                   if not r.get("clauses")}
