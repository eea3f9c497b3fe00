"""Compound questions of the demo corpus: several requests in one message (data and rendering).

Customers put two or three requests in one message, joined in many ways (顺便, 另外, 还有,
然后, 再, 同时, 以及, a question followed by a request "……？帮我……", a condition
"不行的话就……", "如果太贵我就……", "要是……就……", or plain juxtaposition with a comma or a
句号), and sometimes take one back ("提额就不用了，帮我把年费免了" is one intent, fee_waiver).
The pieces, all data:

* :data:`CLAUSES`: each intent's *clauses*, in families: a request (a verb phrase, "把尾号
  {card}的卡挂失", written after 帮我/我想/我要) or a question ("提前还款的违约金怎么算？"),
  with the slot placeholders of :data:`headwise.demo.values.PLACEHOLDERS`;
* :data:`JOIN_FAMILIES`: the ways of joining two or three clauses; :data:`DROP_FAMILIES`: the
  ways of taking a request back (its words inside a negation) and keeping another;
* :data:`TOPICS`: what a customer says when taking an intent's request back (注销卡, 提额);
  only intents whose negation is no intent of its own (not 保险, 分期, 自动还款, 挂失, whose
  negations are refuse_insurance, cancel_instalment, cancel_autopay, unfreeze_card);
  :data:`TAKE_BACKS`: the request's object and verb, for the drop families that negate the
  verb after the object (保险不加了, 分期不办了: those intents too, their own verb negated);
* :data:`RELATED_PAIRS`: intents that belong together in one message (loss and reissue, fee
  and waiver, early repayment and its penalty, a failed transfer and a refund ...);
  :data:`CONFLICTING_PAIRS` never share a message.

Like templates, clause, join and drop families go whole to one split
(:func:`assign_compound_families`), so valid and test questions are joined in ways, and
phrased in clauses, that training never saw. :func:`render_compound` and
:func:`render_dropped` write one message; :mod:`headwise.demo.corpus` decides how many, with
which intents, in which split (``generate_demo_corpus(compound_share=...)``).

Join notation: ``[1]``, ``[2]``, ``[3]`` is a part written as a whole clause (a request gets a
helper, 帮我/我想 ...), ``[2R]`` a request's bare verb phrase (the join writes the helper),
``[1Q]`` a question; ``[X]`` the topic taken back, or ``[O]`` and ``[V]`` its object and verb
("[O]不[V]了": 保险不加了). A part followed by more text gets its own
punctuation (a question ``？``, a request ``，``) unless the text goes on with punctuation.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from headwise.demo.render import Utterance, render

__all__ = ["CLAUSES", "CONFLICTING_PAIRS", "DROP_FAMILIES", "FEE_INTENTS", "JOIN_FAMILIES",
           "RELATED_PAIRS", "TAKE_BACKS", "TOPICS", "Clause", "Join", "Message",
           "assign_compound_families", "can_take_back", "clause_catalogue", "fits",
           "join_catalogue", "render_compound", "render_dropped", "unordered"]

#: intent -> families of clauses; a clause ending in ？ is a question, any other a request
#: (a verb phrase)
CLAUSES: dict[str, tuple[tuple[str, ...], ...]] = {
    "early_repayment": (
        ("提前还款", "把(房贷|贷款)提前还(掉|清)"),
        ("提前还{big_amount}", "{future_date}提前还一部分(房贷|贷款)"),
        ("(房贷|贷款)能提前还清吗？", "把剩下的(房贷|车贷)一次性还清"),
        ("提前结清(房贷|车贷)", "(房贷|贷款)已经还到{ordinal}了，能提前还吗？"),
    ),
    "early_repayment_penalty": (
        ("提前还款(有没有|要不要)违约金？", "提前还款的违约金怎么算？"),
        ("提前还{big_amount}要(付|交)多少违约金？", "提前还款的手续费是按{rate}收吗？"),
        ("提前结清(房贷|贷款)会扣多少(违约金|手续费)？",
         "(房贷|贷款)还了{duration}，提前还还收违约金吗？"),
    ),
    "lpr_rate_change": (
        ("LPR{bp_change}，我的房贷利率会变吗？", "LPR{bp_change}以后月供会少多少？"),
        ("这次LPR{bp_change}，我的利率什么时候调整？", "LPR调整以后我的月供会变吗？"),
        ("我的房贷是LPR加{bp_spread}，LPR{bp_change}以后是多少？",
         "LPR(下调|调整)了，我的利率怎么还没变？"),
    ),
    "loan_rate_query": (
        ("我的(房贷|贷款)利率现在是多少？", "查一下我(这笔|)(房贷|贷款)的利率"),
        ("我的(房贷|贷款)利率是不是{rate}？", "我这笔{big_amount}的贷款年化利率是多少？"),
        ("(房贷|车贷)利率是固定的还是浮动的？", "查一下我的房贷是LPR加多少个基点"),
    ),
    "apply_instalment": (
        ("把这个月的账单分期", "办个账单分期"),
        ("把那笔{amount}的消费分{duration}", "把账单分{duration}还"),
        ("{amount}的账单能分期吗？", "申请(账单|消费)分期"),
        ("把上个月的账单办成分期", "这期账单能分{duration}吗？"),
    ),
    "cancel_instalment": (
        ("把之前办的分期取消(掉|)", "撤销那笔分期"),
        ("把那笔{amount}的分期取消", "已经还到{ordinal}了，剩下的分期能取消吗？"),
        ("分期(能不能|怎么)取消？", "把分期撤回"),
    ),
    "instalment_fee_query": (
        ("分期手续费(多少|怎么算)？", "办分期要收手续费吗？"),
        ("分{duration}手续费是多少？", "{amount}分{duration}每期手续费多少？"),
        ("分期的费率是不是{rate}？", "分期有没有利息？"),
    ),
    "report_card_loss": (
        ("把(我的|)(信用卡|银行卡)挂失", "挂失(我的卡|这张卡)"),
        ("把尾号{card}的卡挂失", "尾号{card}的卡丢了，怎么挂失？"),
        ("(信用卡|卡)丢了怎么挂失？", "先冻结我丢的那张卡"),
    ),
    "unfreeze_card": (
        ("把我的卡解冻", "卡被冻结了怎么解冻？"),
        ("把尾号{card}的卡解冻", "尾号{card}的卡被锁了，怎么解锁？"),
        ("解除(我那张卡的|)冻结", "解冻要去网点吗？"),
    ),
    "reissue_card": (
        ("补办一张(新卡|卡)", "重新办一张卡"),
        ("把尾号{card}的卡补一张", "补卡要多久？"),
        ("补办(银行卡|信用卡)要带什么？", "新卡多久能寄到？"),
        ("换一张新卡", "卡坏了能补办吗？"),
    ),
    "cancel_card": (
        ("把这张信用卡注销", "销户"),
        ("把尾号{card}的卡注销", "注销信用卡要去网点吗？"),
        ("注销(一张|多余的)信用卡", "销卡以后积分怎么处理？"),
    ),
    "transfer_limit_query": (
        ("转账限额是多少？", "每天最多能转多少？"),
        ("转{big_amount}会不会超限额？", "手机银行单笔限额是多少？"),
        ("跨行转账有没有限额？", "查一下我的转账限额"),
    ),
    "raise_transfer_limit": (
        ("把转账限额调高", "提高转账限额"),
        ("把转账限额提到{big_amount}", "把单日转账限额(调到|改成){big_amount}"),
        ("转账限额能临时提高吗？", "临时调高一下转账额度"),
    ),
    "transfer_failed": (
        ("转账怎么一直失败？", "为什么我的钱转不出去？"),
        ("{past_date}转的{amount}怎么还没到账？", "我转了{amount}，钱扣了对方没收到，怎么回事？"),
        ("转账被退回了是什么原因？", "查一下那笔转账为什么失败"),
    ),
    "add_insurance": (
        ("加上这个保险", "给信用卡加一份盗刷险"),
        ("买那个账户安全险", "每月{small_amount}的保险怎么加？"),
        ("把贷款附带的保险加上", "盗刷险怎么买？"),
    ),
    "refuse_insurance": (
        ("把保险去掉", "把捆绑的保险退掉"),
        ("我没同意买保险，怎么扣了{small_amount}？", "退掉那份意外险"),
        ("贷款能不捆绑保险吗？", "取消那份附加险"),
    ),
    "annual_fee_query": (
        ("年费是多少？", "这张卡收不收年费？"),
        ("为什么扣了我{small_amount}的年费？", "年费{small_amount}是每年都收吗？"),
        ("刷几次能免年费？", "年费什么时候扣？"),
    ),
    "fee_waiver": (
        ("把年费免了", "减免今年的年费"),
        ("把扣的{small_amount}年费退回来", "年费{small_amount}能减免吗？"),
        ("年费能不能免？", "申请减免年费"),
    ),
    "repayment_date_query": (
        ("我的还款日是哪天？", "查一下还款日"),
        ("还款日是不是{monthly}？", "{future_date}之前还来得及吗？"),
        ("这个月最后还款日是几号？", "账单日和还款日分别是哪天？"),
    ),
    "change_repayment_date": (
        ("把还款日往后调", "修改还款日"),
        ("把还款日改到{monthly}", "还款日能换成{monthly}吗？"),
        ("还款日能改吗？", "把还款日推后几天"),
    ),
    "overdue_consequence": (
        ("逾期了会怎样？", "逾期会上征信吗？"),
        ("{ordinal}逾期了会有什么后果？", "{past_date}该还的{amount}没还，算逾期吗？"),
        ("逾期的罚息怎么算？", "晚还几天会影响征信吗？"),
    ),
    "deferred_repayment": (
        ("申请延期还款", "还款能延期吗？"),
        ("{ordinal}能延期还吗？", "把还款延到{future_date}"),
        ("能不能宽限几天再还？", "把{ordinal}往后推一个月"),
    ),
    "credit_limit_increase": (
        ("提额", "提高(我的|)信用额度"),
        ("把额度提到{big_amount}", "额度才{amount}，能提一下吗？"),
        ("信用卡额度能调高吗？", "申请临时提额"),
    ),
    "bill_query": (
        ("查一下这个月的账单", "这个月账单多少钱？"),
        ("账单里那笔{amount}的消费是什么？", "看看{past_date}出的账单"),
        ("最低还款额是多少？", "查一下账单明细"),
    ),
    "refund_query": (
        ("退款什么时候到账？", "查一下退款"),
        ("商家退的{amount}怎么还没到？", "{past_date}申请的退款到哪了？"),
        ("退款退到信用卡了吗？", "查一下退款进度"),
    ),
    "enable_autopay": (
        ("开通自动还款", "设置自动扣款"),
        ("用尾号{card}的卡自动还信用卡", "能{monthly}自动扣款吗？"),
        ("自动还款怎么开？", "把自动还款开了"),
    ),
    "cancel_autopay": (
        ("关掉自动还款", "取消自动扣款"),
        ("关闭尾号{card}的自动扣款", "自动还款能停掉吗？"),
        ("自动还款怎么取消？", "把自动扣款停了"),
    ),
}

#: intent -> what a customer calls its request when taking it back (no slot, no negation)
TOPICS: dict[str, tuple[str, ...]] = {
    "early_repayment": ("提前还款", "提前还贷款"),
    "early_repayment_penalty": ("问提前还款的违约金",),
    "lpr_rate_change": ("问LPR调整的事",),
    "loan_rate_query": ("查贷款利率",),
    "reissue_card": ("补办卡片", "补卡"),
    "cancel_card": ("注销卡", "销户", "注销这张卡"),
    "transfer_limit_query": ("查转账限额",),
    "raise_transfer_limit": ("提高转账限额", "调转账限额"),
    "annual_fee_query": ("问年费", "查年费"),
    "fee_waiver": ("免年费", "减免年费"),
    "repayment_date_query": ("查还款日",),
    "change_repayment_date": ("改还款日", "修改还款日"),
    "overdue_consequence": ("问逾期的后果",),
    "deferred_repayment": ("申请延期还款", "延期还款"),
    "credit_limit_increase": ("提额", "提高信用额度"),
    "bill_query": ("查账单",),
    "refund_query": ("查退款",),
}

#: intent -> what a customer takes back by its object and verb, for the drop families that
#: put the object first and negate the verb ("保险不加了", "新卡不用补了", "不用挂失卡了"; issue
#: 34's own example, 保险不加了，帮我提额就行, is one intent). Unlike :data:`TOPICS` this holds
#: intents whose plain negation is an intent of its own (not adding insurance is no
#: refuse_insurance when another request follows), since the verb it negates is the intent's
#: own: the kept request is never the conflicting intent (:data:`CONFLICTING_PAIRS`)
TAKE_BACKS: dict[str, tuple[tuple[str, str], ...]] = {
    "add_insurance": (("保险", "加"), ("盗刷险", "买")),
    "refuse_insurance": (("保险", "退"),),
    "apply_instalment": (("分期", "办"), ("账单分期", "办")),
    "cancel_instalment": (("分期", "取消"),),
    "enable_autopay": (("自动还款", "开"), ("自动扣款", "设置")),
    "cancel_autopay": (("自动还款", "关"),),
    "report_card_loss": (("卡", "挂失"),),
    "cancel_card": (("卡", "注销"), ("这张卡", "注销")),
    "reissue_card": (("新卡", "补"), ("卡", "补办")),
    "raise_transfer_limit": (("转账限额", "调"), ("限额", "提")),
    "change_repayment_date": (("还款日", "改"),),
    "credit_limit_increase": (("额度", "提"), ("信用额度", "调")),
    "early_repayment": (("贷款", "提前还"), ("房贷", "提前还")),
    "deferred_repayment": (("还款", "延期"),),
    "fee_waiver": (("年费", "免"),),
}

#: intents that belong together in one message (unordered)
RELATED_PAIRS: tuple[tuple[str, str], ...] = (
    ("report_card_loss", "reissue_card"),
    ("annual_fee_query", "fee_waiver"),
    ("early_repayment", "early_repayment_penalty"),
    ("transfer_failed", "refund_query"),
    ("apply_instalment", "instalment_fee_query"),
    ("overdue_consequence", "deferred_repayment"),
    ("repayment_date_query", "change_repayment_date"),
    ("transfer_limit_query", "raise_transfer_limit"),
    ("lpr_rate_change", "loan_rate_query"),
    ("bill_query", "apply_instalment"),
    ("bill_query", "refund_query"),
    ("enable_autopay", "repayment_date_query"),
    ("unfreeze_card", "transfer_failed"),
    ("cancel_card", "annual_fee_query"),
    ("cancel_card", "fee_waiver"),
    ("deferred_repayment", "change_repayment_date"),
    ("early_repayment", "loan_rate_query"),
    ("credit_limit_increase", "bill_query"),
    ("raise_transfer_limit", "transfer_failed"),
    ("refuse_insurance", "loan_rate_query"),
    ("report_card_loss", "cancel_card"),
    ("cancel_instalment", "early_repayment"),
)

#: intents that contradict each other and never share a message (unordered)
CONFLICTING_PAIRS: tuple[tuple[str, str], ...] = (
    ("apply_instalment", "cancel_instalment"),
    ("add_insurance", "refuse_insurance"),
    ("enable_autopay", "cancel_autopay"),
    ("report_card_loss", "unfreeze_card"),
)

#: intents whose question asks about a cost (the first part of 如果太贵我就……)
FEE_INTENTS: frozenset[str] = frozenset({
    "early_repayment_penalty", "instalment_fee_query", "annual_fee_query", "loan_rate_query",
    "lpr_rate_change"})

_FEE_ONLY = "$fee"  # a join template whose first part must be a question of FEE_INTENTS

#: families of ways of joining clauses (two or three parts)
JOIN_FAMILIES: tuple[tuple[str, ...], ...] = (
    ("[1]顺便(帮我|)[2R]", "[1]顺便问一下，[2Q]", "[1]顺便(帮我|)[2R]，再顺便问一下，[3Q]"),
    ("[1]另外，[2]", "[1]另外(我|)还想[2R]", "[1]另外，[2]另外(我|)还想[3R]"),
    ("[1]还有，[2]", "[1]还有就是[2]", "[1]还有，[2]还有就是[3]"),
    ("[1]然后(帮我|)[2R]", "[1]然后想问一下，[2Q]", "[1]然后(帮我|)[2R]，然后[3]"),
    ("(先|)帮我[1R]，再[2R]", "(我想|我要)先[1R]，再[2R]", "(先|)帮我[1R]，再[2R]，再[3R]"),
    ("[1]同时(帮我|)[2R]", "[1]同时我想了解一下，[2Q]", "[1]同时(帮我|)[2R]，同时[3]"),
    ("(我有两个问题|想问两件事)：[1Q]以及[2Q]", "(麻烦|)帮我[1R]以及[2R]",
     "(麻烦|)帮我[1R]、[2R]以及[3R]"),
    ("[1Q]？(那|那就|)(帮我|)[2R]", "[1Q]？(那|)先(帮我|)[2R]", "[1Q]？[2Q]？(那|)(帮我|)[3R]"),
    ("[1]不行的话就(帮我|)[2R]", "[1R]办不了的话，(就|那就)(帮我|)[2R]",
     "[1Q]？如果太贵(的话|)我就[2R] $fee"),
    ("[1]要是(可以|能办)的话，(就|)(顺便|)(帮我|)[2R]", "要是[1R]办不了，就(帮我|)[2R]",
     "[1Q]？要是(不划算|太贵)，(那|)我就[2R] $fee"),
    ("[1][2]", "[1]。[2]", "[1][2][3]", "[1]。[2]。[3]"),
)

#: families of ways of taking a request ([X], its topic) back and keeping another
DROP_FAMILIES: tuple[tuple[str, ...], ...] = (
    ("我不是来[X]的，(我|)是(来|)(想|)[2R]的", "不是要[X]啊，(我|)(是|)想[2R]"),
    ("[X](就|)不用了，(帮我|)[2R]就行", "[X](就|)不用了，[2]"),
    ("[X]的事(先|)不(用|)管了，[2]", "[X](先|)不弄了，(帮我|)[2R]就好"),
    ("(先|)别[X]了，(帮我|)[2R]", "(先|)别[X]，[2]"),
    ("(我|)没说要[X]，(我|)(是想|只想)[2R]", "没想[X]，[2]"),
    ("[O](就|)不[V]了，(帮我|)[2R]就行", "[O](先|)不[V]了，[2]", "不用[V][O]了，[2]"),
    ("[O](就|)不用[V]了，[2]", "[O]不[V]了，(我|)(只|就)想[2R]",
     "(那|)[O]先不[V]了，(帮我|)[2R]吧"),
)

_HELPERS = ("帮我", "帮我", "我想", "我要", "麻烦帮我")
_LATER_HELPERS = _HELPERS + ("我还想",)
_PART = re.compile(r"\[(\d|X|O|V)([RQ]?)\]")
#: the parts that name the request taken back: its topic, or its object and verb
_TAKEN_BACK = frozenset("XOV")
_QUESTION_END = ("？", "？", "？", "?")
_REQUEST_END = ("", "", "。", "！")
_PUNCT = "，,。？?！!：、"


@dataclass(frozen=True)
class Clause:
    """One clause: ``id`` ``clause.<intent>.<k>:<n>``, its family, intent, whether it is a
    question, and its template (without the final ？)."""

    id: str
    family: str
    intent: str
    question: bool
    template: str


@dataclass(frozen=True)
class Join:
    """One join (or drop) template: ``id`` ``join.<k>:<n>`` (``drop.<k>:<n>``), its family,
    its template, the number of parts, whether its first part must be a cost question, and
    how a drop template names the request taken back (``{"X"}``: a topic of :data:`TOPICS`;
    ``{"O", "V"}``: an object and verb of :data:`TAKE_BACKS`; empty for a join)."""

    id: str
    family: str
    template: str
    parts: int
    fee_only: bool = False
    takes_back: frozenset[str] = frozenset()


def clause_catalogue() -> list[Clause]:
    """Every clause, in a fixed order."""
    out = []
    for intent, families in CLAUSES.items():
        for k, family in enumerate(families):
            for n, text in enumerate(family):
                question = text.endswith("？")
                out.append(Clause(f"clause.{intent}.{k}:{n}", f"clause.{intent}.{k}", intent,
                                  question, text[:-1] if question else text))
    return out


def join_catalogue() -> list[Join]:
    """Every join and drop template, in a fixed order."""
    out = []
    for kind, families in (("join", JOIN_FAMILIES), ("drop", DROP_FAMILIES)):
        for k, family in enumerate(families):
            for n, text in enumerate(family):
                fee_only = text.endswith(" " + _FEE_ONLY)
                template = text.removesuffix(" " + _FEE_ONLY)
                names = {m.group(1) for m in _PART.finditer(template)}
                out.append(Join(f"{kind}.{k}:{n}", f"{kind}.{k}", template,
                                len(names - _TAKEN_BACK), fee_only,
                                frozenset(names & _TAKEN_BACK)))
    return out


def assign_compound_families(rng: random.Random) -> dict[str, str]:
    """Clause, join and drop family -> split, deterministic for the ``rng`` state.

    Each intent's clause families: one to test, one to valid, the rest to train. Join
    families: two to test, two to valid, the rest to train; drop families: one each to test
    and valid, the rest to train.
    """
    split: dict[str, str] = {}
    groups: list[tuple[list[str], int]] = [
        ([f"clause.{intent}.{k}" for k in range(len(families))], 1)
        for intent, families in CLAUSES.items()]
    groups += [([f"join.{k}" for k in range(len(JOIN_FAMILIES))], 2),
               ([f"drop.{k}" for k in range(len(DROP_FAMILIES))], 1)]
    for families, held in groups:
        order = list(families)
        rng.shuffle(order)
        for i, family in enumerate(order):
            split[family] = "test" if i < held else "valid" if i < 2 * held else "train"
    return split


@dataclass
class Message:
    """A rendered compound message: the utterance, the slot indices of its second and later
    requests, and the ids of its clauses."""

    utterance: Utterance
    later_slots: set[int] = field(default_factory=set)
    clauses: tuple[str, ...] = ()


def _append(out: Utterance, part: Utterance) -> None:
    shift = len(out.text)
    out.text += part.text
    out.slots += [(n, s + shift, e + shift, t, v) for n, s, e, t, v in part.slots]
    out.numbers += [(s + shift, e + shift, v) for s, e, v in part.numbers]


def _literal(text: str, rng: random.Random) -> Utterance:
    return render(text, rng, final=False) if text else Utterance()


def _write(join: str, parts: dict[str, Clause | str], rng: random.Random) -> Message:
    """Write a join template with its parts (part number -> a clause; ``X``, ``O``, ``V`` ->
    the text of the topic taken back, its object, its verb)."""
    out = Utterance()
    later: set[int] = set()
    pieces = _PART.split(join)  # text, number, kind, text, number, kind, ..., text
    last_kind = "R"
    clauses: list[str] = []
    for i in range(0, len(pieces), 3):
        _append(out, _literal(pieces[i], rng))
        if i + 1 >= len(pieces):
            break
        number, wanted = pieces[i + 1], pieces[i + 2]
        source = parts[number]
        if isinstance(source, str):  # the request taken back: topic, object or verb
            _append(out, Utterance(source))
            continue
        clauses.append(source.id)
        if not wanted and not source.question:
            _append(out, Utterance(rng.choice(_HELPERS if number == "1" else _LATER_HELPERS)))
        start = len(out.slots)
        _append(out, render(source.template, rng, final=False))
        if number != "1":
            later.update(range(start, len(out.slots)))
        last_kind = "Q" if source.question else "R"
        after = pieces[i + 3]
        more = bool(after) or i + 4 < len(pieces)
        if not wanted and more and not (after and after[0] in _PUNCT):
            _append(out, _literal("？" if source.question else "，", rng))
    if not out.text or out.text[-1] not in _PUNCT:
        out.text += rng.choice(_QUESTION_END if last_kind == "Q" else _REQUEST_END)
    first = parts.get("1", parts.get("2"))
    out.question = isinstance(first, Clause) and first.question
    return Message(out, later, tuple(clauses))


def fits(join: Join, clauses: dict[str, Clause]) -> bool:
    """Whether ``clauses`` (part number -> clause) fit the join's parts and their kinds."""
    kinds = {m.group(1): m.group(2) for m in _PART.finditer(join.template)}
    if set(clauses) != set(kinds) - _TAKEN_BACK:
        return False
    for number, clause in clauses.items():
        kind = kinds[number]
        if (kind == "Q" and not clause.question) or (kind == "R" and clause.question):
            return False
    first = clauses.get("1")
    return not join.fee_only or (first is not None and first.question
                                 and first.intent in FEE_INTENTS)


