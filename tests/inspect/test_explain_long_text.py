"""Explanations of long messages explain what the predictor answered (issue 35): on a tiny
Transformer whose maximum length is 12 tokens and a message whose request sits at the end
of chatter, ``chunk_max`` (the default) explains the window whose answer was kept, with
offsets in the whole text; ``truncate`` and ``head_tail`` explain the window they read;
``chunk`` (the mean of the windows) and ``reject`` refuse. The library, ``headwise explain``
and its ``--json`` (the service: tests/serve/test_explain.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from tiny_long_text import REQUEST, planted

from headwise.cli import main
from headwise.inspect import LongTextNotExplained, explain, first_window
from headwise.intent.inference import SingleLabelPredictor, TorchRuntime
from headwise.intent.inference.bucketing import LongTextError

TEXT = planted("end")  # chatter, then "i lost my card"


def predictor(clf, policy: str) -> SingleLabelPredictor:
    return SingleLabelPredictor(clf, TorchRuntime(clf.model), long_text=policy)


def _check_offsets(text: str, tokens) -> None:
    """Each real token's offsets point at its piece of the whole text."""
    for token, start, end, special in tokens:
        if special:
            assert start is None and end is None
        else:
            assert text[start:end] == token.removeprefix("##"), (token, start, end)


def test_chunk_max_explains_the_window_whose_answer_was_kept(chatter_clf):
    p = predictor(chatter_clf, "chunk_max")
    [item] = p.encode([TEXT])
    [answer], [note] = p.predictions([TEXT])
    assert answer.intent == "card_lost" and len(item.chunks) > 5
    ex = explain(p, TEXT)
    first = ex.attributions[0]
    assert first.intent == answer.intent and first.within_tolerance
    assert ex.long_text == note and ex.truncated and ex.skipped is None
    # the tokens are the kept window's, in the whole text's coordinates
    window = item.chunks[note["chunk"] - 1]
    tok = chatter_clf.tokenizer
    assert [t[0] for t in ex.tokens] == [tok.backend.id_to_token(i) for i in window]
    _check_offsets(TEXT, ex.tokens)
    real = [(s, e) for _, s, e, sp in ex.tokens if not sp]
    assert ex.window == (real[0][0], real[-1][1])
    at = TEXT.rindex(REQUEST)
    assert ex.window[0] <= at and ex.window[1] == len(TEXT) == at + len(REQUEST)
    assert TEXT[ex.window[0]:ex.window[1]].endswith(REQUEST)
    # the logits explained are that window's, read by the model by hand, and the answer's
    with torch.no_grad():
        by_hand = chatter_clf.model(torch.tensor([window]),
                                    torch.ones(1, len(window), dtype=torch.bool))["logits"]
    np.testing.assert_allclose(ex.logits, by_hand[0].double().numpy(), atol=1e-5)
    probs = torch.softmax(torch.from_numpy(ex.logits), -1).numpy()  # temperature 1
    assert probs.max() == pytest.approx(answer.confidence, abs=1e-6)
    assert first.logit == pytest.approx(float(by_hand[0, first.index]), abs=1e-5)
    # completeness holds for the window explained
    assert first.scores.sum() == pytest.approx(first.delta, abs=0.01 * max(1, abs(first.delta)))
    # the request's words carry the most positive attribution
    top = ex.tokens[int(np.argmax(np.where(ex.special, -np.inf, first.scores)))]
    assert at <= top[1] < len(TEXT)
    # a classifier is explained as its own predict answers (auto: chunk_max)
    same = explain(chatter_clf, TEXT)
    assert same.window == ex.window and same.attributions[0].intent == "card_lost"
    assert chatter_clf.predict([TEXT])[0].intent == same.attributions[0].intent


def test_truncate_and_head_tail_explain_what_they_read(chatter_clf):
    truncate = predictor(chatter_clf, "truncate")
    [cut], [note] = truncate.predictions([TEXT])
    assert cut.intent != "card_lost"  # the first window holds no request
    ex = explain(truncate, TEXT)
    assert ex.attributions[0].intent == cut.top_k[0][0] and ex.long_text == note
    assert ex.window[0] == 0 and ex.window[1] < TEXT.rindex(REQUEST) and ex.skipped is None
    assert len(ex.tokens) == chatter_clf.max_length
    _check_offsets(TEXT, ex.tokens)
    # the head analysis and the deletion curves read the same first window
    assert explain(first_window(chatter_clf), TEXT).tokens == ex.tokens

    head_tail = predictor(chatter_clf, "head_tail")
    [both], _ = head_tail.predictions([TEXT])
    ex = explain(head_tail, TEXT)
    assert both.intent == ex.attributions[0].intent == "card_lost"
    assert ex.attributions[0].within_tolerance
    _check_offsets(TEXT, ex.tokens)
    real = [(s, e) for _, s, e, sp in ex.tokens if not sp]
    half = (chatter_clf.max_length - 2) // 2
    assert ex.window == (0, len(TEXT))
    assert ex.skipped == (real[half - 1][1], real[half][0])
    assert ex.skipped[0] < ex.skipped[1] <= TEXT.rindex(REQUEST)


def test_mean_pooled_chunks_and_reject_are_refused(chatter_clf):
    with pytest.raises(LongTextNotExplained, match="mean of its .* windows"):
        explain(predictor(chatter_clf, "chunk"), TEXT)
    with pytest.raises(LongTextError, match="over the model's maximum length"):
        explain(predictor(chatter_clf, "reject"), TEXT)
    # within the limit, every policy reads the whole text
    ex = explain(predictor(chatter_clf, "chunk"), REQUEST)
    assert ex.window is None and not ex.truncated and ex.long_text is None
    assert ex.attributions[0].intent == "card_lost"


