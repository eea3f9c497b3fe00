"""Chinese typing slips of pinyin input: words and the same-length forms a customer types
by mistake (a same-sound or same-shape character: 还款 -> 换款, 账户 -> 帐户, 冻结 -> 冻洁).

Data only. The demo corpus draws its ``typo`` slice from it
(:mod:`headwise.demo.phenomena`), and distillation's augmentation
(:mod:`headwise.intent.training.distillation`) makes noisy copies of training texts with it.
"""

from __future__ import annotations

__all__ = ["TYPOS"]

#: word -> pinyin-input typos of the same length (same sound or same shape)
TYPOS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("还款", ("换款", "环款")),
    ("账户", ("帐户",)),
    ("账单", ("帐单",)),
    ("转账", ("转帐",)),
    ("到账", ("到帐",)),
    ("冻结", ("冻洁", "动结")),
    ("解冻", ("解动", "姐冻")),
    ("分期", ("分其", "分起")),
    ("挂失", ("挂湿", "挂师")),
    ("注销", ("注消", "柱销")),
    ("额度", ("额渡", "鹅度")),
    ("限额", ("线额", "限鹅")),
    ("利率", ("利律", "历率")),
    ("利息", ("利西", "力息")),
    ("年费", ("年废", "年非")),
    ("手续费", ("手序费", "手续废")),
    ("违约金", ("违约今", "为约金")),
    ("逾期", ("余期", "逾其")),
    ("延期", ("严期", "延其")),
    ("信用卡", ("信用咖", "信用咔")),
    ("提前", ("提钱", "题前")),
    ("保险", ("保显", "包险")),
    ("补办", ("补半", "捕办")),
    ("退款", ("腿款", "推款")),
    ("密码", ("密吗", "秘码")),
    ("自动", ("自懂", "字动")),
    ("取消", ("取笑", "去消")),
    ("申请", ("申清", "深请")),
    ("怎么", ("怎摸", "怎末")),
    ("查询", ("查寻", "察询")),
    ("月供", ("月共",)),
    ("征信", ("征心", "争信")),
)