def render_compound(join: Join, clauses: list[Clause], rng: random.Random) -> Message:
    """One message joining ``clauses`` (which :func:`fits` the join) with ``join``."""
    return _write(join.template, {str(k): c for k, c in enumerate(clauses, 1)}, rng)


def can_take_back(join: Join, intent: str) -> bool:
    """Whether the drop template ``join`` can name ``intent``'s request: by a topic
    (:data:`TOPICS`) or by an object and verb (:data:`TAKE_BACKS`), as it needs."""
    if join.takes_back == {"X"}:
        return intent in TOPICS
    return join.takes_back == {"O", "V"} and intent in TAKE_BACKS


def render_dropped(join: Join, intent: str, kept: Clause, rng: random.Random) -> Message:
    """One message taking ``intent``'s request back and keeping the request of ``kept``.

    Raises:
        ValueError: a template that cannot name ``intent``'s request
            (:func:`can_take_back`).
    """
    if not can_take_back(join, intent):
        raise ValueError(f"{join.id} cannot take back {intent}: it names the request by "
                         f"{'a topic' if 'X' in join.takes_back else 'object and verb'}, "
                         f"which {intent} has none of")
    if join.takes_back == {"X"}:
        return _write(join.template, {"X": rng.choice(TOPICS[intent]), "2": kept}, rng)
    obj, verb = rng.choice(TAKE_BACKS[intent])
    return _write(join.template, {"O": obj, "V": verb, "2": kept}, rng)


def unordered(a: str, b: str) -> tuple[str, str]:
    """A pair of intents in a fixed order."""
    return (a, b) if a <= b else (b, a)
