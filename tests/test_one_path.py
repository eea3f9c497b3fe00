"""One path from a text to an answer: ``headwise predict --json``, the library's
``predict``, the file stream (``headwise predict --data F --out O.jsonl``) and
``/v1/predict`` give the same answers, for a single-label and a compound model trained by
``headwise train``, and each of the four goes through the one predictor
(:meth:`headwise.intent.inference.predictor.Predictor.answers`, counted by a spy)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tiny_corpus import INTENTS, write_annotated, write_csv

from headwise.cli import main
from headwise.intent.inference.bucketing import (
    DEFAULT_CHUNK_STRIDE,
    DEFAULT_LONG_TEXT,
    architecture_of,
    window_length,
)
from headwise.intent.inference.predictor import Predictor
from headwise.intent.kinds import load_classifier

#: the sizes of tests/intent/test_intent_cli.py and test_compound_cli.py: they train in
#: seconds
SINGLE_RECIPE = {
    "architecture": {"type": "transformer", "d_model": 32, "num_layers": 1, "num_heads": 8,
                     "d_ff": 64, "vocab_size": 200, "max_length": 16},
    "train": {"epochs": 4, "batch_size": 8, "lr": 3e-3}}
COMPOUND_RECIPE = {
    "architecture": {"type": "transformer", "tokenizer": "wordpiece", "vocab_size": 120,
                     "max_length": 24, "d_model": 32, "num_layers": 1, "num_heads": 4,
                     "d_ff": 64, "dropout": 0.0, "attention_dropout": 0.0},
    "train": {"epochs": 20, "batch_size": 8, "lr": 3e-3, "patience": None}}
#: the texts asked about: short ones, an out-of-scope one, amounts for the slots, and one
#: longer than both models read (the long-text note)
TEXTS = ["i lost my card", "send 50 pounds to my sister", "what's the weather like",
         "i was charged twice for 75 pounds refund it", "how much money is in my account",
         "please send money to my friend and then transfer fifty pounds to my savings "
         "account and check my balance and block my card today"]
#: the fields every path answers (``Prediction.to_dict()``'s, but the echoed text)
FIELDS = ("intents", "out_of_scope", "slots", "top_k", "decision")


@pytest.fixture(scope="module")
def single_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("one-path-single")
    train = write_csv(d / "train.csv", [(t, k) for k, ts in INTENTS.items() for t in ts] * 4)
    valid = write_csv(d / "valid.csv", [(t, k) for k, ts in INTENTS.items() for t in ts[:2]]
                 + [("what's the weather like", "oos"), ("tell me a joke", "oos")])
    (d / "recipe.json").write_text(json.dumps(SINGLE_RECIPE))
    out = d / "model"
    assert main(["train", "--data", str(train), "--valid", str(valid), "--config",
                 str(d / "recipe.json"), "--out", str(out), "--quiet", "--model",
                 "transformer"]) == 0
    return out


@pytest.fixture(scope="module")
def compound_dir(tmp_path_factory, compound_corpus):
    d = tmp_path_factory.mktemp("one-path-compound")
    write_annotated(d / "train.jsonl", compound_corpus)
    (d / "recipe.json").write_text(json.dumps(COMPOUND_RECIPE))
    out = d / "model"
    assert main(["train", "--data", str(d / "train.jsonl"), "--valid", str(d / "train.jsonl"),
                 "--config", str(d / "recipe.json"), "--out", str(out), "--set",
                 "architecture.model_overrides.number_heads=[0]", "--quiet"]) == 0
    return out


@pytest.fixture
def calls(monkeypatch):
    """Every call of the one predictor's answering step, by the class of the predictor."""
    seen: list[str] = []
    answers = Predictor.answers

    def counted(self, *args, **kwargs):
        seen.append(type(self).__name__)
        return answers(self, *args, **kwargs)

    monkeypatch.setattr(Predictor, "answers", counted)
    return seen


def _same(got: list[dict], want: list[dict], where: str) -> None:
    """The answer fields agree: names, flags and spans exactly, probabilities (the
    confidences, the decision's value and threshold) within 1e-6."""
    assert len(got) == len(want), where
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        for key in FIELDS:
            a, b = g[key], w[key]
            if key in ("intents", "top_k"):
                assert [x["intent"] for x in a] == [x["intent"] for x in b], (where, i, key)
                assert [x["confidence"] for x in a] == pytest.approx(
                    [x["confidence"] for x in b], abs=1e-6), (where, i, key)
            elif key == "decision" and a is not None and b is not None:
                assert a["score"] == b["score"], (where, i)
                assert (a["value"], a["threshold"]) == pytest.approx(
                    (b["value"], b["threshold"]), abs=1e-6), (where, i)
            else:
                assert a == b, (where, i, key)


