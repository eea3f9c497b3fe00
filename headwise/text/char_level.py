"""A character-level tokenizer for Chinese (and mixed) text that keeps numbers whole.

Customer-service Chinese is best read a character at a time (there are no spaces to split
words on, and a word vocabulary would need a segmenter), but an amount such as ``3,500``
or ``三千五百`` split into characters loses what it is. :func:`train_char_tokenizer`
builds a ``tokenizers`` WordLevel vocabulary over these pieces:

- each CJK character (and any other symbol) is one token: 我 想 还 款;
- a run of ASCII letters is one token, lowercased: ``LPR`` -> ``lpr``;
- a number is one token (:data:`NUMBER_PATTERN`):

  - Arabic digits with optional thousands separators (groups of exactly three) and a
    decimal part: ``2024``, ``3,500``, ``3.85``; optionally followed by a magnitude
    百 千 万 亿 (``1.5万``, ``20亿``), except where the magnitude begins a metric unit
    (``2千克`` is 2 + 千 + 克). A ``%`` after a number is its own token (``25`` ``%``), so
    an unseen percentage still reads as "[NUM] %".
  - Chinese numerals 〇零一二三四五六七八九两 十百千万亿: a run of two or more that
    begins with a digit or 十 (``三千五百``, ``十五``, ``两三``), or one digit or 十 directly
    followed by a measure word or unit from :data:`UNITS` (``三`` in 第三期, ``两`` in 两个).
    So 一下, 一直, 一样, 一点 and 十分 ("very") are plain characters, and so are the words
    千万 ("by all means") and 万一 ("in case"), which begin with a magnitude. The
    characters of a number and of a word are the same tokens here; the rule decides which
    unseen pieces become ``[NUM]``.

- text is NFKC-normalized first (full-width ``３，５００`` reads as ``3,500``; the Chinese
  comma ``，`` becomes ``,``) and whitespace only separates pieces.

A number missing from the vocabulary is encoded as ``[NUM]``, any other unknown piece as
``[UNK]``; the vocabulary keeps frequent numbers (``3``, ``25``) as themselves. This is the
:class:`~headwise.text.tokenizer.Tokenizer`'s ``number_pattern`` setting, saved with it, so
a loaded tokenizer does the same.

:func:`train_tokenizer` picks this tokenizer for mostly-CJK corpora and WordPiece for the
rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tokenizers import Regex, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as Backend
from tokenizers.models import WordLevel

from headwise.text.tokenizer import (
    CJK_CHARS,
    DEFAULT_SPECIAL_TOKENS,
    Tokenizer,
    with_special_tokens,
)

#: the special tokens of a character-level vocabulary, ids 0-5 in this order
CHAR_SPECIAL_TOKENS = {**DEFAULT_SPECIAL_TOKENS, "num": "[NUM]"}
#: the Chinese digits (两 and 〇 included) and magnitudes
CN_DIGITS = "〇零一二三四五六七八九两"
CN_MAGNITUDES = "十百千万亿"
#: measure words and units after which a single Chinese numeral counts as a number
UNITS = ("基点", "小时", "分钟", "公斤", "公里", "元", "块", "毛", "角", "期", "个", "月",
         "日", "号", "年", "天", "周", "笔", "次", "张", "件", "岁", "位", "台", "页", "楼",
         "层", "斤", "克", "秒", "倍", "折", "条", "双", "份", "箱", "包", "瓶", "盒", "单",
         "遍", "套", "辆")
_ARABIC = r"[0-9]{1,3}(?:,[0-9]{3}(?![0-9]))+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?"
_CHINESE = (rf"[{CN_DIGITS}十][{CN_DIGITS}{CN_MAGNITUDES}]+"
            rf"|[{CN_DIGITS}十](?={'|'.join(sorted(UNITS, key=len, reverse=True))})")
#: a number (what becomes one token); valid for both Python ``re`` and Oniguruma
NUMBER_PATTERN = rf"(?:{_ARABIC})(?:[百千万亿]+(?![克米瓦]))?|{_CHINESE}"
#: every piece: a number, a run of ASCII letters, or any other single character
TOKEN_PATTERN = rf"{NUMBER_PATTERN}|[A-Za-z]+|\S"
#: ``train_tokenizer(kind="auto")`` picks the character tokenizer from this CJK share up
CJK_THRESHOLD = 0.3
_CJK = re.compile(f"[{CJK_CHARS}]")
_SPACE = re.compile(r"\s")


def train_char_tokenizer(texts: Iterable[str], *, min_frequency: int = 1,
                         max_vocab: int | None = None, lowercase: bool = True) -> Tokenizer:
    """Learn a character-level vocabulary (numbers kept whole) from a corpus.

    Args:
        texts: the training texts.
        min_frequency: the fewest occurrences for a piece to enter the vocabulary.
        max_vocab: the largest vocabulary, the six special tokens included (the most
            frequent pieces are kept); None for no limit.
        lowercase: lowercase letters (after NFKC normalization).

    Returns:
        A :class:`~headwise.text.tokenizer.Tokenizer` with ``[PAD] [UNK] [CLS] [SEP]
        [MASK] [NUM]`` as ids 0-5.

    Raises:
        TypeError: ``texts`` is one string.
        ValueError: an empty corpus, ``max_vocab`` too small for the special tokens, or
            ``min_frequency`` below 1.
    """
    texts = _as_list(texts)
    if max_vocab is not None and max_vocab <= len(CHAR_SPECIAL_TOKENS):
        raise ValueError(f"max_vocab must exceed the {len(CHAR_SPECIAL_TOKENS)} special "
                         f"tokens, got {max_vocab}")
    if min_frequency < 1:
        raise ValueError(f"min_frequency must be at least 1, got {min_frequency}")
    special = dict(CHAR_SPECIAL_TOKENS)
    backend = Backend(WordLevel(unk_token=special["unk"]))
    steps = [normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else [])
    backend.normalizer = normalizers.Sequence(steps)
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split(Regex(TOKEN_PATTERN), behavior="isolated")])
    trainer = trainers.WordLevelTrainer(
        vocab_size=max_vocab if max_vocab is not None else 1 << 30,
        min_frequency=min_frequency, show_progress=False, special_tokens=list(special.values()))
    backend.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return Tokenizer(with_special_tokens(backend, special), lowercase=lowercase,
                     special_tokens=special, number_pattern=NUMBER_PATTERN)


def cjk_fraction(texts: Iterable[str]) -> float:
    """The share of CJK characters (ideographs, kana, CJK punctuation) among non-space ones.

    Returns:
        A number in [0, 1]; 0 for texts with no non-space character.
    """
    cjk = total = 0
    for text in texts:
        cjk += len(_CJK.findall(text))
        total += len(text) - len(_SPACE.findall(text))
    return cjk / total if total else 0.0


def train_tokenizer(texts: Iterable[str], *, kind: str = "auto",
                    vocab_size: int = 8000) -> Tokenizer:
    """Learn a tokenizer suited to a corpus.

    Args:
        texts: the training texts.
        kind: ``"char"`` (:func:`train_char_tokenizer`), ``"wordpiece"``
            (:meth:`Tokenizer.train_wordpiece <headwise.text.tokenizer.Tokenizer.train_wordpiece>`)
            or ``"auto"``: char when at least :data:`CJK_THRESHOLD` of the non-space
            characters are CJK (:func:`cjk_fraction`), else WordPiece.
        vocab_size: the largest vocabulary, special tokens included.

    Returns:
        The trained tokenizer.

    Raises:
        TypeError: ``texts`` is one string.
        ValueError: an unknown ``kind``, an empty corpus or a vocabulary too small.
    """
    if kind not in ("auto", "char", "wordpiece"):
        raise ValueError(f"kind must be 'auto', 'char' or 'wordpiece', got {kind!r}")
    texts = _as_list(texts)
    if kind == "auto":
        kind = "char" if cjk_fraction(texts) >= CJK_THRESHOLD else "wordpiece"
    if kind == "char":
        return train_char_tokenizer(texts, max_vocab=vocab_size)
    return Tokenizer.train_wordpiece(texts, vocab_size)


def _as_list(texts: Iterable[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("texts must be an iterable of strings, not one string")
    texts = list(texts)
    if not texts:
        raise ValueError("cannot train a tokenizer on an empty corpus")
    return texts
