"""WordPiece tokenizer (BERT's) on the Hugging Face ``tokenizers`` library.

:class:`Tokenizer` turns a list of texts into padded ``input_ids`` and ``attention_mask``
tensors, the two inputs every headwise model takes::

    tok = Tokenizer.from_vocab("vocab.txt")          # a BERT vocabulary
    tok = Tokenizer.train_wordpiece(texts, 8000)     # or trained on your corpus
    batch = tok(["book a table", "what's the weather"])
    batch["input_ids"], batch["attention_mask"]      # (batch, longest) long tensors

The pipeline is BERT's: clean the text, split CJK characters, lowercase and strip
accents (when ``lowercase``), split on whitespace and punctuation, WordPiece with ``##``
continuations, then ``[CLS] ... [SEP]``. On a BERT vocabulary it gives the same ids as
``transformers``' ``BertTokenizerFast``. ``save`` writes ``tokenizer.json`` (the library's
own format) and ``headwise_tokenizer.json`` (the settings below).

The class also carries vocabularies other than WordPiece (``headwise.text.char_level``
builds a character-level one on it). For them, the ``number_pattern`` setting names the
pieces that are numbers, so that a number missing from the vocabulary becomes the ``num``
special token (``[NUM]``) instead of ``[UNK]``; and :meth:`decode` leaves no space beside
CJK characters, for any vocabulary (Chinese and Japanese are written without them).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers, processors
from tokenizers import Tokenizer as Backend
from tokenizers.models import WordPiece
from torch import Tensor

from headwise.text.wordpiece_vocab import learn_wordpiece_vocab

TOKENIZER_NAME = "tokenizer.json"
SETTINGS_NAME = "headwise_tokenizer.json"
#: role -> token; the trained vocabulary starts with them in this order ([PAD] is id 0)
DEFAULT_SPECIAL_TOKENS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]",
                          "mask": "[MASK]"}
#: characters written without spaces between them: kana, CJK ideographs and their punctuation
CJK_CHARS = "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff" \
            "\U00020000-\U0002fa1f"
# spaces that decoding must drop: beside CJK, inside a number (3 . 50, 3 , 500), between a
# currency sign and a digit (£ 3), before a percent sign after a digit (25 %)
_DECODE_SPACES = re.compile(rf"(?<=[{CJK_CHARS}]) +| +(?=[{CJK_CHARS}])"
                            r"|(?<=[0-9]) +(?=[.,][0-9])|(?<=[0-9][.,]) +(?=[0-9])"
                            r"|(?<=[$£€¥₹₩]) +(?=[0-9])|(?<=[0-9]) +(?=%)")
#: how many characters past a piece ``number_pattern`` may look at (for units such as 元)
NUMBER_LOOKAHEAD = 8
#: :meth:`Tokenizer.with_split`'s choices: name -> the pieces it isolates before the
#: vocabulary reads the text (``"cjk_digits"``: each CJK character and each run of ASCII
#: digits, so that a slot span's edge never falls inside a subword piece)
PRE_SPLITS: dict[str, str] = {"cjk_digits": rf"[0-9]+|[{CJK_CHARS}]"}


class Tokenizer:
    """A BERT-style WordPiece tokenizer producing padded tensors.

    Build one with :meth:`from_vocab`, :meth:`train_wordpiece` or :meth:`from_file`.

    Args:
        backend: a ``tokenizers.Tokenizer``; its own padding and truncation settings are
            switched off (this class pads and truncates per call).
        lowercase: whether the pipeline lowercases (recorded in the settings; None when
            unknown).
        special_tokens: role (``pad``, ``unk``, ``cls``, ``sep``, ``mask``, and ``num`` for
            ``number_pattern``) -> token, overriding :data:`DEFAULT_SPECIAL_TOKENS`.
        number_pattern: a regular expression (Python ``re``) for numbers: a piece that
            encodes as ``[UNK]`` becomes the ``num`` token when the pattern, matched on the
            normalized text from the piece's start (seeing at most
            :data:`NUMBER_LOOKAHEAD` characters past it), matches exactly that piece.

    Raises:
        ValueError: the padding token is not in the vocabulary, or ``number_pattern``
            without a ``num`` token in the vocabulary.
    """

    def __init__(self, backend: Backend, *, lowercase: bool | None = True,
                 special_tokens: dict[str, str] | None = None,
                 number_pattern: str | None = None) -> None:
        self.backend = backend
        self.backend.no_padding()
        self.backend.no_truncation()
        self.lowercase = lowercase
        self.special_tokens = {**DEFAULT_SPECIAL_TOKENS, **(special_tokens or {})}
        if self.token_to_id(self.special_tokens["pad"]) is None:
            raise ValueError(f"the padding token {self.special_tokens['pad']!r} is not in the "
                             f"vocabulary; pass special_tokens={{'pad': ...}}")
        self._num_special = backend.num_special_tokens_to_add(False)
        #: text that every input is read after (see :meth:`with_prefix`); "" for none
        self.input_prefix = ""
        #: the :data:`PRE_SPLITS` name this tokenizer splits at (see :meth:`with_split`)
        self.pre_split: str | None = None
        self.number_pattern = number_pattern
        self._number_re = re.compile(number_pattern) if number_pattern is not None else None
        if number_pattern is not None and self.number_token_id is None:
            raise ValueError("number_pattern needs a number token in the vocabulary: pass "
                             "special_tokens={'num': ...}")

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_vocab(cls, vocab_txt: str | Path, *, lowercase: bool = True,
                   special_tokens: dict[str, str] | None = None) -> Tokenizer:
        """BERT's tokenizer on a ``vocab.txt`` (one WordPiece token per line, id = line).

        Args:
            vocab_txt: the vocabulary file.
            lowercase: lowercase and strip accents (``do_lower_case`` of uncased BERT).
            special_tokens: role -> token overrides.

        Raises:
            FileNotFoundError: no such file.
            ValueError: the padding token is not in the vocabulary.
        """
        path = Path(vocab_txt)
        if not path.is_file():
            raise FileNotFoundError(f"no vocabulary file at {path}")
        special = {**DEFAULT_SPECIAL_TOKENS, **(special_tokens or {})}
        model = WordPiece.from_file(str(path), unk_token=special["unk"],
                                    max_input_chars_per_word=100)
        return cls(_bert_pipeline(Backend(model), lowercase, special), lowercase=lowercase,
                   special_tokens=special)

    @classmethod
    def train_wordpiece(cls, texts: Iterable[str], vocab_size: int, *, lowercase: bool = True,
                        min_frequency: int = 2,
                        special_tokens: dict[str, str] | None = None) -> Tokenizer:
        """Learn a WordPiece vocabulary from a corpus (BERT's pre-processing).

        Args:
            texts: the training texts.
            vocab_size: the largest vocabulary to learn (special tokens included).
            lowercase: lowercase and strip accents before learning.
            min_frequency: the fewest occurrences for a merge to be learnt.
            special_tokens: role -> token overrides; the special tokens take the first ids
                in the order pad, unk, cls, sep, mask.

        Raises:
            ValueError: an empty corpus or a vocabulary too small for the special tokens.
        """
        if isinstance(texts, str):
            raise TypeError("texts must be an iterable of strings, not one string")
        texts = list(texts)
        if not texts:
            raise ValueError("cannot train a tokenizer on an empty corpus")
        special = {**DEFAULT_SPECIAL_TOKENS, **(special_tokens or {})}
        if vocab_size <= len(special):
            raise ValueError(f"vocab_size must exceed the {len(special)} special tokens, "
                             f"got {vocab_size}")
        normalizer = _bert_normalizer(lowercase)
        pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        words = Counter(word for text in texts for word, _ in
                        pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
        vocab = learn_wordpiece_vocab(words, vocab_size, special_tokens=list(special.values()),
                                      min_frequency=min_frequency, prefix="##")
        model = WordPiece({token: i for i, token in enumerate(vocab)}, unk_token=special["unk"],
                          max_input_chars_per_word=100, continuing_subword_prefix="##")
        return cls(_bert_pipeline(Backend(model), lowercase, special), lowercase=lowercase,
                   special_tokens=special)

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        """Load a ``tokenizer.json`` (or a directory holding one, as written by :meth:`save`).

        The settings file beside it, when present, gives the special tokens and
        ``lowercase``.

        Raises:
            FileNotFoundError: no tokenizer file.
        """
        path = Path(path)
        if path.is_dir():
            path = path / TOKENIZER_NAME
        if not path.is_file():
            raise FileNotFoundError(f"no tokenizer file at {path}")
        settings: dict[str, Any] = {}
        if (path.parent / SETTINGS_NAME).is_file():
            settings = json.loads((path.parent / SETTINGS_NAME).read_text(encoding="utf-8"))
        tok = cls(Backend.from_file(str(path)), lowercase=settings.get("lowercase"),
                  special_tokens=settings.get("special_tokens"),
                  number_pattern=settings.get("number_pattern"))
        tok.input_prefix = settings.get("input_prefix") or ""
        tok.pre_split = settings.get("pre_split")
        return tok

    def save(self, directory: str | Path) -> Path:
        """Write ``tokenizer.json`` and ``headwise_tokenizer.json`` into ``directory``.

        Returns:
            The directory (created if needed).
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backend.save(str(directory / TOKENIZER_NAME))
        settings = {"format": "headwise-tokenizer", "version": 1, "lowercase": self.lowercase,
                    "special_tokens": self.special_tokens,
                    "number_pattern": self.number_pattern, "input_prefix": self.input_prefix,
                    "pre_split": self.pre_split}
        (directory / SETTINGS_NAME).write_text(json.dumps(settings, indent=2) + "\n",
                                               encoding="utf-8")
        return directory

    def save_pretrained(self, directory: str | Path) -> Path:
        """Hugging Face's name for :meth:`save` (``tokenizer.save_pretrained(dir)``)."""
        return self.save(directory)

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> Tokenizer:
        """Hugging Face's name for :meth:`from_file` on a directory written by :meth:`save`
        (``Tokenizer.from_pretrained(dir)``; a checkpoint's own tokenizer, ``vocab.txt``
        included, is read by :func:`headwise.from_pretrained`)."""
        return cls.from_file(directory)

    def with_prefix(self, prefix: str) -> Tokenizer:
        """A copy that reads every text after ``prefix`` (e5's ``"query: "``).

        The prefix's tokens are put into the post-processor's template, right after the
        ``cls`` token, as tokens of their own: every path that adds special tokens
        (:meth:`__call__`, :meth:`lengths`, ONNX serving, the slot tagger's offsets) reads
        them, truncation keeps them, and they carry the ``(0, 0)`` offsets of special
        tokens, so the character offsets of the text itself are unchanged. The prefix is
        tokenized without its trailing whitespace: on a tokenizer that splits words at
        spaces (WordPiece, SentencePiece's metaspace) ``prefix + text`` gives the same ids.
        The copy is saved with its prefix.

        Args:
            prefix: the text; ``""`` returns a copy without one.

        Raises:
            ValueError: a byte-level BPE tokenizer (``RobertaProcessing``: there the
                text's first word would change with a prefix), a post-processor that is not a
                plain ``[CLS] $A [SEP]`` template, or a tokenizer that already has a prefix.
        """
        if self.input_prefix:
            raise ValueError(f"this tokenizer already reads the prefix {self.input_prefix!r}")
        backend = Backend.from_str(self.backend.to_str())
        copy = self.with_backend(backend)
        if not prefix:
            return copy
        kind = json.loads(self.backend.to_str()).get("post_processor") or {}
        kind = kind.get("type") if isinstance(kind, dict) else None
        if kind not in (None, "TemplateProcessing", "BertProcessing"):
            raise ValueError(f"an input prefix needs a [CLS] $A [SEP] template; this "
                             f"tokenizer's post-processor is {kind} (byte-level BPE reads a "
                             f"prefixed text's first word differently)")
        ids = backend.encode(prefix.rstrip(), add_special_tokens=False)
        if not ids.ids:
            raise ValueError(f"the prefix {prefix!r} has no tokens")
        marker = "<headwise-prefix>"
        special = [{"id": marker, "ids": list(ids.ids), "tokens": list(ids.tokens)}]
        single = [marker, "$A"]
        pair = [marker, "$A"]
        cls, sep = self.cls_token_id, self.sep_token_id
        if kind is not None and cls is not None and sep is not None:
            cls_tok, sep_tok = self.special_tokens["cls"], self.special_tokens["sep"]
            single = [cls_tok, marker, "$A", sep_tok]
            pair = [cls_tok, marker, "$A:0", f"{sep_tok}:0", "$B:1", f"{sep_tok}:1"]
            special += [{"id": cls_tok, "ids": [cls], "tokens": [cls_tok]},
                        {"id": sep_tok, "ids": [sep], "tokens": [sep_tok]}]
        backend.post_processor = processors.TemplateProcessing(single=single, pair=pair,
                                                               special_tokens=special)
        copy = self.with_backend(backend)
        copy.input_prefix = prefix
        return copy

    def with_split(self, name: str) -> Tokenizer:
        """A copy that cuts the text into the pieces :data:`PRE_SPLITS` names before its
        vocabulary reads it.

        A subword vocabulary (SentencePiece's above all) joins characters across what a
        slot tagger must tell apart: ``元的`` or ``还45`` is one piece, so a span that ends
        at ``元`` or starts at ``4`` has no token edge there and cannot be tagged.
        ``"cjk_digits"`` makes every CJK character and every run of digits a piece of its
        own; words in other scripts are read as before. The split is a pre-tokenizer step
        inside ``tokenizer.json``, so a saved model, ONNX serving and the slot tagger's
        offsets all read it. Whether it helps a task is measured (BENCHMARKS.md,
        ``compound:cpu``: the ``e5-split`` configuration).

        Args:
            name: a key of :data:`PRE_SPLITS`.

        Raises:
            ValueError: an unknown name, or a tokenizer that already splits.
        """
        if name not in PRE_SPLITS:
            raise ValueError(f"unknown pre-split {name!r}; known: {sorted(PRE_SPLITS)}")
        if self.pre_split is not None:
            raise ValueError(f"this tokenizer already splits at {self.pre_split!r}")
        backend = Backend.from_str(self.backend.to_str())
        split = pre_tokenizers.Split(Regex(PRE_SPLITS[name]), behavior="isolated")
        backend.pre_tokenizer = split if backend.pre_tokenizer is None \
            else pre_tokenizers.Sequence([backend.pre_tokenizer, split])
        copy = self.with_backend(backend)
        copy.pre_split = name
        return copy

    def with_backend(self, backend: Backend) -> Tokenizer:
        """A tokenizer with this one's settings (lowercasing, special tokens, number
        pattern, input prefix and pre-split) on another ``tokenizers`` backend (a grown or
        edited copy of this one's)."""
        copy = Tokenizer(backend, lowercase=self.lowercase, special_tokens=self.special_tokens,
                         number_pattern=self.number_pattern)
        copy.input_prefix = self.input_prefix
        copy.pre_split = self.pre_split
        return copy

    # -- use ---------------------------------------------------------------------------
    def __call__(self, texts: Sequence[str] | str, *, max_length: int | None = 512,
                 padding: bool = True, truncation: bool = True) -> dict[str, Tensor]:
        """Tokenize a batch.

        Args:
            texts: a list of texts (or one text).
            max_length: the longest sequence, special tokens included; None for no limit.
            padding: pad every row with the padding id to the longest in the batch.
            truncation: cut longer texts to ``max_length`` (keeping ``[SEP]``).

        Returns:
            ``{"input_ids": (batch, seq) long, "attention_mask": (batch, seq) long 0/1}``.

        Raises:
            ValueError: an empty list, a ``max_length`` too small for the special tokens,
                or unequal lengths with ``padding=False``.
            TypeError: an item that is not a string.
        """
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        if not texts:
            raise ValueError("cannot tokenize an empty list of texts")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}] is {type(t).__name__}, not str")
        encodings = self.backend.encode_batch(texts, add_special_tokens=False)
        if truncation and max_length is not None:
            limit = max_length - self._num_special
            if limit < 1:
                raise ValueError(f"max_length={max_length} leaves no room beside the "
                                 f"{self._num_special} special tokens")
            for e in encodings:
                if len(e.ids) > limit:
                    e.truncate(limit)
        ids = []
        for text, e in zip(texts, encodings, strict=True):
            e = self.backend.post_process(e)
            ids.append(self._numbers(text, e.ids, e.offsets))
        longest = max(len(row) for row in ids)
        if not padding and any(len(row) != longest for row in ids):
            raise ValueError("the texts have different lengths; pass padding=True")
        input_ids = torch.full((len(ids), longest), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(ids), longest), dtype=torch.long)
        for i, row in enumerate(ids):
            input_ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
            attention_mask[i, :len(row)] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def lengths(self, texts: Sequence[str]) -> list[int]:
        """Token count of each text untruncated, special tokens included: the row lengths
        of ``self(texts, max_length=None)``, without building its tensors.

        Raises:
            TypeError: an item that is not a string.
        """
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}] is {type(t).__name__}, not str")
        return [len(e.ids) + self._num_special
                for e in self.backend.encode_batch(texts, add_special_tokens=False)]

    def tokenize(self, text: str) -> list[str]:
        """The tokens of one text, without special tokens."""
        e = self.backend.encode(text, add_special_tokens=False)
        if self._number_re is None:
            return e.tokens
        num = self.special_tokens["num"]
        ids = self._numbers(text, e.ids, e.offsets)
        return [num if new != old else token
                for token, old, new in zip(e.tokens, e.ids, ids, strict=True)]

    @property
    def prefix_ids(self) -> tuple[int, ...]:
        """The token ids of :attr:`input_prefix` that every encoding carries right after
        the ``cls`` token (:meth:`with_prefix`); ``()`` without a prefix. A reader that cuts
        an encoding into windows keeps them in each window, as it keeps ``cls``."""
        if not self.input_prefix:
            return ()
        return tuple(self.backend.encode(self.input_prefix.rstrip(),
                                         add_special_tokens=False).ids)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """The character span ``(start, end)`` in ``text`` of each token of :meth:`tokenize`.

        ``text[start:end]`` is the text a token came from, before normalization
        (lowercasing, NFKC): ``##`` pieces have spans of their own, while the tokens that
        normalization made out of one character (NFKC turns ``½`` into ``1⁄2``) share its
        span.
        """
        return [tuple(span) for span in
                self.backend.encode(text, add_special_tokens=False).offsets]

    def _numbers(self, text: str, ids: list[int], offsets: list[tuple[int, int]]) -> list[int]:
        """``ids`` with the unknown pieces that ``number_pattern`` matches made ``num``."""
        unk = self.unk_token_id
        if self._number_re is None or unk not in ids:
            return list(ids)
        num = self.number_token_id
        normalize = self.backend.normalizer.normalize_str if self.backend.normalizer \
            else (lambda s: s)
        out = list(ids)
        for i, (token_id, (start, end)) in enumerate(zip(ids, offsets, strict=True)):
            if token_id != unk or end <= start:
                continue
            piece = normalize(text[start:end])
            match = self._number_re.match(normalize(text[start:end + NUMBER_LOOKAHEAD]))
            if match is not None and match.end() == len(piece):
                out[i] = num
        return out

    def decode(self, ids: Sequence[int] | Tensor, *, skip_special_tokens: bool = True) -> str:
        """Text from one sequence of ids.

        Tokens are joined with spaces, except for ``##`` continuations, before punctuation
        (BERT's clean-up), next to a CJK character, inside a number (``3.50``, ``3,500``),
        after a currency sign before a digit (``£3``) and before ``%`` after a digit.

        Raises:
            ValueError: a tensor that is not 1-D.
        """
        if isinstance(ids, Tensor):
            if ids.ndim != 1:
                raise ValueError(f"decode takes one sequence (1-D), got shape "
                                 f"{tuple(ids.shape)}")
            ids = ids.tolist()
        text = self.backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)
        return _DECODE_SPACES.sub("", text)

    def token_to_id(self, token: str) -> int | None:
        """The id of a token, or None when it is not in the vocabulary."""
        return self.backend.token_to_id(token)

    @property
    def vocab_size(self) -> int:
        """Number of ids (added tokens included)."""
        return self.backend.get_vocab_size(with_added_tokens=True)

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def pad_token_id(self) -> int:
        """Id of the padding token."""
        return self.token_to_id(self.special_tokens["pad"])

    @property
    def cls_token_id(self) -> int | None:
        """Id of ``[CLS]`` (None when absent)."""
        return self.token_to_id(self.special_tokens["cls"])

    @property
    def sep_token_id(self) -> int | None:
        """Id of ``[SEP]`` (None when absent)."""
        return self.token_to_id(self.special_tokens["sep"])

    @property
    def unk_token_id(self) -> int | None:
        """Id of ``[UNK]`` (None when absent)."""
        return self.token_to_id(self.special_tokens["unk"])

    @property
    def mask_token_id(self) -> int | None:
        """Id of ``[MASK]`` (None when absent)."""
        return self.token_to_id(self.special_tokens["mask"])

    @property
    def number_token_id(self) -> int | None:
        """Id of the ``num`` token (``[NUM]``; None when absent)."""
        num = self.special_tokens.get("num")
        return self.token_to_id(num) if num is not None else None

    def __repr__(self) -> str:
        prefix = f", input_prefix={self.input_prefix!r}" if self.input_prefix else ""
        return f"Tokenizer(vocab_size={self.vocab_size}, lowercase={self.lowercase}{prefix})"


