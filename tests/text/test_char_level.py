"""Character-level tokenizer (numbers whole, [NUM] fallback), offsets, decode, auto choice."""

from __future__ import annotations

import json
import re
import unicodedata

import pytest
import torch

from headwise.text import Tokenizer, train_char_tokenizer, train_tokenizer
from headwise.text.char_level import NUMBER_PATTERN, cjk_fraction

EXPECTED = {
    # NFKC makes the Chinese comma "，" an ASCII ","
    "我想提前还款3,500元，第三期不需要了":
        ["我", "想", "提", "前", "还", "款", "3,500", "元", ",", "第", "三", "期", "不", "需",
         "要", "了"],
    "LPR下调25个基点": ["lpr", "下", "调", "25", "个", "基", "点"],
    "三千五百元": ["三千五百", "元"],
    "1.5万": ["1.5万"],
    "利率3.85%，还款2024年": ["利", "率", "3.85", "%", ",", "还", "款", "2024", "年"],
    "３，５００元 pay 3 BILLS": ["3,500", "元", "pay", "3", "bills"],
    "等一下 一直 十分 千万 万一 2千克 3千块 两三天": [
        "等", "一", "下", "一", "直", "十", "分", "千", "万", "万", "一", "2", "千", "克",
        "3千", "块", "两三", "天"],
}
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[NUM]"]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return train_char_tokenizer(list(EXPECTED))


def test_pieces_are_characters_words_and_whole_numbers(tok):
    assert [tok.backend.id_to_token(i) for i in range(6)] == SPECIALS
    for text, tokens in EXPECTED.items():
        assert tok.tokenize(text) == tokens, text
        cls, sep = tok.cls_token_id, tok.sep_token_id
        ids = tok(text)["input_ids"][0].tolist()
        assert ids == [cls] + [tok.token_to_id(t) for t in tokens] + [sep]
        assert tok.unk_token_id not in ids


def test_number_rule():
    def number(text: str) -> str | None:
        match = re.match(NUMBER_PATTERN, text)
        return match.group() if match else None

    assert number("3,500元") == "3,500" and number("3,5000") == "3"   # groups of three only
    assert number("1,234.56万元") == "1,234.56万" and number("2千克") == "2"
    assert number("三千五百元") == "三千五百" and number("两三天") == "两三"
    assert number("三期") == "三" and number("两个") == "两" and number("十分钟") == "十"
    assert number("一次") == "一" and number("三基点") == "三"
    for word in ("一下", "一直", "一样", "一点", "一起", "十分", "千万", "万一", "三心二意"):
        assert number(word) is None, word


def test_unseen_numbers_become_num_and_other_pieces_unk():
    tok = train_char_tokenizer(["我想提前还款", "不需要了", "元 期 下 直 个 钟 %"])
    num, unk = "[NUM]", "[UNK]"
    cases = {
        "还款4,200元": ["还", "款", num, "元"],
        "第三期": [unk, num, "期"],              # 三 before a measure word is a number
        "等一下": [unk, unk, "下"],              # 一 before 下 is not
        "一直": [unk, "直"],
        "一个": [num, "个"],
        "三千五百元": [num, "元"],
        "1.5万": [num],
        "千万 万一": [unk, unk, unk, unk],
        "十分钟 25%": [num, unk, "钟", num, "%"],
    }
    for text, tokens in cases.items():
        assert tok.tokenize(text) == tokens, text
        expected = [tok.cls_token_id] + [tok.token_to_id(t) for t in tokens] + [tok.sep_token_id]
        assert tok(text)["input_ids"][0].tolist() == expected, text
    assert tok.number_token_id == 5 and tok.unk_token_id == 1
    # a batch pads as usual and keeps the fallback per row
    batch = tok(["一个", "还款4,200元"])
    assert batch["input_ids"].tolist() == [
        [2, 5, tok.token_to_id("个"), 3, 0, 0],
        [2, tok.token_to_id("还"), tok.token_to_id("款"), 5, tok.token_to_id("元"), 3]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 0, 0], [1] * 6]


