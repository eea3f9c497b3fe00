"""Sentences of a chat message, as character spans: where a long message may be cut into
windows without cutting a request in two
(:class:`~headwise.intent.inference.bucketing.BucketedPredictor`, ``chunk_stride=
"sentence"``).

A sentence ends after a run of sentence-final punctuation, Chinese or Western (。！？!?；;
…, a line break) with the closing quotes and brackets that follow it, or after a full stop
followed by white space (so ``3.5`` and ``e.g`` stay whole). Commas do not end a sentence:
"我的卡丢了，怎么办" is one request.
"""

from __future__ import annotations

import re

__all__ = ["SENTENCE_END", "sentence_spans"]

#: what ends a sentence: a run of sentence-final punctuation (or a full stop before white
#: space), the closing quotes and brackets after it, and the white space after that
SENTENCE_END = re.compile(r"(?:[。！？!?；;…\n\r]+|\.(?=\s))[”’\"'」』）)\]】]*\s*")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` character spans of the sentences of ``text``, in order: they
    cover the whole text without gaps (a sentence keeps its final punctuation and the white
    space after it), and none is empty.

    >>> t = "你好。我的卡丢了，怎么办？谢谢"
    >>> [t[s:e] for s, e in sentence_spans(t)]
    ['你好。', '我的卡丢了，怎么办？', '谢谢']
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for m in SENTENCE_END.finditer(text):
        if m.end() > start:
            spans.append((start, m.end()))
            start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans
