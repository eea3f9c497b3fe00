"""ONNX export: onnxruntime equals PyTorch within 1e-4, int8 agrees with fp32 on a trained
model and holds integer weights, wrong files refused."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest
import torch
from answers import confidence_of
from fastapi.testclient import TestClient
from serve_helpers import wait_ready
from tiny_corpus import INTENTS
from tiny_models import TEXTS

from headwise.cli import main
from headwise.intent.classifier import IntentClassifier
from headwise.intent.inference import OnnxRuntime, TorchRuntime
from headwise.onnx.export import max_logit_difference, probe_batches
from headwise.serve import ServeConfig, create_app, load_served_predictor


@pytest.fixture(scope="module")
def exported(encoder_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("onnx")
    data = d / "data.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows([(t, k) for k, ts in INTENTS.items() for t in ts] + [("hello", "oos")])
    code = main(["export", str(encoder_dir), "--onnx", str(d / "model.onnx"),
                 "--int8", str(d / "model.int8.onnx"), "--data", str(data)])
    assert code == 0
    return d


def test_export_writes_both_files_and_a_report(exported, capsys):
    report = json.loads((exported / "model.export.json").read_text())
    assert report["max_abs_logit_diff"] <= 1e-4
    # the default graph carries onnxruntime's fused operators: one Attention per layer
    assert report["fused_ops"]["Attention"] == 2 and report["fused_ops"]["BiasGelu"] == 2
    assert set(report["accuracy"]) == {"torch", "onnx", "int8", "examples"}
    assert report["accuracy"]["examples"] == len(TEXTS)  # the oos row is not an intent
    assert report["accuracy"]["onnx"] == report["accuracy"]["torch"]
    assert OnnxRuntime(exported / "model.int8.onnx").quantized
    assert not OnnxRuntime(exported / "model.onnx").quantized
    # weights quantised per output channel: the packed Q/K/V matrix of a layer (d 32 -> 96)
    # has one scale per column, not one for the matrix
    import onnx

    graph = onnx.load(str(exported / "model.int8.onnx"), load_external_data=False).graph
    scales = {i.name: list(i.dims) for i in graph.initializer if i.name.endswith("_scale")}
    qkv = [dims for name, dims in scales.items() if "attn" in name and "weight" in name]
    assert qkv and all(dims == [96] for dims in qkv), scales


def test_onnxruntime_equals_pytorch(encoder_dir, exported):
    clf = IntentClassifier.load(encoder_dir)
    tok = clf.tokenizer
    batches = probe_batches(tok.vocab_size, clf.max_length, pad_id=tok.pad_token_id, seed=3)
    torch_rt, onnx_rt = TorchRuntime(clf.model), OnnxRuntime(exported / "model.onnx")
    assert max_logit_difference(torch_rt, onnx_rt, batches) <= 1e-4
    enc = tok(TEXTS, max_length=clf.max_length)
    logits, pooled = onnx_rt.forward(enc["input_ids"].numpy(), enc["attention_mask"].numpy())
    np.testing.assert_allclose(logits, clf.logits(TEXTS), atol=1e-4)
    with torch.no_grad():
        want = clf.model.pool(clf.model.encode(enc["input_ids"], enc["attention_mask"].bool()),
                              enc["attention_mask"].bool())
    np.testing.assert_allclose(pooled, want.numpy(), atol=1e-4)


#: texts the int8 model is compared on: the corpus and paraphrases of it (fixed)
INT8_TEXTS = TEXTS + [
    "i lost my card yesterday", "my card is missing", "someone stole my card", "lost card",
    "my card was taken", "cannot find my card", "card stolen abroad", "send money to john",
    "transfer money abroad", "wire 50 pounds to my friend", "make a transfer to another bank",
    "send 50 pounds to my sister", "i want to transfer money", "what is my current balance",
    "how much is left in my account", "show my balance", "check my savings balance",
    "how much money is in my savings", "balance please", "money left"]


@pytest.fixture(scope="module")
def trained_int8(tmp_path_factory):
    """The tiny encoder trained to fit the corpus (60 full-batch AdamW steps), its fp32
    export and the int8 quantisation of that export."""
    from threads import one_thread
    from tiny_models import MAX_LENGTH, tiny_encoder, tiny_tokenizer

    from headwise.onnx.export import export_onnx, quantize_int8

    tok = tiny_tokenizer()
    model = tiny_encoder(tok)
    labels = torch.tensor([list(INTENTS).index(k) for k, ts in INTENTS.items() for _ in ts])
    enc = tok(TEXTS, max_length=MAX_LENGTH)
    ids, mask = enc["input_ids"], enc["attention_mask"].bool()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    torch.manual_seed(0)  # the dropout masks: the same trained model on every run
    with one_thread():  # and the same reductions: bit-identical whatever the thread count
        for _ in range(60):
            loss = torch.nn.functional.cross_entropy(
                model.classifier(model.pool(model.encode(ids, mask), mask)), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    d = tmp_path_factory.mktemp("int8")
    fp32 = export_onnx(model, d / "m.onnx", max_length=MAX_LENGTH)
    return model, tok, labels, fp32, quantize_int8(fp32, d / "m8.onnx")


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_int8_agrees_with_fp32_on_a_trained_model(trained_int8):
    """Top intent and probabilities of the int8 graph against PyTorch fp32, on 35 fixed
    texts. Measured over repeated runs: agreement 35/35; mean absolute probability change
    0.0005-0.0016; each text's largest change at most 0.011 but on one borderline text,
    which moved 0.012-0.06 from run to run while the fixture trained on the worker's
    threads (it now trains on one, bit-identical from run to run). The bounds hold the
    95th percentile of the texts' changes and the mean, not the single largest: room for
    onnxruntime's kernels to round differently, none for a broken quantisation (the
    untrained model's largest change is 0.09). Those runs were on an Intel CPU with VNNI;
    on an AMD CPU with AVX2 only, full-range int8 weights saturate (95th percentile 0.093,
    largest 0.29: this test failed) and the 7-bit weights ``quantize_int8`` writes give
    95th percentile 0.014, mean 0.0022, agreement 35/35."""
    from tiny_models import MAX_LENGTH

    model, tok, labels, _, int8 = trained_int8
    enc = tok(INT8_TEXTS, max_length=MAX_LENGTH)
    batch = (enc["input_ids"].numpy(), enc["attention_mask"].numpy())
    fp32_logits, _ = TorchRuntime(model).forward(*batch)
    q_logits, _ = OnnxRuntime(int8).forward(*batch)
    p, q = _softmax(fp32_logits), _softmax(q_logits)
    # the model is trained: fp32 gets every corpus text right
    assert (p[:len(TEXTS)].argmax(1) == labels.numpy()).all()
    agreement = (p.argmax(1) == q.argmax(1)).mean()
    assert agreement >= 0.9, agreement
    per_text = np.abs(p - q).max(axis=1)
    assert np.quantile(per_text, 0.95) <= 0.03, np.sort(per_text)[-4:]
    assert np.abs(p - q).mean() <= 0.005, np.abs(p - q).mean()
    # ... and it is an approximation, not the fp32 graph again
    assert np.abs(fp32_logits - q_logits).max() > 1e-3


def test_int8_graph_holds_int8_weights_and_integer_operators(trained_int8):
    """Every weight matrix of the fp32 graph is stored as 8-bit integers in the int8 graph,
    and every matrix product runs on them (MatMulInteger, QAttention): none is left in
    float."""
    import onnx

    _, _, _, fp32, int8 = trained_int8
    f = onnx.load(str(fp32), load_external_data=False).graph
    q = onnx.load(str(int8), load_external_data=False).graph
    float_matrices = [i for i in f.initializer
                      if i.data_type == onnx.TensorProto.FLOAT and len(i.dims) == 2]
    assert len(float_matrices) >= 9  # embeddings, Q/K/V, FFN, classifier
    assert not [i.name for i in q.initializer
                if i.data_type == onnx.TensorProto.FLOAT and len(i.dims) == 2]
    eight_bit = [i for i in q.initializer if len(i.dims) == 2 and i.data_type in
                 (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)]
    assert len(eight_bit) == len(float_matrices)
    f_ops = [n.op_type for n in f.node]
    q_ops = [n.op_type for n in q.node]
    assert not {"MatMul", "Gemm", "Attention"} & set(q_ops)
    assert (q_ops.count("MatMulInteger") + q_ops.count("QAttention")
            == f_ops.count("MatMul") + f_ops.count("Gemm") + f_ops.count("Attention"))
    assert "DynamicQuantizeLinear" in q_ops  # activations quantised at run time
    assert OnnxRuntime(int8).quantized and not OnnxRuntime(fp32).quantized


@pytest.mark.parametrize("policy", ["chunk", "chunk_max", "chunk_span"])
def test_serving_on_onnxruntime_gives_the_same_answers(encoder_dir, exported, policy):
    cfg = ServeConfig(model_dir=str(encoder_dir), runtime="onnx",
                      onnx_path=str(exported / "model.onnx"), long_text=policy)
    with TestClient(create_app(cfg)) as c:
        wait_ready(c)
        body = c.post("/v1/predict", json={"texts": TEXTS}).json()
    assert body["runtime"] == "onnx"
    clf = IntentClassifier.load(encoder_dir)
    torch_predictor = load_served_predictor(
        ServeConfig(model_dir=str(encoder_dir), long_text=policy), clf)
    for got, want in zip(body["predictions"], torch_predictor.predict(TEXTS), strict=True):
        assert [k["intent"] for k in got["top_k"]] == [k["intent"] for k in want["top_k"]]
        assert confidence_of(got) == pytest.approx(confidence_of(want), abs=1e-4)
        assert got["long_text"] == want["long_text"]


def test_onnx_from_other_weights_is_refused(encoder_dir, exported, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(encoder_dir, other)
    clf = IntentClassifier.load(other)
    with torch.no_grad():
        clf.model.classifier.bias.add_(1.0)
    clf.save(other)
    cfg = ServeConfig(model_dir=str(other), runtime="onnx",
                      onnx_path=str(exported / "model.onnx"))
    with pytest.raises(ValueError, match="exported from other weights"):
        load_served_predictor(cfg)
    with pytest.raises(FileNotFoundError, match="headwise export"):
        load_served_predictor(ServeConfig(runtime="onnx",
                                          onnx_path=str(tmp_path / "missing.onnx")),
                              clf)
    (other / "junk.onnx").write_bytes(b"not onnx")
    with pytest.raises(ValueError, match="not a loadable ONNX model"):
        OnnxRuntime(other / "junk.onnx")


def test_an_export_that_fails_its_check_is_not_written(encoder_dir, tmp_path, monkeypatch,
                                                       capsys):
    """`headwise export` and runtime auto's cache run one export-and-check: a graph
    outside the tolerance (here: any difference at all) leaves no file behind."""
    from headwise.intent.inference import load

    monkeypatch.setattr(load, "ONNX_TOLERANCE", -1.0)
    out = tmp_path / "m.onnx"
    assert main(["export", str(encoder_dir), "--onnx", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"not written: {out} does not reproduce the model in {encoder_dir}" in err
    assert list(tmp_path.iterdir()) == []


def test_portable_export_writes_standard_operators(encoder_dir, tmp_path, capsys):
    out = tmp_path / "plain.onnx"
    assert main(["export", str(encoder_dir), "--onnx", str(out), "--portable"]) == 0
    assert "fused operators: none" in capsys.readouterr().out
    report = json.loads(out.with_suffix(".export.json").read_text())
    assert report["fused_ops"] == {} and report["max_abs_logit_diff"] <= 1e-4


def test_bilstm_export_is_refused(bilstm_dir, tmp_path, capsys):
    assert main(["export", str(bilstm_dir), "--onnx", str(tmp_path / "m.onnx")]) == 1
    assert "Transformer encoder classifiers only" in capsys.readouterr().err


def test_rotary_export_says_why_its_attention_is_not_fused(tmp_path, capsys):
    from tiny_models import MAX_LENGTH, tiny_encoder, tiny_tokenizer

    tok = tiny_tokenizer()
    clf = IntentClassifier(tiny_encoder(tok, position="rope"), tok, list(INTENTS),
                           max_length=MAX_LENGTH)
    model_dir = clf.save(tmp_path / "rope")
    out = tmp_path / "rope.onnx"
    assert main(["export", str(model_dir), "--onnx", str(out)]) == 0
    printed = capsys.readouterr().out
    report = json.loads(out.with_suffix(".export.json").read_text())
    assert "Attention" not in report["fused_ops"] and report["max_abs_logit_diff"] <= 1e-4
    assert report["attention_not_fused"] == "layer 0 uses rotary positions"
    assert "no fused Attention node: layer 0 uses rotary positions" in printed
    # onnxruntime's optimizer diagnostics stay off stdout (the user's output)
    assert "shape inference" not in printed