def test_round_trip_decode(tok):
    for text in EXPECTED:
        ids = tok(text)["input_ids"][0]
        expected = unicodedata.normalize("NFKC", text).lower()
        # whitespace only survives between letters and digits
        expected = re.sub(r"(?<![a-z0-9]) | (?![a-z0-9])", "", expected)
        assert tok.decode(ids) == expected, text
    ids = tok("还款4,200元")["input_ids"][0]
    assert tok.decode(ids, skip_special_tokens=False) == "[CLS]还款[NUM]元[SEP]"


def test_save_and_load_keep_ids_and_number_fallback(tmp_path):
    tok = train_char_tokenizer(["我想提前还款", "元 期 下"], lowercase=False)
    texts = ["还款4,200元第三期", "等一下 LPR", "我想"]
    before = tok(texts)
    tok.save(tmp_path)
    settings = json.loads((tmp_path / "headwise_tokenizer.json").read_text(encoding="utf-8"))
    assert settings["number_pattern"] == NUMBER_PATTERN
    assert settings["special_tokens"]["num"] == "[NUM]" and settings["lowercase"] is False
    loaded = Tokenizer.from_file(tmp_path)
    after = loaded(texts)
    assert torch.equal(before["input_ids"], after["input_ids"])
    assert torch.equal(before["attention_mask"], after["attention_mask"])
    assert 5 in after["input_ids"][0].tolist()
    for text in texts:
        assert loaded.tokenize(text) == tok.tokenize(text)
    assert tok.tokenize("LPR") == ["[UNK]"]   # cased: "LPR" was never seen


def test_offsets_slice_back_to_the_tokens(tok):
    for text, tokens in EXPECTED.items():
        spans = tok.offsets(text)
        assert len(spans) == len(tokens)
        for token, (start, end) in zip(tokens, spans, strict=True):
            assert unicodedata.normalize("NFKC", text[start:end]).lower() == token
    assert tok.offsets("LPR下调25个基点") == [(0, 3), (3, 4), (4, 5), (5, 7), (7, 8), (8, 9),
                                           (9, 10)]
    assert tok.offsets("３，５００元") == [(0, 5), (5, 6)]


@pytest.fixture
def english_vocab(tmp_path):
    words = ["i", "was", "charge", "##d", "£", "##3", ".", "50", "twice", "我", "想", "还", "款",
             "3", ",", "500", "元"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(SPECIALS[:5] + words) + "\n", encoding="utf-8")
    return path


def test_wordpiece_numbers_offsets_and_decode(english_vocab):
    tok = Tokenizer.from_vocab(english_vocab)
    text = "I was charged £3.50 twice"
    assert tok.tokenize(text) == ["i", "was", "charge", "##d", "£", "##3", ".", "50", "twice"]
    assert tok.offsets(text) == [(0, 1), (2, 5), (6, 12), (12, 13), (14, 15), (15, 16),
                                 (16, 17), (17, 19), (20, 25)]
    assert tok.decode(tok(text)["input_ids"][0]) == "i was charged £3.50 twice"
    # BERT splits CJK characters; decoding must not put spaces between them
    zh = "我想还款3,500元"
    assert tok.tokenize(zh) == ["我", "想", "还", "款", "3", ",", "500", "元"]
    assert tok.decode(tok(zh)["input_ids"][0]) == zh
    transformers = pytest.importorskip("transformers")
    ref = transformers.BertTokenizerFast.from_pretrained(english_vocab.parent)
    for t in (text, zh, "Twice, I was charged!"):
        expected = ref(t, add_special_tokens=False, return_offsets_mapping=True)
        assert tok.offsets(t) == [tuple(s) for s in expected["offset_mapping"]]


def test_trained_wordpiece_offsets_slice_back():
    corpus = [f"I was charged £{n}.50 {w} for my {c} card"
              for n in range(1, 9) for w in ("twice", "again") for c in ("debit", "credit")]
    tok = Tokenizer.train_wordpiece(corpus, vocab_size=60, min_frequency=1)
    for text in ("I was charged £3.50 twice", "charges credited twice", "Card charged £12.75"):
        tokens, spans = tok.tokenize(text), tok.offsets(text)
        assert len(tokens) == len(spans)
        for token, (start, end) in zip(tokens, spans, strict=True):
            if token != "[UNK]":
                assert text[start:end].lower() == token.removeprefix("##"), (text, token)
    assert tok.number_pattern is None and tok.number_token_id is None


