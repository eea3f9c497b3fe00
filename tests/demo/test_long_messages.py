"""The long-message slice: requests kept whole at their position, chatter free of intent
cues, lengths in the asked multiples of the model's length, every cell filled."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from headwise.demo import generate_demo_corpus, long_message_slice
from headwise.demo.long_messages import CUE_WORDS, LENGTH_BUCKETS, POSITIONS, chatter
from headwise.text.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def questions():
    corpus = generate_demo_corpus(seed=0, per_intent=30)
    return [(e.text, e.label) for e in corpus["test"] if e.label != "oos"]


def test_chatter_is_varied_bilingual_and_holds_no_intent_cue():
    sentences = chatter(random.Random(0), 2000, english=0.3)
    assert len(set(sentences)) > 1000  # composed, not a few fixed strings
    english = [s for s in sentences if s.isascii()]
    assert 0.2 < len(english) / len(sentences) < 0.4
    for s in sentences:
        assert not any(w in s.lower() for w in CUE_WORDS), s


def test_the_slice_puts_each_request_whole_where_its_cell_says(questions):
    texts = [t for t, _ in questions] + chatter(random.Random(1), 500)
    tok = Tokenizer.train_wordpiece(texts, 3000, min_frequency=1)
    max_length = 64
    rows = long_message_slice(questions, lengths=tok.lengths, max_length=max_length, seed=3)
    assert [(r.request, r.label) for r in rows] == list(questions)
    cells = Counter((r.position, r.bucket) for r in rows)
    assert set(cells) == {(p, f"{lo}-{hi}x") for p in POSITIONS for lo, hi in LENGTH_BUCKETS}
    assert max(cells.values()) - min(cells.values()) <= 1  # equal shares
    for r in rows:
        assert r.request in r.text
        at = r.text.index(r.request)
        before, after = len(r.text[:at].strip()), len(r.text[at + len(r.request):].strip())
        if r.position == "start":
            assert before == 0 and after > 0
        elif r.position == "end":
            assert after == 0 and before > 0
        else:
            assert before > 0 and after > 0 and 0.25 < before / (before + after) < 0.75
        lo, hi = map(int, r.bucket[:-1].split("-"))
        assert r.tokens == tok.lengths([r.text])[0]
        # at least the bucket's low end; at most its high end plus one sentence
        assert lo * max_length <= r.tokens <= hi * max_length + 60
    again = long_message_slice(questions, lengths=tok.lengths, max_length=max_length, seed=3)
    assert again == rows  # seeded
