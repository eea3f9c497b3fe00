"""Category lexicons: English words and amounts, Chinese substrings, gold spans, JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from headwise.inspect.categories import (
    CategoryLexicon,
    categories_from_spans,
    chinese_lexicon,
    english_lexicon,
)


def test_english_defaults_mark_negations_and_amounts():
    lex = english_lexicon()
    text = "I don't want to cancel the £50 payment, not now"
    found = lex.spans(text)
    words = {text[s:e] for s, e in found["negation"]}
    assert {"don't", "cancel", "not"} <= words and "now" not in words
    assert [text[s:e].strip() for s, e in found["number"]] == ["£50"]
    assert "payment" in {text[s:e] for s, e in found["domain"]}
    # whole words only: "nothing" is a negation, the "no" inside "know" is not
    assert [text[s:e] for s, e in english_lexicon().spans("i know")["negation"]] == []


def test_chinese_defaults_match_substrings_and_numbers():
    lex = chinese_lexicon()
    text = "我不想分期3,500元"
    spans = lex.spans(text)
    assert text[slice(*spans["negation"][0])] == "不想"
    assert [text[s:e] for s, e in spans["number"]] == ["3,500"]
    units = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 10), (10, 11)]
    marks = lex.mark(text, units, np.zeros(len(units), bool))
    assert marks.shape == (3, len(units))
    assert marks[0].tolist() == [False, True, True, False, False, False, False]
    assert marks[1].tolist() == [False] * 5 + [True, False]


def test_spans_mark_overlapping_words_and_skip_specials():
    units = [(0, 0), (0, 2), (2, 4), (4, 6), (0, 0)]
    special = np.array([True, False, False, False, True])
    got = categories_from_spans([(1, 3, "negation")], ["negation", "number"], units, special)
    assert got.tolist() == [[False, True, True, False, False], [False] * 5]


def test_json_lexicon_and_its_errors(tmp_path):
    path = tmp_path / "lex.json"
    path.write_text(json.dumps({"refusal": ["nope"], "code": {"pattern": "[A-Z]{3}[0-9]+"}}))
    lex = CategoryLexicon.from_json(path)
    assert lex.names == ["refusal", "code"]
    assert lex.spans("nope, ABC123")["code"] == [(6, 12)]
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        CategoryLexicon.from_json(path)
    with pytest.raises(ValueError, match="invalid pattern"):
        CategoryLexicon({"x": {"pattern": "("}})
    with pytest.raises(ValueError, match="neither"):
        CategoryLexicon({"x": []})
    with pytest.raises(FileNotFoundError):
        CategoryLexicon.from_json(tmp_path / "missing.json")
