"""Long messages: a request buried in customer-service chatter, to measure the long-text
policies (:data:`~headwise.intent.inference.bucketing.LONG_TEXT_POLICIES`).

A real chat often holds one request inside many lines of greeting, waiting, apologising and
small talk. :func:`long_message_slice` builds such messages from labelled questions (the
demo's held-out phrasing: its validation or test split): each question is put at the
``start``, in the ``middle`` or at the ``end`` of chatter that makes the whole message a
chosen multiple (2 to 20) of the model's maximum length in tokens, counted by the model's
own tokenizer. :func:`chatter` writes the chatter: sentences composed from parts (who, when,
where, what happened, how it felt; thanks, apologies, asking to wait), in Chinese and in
English, that ask for nothing and hold none of the words the intents hang on
(:data:`CUE_WORDS`, checked when a sentence is made). The benchmark
``benchmarks/long_text.py`` scores every policy on these slices (BENCHMARKS.md, "Long
messages").
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["CUE_WORDS", "LENGTH_BUCKETS", "POSITIONS", "LongMessage", "chatter",
           "chatter_sentence", "long_message_slice"]

#: where the request sits in its chatter
POSITIONS = ("start", "middle", "end")
#: the message's length in multiples of the model's maximum length: (low, high) buckets,
#: the target drawn uniformly within one
LENGTH_BUCKETS: tuple[tuple[int, int], ...] = ((2, 5), (5, 10), (10, 20))

#: words that carry a banking intent (Chinese and English): no chatter sentence holds one
CUE_WORDS: tuple[str, ...] = (
    "卡", "钱", "账", "银行", "还款", "还钱", "转账", "汇款", "冻", "解冻", "挂失", "注销",
    "费", "贷", "保险", "密码", "额度", "限额", "利率", "分期", "退款", "扣款", "信用",
    "网点", "支付", "付款", "存", "取款", "理财", "基金", "股票", "利息", "逾期", "账单",
    "余额", "开户", "销户", "工资", "消费", "充值", "红包", "收款",
    "card", "account", "money", "bank", "transfer", "refund", "loan", "fee", "pay",
    "freeze", "frozen", "password", "pin", "limit", "balance", "credit", "debit",
    "statement", "bill", "insurance", "mortgage", "rate", "cash", "deposit", "withdraw",
    "charge", "salary", "interest", "overdue", "branch", "atm", "app", "wallet", "fund",
)

# -- the parts of a Chinese sentence ---------------------------------------------------------
_ZH_WHEN = ("今天早上", "今天下午", "昨天晚上", "前两天", "上周末", "刚才", "这几天", "最近",
            "中午的时候", "下班路上", "周一一大早", "前天半夜")
_ZH_WHO = ("我", "我和同事", "我们一家", "我跟我老婆", "我和我妈", "我和几个朋友", "我儿子",
           "我邻居")
_ZH_DID = ("去公园散了会儿步", "在家里收拾了一整天", "开了一个特别长的会", "去医院看了个感冒",
           "带孩子去上了游泳课", "在小区楼下遛狗", "去菜市场买了点菜", "坐了两个小时的地铁",
           "在家里做了一顿饭", "去看了一场电影", "在公司加班到很晚", "去爬了一趟山",
           "参加了一个朋友的婚礼", "在楼下等了半天快递", "去图书馆看了会儿书",
           "在家陪老人聊天", "去修了一下自行车", "跑了好几个地方办事")
_ZH_FELT = ("累得不行", "心情还挺好的", "有点头疼", "挺开心的", "忙得团团转", "一直没顾上休息",
            "感觉时间过得好快", "差点迟到了", "人特别多", "天气也不太好")
_ZH_WEATHER = ("外面一直在下雨", "风特别大", "热得要命", "起了大雾", "天气忽冷忽热的",
               "太阳晒得人睁不开眼", "打了好久的雷")
_ZH_SAY = ("你好", "在吗", "客服你好", "亲", "打扰一下", "不好意思", "嗯嗯", "好的好的",
           "稍等我一下", "我打字比较慢", "刚才信号不太好", "我换个安静的地方说",
           "让你久等了", "辛苦你了", "谢谢你耐心听我说", "我先说一下情况", "我想想怎么说",
           "孩子在旁边闹", "我一边走路一边打字", "你们服务态度挺好的", "麻烦你了")
_ZH_END = ("。", "。", "，", "！", "…")

# -- the parts of an English sentence --------------------------------------------------------
_EN_WHEN = ("this morning", "yesterday evening", "last weekend", "earlier today",
            "a couple of days ago", "on my way home", "over lunch", "late last night")
_EN_WHO = ("I", "my wife and I", "my colleague and I", "my son", "a friend of mine and I",
           "my neighbour")
_EN_DID = ("went for a long walk in the park", "spent the whole day tidying the house",
           "sat through a very long meeting", "took the kids to their swimming lesson",
           "waited ages for a delivery", "cooked dinner for the family",
           "watched a film at the cinema", "helped a friend move house",
           "went to the doctor about a cold", "got stuck in traffic for an hour",
           "visited my parents", "went hiking in the hills")
_EN_FELT = ("it was exhausting", "it was nice actually", "I am a bit tired now",
            "time just flew by", "the weather was awful", "it was really busy")
_EN_SAY = ("hello", "hi there", "sorry to bother you", "thanks for waiting",
           "please bear with me", "one moment please", "I type quite slowly",
           "my signal was bad just now", "sorry, where was I", "thank you for your patience",
           "let me explain the situation first", "the kids are making noise here",
           "you have been very helpful so far", "ok", "right", "sure, no problem")


def _has_cue(sentence: str) -> bool:
    low = sentence.lower()
    return any(w in low for w in CUE_WORDS)


def chatter_sentence(rng: random.Random, lang: str = "zh") -> str:
    """One sentence of neutral customer-service chatter, in Chinese (``"zh"``) or English
    (``"en"``), composed at random from its parts (:data:`CUE_WORDS` checked).

    Raises:
        ValueError: an unknown language.
    """
    if lang == "zh":
        kind = rng.randrange(4)
        if kind == 0:
            s = f"{rng.choice(_ZH_WHEN)}{rng.choice(_ZH_WHO)}{rng.choice(_ZH_DID)}，" \
                f"{rng.choice(_ZH_FELT)}"
        elif kind == 1:
            s = f"{rng.choice(_ZH_WHEN)}{rng.choice(_ZH_WEATHER)}"
        elif kind == 2:
            s = rng.choice(_ZH_SAY)
        else:
            s = f"{rng.choice(_ZH_SAY)}，{rng.choice(_ZH_WHO)}{rng.choice(_ZH_DID)}"
        s += rng.choice(_ZH_END)
    elif lang == "en":
        kind = rng.randrange(3)
        if kind == 0:
            s = f"{rng.choice(_EN_WHEN).capitalize()} {rng.choice(_EN_WHO)} " \
                f"{rng.choice(_EN_DID)}, {rng.choice(_EN_FELT)}."
        elif kind == 1:
            s = f"{rng.choice(_EN_SAY).capitalize()}."
        else:
            s = f"{rng.choice(_EN_SAY).capitalize()}, {rng.choice(_EN_WHO)} " \
                f"{rng.choice(_EN_DID)}."
        s = f" {s} "
    else:
        raise ValueError(f"lang must be 'zh' or 'en', got {lang!r}")
    if _has_cue(s):  # a part list gained a cue word: a bug in this module
        raise AssertionError(f"chatter holds an intent cue: {s!r}")
    return s


def chatter(rng: random.Random, n: int, *, english: float = 0.25) -> list[str]:
    """``n`` chatter sentences, each English with probability ``english``, else Chinese."""
    return [chatter_sentence(rng, "en" if rng.random() < english else "zh")
            for _ in range(n)]


@dataclass(frozen=True)
class LongMessage:
    """One long message of the slice.

    Attributes:
        text: the message: chatter with the request inside.
        label: the request's label.
        request: the request as it was (a question of the source split).
        position: where the request sits (:data:`POSITIONS`).
        bucket: the length bucket, ``"2-5x"`` ... (:data:`LENGTH_BUCKETS`).
        tokens: the message's tokens as the model's tokenizer counts them (special tokens
            included).
    """

    text: str
    label: str
    request: str
    position: str
    bucket: str
    tokens: int


def long_message_slice(questions: Sequence[tuple[str, str]], *,
                       lengths: Callable[[list[str]], list[int]], max_length: int,
                       seed: int = 0, positions: Sequence[str] = POSITIONS,
                       buckets: Sequence[tuple[int, int]] = LENGTH_BUCKETS,
                       english: float = 0.25) -> list[LongMessage]:
    """Long messages from labelled questions: one per question, its request at one of
    ``positions`` in chatter that makes the message a multiple of ``max_length`` tokens
    drawn within one of ``buckets``; questions go round the (position, bucket) cells in
    a shuffled order, so every cell gets an equal share.

    Args:
        questions: ``(text, label)`` pairs (the demo's validation or test questions; pass
            in-scope ones to measure accuracy).
        lengths: the model's token counter (``tokenizer.lengths``: special tokens included).
        max_length: the model's maximum length in tokens.
        seed: the chatter's and the cells' seed.
        positions: where requests are put.
        buckets: ``(low, high)`` multiples of ``max_length``.
        english: share of English chatter sentences.

    Returns:
        One :class:`LongMessage` per question, in the questions' order.

    Raises:
        ValueError: an unknown position, or a bucket below 1x or empty.
    """
    if not set(positions) <= set(POSITIONS):
        raise ValueError(f"positions must be among {POSITIONS}, got {tuple(positions)}")
    if any(not 1 <= lo < hi for lo, hi in buckets):
        raise ValueError(f"buckets must be (low, high) with 1 <= low < high, got {buckets}")
    rng = random.Random(seed)
    cells = [(p, b) for p in positions for b in buckets]
    order = list(range(len(questions)))
    rng.shuffle(order)
    cell_of = {q: cells[i % len(cells)] for i, q in enumerate(order)}
    # one pool of sentences, measured once; each message draws from it
    pool = chatter(rng, 4000, english=english)
    specials = lengths([""])[0]
    sizes = [n - specials for n in lengths(pool)]
    request_sizes = [n - specials for n in lengths([t for t, _ in questions])]
    out = []
    for q, ((text, label), size) in enumerate(zip(questions, request_sizes, strict=True)):
        position, (lo, hi) = cell_of[q]
        target = int(rng.uniform(lo, hi) * max_length)
        picked, total = [], size + specials
        while total < target:
            i = rng.randrange(len(pool))
            picked.append(i)
            total += max(1, sizes[i])
        parts = [pool[i] for i in picked]
        if position == "start":
            split = 0
        elif position == "end":
            split = len(parts)
        else:  # the request after half the chatter's tokens
            half, acc, split = (total - size - specials) / 2, 0, 0
            while split < len(parts) and acc + sizes[picked[split]] <= half:
                acc += sizes[picked[split]]
                split += 1
        message = "".join(parts[:split]).strip() + text + "".join(parts[split:]).rstrip()
        out.append(LongMessage(message.strip(), label, text, position, f"{lo}-{hi}x", 0))
    counted = lengths([m.text for m in out]) if out else []
    return [LongMessage(m.text, m.label, m.request, m.position, m.bucket, int(n))
            for m, n in zip(out, counted, strict=True)]
