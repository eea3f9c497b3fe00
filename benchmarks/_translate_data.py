"""Data side of ``translate.py``: pairs, tokenizers, training examples, batches, decoding.

Source (English) and target (Chinese) get separate WordPiece vocabularies, trained on the
training split only: the two languages share almost no tokens, so one shared table would
make the decoder's output softmax (the most expensive single layer of a small model on
the CPU) score thousands of English pieces it must never produce. The target tokenizer
keeps case (``lowercase=False``: "Tom" in a reference must not be scored against "tom");
its BERT pipeline splits every CJK character, so the Chinese side is character level.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from headwise.models.seq2seq import IGNORE_INDEX, EncoderDecoder
from headwise.text import SentencePair, Tokenizer, pad_collate, read_pairs, split_pairs

#: CJK ideographs, CJK and full-width punctuation: no space belongs next to them
_CJK = (r"\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
        r"\uf900-\ufaff\uff00-\uffef")
_SPACE_BY_CJK = re.compile(rf"(?<=[{_CJK}])\s+|\s+(?=[{_CJK}])")


class BudgetSpent(RuntimeError):
    """Raised by :class:`Seq2SeqCollate` once the training deadline has passed."""


def load_splits(path: Path, *, subsample: int | None = None, salt: str = ""
                ) -> tuple[dict[str, list[SentencePair]], int]:
    """Read the pairs file and split it 90/5/5 by the source side (``split_pairs``).

    Args:
        path: the TSV file.
        subsample: keep only about this many pairs, evenly spaced through the file (the
            ``--quick`` mode); None keeps all.
        salt: the split's salt.

    Returns:
        ({"train", "valid", "test"} -> pairs, pairs read from the file).
    """
    pairs = read_pairs(path)
    total = len(pairs)
    if subsample is not None and subsample < total:
        stride = total / subsample
        pairs = [pairs[int(i * stride)] for i in range(subsample)]
    return split_pairs(pairs, salt=salt), total


def train_tokenizers(train: Sequence[SentencePair], src_vocab: int, tgt_vocab: int
                     ) -> tuple[Tokenizer, Tokenizer]:
    """WordPiece vocabularies for the source (lowercased) and the target (cased) sides,
    learnt from ``train`` only (module docstring)."""
    src = Tokenizer.train_wordpiece([p.source for p in train], src_vocab, lowercase=True)
    tgt = Tokenizer.train_wordpiece([p.target for p in train], tgt_vocab, lowercase=False)
    return src, tgt


def encode_pairs(pairs: Sequence[SentencePair], src_tok: Tokenizer, tgt_tok: Tokenizer,
                 max_len: int) -> list[dict[str, list[int]]]:
    """Training examples ``{"input_ids": [CLS] source [SEP], "labels": target [SEP]}``
    (the decoder input is ``[CLS]`` + labels but the last: ``EncoderDecoder.shift_right``
    with ``bos_token_id`` = ``[CLS]``, ``eos_token_id`` = ``[SEP]``)."""
    src = src_tok([p.source for p in pairs], max_length=max_len, padding=True)
    tgt = tgt_tok([p.target for p in pairs], max_length=max_len + 1, padding=True)
    out = []
    for i in range(len(pairs)):
        s = src["input_ids"][i][src["attention_mask"][i].bool()].tolist()
        t = tgt["input_ids"][i][tgt["attention_mask"][i].bool()].tolist()
        out.append({"input_ids": s, "labels": t[1:]})
    return out


class Seq2SeqCollate:
    """Pads examples (``pad_collate``: labels padded with -100) and adds the
    ``label_smoothing`` the model's loss takes; raises :class:`BudgetSpent` once
    ``time.monotonic()`` passes ``deadline`` (the time budget's hard stop: the trainer has
    saved the best weights at every improvement, so nothing is lost).

    Args:
        pad_id: the source padding id.
        label_smoothing: passed to ``EncoderDecoder.forward``.
        deadline: a ``time.monotonic()`` value, or None for no deadline.
    """

    def __init__(self, pad_id: int, label_smoothing: float,
                 deadline: float | None = None) -> None:
        self.pad_id, self.label_smoothing, self.deadline = pad_id, label_smoothing, deadline

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise BudgetSpent("the training time budget is spent")
        batch: dict[str, Any] = pad_collate(examples, self.pad_id, label_pad_id=IGNORE_INDEX)
        batch["label_smoothing"] = self.label_smoothing
        return batch


def token_nll(model: nn.Module, loader: Any) -> dict[str, float]:
    """The Trainer's ``evaluate_fn``: the mean cross-entropy per target token (without
    label smoothing, whatever the batches ask for) and its perplexity."""
    total, tokens = 0.0, 0
    for batch in loader:
        labels: Tensor = batch["labels"]
        n = int((labels != IGNORE_INDEX).sum())
        out = model(**{**batch, "label_smoothing": 0.0})
        total += float(out["loss"]) * n
        tokens += n
    nll = total / max(tokens, 1)
    return {"loss": nll, "ppl": float(torch.tensor(nll).exp())}


def join_cjk(text: str) -> str:
    """Detokenize the target side: drop the spaces the WordPiece decoder puts beside CJK
    characters and full-width punctuation ("我 是 学 生 。" -> "我是学生。"); spaces between
    two Latin words stay."""
    return _SPACE_BY_CJK.sub("", text).strip()


def translate(model: EncoderDecoder, src_tok: Tokenizer, tgt_tok: Tokenizer,
              sentences: Sequence[str], *, num_beams: int, length_penalty: float,
              batch_size: int, max_len: int,
              progress: Callable[[int], None] | None = None) -> tuple[list[str], float]:
    """Translate ``sentences`` in batches of similar length.

    Each batch decodes up to ``min(max_len, 1.5 x its longest source + 10)`` tokens.

    Returns:
        (translations in input order, detokenized by :func:`join_cjk`; seconds spent in
        tokenizing, ``generate`` and decoding).
    """
    order = sorted(range(len(sentences)), key=lambda i: len(src_tok.tokenize(sentences[i])))
    out: list[str] = [""] * len(sentences)
    start = time.perf_counter()
    for b in range(0, len(order), batch_size):
        idx = order[b: b + batch_size]
        enc = src_tok([sentences[i] for i in idx], max_length=max_len)
        steps = min(max_len, int(1.5 * enc["input_ids"].shape[1]) + 10)
        ids = model.generate(enc["input_ids"], enc["attention_mask"], max_new_tokens=steps,
                             num_beams=num_beams, length_penalty=length_penalty)
        for i, row in zip(idx, ids, strict=True):
            out[i] = join_cjk(tgt_tok.decode(row))
        if progress is not None:
            progress(len(idx))
    return out, time.perf_counter() - start
