"""Surface phenomena of the demo corpus: how a rendered template is made to read like a real
customer message, and the names of the slices each example records.

A template (:mod:`headwise.demo.templates`) fixes the intent and the phrasing; the
layers here vary the surface without changing the intent, each with its own probability,
and each example records the layers that touched it in ``DemoExample.slices``:

* ``synonym``: a word swapped for a synonym or a colloquial form (转账 -> 汇款, 怎么 -> 咋);
* ``code_mixed``: a word in English (我的card被冻结了, 帮我check一下);
* ``typo``: a pinyin-input typo, a same-sound or same-shape character (还款 -> 换款,
  账户 -> 帐户, 冻结 -> 冻洁), from the confusion table :data:`TYPOS`;
* ``long_context``: a narrative clause before the request (我刚下班回到家，...), so the
  intent sits in the second clause;
* ``filler``: openings, fillers, particles and closings (亲，那个…，麻烦问一下，...哈，谢谢).

The other slices come from the template itself: ``word_order`` (the topic fronted),
``long_context`` (a multi-clause story), ``negation_scope`` (不是X，是Y / 不用X了 /
X就不用了，帮我Y / a negation that flips a minimal pair), ``oos_near_miss`` (an out-of-scope
request that sounds like banking); ``numbers`` marks an example with a slot value (amount,
rate, ordinal, date, card), and ``plain`` one that has none of these.

Held-out surface forms: for each inventory a third of its entries (chosen by the seed) is
kept out of the training split, so the valid and test splits also meet typos, English words,
synonyms, fillers and context clauses never seen in training. No inventory entry holds a
digit; the few that hold a negation character negate nothing the label hangs on (a context
clause's 没人接, 不太懂; 找不着了, 不好意思), and the spans are found on the final text, so
the number and negation annotations stay exact.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Sequence
from typing import Any

from headwise.demo.render import TEMPLATE_TAGS, Utterance
from headwise.text.slices import PHENOMENA, PLAIN
from headwise.text.typos import TYPOS

#: probability of each surface layer, applied in this order (designed once, never tuned)
RATES: dict[str, float] = {"long_context": 0.15, "synonym": 0.3, "code_mixed": 0.15,
                           "typo": 0.2, "filler": 0.35}
#: no context clause is added to a message already this long (characters)
LONG_ENOUGH = 36

# -- inventories -----------------------------------------------------------------------------
#: word -> synonyms or colloquial forms that keep the intent
SYNONYMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("怎么办", ("咋办", "怎么弄", "如何处理")),
    ("怎么", ("咋", "如何", "怎样")),
    ("帮我", ("给我", "替我", "麻烦帮我")),
    ("能不能", ("可不可以", "能否")),
    ("取消", ("撤销", "撤掉", "退掉")),
    ("提高", ("调高", "提升", "调大")),
    ("查一下", ("查查", "看一下", "查询一下")),
    ("丢了", ("弄丢了", "找不着了", "丢掉了")),
    ("挂失", ("报失", "办挂失")),
    ("转账", ("转钱", "汇款")),
    ("提前还款", ("提前还贷", "提早还款", "提前还钱")),
    ("违约金", ("罚金", "违约费")),
    ("手续费", ("服务费", "手续费用")),
    ("冻结", ("冻住", "锁住")),
    ("解冻", ("解锁", "解封")),
    ("逾期", ("晚还", "超期")),
    ("延期", ("推迟", "往后延")),
    ("注销", ("销掉", "注销掉")),
    ("补办", ("重新办", "再办")),
    ("分期", ("分期付款", "分期还款")),
)

#: word -> English (or half-English) forms, as code-mixed chats write them
CODE_MIX: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("信用卡", ("credit card", "card", "信用card")),
    ("银行卡", ("银行card", "card")),
    ("账单", ("bill", "statement")),
    ("查一下", ("check一下",)),
    ("查询", ("check",)),
    ("冻结", ("freeze", "冻结freeze")),
    ("转账", ("transfer",)),
    ("限额", ("limit",)),
    ("额度", ("limit", "credit limit")),
    ("退款", ("refund",)),
    ("自动还款", ("auto pay", "autopay", "自动pay")),
    ("取消", ("cancel", "cancel掉")),
    ("注销", ("cancel", "close")),
    ("年费", ("annual fee",)),
    ("手续费", ("fee", "手续fee")),
    ("利率", ("rate", "interest rate")),
    ("逾期", ("overdue",)),
    ("密码", ("password", "PIN")),
    ("手机银行", ("app", "手机app", "APP")),
    ("保险", ("insurance",)),
    ("申请", ("apply",)),
    ("房贷", ("mortgage", "房贷mortgage")),
    ("贷款", ("loan",)),
    ("违约金", ("penalty", "penalty fee")),
    ("还款日", ("due date",)),
    ("账户", ("account",)),
    ("网点", ("branch",)),
)

#: openings for any message
OPENINGS: tuple[str, ...] = (
    "您好，", "你好，", "喂，", "在吗？", "客服，", "你好客服，", "那个，", "那个…", "嗯，",
    "嗯嗯，", "打扰一下，", "人工客服，", "哈喽，", "亲，", "亲亲，", "不好意思，",
    "不好意思打扰一下，", "客服小姐姐，", "你好呀，", "我想咨询个事，", "就是那个…",
)
#: openings that only fit a question
QUESTION_OPENINGS: tuple[str, ...] = (
    "请问", "请问一下，", "麻烦问一下，", "我想问一下，", "咨询一下，", "想了解一下，", "问一下，",
    "问下，", "想问问，",
)
#: fillers after the first comma
INNER_FILLERS: tuple[str, ...] = ("就是", "那个", "嗯", "然后", "就是说")
#: particles before the final punctuation
PARTICLES: tuple[str, ...] = ("哈", "呀", "啊", "呢", "哦", "啦")
#: closings after the final punctuation
CLOSINGS: tuple[str, ...] = (
    "谢谢", "谢谢啦", "麻烦了", "多谢", "急", "在线等", "辛苦了", "麻烦尽快", "谢谢哈", "拜托了",
    "感谢", "哈哈", "麻烦你了", "谢啦",
)

#: narrative clauses that set a scene and ask for nothing (some mention banking words)
CONTEXT_CLAUSES: tuple[str, ...] = (
    "我刚下班回到家", "我是你们的老客户了，用了好几年", "刚才打了好几次电话都没人接",
    "我现在在外地出差", "我妈让我帮她问一下", "我昨天在超市买东西，结账的时候才想起来",
    "之前在网点问过一次，没问明白", "我刚看了一下手机银行", "上个月刚办了房贷",
    "我朋友说你们家的信用卡挺好用", "我刚收到一条短信", "我是做生意的，平时转账比较多",
    "家里最近开销比较大", "我用的是工资卡", "早上去银行排了半天队", "我对这些不太懂",
    "我年纪大了，手机用得不熟", "最近事情特别多", "我刚从国外回来", "这个问题困扰我好几天了",
)
CONNECTORS: tuple[str, ...] = ("", "", "现在", "所以", "然后", "想问一下，")


@functools.cache
def surface_pool(name: str, seed: int, train: bool) -> tuple[Any, ...]:
    """The entries of inventory ``name`` (``"SYNONYMS"``, ``"TYPOS"``, ``"OPENINGS"`` ...) a
    split may use: all of them outside training, two thirds (chosen by ``seed``) in it.

    Raises:
        KeyError: an unknown inventory.
    """
    items: Sequence[Any] = _INVENTORIES[name]
    if not train:
        return tuple(items)
    order = list(range(len(items)))
    random.Random(f"{seed}:{name}").shuffle(order)  # a str seed: the same in every process
    held = set(order[: len(items) // 3])
    return tuple(x for i, x in enumerate(items) if i not in held)


# -- editing an utterance --------------------------------------------------------------------
def edit(u: Utterance, start: int, end: int, new: str) -> bool:
    """Replace ``u.text[start:end]`` by ``new``, moving the slots and numerals after it.

    Returns:
        False (and nothing changed) when the span overlaps a slot value: slot texts stay as
        rendered, so their normalised values still hold.
    """
    if any(s < end and start < e if end > start else s < start < e
           for _, s, e, _, _ in u.slots):
        return False
    shift = len(new) - (end - start)
    u.text = u.text[:start] + new + u.text[end:]
    u.slots = [(n, s + shift, e + shift, t, v) if s >= end else (n, s, e, t, v)
               for n, s, e, t, v in u.slots]
    u.numbers = [(s + shift, e + shift, v) if s >= end else (s, e, v) for s, e, v in u.numbers]
    return True


def _substitute(u: Utterance, rng: random.Random, table: Sequence[tuple[str, tuple[str, ...]]],
                most: int) -> bool:
    """Replace one to ``most`` occurrences of the table's words; True when one was."""
    spots = [(m.start(), m.end(), forms) for word, forms in table
             for m in re.finditer(re.escape(word), u.text)]
    if not spots:
        return False
    rng.shuffle(spots)
    chosen: list[tuple[int, int, tuple[str, ...]]] = []
    for spot in spots:
        if len(chosen) < rng.randint(1, most) and all(
                spot[1] <= c[0] or c[1] <= spot[0] for c in chosen):
            chosen.append(spot)
    done = False
    for start, end, forms in sorted(chosen, reverse=True):  # right to left: offsets hold
        form = rng.choice(forms)
        if form not in u.text:  # never 分期付款付款
            done = edit(u, start, end, form) or done
    return done


