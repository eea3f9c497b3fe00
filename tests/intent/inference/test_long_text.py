"""Long texts: each policy on a planted long message (a request at the start, middle or end
of neutral chatter) read by a tiny trained Transformer, and the plain-output line and the
JSON ``long_text`` note of ``headwise predict`` (the service:
tests/serve/test_serve_long_text.py)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch
from answers import intent_of
from tiny_long_text import REQUEST, chatter, planted
from tiny_models import MAX_LENGTH

from headwise.intent.classifier import IntentClassifier
from headwise.intent.inference import (
    EncodedText,
    SingleLabelPredictor,
    TorchRuntime,
    load_predictor,
)


@pytest.fixture(scope="module")
def trained(chatter_clf) -> IntentClassifier:
    return chatter_clf


def predictor(clf: IntentClassifier, policy: str) -> SingleLabelPredictor:
    return SingleLabelPredictor(clf, TorchRuntime(clf.model), long_text=policy)


@pytest.mark.parametrize("position", ["start", "middle", "end"])
def test_chunk_max_finds_the_request_wherever_it_sits(trained, position):
    text = planted(position)
    p = predictor(trained, "chunk_max")
    [item] = p.encode([text])
    assert item.policy == "chunked" and len(item.chunks) >= 5
    [answer], [note] = p.predictions([text])
    assert answer.intent == "card_lost" and not answer.out_of_scope
    # the deciding window reads the request (all of it or a part): its span of the text's
    # tokens meets the request's
    body = trained.tokenizer([text], max_length=None)["input_ids"][0].tolist()[1:-1]
    request = trained.tokenizer([REQUEST], max_length=None)["input_ids"][0].tolist()[1:-1]
    at = next(i for i in range(len(body)) if body[i:i + len(request)] == request)
    start = (note["chunk"] - 1) * p.chunk_stride
    assert start < at + len(request) and at < start + p.window_body
    assert note == {"policy": "chunked", "tokens": item.tokens, "max_length": MAX_LENGTH,
                    "chunks": len(item.chunks), "window": p.window, "stride": p.chunk_stride,
                    "pooling": "max_confidence", "chunk": note["chunk"], "span": None}
    # its answer is that window's own, read alone
    window = item.chunks[note["chunk"] - 1]
    alone = torch.softmax(torch.from_numpy(p.forward([EncodedText((window,), len(window))])[0]
                                           ), -1).numpy()[0]
    assert alone.max() == pytest.approx(answer.confidence, abs=1e-6)


def test_chunk_max_is_out_of_scope_only_when_every_window_is(trained):
    p = predictor(trained, "chunk_max")
    text = chatter(12, 7)
    [item] = p.encode([text])
    assert len(item.chunks) > 1
    # each window read alone, by hand (temperature 1)
    logits = np.stack([p.forward([EncodedText((c,), len(c))])[0][0] for c in item.chunks])
    top = torch.softmax(torch.from_numpy(logits), -1).numpy().max(1)
    assert top.min() < top.max()
    [answer], [note] = p.predictions([text])
    assert note["chunk"] == int(top.argmax()) + 1  # the most confident window, kept or not
    assert answer.confidence == pytest.approx(top.max(), abs=1e-6)
    assert answer.out_of_scope == bool(top.max() < trained.threshold)
    # a threshold above every window's top probability rejects the text ...
    [high], _ = p.predictions([text], threshold=float(top.max()) + 1e-6)
    assert high.out_of_scope and high.decision.value == pytest.approx(top.max(), abs=1e-6)
    # ... one that keeps a single window answers from it
    [low], _ = p.predictions([text], threshold=float(top.max()) - 1e-6)
    assert not low.out_of_scope and low.confidence == pytest.approx(top.max(), abs=1e-6)


def test_truncate_and_head_tail_lose_the_request_where_they_do_not_read(trained):
    truncate, head_tail = predictor(trained, "truncate"), predictor(trained, "head_tail")
    got = {pos: (truncate.predictions([planted(pos)])[0][0],
                 head_tail.predictions([planted(pos)])[0][0]) for pos in
           ("start", "middle", "end")}
    assert got["start"][0].intent == "card_lost"  # the first window holds it
    assert got["middle"][0].intent != "card_lost" and got["end"][0].intent != "card_lost"
    assert got["start"][1].intent == "card_lost" and got["end"][1].intent == "card_lost"
    assert got["middle"][1].intent != "card_lost"
    # head_tail's one window: the first and last half windows of the text's body
    [item] = head_tail.encode([planted("end")])
    body = trained.tokenizer([planted("end")], max_length=None)["input_ids"][0].tolist()
    body = [t for t in body if t != trained.tokenizer.pad_token_id][1:-1]
    half = (MAX_LENGTH - 2) // 2
    tok = trained.tokenizer
    assert item.chunks == ((tok.cls_token_id, *body[:half], *body[-(MAX_LENGTH - 2 - half):],
                            tok.sep_token_id),)
    assert item.policy == "head_tail"


def test_mean_pooling_dilutes_the_request_that_chunk_max_keeps(trained):
    text = planted("middle", n_sentences=16)
    [mean] = predictor(trained, "chunk").predictions([text])[0]
    [best] = predictor(trained, "chunk_max").predictions([text])[0]
    assert best.intent == "card_lost"
    assert dict(mean.top_k)["card_lost"] < best.confidence


def test_predict_says_what_it_did_with_a_long_text(trained, tmp_path, capsys):
    from headwise.cli import main

    model = trained.save(tmp_path / "model")
    text = planted("end")
    p = load_predictor(model, runtime="torch")
    assert p.long_text == "chunk_max"  # auto, for a single network
    [item] = p.encode([text])
    _, [note] = p.predictions([text])
    assert main(["predict", str(model), text]) == 0
    out = capsys.readouterr().out
    chunks = f"{len(item.chunks)} chunks" + (f" of {p.window} tokens"  # windows narrower
                                             if p.window < MAX_LENGTH else "")  # than 12
    assert (f"long text: {item.tokens} tokens over {MAX_LENGTH}, {chunks}, "
            f"answer from chunk {note['chunk']}]") in out
    assert "-> card_lost (" in out
    assert main(["predict", str(model), "--json", text]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["long_text"] == note and intent_of(record) == "card_lost"
    assert main(["predict", str(model), "--long-text", "chunk", text]) == 0
    assert f"{chunks}, pooled (mean)]" in capsys.readouterr().out
    assert main(["predict", str(model), "--long-text", "head_tail", text]) == 0
    assert "tokens over 12, read its head and tail]" in capsys.readouterr().out
    assert main(["predict", str(model), "--long-text", "truncate", "--json", text]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["long_text"]["policy"] == "truncated" and intent_of(record) != "card_lost"


@pytest.mark.parametrize("position", ["middle", None])
def test_chunk_max_with_a_detector_picks_among_the_windows_it_keeps(trained, position):
    """With an out-of-scope detector (k nearest neighbours on pooled vectors), chunk_max's
    window is, among those the detector keeps, the one of highest top probability; when it
    keeps none, the one of highest detector score, and the text is out of scope: checked
    by hand on each window read alone."""
    from headwise.intent.decision.temperature import calibrated_probs

    clf, p, item, text, logits, scores = _windows_by_hand(trained, "chunk_max", position)
    kept = scores >= clf.ood.threshold
    top = calibrated_probs(logits, clf.temperature).max(1)
    want = int(np.where(kept, top, -np.inf).argmax()) if kept.any() else int(scores.argmax())
    [answer], [note] = p.predictions([text])
    assert note["chunk"] == want + 1
    assert answer.out_of_scope == (not kept.any())
    assert answer.decision.score == clf.ood.name
    assert answer.decision.value == pytest.approx(scores[want], abs=1e-6)
    if kept.any():
        assert answer.intent == clf.labels[int(logits[want].argmax())]


def _windows_by_hand(trained: Any, policy: str, position: str | None) -> tuple:
    """A copy of ``trained`` with a k-nearest-neighbour detector, its ``policy``
    predictor, a long text (a request planted at ``position`` in chatter, or chatter
    alone), its encoding, and each window's logits and detector score, each window read
    alone."""
    import copy

    from tiny_corpus import INTENTS
    from tiny_models import TEXTS

    from headwise.intent.posthoc.recalibration import fit_ood_detector

    clf = copy.deepcopy(trained)
    labels = [k for k, ts in INTENTS.items() for _ in ts]
    fit_ood_detector(clf, TEXTS, labels, TEXTS[::2] + [chatter(2, s) for s in range(8)],
                     labels[::2] + ["oos"] * 8, "knn:2")
    assert clf.ood is not None
    p = predictor(clf, policy)
    text = planted(position) if position else chatter(12, 7)
    [item] = p.encode([text])
    parts = [p.forward([EncodedText((c,), len(c))]) for c in item.chunks]
    logits = np.concatenate([lg for lg, _ in parts])
    pooled = np.concatenate([pl for _, pl in parts])
    return clf, p, item, text, logits, np.asarray(clf.ood.score(pooled, logits))


@pytest.mark.parametrize("position", ["start", "middle", "end", None])
def test_chunk_in_scope_answers_from_the_window_the_detector_finds_most_in_scope(trained,
                                                                                 position):
    """chunk_in_scope's window is the one of highest detector score (k nearest neighbours
    on pooled vectors), whatever its top probability; the text is out of scope exactly
    when the detector rejects every window. Checked by hand on each window read alone; a
    request planted anywhere in chatter is found and answered."""
    clf, p, item, text, logits, scores = _windows_by_hand(trained, "chunk_in_scope", position)
    want = int(scores.argmax())
    [answer], [note] = p.predictions([text])
    assert note == {"policy": "chunked", "tokens": item.tokens, "max_length": MAX_LENGTH,
                    "chunks": len(item.chunks), "window": p.window, "stride": p.chunk_stride,
                    "pooling": "max_in_scope", "chunk": want + 1, "span": None}
    assert answer.decision.score == clf.ood.name
    assert answer.decision.value == pytest.approx(scores[want], abs=1e-6)
    assert answer.out_of_scope == bool((scores < clf.ood.threshold).all())
    if position:
        assert answer.intent == "card_lost" and not answer.out_of_scope
    elif not answer.out_of_scope:
        assert answer.intent == clf.labels[int(logits[want].argmax())]


def test_chunk_in_scope_is_chunk_max_under_the_top_probability_rule(trained):
    """Without a detector both policies answer from the window of highest top probability,
    for any request threshold."""
    assert trained.ood is None
    texts = [planted(pos) for pos in ("start", "middle", "end")] + [chatter(12, 7)]
    a, b = predictor(trained, "chunk_max"), predictor(trained, "chunk_in_scope")
    for threshold in (None, 0.99):
        got_a, notes_a = a.predictions(texts, threshold=threshold)
        got_b, notes_b = b.predictions(texts, threshold=threshold)
        assert [(x.intent, x.out_of_scope, x.confidence) for x in got_a] == \
            [(x.intent, x.out_of_scope, x.confidence) for x in got_b]
        assert [n["chunk"] for n in notes_a] == [n["chunk"] for n in notes_b]


# --- windows narrower than the maximum length (chunk_length) ---------------------------------
#: 13 text tokens for the tiny chatter tokenizer (hel ##l ##o th ##er ##e go ##o ##d mo ##r
#: ##n ##ing), 15 with the special tokens: over the maximum length of 12
THIRTEEN = "hello there good morning"


@pytest.mark.parametrize("chunk_length, window, spans", [
    (8, 8, [(0, 6), (3, 9), (6, 12), (9, 13)]),  # 8 tokens: a body of 6, stride 3
    (0.75, 9, [(0, 7), (3, 10), (6, 13)]),  # 0.75 * 12 = 9 tokens: a body of 7, stride 3
    (1.0, 12, [(0, 10), (5, 13)]),
])
def test_windows_have_the_width_asked_for_and_overlap_by_half(trained, chunk_length, window,
                                                              spans):
    """A chunked policy's windows are ``chunk_length`` wide (tokens, or a fraction of the
    maximum length rounded down), start half a window's body apart, and cover the text
    (spans worked out by hand for a text of 13 tokens)."""
    tok = trained.tokenizer
    body = tok([THIRTEEN], max_length=None)["input_ids"][0].tolist()[1:14]
    assert tok.lengths([THIRTEEN]) == [15] and len(body) == 13
    for policy in ("chunk", "chunk_max", "chunk_in_scope"):
        p = SingleLabelPredictor(trained, TorchRuntime(trained.model), long_text=policy,
                                 chunk_length=chunk_length)
        assert p.window == window and p.chunk_stride == (window - 2) // 2
        [item] = p.encode([THIRTEEN])
        assert item.chunks == tuple((tok.cls_token_id, *body[s:e], tok.sep_token_id)
                                    for s, e in spans)
        assert [p.window_tokens(item, w) for w in range(len(spans))] == [
            list(range(s, e)) for s, e in spans]
        _, [note] = p.predictions([THIRTEEN])
        assert note["window"] == window and note["chunks"] == len(spans)
        assert note["max_length"] == MAX_LENGTH and note["tokens"] == 15
    # a text within the maximum length is read whole, whatever the windows' width
    p = SingleLabelPredictor(trained, TorchRuntime(trained.model), chunk_length=8)
    [short] = p.encode([REQUEST])
    assert len(short.chunks) == 1 and len(short.chunks[0]) == tok.lengths([REQUEST])[0] > 6


#: four sentences of 4, 6, 6 and 6 tokens (the "." / "!" are [UNK] pieces of their own)
SENTENCES = "ok sure. i lost my card! thank you kindly. right ok then"


@pytest.mark.parametrize("chunk_length, spans", [
    (8, [(0, 4), (4, 10), (10, 16), (16, 22)]),  # a body of 6: one sentence a window
    (1.0, [(0, 10), (4, 10), (10, 16), (16, 22)]),  # a body of 10: 4 + 6 fit together
])
def test_sentence_windows_start_at_sentences_and_end_at_one(trained, chunk_length, spans):
    """Under ``chunk_stride="sentence"`` a window starts at every sentence and takes the
    whole sentences after it that fit its body (spans worked out by hand from the
    tokenizer's offsets); the windows map back to their tokens' positions."""
    tok = trained.tokenizer
    body = tok([SENTENCES], max_length=None)["input_ids"][0].tolist()[1:-1]
    assert len(body) == 22 == len(tok.offsets(SENTENCES))
    p = SingleLabelPredictor(trained, TorchRuntime(trained.model), long_text="chunk_max",
                             chunk_length=chunk_length, chunk_stride="sentence")
    [item] = p.encode([SENTENCES])
    assert item.chunks == tuple((tok.cls_token_id, *body[a:b], tok.sep_token_id)
                                for a, b in spans)
    assert item.starts == tuple(a for a, _ in spans)
    assert [p.window_tokens(item, w) for w in range(len(spans))] == [
        list(range(a, b)) for a, b in spans]
    # the request's sentence, read alone, is the window chunk_max keeps
    [answer], [note] = p.predictions([SENTENCES])
    assert answer.intent == "card_lost" and note["chunks"] == len(spans)
    assert note["stride"] == "sentence" and note["window"] == p.window
    assert tok.decode(item.chunks[note["chunk"] - 1]).replace(" ", "").startswith("ilostmycard")


def test_a_sentence_wider_than_a_window_is_cut_by_count(trained):
    """A sentence longer than a window's body is cut into windows half a body apart, like
    a text without sentences; the sentences around it keep windows of their own."""
    text = "ok sure. hello there good morning thanks for waiting. i lost my card"
    tok = trained.tokenizer
    pieces = tok.tokenize(text)
    n = len(pieces)
    long_start, long_end = 4, pieces.index("[UNK]", 4) + 1  # the second sentence
    assert long_end - long_start > 6
    p = SingleLabelPredictor(trained, TorchRuntime(trained.model), long_text="chunk_max",
                             chunk_length=8, chunk_stride="sentence")
    [item] = p.encode([text])
    spans = [(p.window_tokens(item, w)[0], p.window_tokens(item, w)[-1] + 1)
             for w in range(len(item.chunks))]
    inner = [(a, min(a + 6, long_end)) for a in range(long_start, long_end - 6 + 3, 3)]
    assert inner[-1][1] == long_end
    assert spans == [(0, 4), *inner, (long_end, n)]
    assert p.predictions([text])[0][0].intent == "card_lost"


def test_auto_is_the_policy_of_the_models_architecture(trained):
    """``"auto"`` on a single network is its architecture's policy, read from its saved
    training recipe (``DEFAULT_LONG_TEXT``), with its windows' stride
    (``DEFAULT_CHUNK_STRIDE``); a model that records none takes ``"chunk_max"`` with
    windows half a body apart; a policy given is taken as given, its windows half a body
    apart unless a stride is given, and a stride given with ``"auto"`` is kept. The same
    through ``load_predictor``, and the answer's note says which pooling decided."""
    import copy

    from headwise.intent.inference.bucketing import (
        CHUNK_POOLING,
        DEFAULT_CHUNK_STRIDE,
        DEFAULT_LONG_TEXT,
        UNRECORDED_LONG_TEXT,
        architecture_of,
        default_chunk_stride,
        default_long_text,
    )

    assert set(DEFAULT_LONG_TEXT) == {"transformer", "bilstm", "pretrained"}
    assert set(DEFAULT_LONG_TEXT.values()) <= {"chunk_max", "chunk_in_scope", "chunk_span"}
    assert UNRECORDED_LONG_TEXT == "chunk_max"
    assert default_long_text(None) == default_long_text("tfidf") == UNRECORDED_LONG_TEXT
    assert set(DEFAULT_CHUNK_STRIDE) == set(DEFAULT_LONG_TEXT)
    assert default_chunk_stride(None) is None and default_chunk_stride("tfidf") is None
    text = planted("middle")

    def as_trained(architecture: str | None) -> IntentClassifier:
        clf = copy.copy(trained)  # the same network, another training record
        clf.info = {} if architecture is None else \
            {"recipe": {"architecture": {"type": architecture, "max_length": MAX_LENGTH}}}
        assert architecture_of(clf) == architecture
        return clf

    for architecture in (None, *DEFAULT_LONG_TEXT):
        want = default_long_text(architecture)
        assert want == (DEFAULT_LONG_TEXT[architecture] if architecture else "chunk_max")
        clf = as_trained(architecture)
        for p in (SingleLabelPredictor(clf, TorchRuntime(clf.model)),
                  load_predictor(clf, runtime="torch")):
            assert p.long_text == want
            stride = default_chunk_stride(architecture)
            assert p.chunk_stride == (max(1, p.window_body // 2) if stride is None else stride)
            [answer], [note] = p.predictions([text])
            assert note["pooling"] == CHUNK_POOLING[want] and note["chunk"] is not None
            assert answer.intent == "card_lost"  # the request's window, either way
        given = SingleLabelPredictor(clf, TorchRuntime(clf.model), long_text="head_tail")
        assert given.long_text == "head_tail"
        for p in (SingleLabelPredictor(clf, TorchRuntime(clf.model), long_text=want),
                  load_predictor(clf, runtime="torch", long_text=want)):
            assert p.chunk_stride == max(1, p.window_body // 2)  # named: counted windows
        for p in (SingleLabelPredictor(clf, TorchRuntime(clf.model), chunk_stride=2),
                  load_predictor(clf, runtime="torch", chunk_stride=2)):
            assert p.long_text == want and p.chunk_stride == 2  # a stride given is kept


def test_sentence_windows_fall_back_to_counted_windows_without_sentences(trained):
    """A text with no sentence end reads as the counted windows, positions and all."""
    text = planted("end")
    by_count = SingleLabelPredictor(trained, TorchRuntime(trained.model), long_text="chunk_max",
                                    chunk_length=8)
    by_sentence = SingleLabelPredictor(trained, TorchRuntime(trained.model),
                                       long_text="chunk_max", chunk_length=8,
                                       chunk_stride="sentence")
    [sentences], [counted] = by_sentence.encode([text]), by_count.encode([text])
    assert sentences.chunks == counted.chunks and sentences.tokens == counted.tokens
    assert [by_sentence.window_tokens(sentences, w) for w in range(len(sentences.chunks))] \
        == [by_count.window_tokens(counted, w) for w in range(len(counted.chunks))]
    with pytest.raises(ValueError, match="chunk_stride must be a number of tokens or "
                                         "'sentence', got 'sentences'"):
        SingleLabelPredictor(trained, TorchRuntime(trained.model), chunk_stride="sentences")
    with pytest.raises(ValueError, match=r"chunk_stride must be in \[1, 6\]"):
        SingleLabelPredictor(trained, TorchRuntime(trained.model), chunk_length=8,
                             chunk_stride=True)


def test_every_window_reads_the_input_prefix_as_the_whole_text_does(trained):
    """A tokenizer with an input prefix (e5's ``"query: "``) puts its tokens after ``cls``
    in every encoding: each window (chunked and head_tail) carries them too, counted like
    special tokens, and the windows' text tokens are still the text's, mapped back to
    their positions (spans worked out by hand for a text of 13 tokens)."""
    import copy

    prefixed = copy.copy(trained)
    prefixed.tokenizer = trained.tokenizer.with_prefix("i card")
    tok = prefixed.tokenizer
    prefix = tok.prefix_ids
    assert len(prefix) == 2 and trained.tokenizer.prefix_ids == ()
    plain = trained.tokenizer([THIRTEEN], max_length=None)["input_ids"][0].tolist()[1:14]
    row = tok([THIRTEEN], max_length=None)["input_ids"][0].tolist()
    assert row == [tok.cls_token_id, *prefix, *plain, tok.sep_token_id]
    # windows of 10 tokens: cls, 2 prefix tokens, a body of 6, sep; stride 3
    p = SingleLabelPredictor(prefixed, TorchRuntime(prefixed.model), long_text="chunk_max",
                             chunk_length=10)
    assert p.window_body == 6 and p.chunk_stride == 3
    [item] = p.encode([THIRTEEN])
    spans = [(0, 6), (3, 9), (6, 12), (9, 13)]
    assert item.chunks == tuple((tok.cls_token_id, *prefix, *plain[s:e], tok.sep_token_id)
                                for s, e in spans)
    assert [p.window_tokens(item, w) for w in range(len(spans))] == [
        list(range(s, e)) for s, e in spans]
    # head_tail: the first 4 and the last 4 text tokens in the maximum length of 12
    h = SingleLabelPredictor(prefixed, TorchRuntime(prefixed.model), long_text="head_tail")
    [item] = h.encode([THIRTEEN])
    assert item.chunks == ((tok.cls_token_id, *prefix, *plain[:4], *plain[9:],
                            tok.sep_token_id),)
    assert h.window_tokens(item) == [0, 1, 2, 3, 9, 10, 11, 12]
    # a window with no room for text beside cls, the prefix and sep is refused
    prefixed.tokenizer = trained.tokenizer.with_prefix("hello there")  # 6 tokens
    with pytest.raises(ValueError, match="no room for text beside its 8 special and prefix"):
        SingleLabelPredictor(prefixed, TorchRuntime(prefixed.model), long_text="chunk_max",
                             chunk_length=8)


@pytest.mark.parametrize("position", ["start", "middle", "end"])
def test_a_narrow_window_answers_as_that_window_read_alone(trained, position):
    """Under chunk_max with windows of 8 tokens the request is still found, and the
    answer (intent, top-k, confidence, out-of-scope decision) is that of the deciding
    window's tokens predicted alone, a text within the maximum length under chunk_max."""
    text = planted(position)
    p = SingleLabelPredictor(trained, TorchRuntime(trained.model), long_text="chunk_max",
                             chunk_length=8)
    [item] = p.encode([text])
    wide = SingleLabelPredictor(trained, TorchRuntime(trained.model), long_text="chunk_max",
                                chunk_length=1.0).encode([text])[0]
    assert len(item.chunks) > len(wide.chunks) and {len(c) for c in item.chunks[:-1]} == {8}
    [answer], [note] = p.predictions([text])
    assert note == {"policy": "chunked", "tokens": item.tokens, "max_length": MAX_LENGTH,
                    "chunks": len(item.chunks), "window": 8, "stride": p.chunk_stride,
                    "pooling": "max_confidence", "chunk": note["chunk"], "span": None}
    window = item.chunks[note["chunk"] - 1]
    alone = EncodedText((window,), len(window))
    [want] = p.answers(["window"], [alone], p.run([alone]), top_k=3)
    assert answer.intent == want.intent == "card_lost"
    assert answer.out_of_scope == want.out_of_scope
    assert [k for k, _ in answer.top_k] == [k for k, _ in want.top_k]
    assert answer.confidence == pytest.approx(want.confidence, abs=1e-6)
    # every other window, read alone, is less confident or rejected (chunk_max's rule)
    others = [EncodedText((c,), len(c)) for i, c in enumerate(item.chunks)
              if i != note["chunk"] - 1]
    for a in p.answers(["w"] * len(others), others, p.run(others), top_k=1):
        assert a.out_of_scope or a.confidence <= answer.confidence + 1e-9


def test_predict_reads_narrow_windows_from_the_command_line(trained, tmp_path, capsys):
    from headwise.cli import main

    model = trained.save(tmp_path / "model")
    text = planted("end")
    p = load_predictor(model, runtime="torch", chunk_length=8)
    [item] = p.encode([text])
    _, [note] = p.predictions([text])
    assert note["window"] == 8
    assert main(["predict", str(model), "--long-text", "chunk_max:8", "--json", text]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["long_text"] == note and intent_of(record) == "card_lost"
    assert main(["predict", str(model), "--long-text", "auto:8", text]) == 0
    assert (f"long text: {item.tokens} tokens over {MAX_LENGTH}, {len(item.chunks)} chunks "
            f"of 8 tokens, answer from chunk {note['chunk']}]") in capsys.readouterr().out
    # a fraction of the maximum length: 0.75 * 12 = 9 tokens
    assert main(["predict", str(model), "--long-text", "chunk:0.75", "--json", text]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["long_text"]["window"] == 9 and record["long_text"]["pooling"] == "mean"
    # widths the model cannot take are refused when it loads, naming why
    assert main(["predict", str(model), "--long-text", "chunk_max:13", text]) == 1
    assert "wider than the model's maximum length of 12" in capsys.readouterr().err
    assert main(["predict", str(model), "--long-text", "chunk_max:0.5", text]) == 1
    assert "window of 6 tokens, under the 8" in capsys.readouterr().err


@pytest.mark.parametrize("value, message", [
    ("truncate:16", "truncate does not cut a text into windows"),
    ("head_tail:0.5", "head_tail does not cut a text into windows"),
    ("reject:16", "reject does not cut a text into windows"),
    ("chunk_max:4", "an int >= 8"),
    ("chunk_max:0", "an int >= 8"),
    ("chunk_max:-16", "an int >= 8"),
    ("chunk_max:1.5", r"a float in \(0, 1\]"),
    ("chunk_max:0.0", r"a float in \(0, 1\]"),
    ("chunk_max:nan", r"a float in \(0, 1\]"),
    ("chunk_max:wide", "N must be a number of tokens"),
    ("chunk_max:", "N must be a number of tokens"),
    ("chunky:16", "give one of auto, truncate"),
])
def test_long_text_option_refuses_a_width_it_cannot_use(value, message, capsys):
    import argparse

    from headwise.cli import main
    from headwise.commands._common import long_text_choice

    with pytest.raises(argparse.ArgumentTypeError, match=message):
        long_text_choice(value)
    for command in (["predict", "M", "hi"], ["eval", "M", "--data", "d.csv"],
                    ["explain", "M", "hi"]):
        with pytest.raises(SystemExit) as e:
            main([*command, "--long-text", value])
        assert e.value.code == 2
        assert "--long-text" in capsys.readouterr().err


@pytest.mark.parametrize("value, want", [
    ("auto", ("auto", None)), ("chunk_max", ("chunk_max", None)),
    ("truncate", ("truncate", None)), ("chunk_max:16", ("chunk_max", 16)),
    ("chunk:8", ("chunk", 8)), ("chunk_in_scope:0.25", ("chunk_in_scope", 0.25)),
    ("auto:1.0", ("auto", 1.0)), ("chunk_max:1", None),
])
def test_long_text_option_reads_a_policy_and_a_width(value, want):
    import argparse

    from headwise.commands._common import long_text_choice

    if want is None:  # an integer is tokens: 1 token is refused, not read as the fraction 1
        with pytest.raises(argparse.ArgumentTypeError, match="an int >= 8"):
            long_text_choice(value)
        return
    got = long_text_choice(value)
    assert got == want and type(got[1]) is type(want[1])


def test_window_width_is_refused_where_it_cannot_apply(trained):
    from headwise.intent.inference.bucketing import (
        DEFAULT_CHUNK_LENGTH,
        MIN_CHUNK_LENGTH,
        window_length,
    )

    runtime = TorchRuntime(trained.model)
    for policy in ("truncate", "head_tail", "reject"):
        with pytest.raises(ValueError, match=f"the {policy} policy does not cut"):
            SingleLabelPredictor(trained, runtime, long_text=policy, chunk_length=8)
        with pytest.raises(ValueError, match=f"chunk_stride 4 is the stride .* the {policy} "
                                             f"policy does not cut"):
            SingleLabelPredictor(trained, runtime, long_text=policy, chunk_stride=4)
    for bad in (4, 0, -8, 1.5, 0.0, -0.5, True, "8", float("nan")):
        with pytest.raises(ValueError, match="chunk_length must be a fraction"):
            SingleLabelPredictor(trained, runtime, long_text="chunk_max", chunk_length=bad)
    with pytest.raises(ValueError, match="wider than the model's maximum length of 12"):
        SingleLabelPredictor(trained, runtime, long_text="chunk", chunk_length=13)
    with pytest.raises(ValueError, match="0.5 of the model's maximum length of 12 is a window "
                                         "of 6 tokens"):
        SingleLabelPredictor(trained, runtime, chunk_length=0.5)
    with pytest.raises(ValueError, match=r"chunk_stride must be in \[1, 6\] \(a window of 8"):
        SingleLabelPredictor(trained, runtime, chunk_length=8, chunk_stride=7)
    # the same refusals through load_predictor, before a runtime is chosen (onnx: no export
    # of this model exists, which would be refused after)
    with pytest.raises(ValueError, match="the truncate policy does not cut"):
        load_predictor(trained, runtime="onnx", long_text="truncate", chunk_length=0.5)
    with pytest.raises(ValueError, match="chunk_stride 4 .* the head_tail policy does not cut"):
        load_predictor(trained, runtime="onnx", long_text="head_tail", chunk_stride=4)
    with pytest.raises(ValueError, match="chunk_length must be a fraction"):
        load_predictor(trained, runtime="torch", chunk_length=2.0)
    # the widths, by hand: a fraction rounded down; the default fits any model
    assert MIN_CHUNK_LENGTH == 8
    assert [window_length(x, 64) for x in (1.0, 0.5, 0.25, 0.3, 16, 64)] == \
        [64, 32, 16, 19, 16, 64]
    assert window_length(0.29, 100) == 29
    # the default (None): DEFAULT_CHUNK_LENGTH, within [MIN_CHUNK_LENGTH, max_length]
    assert window_length(None, 64) == window_length(DEFAULT_CHUNK_LENGTH, 64)
    assert window_length(None, 6) == 6
    assert SingleLabelPredictor(trained, runtime).window == window_length(None, MAX_LENGTH)
    assert window_length(1.0, 6) == 6  # the whole maximum length, however short
    with pytest.raises(ValueError, match="under the 8"):
        window_length(0.1, 64)


# --- chunk_span: narrow windows locate the request, the span is read again -------------------
def _kept_by_hand(p: SingleLabelPredictor, item: EncodedText) -> tuple[np.ndarray, np.ndarray]:
    """Each window read alone: its top probability and whether the saved rule (no
    detector: the top probability at the saved threshold) keeps it."""
    tops = []
    for c in item.chunks:
        logits = p.forward([EncodedText((c,), len(c))])[0][0]
        tops.append(float(torch.softmax(torch.from_numpy(logits / p.classifier.temperature),
                                        -1).max()))
    tops_ = np.asarray(tops)
    return tops_, tops_ >= p.classifier.threshold


@pytest.mark.parametrize("position", ["start", "middle", "end"])
def test_chunk_span_reads_again_the_run_of_windows_kept_around_the_most_confident(trained,
                                                                                 position):
    """chunk_span with 8-token windows: the span is the run of consecutive kept windows
    around the most confident kept one, widened by SPAN_MARGIN tokens each side and cut to
    the text and to one window's body (computed by hand from each window read alone); the
    answer is that span's tokens read alone when the rule keeps it, else chunk_max's; the
    request planted anywhere is answered."""
    from headwise.intent.inference.bucketing import SPAN_MARGIN

    text = planted(position)
    p = SingleLabelPredictor(trained, TorchRuntime(trained.model), long_text="chunk_span",
                             chunk_length=8)
    [item] = p.encode([text])
    tops, kept = _kept_by_hand(p, item)
    assert kept.any() and not kept.all()
    w = int(np.where(kept, tops, -np.inf).argmax())
    lo, hi = w, w
    while lo > 0 and kept[lo - 1]:
        lo -= 1
    while hi < len(kept) - 1 and kept[hi + 1]:
        hi += 1
    body = trained.tokenizer([text], max_length=None)["input_ids"][0].tolist()[1:-1]
    stride = p.token_stride
    a = max(0, lo * stride - SPAN_MARGIN)
    b = min(len(body), min(hi * stride + p.window_body, len(body)) + SPAN_MARGIN)
    if b - a > p.body:
        centre = (w * stride + min(w * stride + p.window_body, len(body))) // 2
        a = max(a, min(centre - p.body // 2, b - p.body))
        b = a + p.body
    ids = (trained.tokenizer.cls_token_id, *body[a:b], trained.tokenizer.sep_token_id)
    assert p.span_window(item, a, b) == (ids, list(range(a, b)))
    span_alone = EncodedText((ids,), len(ids))
    [want] = p.answers(["span"], [span_alone], p.run([span_alone]), top_k=3)
    [answer], [note] = p.predictions([text])
    if want.out_of_scope:  # the span rejected: chunk_max's window answers
        assert note["span"] is None
        assert answer.confidence == pytest.approx(tops[w], abs=1e-6)
    else:
        assert note["span"] == [a, b]
        assert [k for k, _ in answer.top_k] == [k for k, _ in want.top_k]
        assert answer.confidence == pytest.approx(want.confidence, abs=1e-6)
    assert note == {"policy": "chunked", "tokens": item.tokens, "max_length": MAX_LENGTH,
                    "chunks": len(item.chunks), "window": 8, "stride": p.chunk_stride,
                    "pooling": "in_scope_span", "chunk": w + 1, "span": note["span"]}
    assert answer.intent == "card_lost" and not answer.out_of_scope


def test_chunk_span_is_out_of_scope_when_every_window_is(trained):
    """When the saved rule rejects every window there is no span to read again: the answer
    and its note are chunk_max's (the most in-scope window, rejected). A request's
    threshold still decides on the span the saved rule located."""
    import copy

    strict = copy.deepcopy(trained)
    strict.threshold = 1.0  # the saved rule rejects every window
    text = planted("middle")
    span = SingleLabelPredictor(strict, TorchRuntime(strict.model), long_text="chunk_span",
                                chunk_length=8)
    most = SingleLabelPredictor(strict, TorchRuntime(strict.model), long_text="chunk_max",
                                chunk_length=8)
    [item] = span.encode([text])
    assert not _kept_by_hand(span, item)[1].any()
    [a], [note] = span.predictions([text])
    [b], [note_b] = most.predictions([text])
    assert a.out_of_scope and b.out_of_scope
    assert (a.intent, a.confidence) == (b.intent, b.confidence)
    assert note["span"] is None and note["chunk"] == note_b["chunk"]
    # the saved rule (0.6) finds the request: a request threshold of 0.999 rejects the span
    loose = SingleLabelPredictor(trained, TorchRuntime(trained.model), long_text="chunk_span",
                                 chunk_length=8)
    [c], [note_c] = loose.predictions([text], threshold=0.999)
    [d], [note_d] = loose.predictions([text])
    assert note_c == note_d and note_d["span"] is not None
    assert c.confidence == pytest.approx(d.confidence) and c.out_of_scope != d.out_of_scope


@pytest.mark.parametrize("stride", [None, "sentence"])
def test_a_chunked_texts_tokens_are_put_back_together_from_its_windows(trained, stride):
    """text_tokens gives back the whole text's tokens without special tokens, from windows
    cut by count or at sentences; span_window refuses a span outside the text or wider
    than one window's body."""
    text = planted("middle").replace(" thanks", ". thanks")
    p = SingleLabelPredictor(trained, TorchRuntime(trained.model), long_text="chunk_span",
                             chunk_length=8, chunk_stride=stride)
    [item] = p.encode([text])
    body = trained.tokenizer([text], max_length=None)["input_ids"][0].tolist()[1:-1]
    assert p.text_tokens(item) == body
    for bad in ((0, 0), (-1, 3), (len(body) - 2, len(body) + 1), (0, p.body + 1)):
        with pytest.raises(ValueError, match="span"):
            p.span_window(item, *bad)


def _answered_by_span(trained: IntentClassifier) -> tuple[str, Any, Any, Any, dict]:
    """A request in the middle of chatter answered under chunk_span with 8-token windows:
    the text, the predictor, its encoding, its run row and its long_text note."""
    text = planted("middle")
    p = SingleLabelPredictor(trained, TorchRuntime(trained.model), long_text="chunk_span",
                             chunk_length=8)
    [item] = p.encode([text])
    [row] = p.run([item])
    return text, p, item, row, p.note(item, row)


def test_explain_under_chunk_span_explains_the_span_that_answered(trained):
    """An explanation of a text chunk_span answered from its span covers exactly that
    span's characters, and explains the answered intent."""
    from headwise.inspect import explain

    text, p, item, row, note = _answered_by_span(trained)
    assert note["span"] is not None
    a, b = note["span"]
    e = explain(p, text, answered=(item, row))
    offsets = trained.tokenizer.offsets(text)
    assert e.window == (offsets[a][0], offsets[b - 1][1])
    [answer] = p.answers([text], [item], [row], top_k=1)
    assert e.attributions[0].intent == answer.intent == "card_lost"


def test_predict_says_which_span_answered():
    from headwise.commands.predict import long_text_words

    note = {"policy": "chunked", "tokens": 180, "max_length": 64, "chunks": 21, "window": 16,
            "stride": 7, "pooling": "in_scope_span", "chunk": 6, "span": [40, 66]}
    assert long_text_words(note) == ("long text: 180 tokens over 64, 21 chunks of 16 tokens, "
                                      "answer from tokens 41-66 read again (located by chunk 6)")
    assert long_text_words({**note, "span": None}).endswith("answer from chunk 6")
    # windows that follow the text's sentences say so; counted ones say nothing more
    assert long_text_words({**note, "stride": "sentence", "chunks": 9}) == (
        "long text: 180 tokens over 64, 9 chunks of 16 tokens by sentence, answer from tokens "
        "41-66 read again (located by chunk 6)")


def test_the_answered_window_is_the_span_the_window_or_the_first(trained):
    """answered_window reads the note: chunk_span's span (its tokens alone between the
    special tokens), else the window that answered, else the first window."""
    text, p, item, row, note = _answered_by_span(trained)
    a, b = note["span"]
    body = trained.tokenizer([text], max_length=None)["input_ids"][0].tolist()[1:-1]
    tok = trained.tokenizer
    assert p.answered_window(item, note) == ((tok.cls_token_id, *body[a:b], tok.sep_token_id),
                                             list(range(a, b)))
    window = {**note, "span": None}
    assert p.answered_window(item, window) == (item.chunks[note["chunk"] - 1],
                                               p.window_tokens(item, note["chunk"] - 1))
    assert p.answered_window(item, None) == (item.chunks[0], p.window_tokens(item, 0))
