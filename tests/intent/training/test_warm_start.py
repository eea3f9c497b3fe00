"""Warm start (``headwise train --init-from``): the grown head and vocabulary, the replayed
rows, the refusals, the lineage, and a tiny model that learns a new intent and keeps the
old ones."""

from __future__ import annotations

import csv
import hashlib
import json

import numpy as np
import pytest
import torch
from tiny_corpus import INTENTS
from tiny_models import tiny_encoder, tiny_tokenizer

from headwise.cli import main
from headwise.intent.classifier import IntentClassifier
from headwise.intent.posthoc.prior import apply_prior_correction, log_prior
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe
from headwise.intent.training.warm_start import (
    WarmStart,
    grow_network,
    grow_tokenizer,
    grown_intents,
    lineage_of,
    model_identity,
    replay_sample,
    undo_prior_correction,
    warm_epochs,
    warm_recipe,
)
from headwise.models.config import ModelConfig
from headwise.models.lstm import BiLSTMClassifier
from headwise.models.registry import build_model
from headwise.text.bio import bio_tag_names
from headwise.text.char_level import train_char_tokenizer

NEW = {"mortgage": ["apply for a mortgage", "mortgage rates please", "i want a home loan",
                    "how do mortgages work", "remortgage my flat"]}
TINY = {"architecture": {"type": "transformer", "d_model": 32, "num_layers": 1,
                         "num_heads": 4, "d_ff": 64, "vocab_size": 200, "dropout": 0.0},
        "train": {"epochs": 8, "batch_size": 8, "lr": 3e-3, "progress": False}}
#: a tiny compound (multi-label + slots) recipe: a parent trained in seconds
COMPOUND_TINY = {
    "architecture": {"type": "transformer", "tokenizer": "wordpiece", "vocab_size": 120,
                     "max_length": 24, "d_model": 32, "num_layers": 1, "num_heads": 4,
                     "d_ff": 64, "dropout": 0.0, "attention_dropout": 0.0},
    "train": {"epochs": 15, "batch_size": 8, "lr": 3e-3, "patience": None, "progress": False},
    "task": {"type": "multi_label"}}


def _rows(intents, times=4):
    return [(t, k) for k, ts in intents.items() for t in ts] * times