def _final_at(text: str) -> int:
    """Where the final punctuation starts (``len(text)`` when there is none)."""
    i = len(text)
    while i > 0 and text[i - 1] in "？。！?!":
        i -= 1
    return i


def add_fillers(u: Utterance, rng: random.Random, seed: int, train: bool) -> bool:
    """A particle before the final punctuation, a closing after it, a filler after the first
    comma and an opening (each with its own chance, at least one)."""
    def pool(name: str) -> tuple[Any, ...]:
        return surface_pool(name, seed, train)

    parts = [rng.random() < p for p in (0.35, 0.45, 0.2, 0.55)]
    if not any(parts):
        parts[3] = True
    particle, closing, inner, opening = parts
    if particle:
        at = _final_at(u.text)
        edit(u, at, at, rng.choice(pool("PARTICLES")))
    if closing:
        ending = rng.choice(pool("CLOSINGS"))
        edit(u, len(u.text), len(u.text),
             ending if _final_at(u.text) < len(u.text) else "，" + ending)
    if inner:
        comma = next((i for i, c in enumerate(u.text) if c in "，,"), None)
        if comma is not None:
            # no filler that makes an A-not-A question of what follows (就是 + 不是要 reads
            # 就是不是要, and its 不 negates nothing)
            after = u.text[comma + 1:comma + 3]
            fillers = [f for f in pool("INNER_FILLERS")
                       if not (len(after) == 2 and after[0] in "不没" and f[-1] == after[1])]
            if fillers:
                edit(u, comma + 1, comma + 1, rng.choice(fillers))
    if opening:
        openings = pool("OPENINGS") + (pool("QUESTION_OPENINGS") if u.question else ())
        edit(u, 0, 0, rng.choice(openings))
    return True