def test_cli_json_answers_as_predict_and_says_which_window(chatter_clf, tmp_path, capsys):
    model = str(chatter_clf.save(tmp_path / "model"))
    assert main(["predict", model, "--json", TEXT]) == 0
    predicted = json.loads(capsys.readouterr().out)
    assert main(["explain", model, TEXT, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["intents"] == predicted["intents"] and out["top_k"] == predicted["top_k"]
    assert out["explained_intent"] == "card_lost" == predicted["intents"][0]["intent"]
    assert out["long_text"] == predicted["long_text"] and out["truncated"]
    window = out["window"]
    assert window["skipped"] is None and window["end"] == len(TEXT)
    real = [t for t in out["tokens"] if not t["special"]]
    assert (real[0]["start"], real[-1]["end"]) == (window["start"], window["end"])
    for t in real:
        assert TEXT[t["start"]:t["end"]] == t["token"].removeprefix("##")
    assert out["completeness"]["within_tolerance"]
    # the plain output says it, and each policy is predict's
    assert main(["explain", model, TEXT]) == 0
    plain = capsys.readouterr().out
    note = out["long_text"]
    assert plain.startswith("answer: card_lost")
    assert (f"answer from chunk {note['chunk']}; explained: characters {window['start']}-"
            f"{window['end']} of {len(TEXT)}") in plain
    for policy in ("truncate", "head_tail"):
        assert main(["predict", model, "--json", "--long-text", policy, TEXT]) == 0
        predicted = json.loads(capsys.readouterr().out)
        assert main(["explain", model, TEXT, "--json", "--long-text", policy]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["intents"] == predicted["intents"]
        assert out["long_text"] == predicted["long_text"]
        assert (out["window"]["skipped"] is not None) == (policy == "head_tail")
    assert main(["explain", model, TEXT, "--long-text", "chunk"]) == 1
    assert "mean of its" in capsys.readouterr().err


def test_narrow_windows_are_explained_as_they_were_read(chatter_clf, tmp_path, capsys):
    """Windows of 8 tokens (``chunk_length``): the window explained is the 8-token window
    whose answer was kept, its tokens at their offsets in the whole text; ``headwise
    explain --long-text chunk_max:8`` explains the same."""
    p = SingleLabelPredictor(chatter_clf, TorchRuntime(chatter_clf.model), chunk_length=8)
    [item] = p.encode([TEXT])
    [answer], [note] = p.predictions([TEXT])
    assert note["window"] == 8 and answer.intent == "card_lost"
    ex = explain(p, TEXT)
    window = item.chunks[note["chunk"] - 1]
    tok = chatter_clf.tokenizer
    assert len(window) <= 8
    assert [t[0] for t in ex.tokens] == [tok.backend.id_to_token(i) for i in window]
    _check_offsets(TEXT, ex.tokens)
    assert ex.long_text == note and ex.attributions[0].within_tolerance
    model = chatter_clf.save(tmp_path / "model")
    assert main(["explain", str(model), TEXT, "--json", "--long-text", "chunk_max:8"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["long_text"] == note
    assert (out["window"]["start"], out["window"]["end"]) == ex.window


def test_a_prefixed_tokenizer_s_windows_are_explained_with_their_offsets(chatter_clf):
    """With an input prefix (e5's ``"query: "``) every window starts with ``cls`` and the
    prefix's tokens: they are explained as special tokens, and every text token keeps its
    offsets in the whole text (a short text, its truncation, and the window chunk_max
    kept)."""
    import copy

    prefixed = copy.copy(chatter_clf)
    prefixed.tokenizer = chatter_clf.tokenizer.with_prefix("i card")
    tok = prefixed.tokenizer
    lead = [tok.backend.id_to_token(i) for i in (tok.cls_token_id, *tok.prefix_ids)]
    for policy, text in (("truncate", REQUEST), ("truncate", TEXT), ("chunk_max", TEXT)):
        ex = explain(predictor(prefixed, policy), text)
        assert [t[0] for t in ex.tokens[:3]] == lead and all(t[3] for t in ex.tokens[:3])
        assert not any(t[3] for t in ex.tokens[3:-1]) and ex.tokens[-1][3]
        assert all(t[1] is not None for t in ex.tokens[3:-1])
        _check_offsets(text, ex.tokens)
        # integrated gradients' baseline keeps cls and the prefix: they carry nothing
        assert np.abs(ex.attributions[0].scores[:3]).max() == 0.0
        assert ex.attributions[0].within_tolerance
    short = explain(predictor(prefixed, "truncate"), REQUEST).tokens
    assert "".join(REQUEST[s:e] for _, s, e, sp in short if not sp) == \
        REQUEST.replace(" ", "")


def test_sentence_windows_are_explained_in_the_whole_text_s_offsets(chatter_clf):
    """Under ``chunk_stride="sentence"`` the kept window is the request's sentence, and its
    tokens keep their offsets in the whole text."""
    text = "ok sure\nthank you kindly\ni lost my card\nright ok then\ngood morning"
    p = SingleLabelPredictor(chatter_clf, TorchRuntime(chatter_clf.model),
                             long_text="chunk_max", chunk_length=8, chunk_stride="sentence")
    ex = explain(p, text)
    assert ex.attributions[0].intent == "card_lost" and ex.attributions[0].within_tolerance
    _check_offsets(text, ex.tokens)
    at = text.index(REQUEST)
    assert ex.window == (at, at + len(REQUEST))  # the request's line alone
