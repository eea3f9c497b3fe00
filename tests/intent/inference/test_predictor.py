"""The predictor's answering step: options a kind does not take are refused, by name, and
the notes come from the one encoding."""

from __future__ import annotations

from datetime import date

import pytest
from tiny_corpus import INTENTS
from tiny_models import MAX_LENGTH, tiny_encoder, tiny_tokenizer

from headwise.intent.classifier import IntentClassifier
from headwise.intent.inference import SingleLabelPredictor, TorchRuntime, load_predictor
from headwise.intent.inference.bucketing import window_length


@pytest.fixture(scope="module")
def classifier():
    tok = tiny_tokenizer()
    return IntentClassifier(tiny_encoder(tok), tok, list(INTENTS), temperature=1.5,
                            threshold=0.4, max_length=MAX_LENGTH)


@pytest.mark.parametrize("option, value", [("reference_date", date(2026, 1, 1)),
                                           ("at_least_one", True), ("thresholds", object())])
def test_a_single_label_predictor_refuses_the_compound_options(classifier, option, value):
    predictor = classifier.predictor()
    with pytest.raises(ValueError, match=f"{option}: not an option of SingleLabelPredictor"):
        predictor.predictions(["i lost my card"], **{option: value})
    # not given (None or False) is no option at all
    assert predictor.predictions(["i lost my card"], **{option: None})[0]


def test_the_notes_come_from_the_encoding(classifier):
    long = "send money to my friend and then transfer fifty pounds to my savings now"
    n = classifier.tokenizer.lengths([long])[0]
    assert n > MAX_LENGTH
    predictor = classifier.predictor()  # long_text "auto": chunk_max
    answers, notes = predictor.predictions(["hi", long])
    [item] = predictor.encode([long])
    assert notes[0] is None
    assert 1 <= notes[1].pop("chunk") <= len(item.chunks)
    assert notes[1] == {"policy": "chunked", "tokens": n, "max_length": MAX_LENGTH,
                        "chunks": len(item.chunks), "window": window_length(None, MAX_LENGTH),
                        "stride": predictor.chunk_stride, "pooling": "max_confidence",
                        "span": None}
    assert [a.to_dict() for a in answers] == [a.to_dict() for a in classifier.predict(
        ["hi", long])]


def test_load_predictor_refuses_an_unknown_runtime_or_policy(classifier):
    with pytest.raises(ValueError, match="runtime must be one of auto, torch, onnx"):
        load_predictor(classifier, runtime="cuda")
    with pytest.raises(ValueError, match="long_text must be one of auto, truncate, head_tail, "
                                         "chunk, chunk_max, chunk_in_scope, chunk_span, "
                                         "reject"):
        load_predictor(classifier, long_text="cut")
    chosen = load_predictor(classifier, runtime="torch", long_text="chunk")
    assert isinstance(chosen, SingleLabelPredictor) and chosen.runtime.name == "torch"
    assert chosen.long_text == "chunk"


def test_a_chunked_text_reads_the_head_once(classifier):
    """Chunk-and-pool: a long text's logits are the head on its windows' mean pooled
    vector, computed here by hand in float64."""
    import numpy as np

    long = "send money to my friend and then transfer fifty pounds to my savings now"
    predictor = SingleLabelPredictor(classifier, TorchRuntime(classifier.model),
                                     long_text="chunk")
    [item] = predictor.encode([long])
    assert item.policy == "chunked" and len(item.chunks) > 1
    logits, pooled = predictor.forward([item])
    windows = [predictor.forward([type(item)((c,), len(c))])[1][0] for c in item.chunks]
    mean = np.mean(windows, axis=0)
    head = classifier.model.classifier
    want = mean @ head.weight.detach().double().numpy().T + head.bias.detach().double().numpy()
    np.testing.assert_allclose(pooled[0], mean, atol=1e-6)
    np.testing.assert_allclose(logits[0], want, atol=1e-5)