def add_context(u: Utterance, rng: random.Random, seed: int, train: bool) -> bool:
    """A narrative clause (sometimes two) before the message; none before a long one."""
    if len(u.text) > LONG_ENOUGH:
        return False
    pool = surface_pool("CONTEXT_CLAUSES", seed, train)
    clauses = rng.sample(pool, 2 if rng.random() < 0.3 else 1)
    connector = rng.choice(CONNECTORS if u.question else CONNECTORS[:-1])
    edit(u, 0, 0, "，".join(clauses) + "，" + connector)
    return True


def apply_surface(u: Utterance, rng: random.Random, *, seed: int, train: bool) -> list[str]:
    """Apply each surface layer with its probability (:data:`RATES`); return the names of
    those that changed the message.

    Args:
        u: the rendered template, edited in place.
        rng: the random source (the same number of draws decides which layers run, so the
            two sides of a minimal pair get the same layers).
        seed: the corpus seed (which inventory entries are held out of training).
        train: whether the message is for the training split.
    """
    runs = {name: rng.random() < p for name, p in RATES.items()}
    applied = []
    layers = {
        "long_context": lambda: add_context(u, rng, seed, train),
        "synonym": lambda: _substitute(u, rng, surface_pool("SYNONYMS", seed, train), 2),
        "code_mixed": lambda: _substitute(u, rng, surface_pool("CODE_MIX", seed, train), 2),
        "typo": lambda: _substitute(u, rng, surface_pool("TYPOS", seed, train), 2),
        "filler": lambda: add_fillers(u, rng, seed, train),
    }
    for name, run in runs.items():
        if run and layers[name]():
            applied.append(name)
    return applied


def slice_names(template_tags: Sequence[str], applied: Sequence[str], has_slots: bool, *,
                near_miss: bool = False, extra: Sequence[str] = ()) -> tuple[str, ...]:
    """The slices of one example, in :data:`PHENOMENA` order (``("plain",)`` for none);
    ``extra``: further slice names (a compound message's, :mod:`headwise.demo.joins`)."""
    names = {TEMPLATE_TAGS[t] for t in template_tags} | set(applied) | set(extra)
    if has_slots:
        names.add("numbers")
    if near_miss:
        names.add("oos_near_miss")
    return tuple(n for n in PHENOMENA if n in names) or (PLAIN,)


_INVENTORIES: dict[str, Sequence[Any]] = {
    "SYNONYMS": SYNONYMS, "CODE_MIX": CODE_MIX, "TYPOS": TYPOS, "OPENINGS": OPENINGS,
    "QUESTION_OPENINGS": QUESTION_OPENINGS, "INNER_FILLERS": INNER_FILLERS,
    "PARTICLES": PARTICLES, "CLOSINGS": CLOSINGS, "CONTEXT_CLAUSES": CONTEXT_CLAUSES,
}