def _bert_normalizer(lowercase: bool) -> normalizers.Normalizer:
    # strip_accents=None follows lowercase, as in BERT
    return normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                      strip_accents=None, lowercase=lowercase)


def _bert_pipeline(backend: Backend, lowercase: bool, special: dict[str, str]) -> Backend:
    """Normalizer, pre-tokenizer, ``[CLS] $A [SEP]`` template and decoder of BERT."""
    backend.normalizer = _bert_normalizer(lowercase)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return with_special_tokens(backend, special)


def with_special_tokens(backend: Backend, special: dict[str, str]) -> Backend:
    """Give a backend BERT's ``[CLS] $A [SEP]`` template, decoder and whole special tokens.

    Args:
        backend: a ``tokenizers.Tokenizer`` whose vocabulary holds the special tokens.
        special: role -> token (all of them are kept whole when written in a text).

    Returns:
        The same backend.

    Raises:
        ValueError: the vocabulary lacks ``cls``, ``sep`` or ``unk``.
    """
    missing = [t for t in (special["cls"], special["sep"], special["unk"])
               if backend.token_to_id(t) is None]
    if missing:
        raise ValueError(f"the vocabulary lacks the special tokens {missing}")
    cls, sep = special["cls"], special["sep"]
    backend.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, backend.token_to_id(cls)), (sep, backend.token_to_id(sep))])
    backend.decoder = decoders.WordPiece(prefix="##")
    # special tokens written in a text stay whole (as in BertTokenizerFast)
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t in special.values() if backend.token_to_id(t) is not None])
    return backend
