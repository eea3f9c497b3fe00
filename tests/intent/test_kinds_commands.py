"""Every saved kind that is not a single network (a compound model, a TF-IDF model, an
ensemble) goes through eval, calibrate, export, serve and file streaming, or is refused
with the reason its registry entry gives (headwise.intent.kinds), never a traceback."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient
from tiny_corpus import INTENTS, write_annotated, write_csv

from headwise.cli import main
from headwise.intent import kinds
from headwise.intent.ensemble import EnsembleClassifier
from headwise.intent.inference import load_predictor
from headwise.intent.tfidf import TfidfClassifier
from headwise.serve import ServeConfig, create_app

TEXTS = [t for ts in INTENTS.values() for t in ts]
LABELS = [y for y, ts in INTENTS.items() for _ in ts]
TINY = {"architecture": {"type": "transformer", "tokenizer": "wordpiece", "vocab_size": 120,
                         "max_length": 24, "d_model": 32, "num_layers": 1, "num_heads": 4,
                         "d_ff": 64, "dropout": 0.0, "attention_dropout": 0.0},
        "train": {"epochs": 3, "batch_size": 8, "lr": 3e-3, "patience": None}}
#: the answer fields every kind gives
FIELDS = {"text", "intents", "out_of_scope", "slots", "top_k", "decision", "long_text"}


@pytest.fixture(scope="module")
def models(tmp_path_factory, compound_corpus):
    root = tmp_path_factory.mktemp("kinds-commands")
    tfidf = TfidfClassifier.fit(TEXTS, LABELS)
    other = TfidfClassifier.fit(TEXTS[::2], LABELS[::2], c=0.5)
    write_csv(root / "single.csv", [*zip(TEXTS, LABELS, strict=True),
                                     ("what is the weather today", "oos")])
    write_annotated(root / "compound.jsonl", compound_corpus)
    (root / "recipe.json").write_text(json.dumps(TINY))
    assert main(["train", "--data", str(root / "compound.jsonl"), "--valid",
                 str(root / "compound.jsonl"), "--config", str(root / "recipe.json"),
                 "--out", str(root / "compound"), "--quiet"]) == 0
    return root, {"tfidf": (tfidf.save(root / "tfidf"), root / "single.csv"),
                  "ensemble": (EnsembleClassifier([tfidf, other]).save(root / "ens"),
                               root / "single.csv"),
                  "compound": (root / "compound", root / "compound.jsonl")}


KINDS = ["tfidf", "ensemble", "compound"]


def _wait_ready(client: TestClient, tries: int = 200) -> None:
    import time

    for _ in range(tries):
        if client.get("/readyz").status_code == 200:
            return
        time.sleep(0.05)
    raise AssertionError("the service did not become ready")


def _refused_or_ok(code: int, err: str, kind: kinds.ModelKind, capability: str) -> None:
    """Exit 0 where the kind has the capability; otherwise exit 1 with its registry reason
    (the first clause of it: the message wraps the rest)."""
    if kind.supports(capability):
        assert code == 0, err
    else:
        assert code == 1 and "Traceback" not in err
        assert kind.missing[capability].split(";")[0] in err, err


@pytest.mark.parametrize("name", KINDS)
def test_eval(models, name, capsys):
    root, saved = models
    model, data = saved[name]
    assert main(["eval", str(model), "--data", str(data), "--out", str(root / f"ev-{name}")]) == 0
    assert (root / f"ev-{name}" / "report.json").is_file()
    capsys.readouterr()


@pytest.mark.parametrize("name", KINDS)
def test_calibrate(models, name, tmp_path, capsys):
    _, saved = models
    model, data = saved[name]
    kind = kinds.kind_of(model)
    code = main(["calibrate", str(model), "--data", str(data), "--out", str(tmp_path / "c")])
    _refused_or_ok(code, capsys.readouterr().err, kind, "calibrate")
    if code == 0:
        assert kinds.kind_of(tmp_path / "c") is kind


@pytest.mark.parametrize("name", KINDS)
def test_export(models, name, tmp_path, capsys):
    _, saved = models
    model, _ = saved[name]
    code = main(["export", str(model), "--onnx", str(tmp_path / "m.onnx")])
    kind = kinds.kind_of(model)
    _refused_or_ok(code, capsys.readouterr().err, kind, "onnx")
    # a compound model's export is written (with its tag logits), the others refused
    assert (tmp_path / "m.onnx").exists() == kind.supports("onnx") == (name == "compound")


@pytest.mark.parametrize("name", KINDS)
def test_serve(models, name, capsys):
    _, saved = models
    model, _ = saved[name]
    with TestClient(create_app(ServeConfig(model_dir=str(model)))) as client:
        _wait_ready(client)
        r = client.post("/v1/predict", json={"texts": ["send 50 pounds to my sister",
                                                       "what is my balance"]})
        assert r.status_code == 200, r.text
        answers = r.json()["predictions"]
        assert len(answers) == 2 and all(set(a) == FIELDS for a in answers)
        # a long-text policy the kind cannot follow is refused at start, with the reason
        kind = kinds.kind_of(model)
        assert not kind.supports("chunk")
        reason = re.escape(kind.missing["chunk"].split(";")[0])
        with pytest.raises(ValueError, match=reason):
            create_app(ServeConfig(model_dir=str(model), long_text="chunk"))
        # so is a width of the windows it does not cut (long_text auto: its truncate)
        with pytest.raises(ValueError, match=reason):
            create_app(ServeConfig(model_dir=str(model), chunk_length=16))
        with pytest.raises(ValueError, match=reason):
            load_predictor(model, chunk_length=0.5)
        # and a stride between windows it does not cut
        with pytest.raises(ValueError, match=reason):
            create_app(ServeConfig(model_dir=str(model), chunk_stride=4))
        with pytest.raises(ValueError, match=reason):
            load_predictor(model, chunk_stride=4)
    capsys.readouterr()
    assert main(["predict", str(model), "--long-text", "auto:16", "hi"]) == 1
    assert re.search(reason, capsys.readouterr().err)


@pytest.mark.parametrize("name", KINDS)
def test_streaming(models, name, tmp_path, capsys):
    _, saved = models
    model, _ = saved[name]
    data = tmp_path / "logs.txt"
    data.write_text("send 50 pounds to my sister\nwhat is my balance\n\ni lost my card\n",
                    encoding="utf-8")
    out = tmp_path / "answers.jsonl"
    assert main(["predict", str(model), "--data", str(data), "--out", str(out),
                 "--quiet"]) == 0, capsys.readouterr().err
    records = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in records] == [1, 2, 4]  # the blank line 3 is reported, skipped
    assert all({"intents", "out_of_scope", "slots", "top_k", "decision"} <= set(r)
               for r in records)
