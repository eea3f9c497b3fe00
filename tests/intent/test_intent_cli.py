"""The intent commands end to end with a tiny model: exit codes, output files, messages."""

from __future__ import annotations

import json

import pytest
from answers import confidence_of, intent_of
from tiny_corpus import INTENTS, write_csv

from headwise.cli import main

TINY = {"architecture": {"d_model": 32, "num_layers": 1, "num_heads": 8, "d_ff": 64,
                         "vocab_size": 200},
        "train": {"epochs": 4, "batch_size": 8, "lr": 3e-3}}
#: the BiLSTM's own sizes (the Transformer's are no fields of the BiLSTM part)
TINY_LSTM = {"architecture": {"vocab_size": 200, "lstm_embed_dim": 16, "lstm_hidden": 16},
             "train": {"epochs": 4, "batch_size": 8, "lr": 3e-3}}




@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    rows = [(t, k) for k, ts in INTENTS.items() for t in ts] * 4
    train = write_csv(d / "train.csv", rows)
    valid = write_csv(d / "valid.csv", [(t, k) for k, ts in INTENTS.items() for t in ts[:2]]
                   + [("what's the weather like", "oos"), ("tell me a joke", "oos")])
    cfg = d / "recipe.json"
    cfg.write_text(json.dumps(TINY))
    out = d / "model"
    code = main(["train", "--data", str(train), "--valid", str(valid), "--config", str(cfg),
                 "--out", str(out), "--quiet", "--model", "transformer"])
    assert code == 0
    return d, out


def test_train_writes_a_loadable_classifier(trained):
    _, out = trained
    assert (out / "intent.json").is_file() and (out / "model.safetensors").is_file()
    assert not (out / "checkpoints").exists()
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["oos_threshold"]["n_oos"] == 2 and summary["train_examples"] == 60


def test_eval_prints_report_and_writes_png(trained, capsys):
    d, out = trained
    data = write_csv(d / "test.csv", [(t, k) for k, ts in INTENTS.items() for t in ts]
                  + [("open a mortgage", "mortgage")])
    assert main(["eval", str(out), "--data", str(data), "--out", str(d / "ev")]) == 0
    text = capsys.readouterr().out
    assert "macro-F1" in text and "mortgage (1)" in text  # unseen intent reported
    report = json.loads((d / "ev" / "report.json").read_text())
    assert report["num_examples"] == 15 and report["unseen_labels"] == {"mortgage": 1}
    assert (d / "ev" / "confusion.png").stat().st_size > 1000


