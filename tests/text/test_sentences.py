"""Sentence spans of chat messages: Chinese and Western sentence ends, closing quotes,
decimals and abbreviations kept whole, commas not ending a sentence, and spans that
always cover the text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headwise.text import sentence_spans


def split(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


@pytest.mark.parametrize("text, sentences", [
    ("你好。我的卡丢了，怎么办？谢谢", ["你好。", "我的卡丢了，怎么办？", "谢谢"]),
    ("在吗！！我要挂失…… 快点", ["在吗！！", "我要挂失…… ", "快点"]),
    ("他说：“卡丢了。”然后呢？", ["他说：“卡丢了。”", "然后呢？"]),
    ("I paid 3.5 pounds. Then the card failed! Why?", ["I paid 3.5 pounds. ",
                                                      "Then the card failed! ", "Why?"]),
    ("first line\nsecond line\n", ["first line\n", "second line\n"]),
    ("转账失败；钱扣了", ["转账失败；", "钱扣了"]),
    ("no end at all", ["no end at all"]),
    ("。。。", ["。。。"]),
    ("", []),
])
def test_sentences_end_where_a_reader_would_end_them(text, sentences):
    assert split(text) == sentences


@given(st.text(alphabet="ab 。？!.\n，”3", max_size=40))
def test_spans_cover_the_text_in_order_without_empty_ones(text):
    spans = sentence_spans(text)
    assert "".join(text[a:b] for a, b in spans) == text
    assert all(a < b for a, b in spans)
    assert all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))