def test_train_tokenizer_picks_by_cjk_share():
    chinese = ["我想提前还款3,500元", "LPR下调25个基点了吗", "请问第三期什么时候还"]
    english = ["I was charged £3.50 twice", "my card has not arrived yet", "cancel my transfer"]
    assert cjk_fraction(["ab 中文"]) == 0.5 and cjk_fraction(["  "]) == 0.0
    assert cjk_fraction(["abcdefg 中文三"]) == pytest.approx(0.3)
    def kind(tok: Tokenizer) -> str:
        model = type(tok.backend.model).__name__
        assert (model == "WordLevel") == (tok.number_pattern == NUMBER_PATTERN)
        return {"WordLevel": "char", "WordPiece": "wordpiece"}[model]

    char = train_tokenizer(chinese)
    assert kind(char) == "char" and char.tokenize("三千五百元") == ["[NUM]", "元"]
    wordpiece = train_tokenizer(english, vocab_size=100)
    assert kind(wordpiece) == "wordpiece" and "##ed" in wordpiece.tokenize("charged")
    assert kind(train_tokenizer(["abcdefg 中文三"])) == "char"                     # 30 %
    assert kind(train_tokenizer(["abcdefgh 中文"], vocab_size=50)) == "wordpiece"  # 20 %
    assert kind(train_tokenizer(english, kind="char")) == "char"
    assert kind(train_tokenizer(chinese, kind="wordpiece")) == "wordpiece"


def test_vocabulary_limits_and_case():
    corpus = ["我 我 我 你 你 他 ABC", "abc"]
    ranked = train_char_tokenizer(corpus)   # 我 3, abc 2, 你 2, 他 1 (ties by token)
    assert [ranked.backend.id_to_token(i) for i in range(6, 10)] == ["我", "abc", "你", "他"]
    assert ranked.vocab_size == 10
    frequent = train_char_tokenizer(corpus, min_frequency=2)
    assert frequent.vocab_size == 9 and frequent.tokenize("他") == ["[UNK]"]
    capped = train_char_tokenizer(corpus, max_vocab=7)
    assert capped.vocab_size == 7 and capped.tokenize("我你") == ["我", "[UNK]"]
    cased = train_char_tokenizer(corpus, lowercase=False)
    assert cased.tokenize("ABC abc") == ["ABC", "abc"] and cased.lowercase is False


def test_bad_arguments():
    with pytest.raises(TypeError, match="one string"):
        train_char_tokenizer("我想还款")
    with pytest.raises(ValueError, match="empty corpus"):
        train_char_tokenizer([])
    with pytest.raises(ValueError, match="max_vocab"):
        train_char_tokenizer(["我"], max_vocab=6)
    with pytest.raises(ValueError, match="min_frequency"):
        train_char_tokenizer(["我"], min_frequency=0)
    with pytest.raises(ValueError, match="kind"):
        train_tokenizer(["我"], kind="bpe")
    wordpiece = Tokenizer.train_wordpiece(["a b c"], vocab_size=20, min_frequency=1)
    with pytest.raises(ValueError, match="number token"):
        Tokenizer(wordpiece.backend, number_pattern=NUMBER_PATTERN)


@pytest.mark.parametrize("kind", ["char", "wordpiece"])
def test_lengths_are_the_untruncated_row_lengths(kind):
    texts = ["提前还款20000元要违约金吗", "第三期的账单不需要了",
             "I lost my card ending 4821 yesterday", "½ off？", "好"]
    tok = train_tokenizer(texts * 3, kind=kind, vocab_size=200)
    rows = tok(texts, max_length=None)["attention_mask"].sum(1).tolist()
    assert tok.lengths(texts) == rows
    with pytest.raises(TypeError, match="texts\\[1\\]"):
        tok.lengths(["ok", 3])
