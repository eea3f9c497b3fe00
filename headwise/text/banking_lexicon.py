"""Chinese banking customer-service words: negators, the expressions that only look
negated, and domain terms (data, plus the category mapping the head analysis reads).

The demo corpus marks negation and domain spans with them (:mod:`headwise.demo.render`);
the head analysis uses them as its Chinese category lexicons
(:func:`category_lexicon`, :mod:`headwise.inspect.categories`).
"""

from __future__ import annotations

__all__ = ["DOMAIN", "NEGATION", "NON_NEGATION", "category_lexicon"]

#: negation words, matched longest first; the single characters catch what the words miss
NEGATION: tuple[str, ...] = (
    "不需要", "不用", "不要", "不想", "不接受", "不同意", "不认识", "不认", "不办", "不做",
    "不打算", "不准备", "不考虑", "不在乎", "不管", "不知道", "不清楚", "不太清楚", "不了解",
    "不记得", "不够", "不了", "不上", "不起", "不出去", "不成功", "不再", "不能", "不会",
    "不是", "不对", "不行", "不必", "不太", "没有", "还没", "没", "别", "无法", "无需",
    "无所谓", "未", "拒绝", "不",
)

#: expressions holding a negation character that negate nothing (A-not-A questions, which
#: the scanner also recognises by their form, and fixed words); never marked
NON_NEGATION: tuple[str, ...] = (
    "要不要", "需不需要", "能不能", "可不可以", "是不是", "会不会", "有没有", "收不收",
    "扣不扣", "行不行", "算不算", "用不用", "对不起", "不好意思", "别人", "别的", "分别",
    "特别", "区别", "差不多", "无聊",
)

#: banking terms (Chinese and the LPR acronym), matched longest first
DOMAIN: tuple[str, ...] = (
    "提前还款", "提前还", "提前结清", "违约金", "手续费", "费率", "分期", "基点", "LPR",
    "利率", "房贷", "车贷", "贷款", "月供", "利息", "罚息", "滞纳金", "保险", "意外险",
    "盗刷险", "挂失", "冻结", "解冻", "转账", "限额", "年费", "信用卡", "储蓄卡", "银行卡",
    "借记卡", "额度", "提额", "账单", "退款", "销户", "注销", "自动还款", "自动扣款",
    "还款日", "还款", "逾期", "征信", "补卡", "补办", "延期", "停息挂账", "最低还款",
    "到账", "放款", "重定价日", "手机银行", "网点", "柜台",
)


def category_lexicon() -> dict[str, list[str]]:
    """The Chinese lexicons, category -> words (``negation``, ``domain``).

    The head analysis can use them as its category lexicons on Chinese data.
    """
    return {"negation": list(NEGATION), "domain": list(DOMAIN)}
