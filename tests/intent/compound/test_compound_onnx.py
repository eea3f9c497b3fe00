"""A compound (multi-label + slots) classifier on onnxruntime: the export of its joint
network carries the slot-tag logits, equal to PyTorch's (and to a float64 forward pass)
within float tolerance on odd lengths, with padding, one row or several; the check refuses
an export that disagrees; a trained model answers alike on both runtimes (its int8 copy
close to them, by a stated bar); ``headwise export`` and ``headwise predict --runtime
onnx`` take it."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from tiny_models import tiny_tokenizer

from headwise.cli import main
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.inference import CompoundPredictor, OnnxRuntime, TorchRuntime
from headwise.intent.inference.load import check_onnx, compare_joint, export_checked_onnx
from headwise.models import ModelConfig
from headwise.models.joint import JointIntentSlotModel
from headwise.onnx import export_onnx, fused_op_counts, probe_batches, quantize_int8

TAGS = ["O", "B-amount_of_money", "I-amount_of_money", "B-date", "I-date"]
#: questions the trained model answers: its corpus' shapes with other amounts, and others
TEXTS = ["send 50 pounds to my sister", "i was charged twice for 65 pounds refund it",
         "refund the 90 pounds please", "why was i charged 1,200 pounds", "what is the weather",
         "send 300 pounds now", "hi", "refund it", "charged twice for 20 pounds",
         "i was charged twice for 50 pounds and then again for 75 pounds so please refund "
         "both of them to my account today"]
#: the least share of texts on which the int8 copy of the trained model must answer
#: PyTorch's intent set, and its slot spans (dynamic int8 moves the probabilities by a few
#: hundredths; the tiny model's answers are far from its thresholds on most texts)
INT8_AGREEMENT = 0.9


def _joint(tok, *, number_heads=None, slot_tags=tuple(TAGS), multi_label=True, layers=2,
           seed=0) -> JointIntentSlotModel:
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=32, num_layers=layers, num_heads=4,
                      d_ff=64, num_labels=3, labels=["a", "b", "c"], max_position=64,
                      pad_token_id=tok.pad_token_id, dropout=0.0,
                      model_type="joint_intent_slot", multi_label=multi_label,
                      slot_tags=list(slot_tags) if slot_tags else None,
                      number_heads=number_heads)
    model = JointIntentSlotModel(cfg).eval()
    with torch.no_grad():  # larger heads: probabilities and tags away from uniform
        model.classifier.weight.normal_(0, 1.0)
        if model.tagger is not None:
            model.tagger.weight.normal_(0, 1.0)
    return model


def _batch(tok, lengths: list[int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random ids padded to the longest row (pad id where the mask is 0)."""
    rng = np.random.default_rng(seed)
    width = max(lengths)
    ids = np.full((len(lengths), width), tok.pad_token_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, n in enumerate(lengths):
        ids[i, :n] = rng.integers(5, tok.vocab_size, size=n)
        mask[i, :n] = 1
    return ids, mask


#: odd lengths, one row and several, rows padded by up to 12 tokens
SHAPES = ([7], [1], [3, 13, 1, 9], [5, 5, 11], [15] * 2 + [3])


@pytest.mark.parametrize("number_heads", [None, [0]], ids=["fused", "number-heads"])
def test_the_export_gives_pytorchs_intent_and_tag_logits(tmp_path, number_heads):
    tok = tiny_tokenizer()
    model = _joint(tok, number_heads=number_heads)
    path = export_onnx(model, tmp_path / "joint.onnx", max_length=32)
    rt = OnnxRuntime(path)
    assert rt.tagged
    assert [o.name for o in rt.session.get_outputs()] == ["logits", "pooled", "tag_logits"]
    # fused Attention where the single-label export fuses (not with a number-aware head)
    assert fused_op_counts(path).get("Attention", 0) == (2 if number_heads is None else 0)
    reference = copy.deepcopy(model).double()  # the float64 path, independent of both
    torch_rt = TorchRuntime(model)
    for seed, lengths in enumerate(SHAPES):
        ids, mask = _batch(tok, lengths, seed)
        logits, tags = rt.forward_joint(ids, mask)
        assert logits.shape == (len(lengths), 3) and tags.shape == (*ids.shape, len(TAGS))
        with torch.no_grad():
            want = reference(torch.from_numpy(ids), torch.from_numpy(mask).bool())
        real = mask == 1
        np.testing.assert_allclose(1 / (1 + np.exp(-logits)),
                                   torch.sigmoid(want["logits"]).numpy(), atol=1e-6, rtol=0)
        np.testing.assert_allclose(tags[real], want["tag_logits"].numpy()[real], atol=1e-4,
                                   rtol=0)
        t_logits, t_tags = torch_rt.forward_joint(ids, mask)
        np.testing.assert_allclose(logits, t_logits, atol=1e-5, rtol=0)
        np.testing.assert_allclose(tags[real], t_tags[real], atol=1e-4, rtol=0)
        assert np.array_equal(tags[real].argmax(-1), t_tags[real].argmax(-1))
        # the single-label outputs of the same graph: intent logits and pooled vectors
        p_logits, pooled = rt.forward(ids, mask)
        np.testing.assert_allclose(p_logits, logits, atol=1e-6, rtol=0)
        np.testing.assert_allclose(pooled, torch_rt.forward(ids, mask)[1], atol=1e-4, rtol=0)


def test_a_joint_network_without_a_tagger_exports_its_intents_only(tmp_path):
    tok = tiny_tokenizer()
    model = _joint(tok, slot_tags=None, multi_label=False, layers=1)
    rt = OnnxRuntime(export_onnx(model, tmp_path / "plain.onnx", max_length=32))
    assert not rt.tagged
    ids, mask = _batch(tok, [3, 9], 0)
    logits, tags = rt.forward_joint(ids, mask)
    assert tags is None
    np.testing.assert_allclose(logits, TorchRuntime(model).forward_joint(ids, mask)[0],
                               atol=1e-5, rtol=0)
    # a compound classifier of it answers alike on both runtimes (softmax head, no slots)
    clf = CompoundClassifier(model, tok, ["a", "b", "c"], max_length=16)
    texts = ["i lost my card", "send money", "what is my balance today please"]
    on_onnx = CompoundPredictor(clf, rt).predict(texts)
    on_torch = CompoundPredictor(clf, TorchRuntime(model)).predict(texts)
    assert [[i["intent"] for i in a["intents"]] for a in on_onnx] == \
        [[i["intent"] for i in a["intents"]] for a in on_torch]
    assert all(a["slots"] == [] for a in on_onnx)


# -- a trained compound model --------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(trained_compound_dir):
    return CompoundClassifier.load(trained_compound_dir)


@pytest.fixture(scope="module")
def exported(trained, trained_compound_dir, tmp_path_factory):
    """The trained model's checked float32 export and its int8 copy."""
    d = tmp_path_factory.mktemp("compound-onnx")
    fp32, _ = export_checked_onnx(trained, d / "model.onnx", model_dir=trained_compound_dir)
    return fp32, OnnxRuntime(quantize_int8(fp32.path, d / "model.int8.onnx"))


def _answers(clf, runtime, texts):
    return CompoundPredictor(clf, runtime).predict(texts, top_k=3)


def test_the_trained_model_answers_alike_on_both_runtimes(trained, exported,
                                                          compound_corpus):
    texts = TEXTS + [e.text for e in compound_corpus]
    on_torch = _answers(trained, TorchRuntime(trained.model), texts)
    on_onnx = _answers(trained, exported[0], texts)
    for a, b in zip(on_onnx, on_torch, strict=True):
        assert [i["intent"] for i in a["intents"]] == [i["intent"] for i in b["intents"]]
        assert [i["intent"] for i in a["top_k"]] == [i["intent"] for i in b["top_k"]]
        np.testing.assert_allclose([i["confidence"] for i in a["top_k"]],
                                   [i["confidence"] for i in b["top_k"]], atol=1e-5, rtol=0)
        assert a["out_of_scope"] == b["out_of_scope"] and a["slots"] == b["slots"]
        assert a["long_text"] == b["long_text"]
    # what it learned survives the export: intents, out-of-scope, a slot with its value
    assert {i["intent"] for i in on_onnx[1]["intents"]} == {"charge", "refund"}
    # (the corpus's own out-of-scope rows, which the model was trained on: whether a model
    # this small also rejects an unseen wording is not what the export is tested for)
    rejected = [a for a, e in zip(on_onnx[len(TEXTS):], compound_corpus, strict=True)
                if not e.intents]
    assert rejected and all(a["out_of_scope"] and a["slots"] == [] for a in rejected)
    assert on_onnx[0]["slots"] == [{"name": "amount_of_money", "start": 5, "end": 14,
                                    "text": "50 pounds",
                                    "value": {"amount": 50.0, "currency": "GBP"}}]
    assert on_onnx[len(TEXTS) - 1]["long_text"]["policy"] == "truncated"


def test_int8_keeps_the_intent_sets_and_slot_spans_of_fp32(trained, exported,
                                                            compound_corpus):
    texts = TEXTS + [e.text for e in compound_corpus]
    fp32 = _answers(trained, exported[0], texts)
    int8 = _answers(trained, exported[1], texts)
    assert exported[1].quantized and exported[1].tagged
    sets = np.mean([{i["intent"] for i in a["intents"]} == {i["intent"] for i in b["intents"]}
                    for a, b in zip(int8, fp32, strict=True)])
    spans = np.mean([[(s["name"], s["start"], s["end"]) for s in a["slots"]]
                     == [(s["name"], s["start"], s["end"]) for s in b["slots"]]
                     for a, b in zip(int8, fp32, strict=True)])
    assert sets >= INT8_AGREEMENT and spans >= INT8_AGREEMENT, (sets, spans)
    # the int8 file is the same model's: the check accepts it without a tolerance
    assert check_onnx(trained, exported[1], None) > 0


def test_the_check_refuses_an_export_that_disagrees(trained, tmp_path):
    tok = trained.tokenizer
    batches = probe_batches(tok.vocab_size, trained.max_length, pad_id=tok.pad_token_id)
    other = copy.deepcopy(trained.model)
    with torch.no_grad():  # the slot tags move; the intent logits do not
        other.tagger.bias[1] += 0.05
    moved = OnnxRuntime(export_onnx(other, tmp_path / "moved.onnx", max_length=24))
    found = compare_joint(trained, TorchRuntime(trained.model), moved, batches)
    assert found["max_abs_logit_diff"] < 1e-5
    assert found["max_abs_tag_logit_diff"] == pytest.approx(0.05, abs=1e-4)
    with pytest.raises(ValueError, match="tag logits by up to 0.05"):
        check_onnx(trained, moved, "m")
    untagged = copy.deepcopy(trained.model)
    untagged.tagger = None
    no_tags = OnnxRuntime(export_onnx(untagged, tmp_path / "no_tags.onnx", max_length=24))
    with pytest.raises(ValueError, match="has slot tagger and the file carries no tag"):
        check_onnx(trained, no_tags, "m")


def test_export_and_predict_on_onnx_from_the_command_line(trained_compound_dir, tmp_path,
                                                          compound_corpus, capsys):
    data = tmp_path / "annotated.jsonl"
    data.write_text("".join(json.dumps({"text": e.text, "intents": list(e.intents), "slots": [
        {"name": s.name, "start": s.start, "end": s.end, "text": s.text, "value": s.value}
        for s in e.slots]}) + "\n" for e in compound_corpus), encoding="utf-8")
    out, q = tmp_path / "m.onnx", tmp_path / "m.int8.onnx"
    assert main(["export", str(trained_compound_dir), "--onnx", str(out), "--int8", str(q),
                 "--data", str(data)]) == 0
    printed = capsys.readouterr().out
    assert "intent and slot-tag logits within" in printed and "slot spans" in printed
    report = json.loads(out.with_suffix(".export.json").read_text())
    assert max(report["max_abs_logit_diff"], report["int8_max_abs_logit_diff"]) < 1.0
    assert report["max_abs_logit_diff"] <= 1e-4
    compound = report["compound"]
    assert compound["examples"] == len(compound_corpus)
    assert compound["intent_exact_match"]["onnx"] == compound["intent_exact_match"]["torch"]
    assert compound["onnx_vs_torch"] == {"intent_sets_equal": 1.0, "slot_spans_equal": 1.0}
    assert min(compound["int8_vs_torch"].values()) >= INT8_AGREEMENT
    answers = {}
    for runtime in ("torch", str(out), str(q)):
        assert main(["predict", str(trained_compound_dir), "--runtime", runtime, "--json",
                     *TEXTS]) == 0
        captured = capsys.readouterr()
        answers[runtime] = [json.loads(line) for line in captured.out.splitlines()]
    assert [a["slots"] for a in answers[str(out)]] == [a["slots"] for a in answers["torch"]]
    assert [a["intents"] and [i["intent"] for i in a["intents"]] for a in answers[str(out)]] \
        == [a["intents"] and [i["intent"] for i in a["intents"]] for a in answers["torch"]]
    assert answers[str(out)][0]["slots"][0]["value"] == {"amount": 50.0, "currency": "GBP"}
    assert len(answers[str(q)]) == len(TEXTS)
    # runtime onnx with no file named: the checked export cached for the directory
    assert main(["predict", str(trained_compound_dir), "--runtime", "onnx", "--json",
                 TEXTS[0]]) == 0
    assert json.loads(capsys.readouterr().out)["slots"] == answers["torch"][0]["slots"]