def test_predict_json_and_stdin(trained, capsys, monkeypatch):
    _, out = trained
    assert main(["predict", str(out), "i lost my card", "--json", "--top-k", "2"]) == 0
    rec = json.loads(capsys.readouterr().out.strip())
    assert len(rec["top_k"]) == 2 and rec["text"] == "i lost my card"
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("send money\nmy balance\n"))
    assert main(["predict", str(out), "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [json.loads(x)["text"] for x in lines] == ["send money", "my balance"]


def test_predict_answers_every_text_and_reports_each_empty_one_by_position(
        trained, capsys, monkeypatch):
    import io

    from headwise.intent.classifier import IntentClassifier

    _, out = trained
    want = {p.text: p.intent for p in IntentClassifier.load(out).predict(
        ["i lost my card", "send money", "my balance"])}
    # arguments: the empty one (and a blank one) by its TEXT position, the others answered
    assert main(["predict", str(out), "i lost my card", "", "send money", "  ",
                 "--json"]) == 1
    got = capsys.readouterr()
    recs = [json.loads(x) for x in got.out.strip().splitlines()]
    assert len(recs) == 4  # one object per input, in order
    assert recs[1] == {"argument": 2, "error": "empty text"}
    assert recs[3] == {"argument": 4, "error": "empty text"}
    assert [recs[0]["text"], recs[2]["text"]] == ["i lost my card", "send money"]
    assert [intent_of(recs[0]), intent_of(recs[2])] == [want["i lost my card"],
                                                        want["send money"]]
    assert "TEXT argument 2: empty text" in got.err and "TEXT argument 4: empty text" in got.err
    assert "2 of 4 texts empty" in got.err
    # standard input: blank lines by line number, in place, in the plain output too
    monkeypatch.setattr("sys.stdin", io.StringIO("send money\n\nmy balance\n"))
    assert main(["predict", str(out), "--json"]) == 1
    got = capsys.readouterr()
    recs = [json.loads(x) for x in got.out.strip().splitlines()]
    assert [r.get("text") for r in recs] == ["send money", None, "my balance"]
    assert recs[1] == {"line": 2, "error": "empty text"}
    assert "<stdin>:2: empty text" in got.err
    monkeypatch.setattr("sys.stdin", io.StringIO("send money\n\nmy balance\n"))
    assert main(["predict", str(out)]) == 1
    got = capsys.readouterr()
    assert got.out.count("  -> ") == 2 and "<stdin>:2: empty text" in got.err
    # nothing but empty texts: each reported, no answer, the model not needed
    assert main(["predict", str(out / "nowhere"), "", ""]) == 1
    got = capsys.readouterr()
    assert got.out == "" and "TEXT argument 1" in got.err and "TEXT argument 2" in got.err


def test_predict_threshold_splits_at_the_reported_confidence(trained, capsys):
    """Out-of-scope exactly when the calibrated top probability is below ``--threshold``."""
    _, out = trained
    assert main(["predict", str(out), "zzqx blorp", "--threshold", "0", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    conf = confidence_of(rec)
    assert intent_of(rec) in INTENTS and 0.0 < conf <= 1.0
    above = min(1.0, conf + 2e-6)  # the JSON rounds the confidence to 6 decimals
    assert main(["predict", str(out), "zzqx blorp", "--threshold", str(above), "--json"]) == 0
    rec_above = json.loads(capsys.readouterr().out)
    if above < 1.0:
        assert intent_of(rec_above) == "out_of_scope" and rec_above["out_of_scope"]
    below = max(0.0, conf - 2e-6)
    assert main(["predict", str(out), "zzqx blorp", "--threshold", str(below), "--json"]) == 0
    assert intent_of(json.loads(capsys.readouterr().out)) == intent_of(rec)


def test_errors_exit_1_with_a_message(trained, tmp_path, capsys):
    _, out = trained
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nhello,greet\n,empty\n", encoding="utf-8")
    assert main(["eval", str(out), "--data", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.csv:3" in err and "error" in err
    assert main(["eval", str(out), "--data", str(bad), "--skip-bad-rows",
                 "--out", str(tmp_path / "e")]) == 0
    assert "skipped 1 bad rows" in capsys.readouterr().err
    assert main(["predict", str(tmp_path / "missing"), "hi"]) == 1
    assert main(["train", "--data", str(bad), "--out", str(tmp_path / "m"),
                 "--model", "gpt"]) == 1


def test_bilstm_trains_through_the_same_command(trained, tmp_path):
    d, _ = trained
    cfg = tmp_path / "lstm.json"
    cfg.write_text(json.dumps(TINY_LSTM))
    assert main(["train", "--data", str(d / "train.csv"), "--model", "bilstm", "--config",
                 str(cfg), "--out", str(tmp_path / "lstm"), "--quiet", "--epochs", "2"]) == 0
    from headwise.intent import IntentClassifier

    clf = IntentClassifier.load(tmp_path / "lstm")
    assert type(clf.model).__name__ == "BiLSTMClassifier"
    assert clf.predict("i lost my card")[0].top_k[0][0] in INTENTS


def test_negation_heads_and_pretraining_options(trained, tmp_path):
    d, _ = trained
    out = tmp_path / "neg"
    assert main(["train", "--data", str(d / "train.csv"), "--config", str(d / "recipe.json"),
                 "--out", str(out), "--quiet", "--epochs", "1", "--model", "transformer",
                 "--set", 'architecture.model_overrides={"negation_heads": [1, 2], '
                 '"number_heads": [0], "negation_scope": "clause"}',
                 "--set", "levers.pretrain_epochs=1"]) == 0
    from headwise.intent import IntentClassifier
    from headwise.text.negation_tokens import clause_break_token_ids

    clf = IntentClassifier.load(out)
    cfg = clf.model.config
    assert cfg.negation_heads == [1, 2] and cfg.number_heads == [0]
    assert cfg.negation_scope == "clause"
    flagged = clf.model.encoder.is_negation_token.nonzero().flatten().tolist()
    words = {clf.tokenizer.backend.id_to_token(i) for i in flagged}
    assert words and words <= {"cannot", "not"}  # "cannot find my card anywhere"
    breaks = clf.model.encoder.is_clause_break.nonzero().flatten().tolist()
    assert breaks == clause_break_token_ids(clf.tokenizer)
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["recipe"]["levers"]["pretrain_epochs"] == 1 and summary["pretrain"]["steps"] > 0


def test_no_valid_trains_on_every_row_for_every_epoch(trained, tmp_path, capsys):
    d, _ = trained
    out = tmp_path / "all"
    assert main(["train", "--data", str(d / "train.csv"), "--config", str(d / "recipe.json"),
                 "--out", str(out), "--quiet", "--epochs", "2", "--no-valid",
                 "--model", "transformer"]) == 0
    assert "no validation data" in capsys.readouterr().out
    summary = json.loads((out / "train_summary.json").read_text())
    # all 60 rows train (the default split would hold 6 out), 2 epochs of ceil(60 / 8) steps
    assert summary["train_examples"] == 60 and summary["valid_examples"] == 0
    assert summary["epochs"] == 2 and summary["steps"] == 16 and not summary["stopped_early"]
    assert summary["valid"] == {} and summary["oos_threshold"]["method"] == "none"
    from headwise.intent import IntentClassifier

    clf = IntentClassifier.load(out)
    assert clf.temperature == 1.0 and clf.threshold == 0.0
    answer = clf.predict("zxqv blorp wibble")[0]
    assert answer.intent in INTENTS  # no threshold: never out-of-scope
    assert main(["train", "--data", str(d / "train.csv"), "--valid", str(d / "valid.csv"),
                 "--no-valid", "--out", str(tmp_path / "x"), "--quiet"]) == 1
    assert "exclude each other" in capsys.readouterr().err


def test_an_out_that_holds_files_is_refused_or_replaced_whole(trained, tmp_path, capsys):
    d, _ = trained
    out = tmp_path / "tfidf"
    argv = ["train", "--data", str(d / "train.csv"), "--valid", str(d / "valid.csv"),
            "--model", "tfidf", "--out", str(out)]
    assert main(argv) == 0
    (out / "model.onnx").write_text("a stale export of an older model")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(argv) == 1  # refused, and nothing touched
    err = capsys.readouterr().err
    assert "already holds files" in err and "--overwrite" in err and "--resume" in err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    # a failing --overwrite run (a bad data file) leaves the old model as it was
    bad = write_csv(tmp_path / "bad.csv", [("only text",)], header=("text",))
    assert main([*argv[:2], str(bad), *argv[3:], "--overwrite"]) == 1
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "tfidf"]
    # --overwrite replaces the whole directory: the stale export is gone
    assert main([*argv, "--overwrite"]) == 0
    assert "saved to" in capsys.readouterr().out
    assert not (out / "model.onnx").exists() and (out / "train_summary.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "tfidf"]
    assert main([*argv, "--overwrite", "--resume"]) == 1
    assert "give one of them" in capsys.readouterr().err


def test_resume_without_a_checkpoint_says_it_starts_afresh(trained, tmp_path, capsys):
    d, _ = trained
    out = tmp_path / "m"
    assert main(["train", "--data", str(d / "train.csv"), "--valid", str(d / "valid.csv"),
                 "--config", str(d / "recipe.json"), "--model", "transformer", "--epochs", "1",
                 "--out", str(out), "--quiet", "--resume"]) == 0
    assert f"--resume: no checkpoint in {out / 'checkpoints'} yet; training from the start" \
        in capsys.readouterr().out


def test_counts_are_said_in_the_right_number():
    from headwise.commands._common import plural

    assert [plural(1, "intent"), plural(3, "intent"), plural(0, "row"),
            plural(1200, "row"), plural(2, "query", "queries")] == [
        "1 intent", "3 intents", "0 rows", "1,200 rows", "2 queries"]


def test_reference_date_is_refused_for_a_single_label_model(trained, capsys):
    _, out = trained
    assert main(["predict", str(out), "hello", "--reference-date", "2026-12-01"]) == 1
    assert "--reference-date" in capsys.readouterr().err