def _four_answers(model_dir, tmp_path, capsys, calls) -> dict[str, list[dict]]:
    """The answers to :data:`TEXTS` of the CLI, the library, the file stream and the
    service, asserting that each went through the predictor."""
    from fastapi.testclient import TestClient

    from headwise.serve import ServeConfig, create_app

    out: dict[str, list[dict]] = {}
    capsys.readouterr()  # what training printed
    before = len(calls)
    assert main(["predict", str(model_dir), "--json", *TEXTS]) == 0
    out["cli"] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(calls) > before, "headwise predict --json did not go through the predictor"

    before = len(calls)
    out["library"] = [p.to_dict(digits=None) for p in load_classifier(model_dir).predict(TEXTS)]
    assert len(calls) > before, "the library's predict did not go through the predictor"

    before = len(calls)
    data, answers = tmp_path / "texts.txt", tmp_path / "answers.jsonl"
    data.write_text("".join(t + "\n" for t in TEXTS), encoding="utf-8")
    assert main(["predict", str(model_dir), "--data", str(data), "--out", str(answers),
                 "--quiet"]) == 0
    out["stream"] = [json.loads(line) for line in answers.read_text().splitlines()]
    assert len(calls) > before, "the file stream did not go through the predictor"

    before = len(calls)
    app = create_app(ServeConfig(model_dir=str(model_dir), warmup=False))
    with TestClient(app) as client:
        r = client.post("/v1/predict", json={"texts": TEXTS})
    assert r.status_code == 200, r.text
    out["service"] = r.json()["predictions"]
    assert len(calls) > before, "/v1/predict did not go through the predictor"
    return out


@pytest.mark.parametrize("kind", ["single", "compound"])
def test_the_cli_the_library_the_stream_and_the_service_answer_alike(
        kind, request, tmp_path, capsys, calls):
    model_dir = request.getfixturevalue(f"{kind}_dir")
    answers = _four_answers(model_dir, tmp_path, capsys, calls)
    predictor = {"single": "SingleLabelPredictor", "compound": "CompoundPredictor"}[kind]
    assert set(calls) == {predictor}  # one predictor class for all four
    for where in ("cli", "stream", "service"):
        _same(answers[where], answers["library"], f"{where} vs library")
    # the long-text note (the CLI, the stream) comes from the one encoding; the default
    # policy reads a network's long text in windows, a compound model's first window
    assert answers["cli"][-1]["long_text"]["policy"] == {"single": "chunked",
                                                         "compound": "truncated"}[kind]
    assert [a["long_text"] for a in answers["stream"]] == [a["long_text"] for a in answers["cli"]]
    if kind == "compound":  # the slots are there to compare: an amount valued by hand
        found = {(s["name"], s["text"]): s["value"] for a in answers["library"]
                 for s in a["slots"]}
        assert found.get(("amount_of_money", "50 pounds"), {}).get("amount") == 50.0, found


@pytest.mark.parametrize("kind", ["single", "compound"])
def test_eval_scores_the_answers_predict_gives(kind, request, tmp_path, capsys, calls):
    """``headwise eval`` goes through the same predictor, and its scores are those of the
    library's answers, the long text (read in windows by a network) included."""
    model_dir = request.getfixturevalue(f"{kind}_dir")
    model = load_classifier(model_dir)
    capsys.readouterr()
    if kind == "single":
        rows = [(t, k) for k, ts in INTENTS.items() for t in ts[:2]] + [(TEXTS[-1], "transfer")]
        data = write_csv(tmp_path / "test.csv", rows)
    else:
        rows = [("i was charged twice for 75 pounds refund it", ["charge", "refund"]),
                ("send 50 pounds to my sister", ["transfer"]),
                ("what's the weather like", []), (TEXTS[-1], ["transfer"])]
        data = tmp_path / "test.jsonl"
        data.write_text("".join(json.dumps({"text": t, "intents": i}) + "\n" for t, i in rows),
                        encoding="utf-8")
    assert main(["eval", str(model_dir), "--data", str(data), "--json",
                 "--out", str(tmp_path / "ev")]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    predictor = {"single": "SingleLabelPredictor", "compound": "CompoundPredictor"}[kind]
    assert set(calls) == {predictor}
    # a single network's auto: its architecture's (a Transformer here), a compound one's
    # truncate
    assert architecture_of(model) == "transformer"
    assert report["long_text"] == {"policy": {"single": DEFAULT_LONG_TEXT["transformer"],
                                              "compound": "truncate"}[kind],
                                   "window": {"single": window_length(None, model.max_length),
                                              "compound": None}[kind],
                                   "stride": {"single": DEFAULT_CHUNK_STRIDE["transformer"],
                                              "compound": None}[kind], "rows": 1}
    answers = model.predict([t for t, _ in rows])
    if kind == "single":
        assert report["scored_as"] == "single_label"
        assert report["accuracy"] == pytest.approx(np.mean(
            [a.top_k[0][0] == y for a, (_, y) in zip(answers, rows, strict=True)]))
    else:
        assert report["scored_as"] == "multi_label"
        assert report["intents"]["exact_match"] == pytest.approx(np.mean(
            [{n for n, _ in a.intents} == set(y) for a, (_, y) in zip(answers, rows,
                                                                     strict=True)]))