def _write(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(("text", "label"))
        w.writerows(rows)
    return path


# --- the head and the vocabulary ------------------------------------------------------------
def test_head_growth_copies_old_rows_exactly_and_new_rows_are_a_fresh_heads():
    tok = tiny_tokenizer()
    parent = tiny_encoder(tok, seed=3)
    old = list(INTENTS)  # card_lost, transfer, balance
    labels = ["balance", "mortgage", "card_lost", "transfer"]  # reordered, one new
    torch.manual_seed(11)
    grown = grow_network(parent, old, labels, vocab_size=tok.vocab_size + 5)
    torch.manual_seed(11)  # the same draws: the fresh network grow_network started from
    fresh = build_model(parent.config.replace(num_labels=4, labels=labels,
                                              vocab_size=tok.vocab_size + 5))
    for name in old:
        i, j = old.index(name), labels.index(name)
        assert torch.equal(grown.classifier.weight[j], parent.classifier.weight[i])
        assert torch.equal(grown.classifier.bias[j], parent.classifier.bias[i])
    new = labels.index("mortgage")
    assert torch.equal(grown.classifier.weight[new], fresh.classifier.weight[new])
    assert float(grown.classifier.bias[new].detach()) == 0.0
    emb, old_emb = (m.encoder.embeddings.word_embeddings.weight for m in (grown, parent))
    assert torch.equal(emb[:tok.vocab_size], old_emb)
    assert torch.equal(emb[tok.vocab_size:],
                       fresh.encoder.embeddings.word_embeddings.weight[tok.vocab_size:])
    body = {k: v for k, v in parent.state_dict().items()
            if not k.startswith("classifier.") and "word_embeddings" not in k}
    state = grown.state_dict()
    assert all(torch.equal(state[k], v) for k, v in body.items())
    assert grown.config.labels == labels
    with pytest.raises(ValueError, match="lacks the parent's intents"):
        grow_network(parent, old, ["balance", "transfer"])
    with pytest.raises(ValueError, match="cannot shrink"):
        grow_network(parent, old, old, vocab_size=tok.vocab_size - 1)


def test_bilstm_and_joint_tagger_grow_by_name():
    lstm = BiLSTMClassifier(50, 2, embed_dim=8, hidden_size=8)
    grown = grow_network(lstm, ["a", "b"], ["a", "b", "c"], vocab_size=60)
    assert grown.config["num_labels"] == 3 and grown.config["vocab_size"] == 60
    assert torch.equal(grown.classifier.weight[:2], lstm.classifier.weight)
    assert torch.equal(grown.embedding.weight[:50], lstm.embedding.weight)
    old_tags = bio_tag_names(["amount"])
    tags = bio_tag_names(["account", "amount"])  # the new slot sorts first
    joint = build_model(ModelConfig(vocab_size=40, d_model=16, num_layers=1, num_heads=2,
                                    d_ff=32, num_labels=2, labels=["x", "y"],
                                    model_type="joint_intent_slot", multi_label=True,
                                    slot_tags=old_tags))
    with torch.no_grad():
        joint.tagger.bias.normal_()
    g = grow_network(joint, ["x", "y"], ["x", "y", "z"], old_tags=old_tags, tags=tags)
    for i, t in enumerate(old_tags):
        assert torch.equal(g.tagger.weight[tags.index(t)], joint.tagger.weight[i])
        assert torch.equal(g.tagger.bias[tags.index(t)], joint.tagger.bias[i])
    assert g.config.slot_tags == tags
    with pytest.raises(ValueError, match="lacks the parent's tags"):
        grow_network(joint, ["x", "y"], ["x", "y"], old_tags=old_tags, tags=["O"])


def test_undo_prior_correction_restores_the_trained_bias():
    tok = tiny_tokenizer()
    clf = IntentClassifier(tiny_encoder(tok), tok, list(INTENTS))
    before = clf.model.classifier.bias.detach().clone()
    apply_prior_correction(clf, log_prior(["transfer"] * 5 + ["balance"], clf.labels), 0.75)
    assert not torch.allclose(clf.model.classifier.bias, before)
    undo_prior_correction(clf.model, clf.info)
    torch.testing.assert_close(clf.model.classifier.bias, before, rtol=0, atol=1e-6)


def test_vocabulary_grows_for_unknown_pieces_and_keeps_every_old_id():
    tok = tiny_tokenizer()
    texts = ["i lost my zebra card", "xylophone transfer"]
    assert "[UNK]" in tok.tokenize(texts[0])
    grown, added = grow_tokenizer(tok, texts, kind="wordpiece", vocab_size=100)
    assert added and grown.vocab_size == tok.vocab_size + len(added)
    assert all(grown.token_to_id(t) == i for t, i in tok.backend.get_vocab().items())
    assert "[UNK]" not in grown.tokenize(texts[0]) + grown.tokenize(texts[1])
    same = "i lost my card"  # known words keep their ids
    assert grown([same])["input_ids"].tolist() == tok([same])["input_ids"].tolist()
    assert grow_tokenizer(tok, [same], kind="wordpiece", vocab_size=100) == (tok, [])
    # characters: new characters get ids, an unseen number stays [NUM]
    chars = train_char_tokenizer(["我想还款", "转账 3,500 元"])
    g, new = grow_tokenizer(chars, ["我要挂失 4,200 元"], kind="char", vocab_size=100)
    assert sorted(new) == sorted("要挂失") and g.tokenize("我要挂失 4,200 元")[-2] == "[NUM]"


# --- the rows and the recipe ----------------------------------------------------------------
def test_grown_intents_keep_the_parents_order_and_refuse_a_removed_intent():
    assert grown_intents(["b", "a"], ["a", "c", "b", "d"], 1.0) == ["b", "a", "c", "d"]
    with pytest.raises(ValueError, match=r"1 of the parent's intents have no training row.*"
                                         r"train from scratch"):
        grown_intents(["b", "a"], ["a", "c"], 0.5)
    assert grown_intents(["b", "a"], ["c"], 0.0) == ["b", "a", "c"]  # no replay: allowed


def test_replay_keeps_every_new_row_and_a_share_of_each_old_intent():
    labels = ["a"] * 10 + ["b"] * 4 + ["new"] * 3
    kept = replay_sample(labels, ["a", "b"], 0.5, seed=0)
    counts = {y: sum(labels[i] == y for i in kept) for y in ("a", "b", "new")}
    assert counts == {"a": 5, "b": 2, "new": 3} and kept == sorted(kept)
    assert replay_sample(labels, ["a", "b"], 0.5, seed=0) == kept  # seeded
    assert [labels[i] for i in replay_sample(labels, ["a", "b"], 0.0, 0)] == ["new"] * 3
    assert replay_sample(labels, ["a", "b"], 1.0, 0) == list(range(len(labels)))
    with pytest.raises(ValueError, match="replay"):
        WarmStart("x", 1.5)


# --- a warm start, end to end -----------------------------------------------------------------
@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    d = tmp_path_factory.mktemp("warm")
    result = train_intent_classifier(_rows(INTENTS), None, IntentRecipe.from_dict(TINY),
                                     out_dir=d / "parent")
    return d, result


def test_warm_recipe_keeps_the_architecture_and_refuses_another(parent):
    d, _ = parent
    merged = warm_recipe(d / "parent", {"train": {"epochs": 3},
                                        "architecture": {"type": "transformer"}})
    assert merged["train"]["epochs"] == 3 and merged["train"]["lr"] == 3e-3
    assert merged["architecture"]["d_model"] == 32
    with pytest.raises(ValueError, match=r"transformer model; the recipe asks for "
                                         r"architecture.type='bilstm'.*without --init-from"):
        warm_recipe(d / "parent", {"architecture": {"type": "bilstm"}})
    with pytest.raises(ValueError, match="architecture.d_model=64"):
        warm_recipe(d / "parent", {"architecture": {"d_model": 64}})
    with pytest.raises(ValueError, match="task is multi_label"):
        warm_recipe(d / "parent", {"task": {"type": "multi_label"}})
    with pytest.raises(ValueError, match="remove --linear-probe"):
        warm_recipe(d / "parent", {"levers": {"linear_probe": True}})
    with pytest.raises(FileNotFoundError):
        warm_recipe(d / "nowhere", {})


def test_a_warm_start_without_epochs_trains_a_third_of_the_parents(parent):
    """The parent trained 8 epochs: a warm start that names none trains ceil(8 / 3) = 3;
    named epochs win; the rule by hand."""
    d, _ = parent
    assert warm_recipe(d / "parent", {})["train"]["epochs"] == 3
    assert warm_recipe(d / "parent", {"train": {"lr": 1e-3}})["train"]["epochs"] == 3
    assert warm_recipe(d / "parent", {"train": {"epochs": 8}})["train"]["epochs"] == 8
    assert [warm_epochs(e) for e in (1, 2, 3, 4, 6, 9, 10, 20)] == [1, 1, 1, 2, 2, 3, 4, 7]
    for bad in (0, -3, 2.5, True, None):
        with pytest.raises(ValueError, match="positive int"):
            warm_epochs(bad)


def test_warm_start_learns_a_new_intent_keeps_the_old_and_records_its_lineage(parent):
    d, first = parent
    data = _write(d / "new.csv", _rows({**INTENTS, **NEW}))
    recipe = IntentRecipe.from_dict(warm_recipe(d / "parent", {"train": {"epochs": 6}}))
    notes: list[str] = []
    result = train_intent_classifier(_rows({**INTENTS, **NEW}), None, recipe,
                                     out_dir=d / "child", report=notes.append,
                                     init_from=WarmStart(d / "parent", 1.0, (data,)))
    clf = result.classifier
    assert clf.labels == list(first.classifier.labels) + ["mortgage"]
    old_texts = [t for ts in INTENTS.values() for t in ts]
    gold = [k for k, ts in INTENTS.items() for _ in ts]
    old_acc = np.mean([p.intent == y for p, y in zip(clf.predict(old_texts), gold,
                                                     strict=True)])
    new_acc = np.mean([p.intent == "mortgage" for p in clf.predict(NEW["mortgage"])])
    assert old_acc >= 0.9, old_acc  # the old intents kept
    assert new_acc > 0.5, new_acc  # chance among 4 intents is 0.25
    assert any("warm start from" in n and "1 new (mortgage)" in n for n in notes)
    lineage = lineage_of(d / "child")
    assert lineage == json.loads((d / "child" / "intent.json").read_text())["info"]["lineage"]
    assert lineage["parent"] == str((d / "parent").resolve())
    assert lineage["parent_id"] == model_identity(d / "parent")
    assert lineage["data"] == [{"path": str(data),
                                "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}]
    assert lineage["intents_added"] == ["mortgage"] and lineage["replay"] == 1.0
    assert lineage["tokens_added"] > 0 and lineage["parent_lineage"] is None
    assert lineage_of(d / "parent") is None
    # the identity is the saved model's: an evaluation beside it does not change it
    (d / "parent" / "train_summary.json").write_text("{}")
    assert model_identity(d / "parent") == lineage["parent_id"]



def test_a_resumed_warm_start_reads_its_grown_tokenizer_back(parent, tmp_path):
    d, _ = parent
    recipe = IntentRecipe.from_dict(warm_recipe(d / "parent", {"train": {"epochs": 1}}))
    start, rows = WarmStart(d / "parent"), _rows({**INTENTS, **NEW})
    first = train_intent_classifier(rows, None, recipe, out_dir=tmp_path / "c",
                                    keep_checkpoints=True, init_from=start).classifier
    assert (tmp_path / "c" / "checkpoints" / "tokenizer").is_dir()
    again = train_intent_classifier(rows, None, recipe, out_dir=tmp_path / "c", resume=True,
                                    init_from=start).classifier
    assert again.tokenizer.backend.get_vocab() == first.tokenizer.backend.get_vocab()
    assert again.info["lineage"]["tokens_added"] == first.info["lineage"]["tokens_added"] > 0

def test_tfidf_parent_is_refitted_with_its_lineage(tmp_path):
    recipe = IntentRecipe.from_dict({"architecture": {"type": "tfidf"}})
    train_intent_classifier(_rows(INTENTS), None, recipe, out_dir=tmp_path / "p")
    warm = IntentRecipe.from_dict(warm_recipe(tmp_path / "p", {}))
    result = train_intent_classifier(_rows({**INTENTS, **NEW}), None, warm,
                                     out_dir=tmp_path / "c", init_from=WarmStart(tmp_path / "p"))
    assert result.classifier.labels[-1] == "mortgage" or "mortgage" in result.classifier.labels
    lineage = lineage_of(tmp_path / "c")
    assert lineage["refit"] and lineage["parent_kind"] == "tfidf"
    with pytest.raises(ValueError, match="keeps every intent of its parent"):
        train_intent_classifier(_rows(NEW) + _rows({"balance": INTENTS["balance"]}), None,
                                warm, out_dir=tmp_path / "d",
                                init_from=WarmStart(tmp_path / "p"))


def test_compound_warm_start_adds_an_intent_and_eval_compares(tmp_path, compound_corpus):
    recipe = IntentRecipe.from_dict(COMPOUND_TINY)
    old = [e for e in compound_corpus if "transfer" not in e.intents]
    first = train_intent_classifier(old, old, recipe, out_dir=tmp_path / "p").classifier
    warm = IntentRecipe.from_dict(warm_recipe(tmp_path / "p", {"train": {"epochs": 20}}))
    child = train_intent_classifier(compound_corpus, compound_corpus, warm,
                                    out_dir=tmp_path / "c",
                                    init_from=WarmStart(tmp_path / "p")).classifier
    assert child.intents == first.intents + ["transfer"]
    assert child.slot_tags == first.slot_tags
    assert lineage_of(tmp_path / "c")["intents_added"] == ["transfer"]
    sent = [e.text for e in compound_corpus if e.intents == ("transfer",)]
    hits = np.mean([[k for k, _ in p.intents] == ["transfer"] for p in child.predict(sent)])
    assert hits > 0.5, hits  # the new intent answered alone (its prior start: 6 of 27 rows)
    kept = [e for e in old if e.intents]
    same = np.mean([sorted(k for k, _ in p.intents) == sorted(e.intents)
                    for p, e in zip(child.predict([e.text for e in kept]), kept, strict=True)])
    assert same >= 0.9, same  # the old intents kept
    data = tmp_path / "all.jsonl"  # eval --parent on compound models: exact intent sets
    data.write_text("".join(json.dumps({"text": e.text, "intents": list(e.intents)}) + "\n"
                            for e in compound_corpus), encoding="utf-8")
    assert main(["eval", str(tmp_path / "c"), "--data", str(data), "--parent",
                 str(tmp_path / "p"), "--out", str(tmp_path / "ev")]) == 0
    report = json.loads((tmp_path / "ev" / "report.json").read_text())["parent_comparison"]
    assert report["new_intents"] == ["transfer"] and report["rows"] == len(compound_corpus)
    transfer = next(r for r in report["per_intent"] if r["intent"] == "transfer")
    assert transfer["parent"] == 0.0 and transfer["model"] > 0.5


def test_a_compound_warm_starts_new_intent_row_is_fitted_against_the_parents(
        tmp_path, compound_corpus):
    """The compound warm start fits the new intent's sigmoid row on the parent's features
    (the parent's rows kept): with fine-tuning off (lr 1e-12) the child already answers the
    new intent on its rows, and the parent's rows are unchanged."""
    recipe = IntentRecipe.from_dict(COMPOUND_TINY)
    old = [e for e in compound_corpus if "transfer" not in e.intents]
    first = train_intent_classifier(old, old, recipe, out_dir=tmp_path / "p").classifier
    warm = IntentRecipe.from_dict(warm_recipe(tmp_path / "p",
                                              {"train": {"epochs": 1, "lr": 1e-12}}))
    child = train_intent_classifier(compound_corpus, compound_corpus, warm,
                                    out_dir=tmp_path / "c",
                                    init_from=WarmStart(tmp_path / "p")).classifier
    n = len(first.intents)
    torch.testing.assert_close(child.model.classifier.weight.detach()[:n],
                               first.model.classifier.weight.detach(), atol=1e-6, rtol=0)
    sent = [e.text for e in compound_corpus if e.intents == ("transfer",)]
    hits = np.mean(["transfer" in [k for k, _ in p.intents] for p in child.predict(sent)])
    assert hits > 0.5, hits


def test_a_compound_warm_starts_new_slot_rows_are_fitted_against_the_parents(
        tmp_path, compound_corpus):
    """A slot the parent never tagged (``recipient``, on "my sister"): the warm start fits
    its two tag rows on the parent's token states (the parent's tag rows kept), so with
    fine-tuning off (lr 1e-12) the child already tags it on its rows; fresh rows, as before,
    tagged none of them."""
    import dataclasses

    from headwise.text.dataset import SlotSpan

    recipe = IntentRecipe.from_dict(COMPOUND_TINY)
    first = train_intent_classifier(compound_corpus, compound_corpus, recipe,
                                    out_dir=tmp_path / "p").classifier

    def with_recipient(e):
        if "my sister" not in e.text:
            return e
        start = e.text.index("my sister")
        span = SlotSpan("recipient", start, start + len("my sister"), "my sister", None)
        return dataclasses.replace(e, slots=tuple(sorted((*e.slots, span),
                                                         key=lambda s: s.start)))

    rows = [with_recipient(e) for e in compound_corpus]
    warm = IntentRecipe.from_dict(warm_recipe(tmp_path / "p",
                                              {"train": {"epochs": 1, "lr": 1e-12}}))
    child = train_intent_classifier(rows, rows, warm, out_dir=tmp_path / "c",
                                    init_from=WarmStart(tmp_path / "p")).classifier
    assert set(child.slot_tags) - set(first.slot_tags) == {"B-recipient", "I-recipient"}
    old = [child.slot_tags.index(t) for t in first.slot_tags]
    torch.testing.assert_close(child.model.tagger.weight.detach()[old],
                               first.model.tagger.weight.detach(), atol=1e-6, rtol=0)
    sent = [e.text for e in rows if "my sister" in e.text]
    found = np.mean([any(s.name == "recipient" and s.text == "my sister" for s in p.slots)
                     for p in child.predict(sent)])
    assert found > 0.5, found
    amounts = np.mean([any(s.name == "amount_of_money" for s in p.slots)
                       for p in child.predict([e.text for e in rows if e.slots])])
    assert amounts > 0.5, amounts  # the parent's slot still tagged


# --- the commands -----------------------------------------------------------------------------
def test_cli_warm_start_and_eval_against_the_parent(parent, tmp_path, capsys):
    d, _ = parent
    data = _write(tmp_path / "new.csv", _rows({**INTENTS, **NEW}))
    test = _write(tmp_path / "test.csv", _rows({**INTENTS, **NEW}, 1) + [("tell a joke", "oos")])
    out = tmp_path / "child"
    assert main(["train", "--data", str(data), "--init-from", str(d / "parent"), "--epochs", "6",
                 "--replay", "0.5", "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "warm start from" in text and "50% of the parent's intents' rows replayed" in text
    assert lineage_of(out)["replay"] == 0.5
    assert main(["eval", str(out), "--data", str(test), "--parent", str(d / "parent"),
                 "--out", str(tmp_path / "ev")]) == 0
    text = capsys.readouterr().out
    assert f"against the parent {d / 'parent'} (21 rows)" in text
    assert "mortgage" in text and "(new)" in text and "verdict: " in text
    assert "the model was warm-started from this parent" in text
    report = json.loads((tmp_path / "ev" / "report.json").read_text())["parent_comparison"]
    assert report["new_intents"] == ["mortgage"] and report["parent_rows"]["rows"] == 16
    mortgage = next(r for r in report["per_intent"] if r["intent"] == "mortgage")
    assert mortgage["parent"] == 0.0 and not mortgage["parent_knows"]
    # a model that is not this parent's child says so
    assert main(["eval", str(d / "parent"), "--data", str(test), "--parent", str(out),
                 "--out", str(tmp_path / "ev2")]) == 0
    assert "records no parent" in capsys.readouterr().out


def test_cli_warm_start_without_epochs_says_it_trains_a_third(parent, tmp_path, capsys):
    d, _ = parent
    data = _write(tmp_path / "new.csv", _rows({**INTENTS, **NEW}))
    assert main(["train", "--data", str(data), "--init-from", str(d / "parent"), "--out",
                 str(tmp_path / "child"), "--quiet"]) == 0
    assert "warm start: 3 epochs, a third of the parent's" in capsys.readouterr().out
    saved = json.loads((tmp_path / "child" / "intent.json").read_text())
    assert saved["info"]["recipe"]["train"]["epochs"] == 3


def test_cli_refusals_say_what_to_do(parent, tmp_path, capsys):
    d, _ = parent
    data = _write(tmp_path / "new.csv", _rows({**INTENTS, **NEW}))
    assert main(["train", "--data", str(data), "--init-from", str(d / "parent"), "--model",
                 "bilstm", "--out", str(tmp_path / "a")]) == 1
    assert "A warm start keeps its parent's network" in capsys.readouterr().err
    assert main(["train", "--data", str(data), "--replay", "0.5", "--out",
                 str(tmp_path / "b")]) == 1
    assert "give --init-from MODEL too" in capsys.readouterr().err
    dropped = _write(tmp_path / "dropped.csv", _rows({**NEW, "balance": INTENTS["balance"]}))
    assert main(["train", "--data", str(dropped), "--init-from", str(d / "parent"), "--out",
                 str(tmp_path / "c"), "--quiet"]) == 1
    assert "keeps every intent of its parent" in capsys.readouterr().err


def test_bilstm_warm_start_grows_its_vocabulary_and_head(tmp_path):
    recipe = IntentRecipe.from_dict({
        "architecture": {"type": "bilstm", "vocab_size": 200, "lstm_embed_dim": 16,
                         "lstm_hidden": 16},
        "train": {"epochs": 2, "batch_size": 8, "lr": 3e-3, "progress": False}})
    first = train_intent_classifier(_rows(INTENTS), None, recipe,
                                    out_dir=tmp_path / "p").classifier
    warm = IntentRecipe.from_dict(warm_recipe(tmp_path / "p", {"train": {"epochs": 1}}))
    child = train_intent_classifier(_rows({**INTENTS, **NEW}), None, warm,
                                    out_dir=tmp_path / "c",
                                    init_from=WarmStart(tmp_path / "p")).classifier
    lineage = lineage_of(tmp_path / "c")
    assert child.labels == first.labels + ["mortgage"] and lineage["tokens_added"] > 0
    assert child.tokenizer.vocab_size == first.tokenizer.vocab_size + lineage["tokens_added"]
    assert child.model.embedding.num_embeddings == child.tokenizer.vocab_size
    assert IntentClassifier.load(tmp_path / "c").labels == child.labels


@pytest.mark.parametrize("extra_rows", [0, 5])
def test_pretrained_warm_start_keeps_the_tokenizer_and_its_record(tmp_path, extra_rows):
    """extra_rows: an embedding with more rows than the tokenizer has ids, as
    multilingual-e5-small's (the warm start keeps it, the tokenizer too)."""
    pytest.importorskip("transformers")
    from hf_checkpoints import xlmr_unigram

    rows = [("我的信用卡被冻结了", "freeze"), ("my card is frozen", "freeze"),
            ("每个月15号还款太早了", "repay_date"), ("change my repayment date", "repay_date"),
            ("我要提前还一部分本金", "prepay"), ("repay early please", "prepay")]
    directory = xlmr_unigram(tmp_path / "xlmr", extra_rows=extra_rows)
    recipe = IntentRecipe.from_dict({
        "architecture": {"type": "pretrained", "name": str(directory), "max_length": 24,
                         "input_prefix": "query: ", "trim_vocab": 8},
        "train": {"epochs": 2, "batch_size": 4, "lr": 3e-3, "progress": False}})
    first = train_intent_classifier(rows * 2, rows, recipe, out_dir=tmp_path / "p").classifier
    assert first.info["linear_probe"] is not None  # the family's default: LP-FT
    given = warm_recipe(tmp_path / "p", {"train": {"epochs": 1}})
    assert given["levers"]["linear_probe"] is False  # the head is the parent's
    new = [("我想开一个储蓄账户", "open_account"), ("open a savings account", "open_account")]
    child = train_intent_classifier((rows + new) * 2, rows + new,
                                    IntentRecipe.from_dict(given), out_dir=tmp_path / "c",
                                    init_from=WarmStart(tmp_path / "p")).classifier
    assert child.labels == first.labels + ["open_account"]
    assert child.tokenizer.backend.to_str() == first.tokenizer.backend.to_str()
    assert child.tokenizer.input_prefix == "query: "
    assert child.info["pretrained"] == first.info["pretrained"]
    assert lineage_of(tmp_path / "c")["tokens_added"] == 0
    # the new intent's head row was fitted on the parent's features before fine-tuning
    assert child.info["linear_probe"] is not None


def test_a_new_intents_head_row_is_fitted_against_the_parents_rows(tmp_path):
    """A warm start that adds an intent to a pretrained encoder (fine-tuned at a rate far
    too small to train a fresh row in a few steps) fits the new row on the parent's
    features against its rows, which stay as they were: with fine-tuning switched off
    (lr 1e-12) the child already answers the new intent on its rows, and the parent's rows
    of the head are unchanged."""
    pytest.importorskip("transformers")
    from hf_checkpoints import xlmr_unigram

    rows = [("我的信用卡被冻结了", "freeze"), ("my card is frozen", "freeze"),
            ("每个月15号还款太早了", "repay_date"), ("change my repayment date", "repay_date"),
            ("我要提前还一部分本金", "prepay"), ("repay early please", "prepay")]
    directory = xlmr_unigram(tmp_path / "xlmr")
    recipe = IntentRecipe.from_dict({
        "architecture": {"type": "pretrained", "name": str(directory), "max_length": 24},
        "train": {"epochs": 2, "batch_size": 4, "lr": 3e-3, "progress": False},
        "decision": {"prior_correction": "none"}})
    first = train_intent_classifier(rows * 2, rows, recipe, out_dir=tmp_path / "p").classifier
    new = [("我想开一个储蓄账户", "open_account"), ("open a savings account", "open_account"),
           ("开户需要什么材料", "open_account")]
    given = warm_recipe(tmp_path / "p", {"train": {"epochs": 1, "lr": 1e-12}})
    child = train_intent_classifier((rows + new) * 2, rows + new,
                                    IntentRecipe.from_dict(given), out_dir=tmp_path / "c",
                                    init_from=WarmStart(tmp_path / "p")).classifier
    assert child.labels == first.labels + ["open_account"]
    old = len(first.labels)
    torch.testing.assert_close(child.model.classifier.weight.detach()[:old],
                               first.model.classifier.weight.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(child.model.classifier.bias.detach()[:old],
                               first.model.classifier.bias.detach(), atol=1e-6, rtol=0)
    answers = [p.top_k[0][0] for p in child.predict([t for t, _ in new])]
    assert answers.count("open_account") >= 2, answers
