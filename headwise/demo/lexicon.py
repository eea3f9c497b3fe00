"""Word lists and shared templates of the demo corpus (data only).

Out-of-scope requests (far ones and near misses; those of the valid and test splits, and
others for training rows only), and the templates
shared between intents: minimal pairs, contrasts and corrections. Each contrast or correction
frame, each minimal-pair template and each out-of-scope template is one family: it goes to
one split for every intent that uses it. Openings, fillers and closings are surface
phenomena (:mod:`headwise.demo.phenomena`). The intents' own templates
are in :mod:`headwise.demo.templates`; :mod:`headwise.demo.render` reads both.
Templates use a small notation:
``(a|b|)`` picks one alternative (an empty one makes the group optional), ``{amount}``
inserts a slot value (the placeholders of :data:`headwise.demo.values.PLACEHOLDERS`),
``<pos|neg>`` marks where a minimal pair differs (alternatives split by ``/``), a trailing
`` @+intent`` lists further intents the utterance also expresses, and trailing tags
(`` #neg``, `` #order``, `` #long``) name the slices the template exercises.
The negation and domain word lists are the text layer's
(:mod:`headwise.text.banking_lexicon`).
"""

from __future__ import annotations

__all__ = ["CONTRASTS", "CONTRAST_FRAMES", "CORRECTIONS", "CORRECTION_FRAMES",
           "OOS_NEAR_MISS_TEMPLATES", "OOS_NEAR_MISS_TRAIN_TEMPLATES", "OOS_TEMPLATES",
           "OOS_TRAIN_TEMPLATES", "PAIR_TEMPLATES"]

#: out-of-scope requests: chit-chat and other domains (label "oos")
OOS_TEMPLATES: tuple[str, ...] = (
    "(明天|今天|周末|{future_date})(北京|上海|深圳|杭州|成都)(天气怎么样|会下雨吗|冷不冷)？",
    "(外面|今天)(下雨了吗|多少度|空气质量怎么样)？",
    "帮我(订|点)(一份|个)(外卖|午饭|奶茶|披萨)",
    "我不想做饭了，帮我点个外卖",
    "附近有什么好吃的(餐厅|火锅|小吃)？",
    "(给我|来)讲个(笑话|故事)(吧|)",
    "(心情不好|好无聊)，陪我聊聊天",
    "帮我买一张{future_date}去(北京|上海|广州|西安)的(火车票|高铁票|机票)",
    "(火车票|高铁票)怎么改签？",
    "最近有什么好看的(电影|电视剧|综艺)？",
    "(红烧肉|番茄炒蛋|可乐鸡翅)怎么做？",
    "(帮我|)(放|播)一首(周杰伦的歌|轻音乐|儿歌)",
    "你叫什么名字？",
    "你是机器人还是真人？",
    "帮我定个明天早上(七|八|六)点的闹钟",
    "去(火车站|机场|最近的地铁站)怎么走？",
    "我的快递(到哪了|怎么还没到)？",
    "(昨晚|今天)的(足球|篮球)比赛谁赢了？",
    "帮我把这句话翻译成(英文|日语)",
    "推荐几本好看的(小说|历史书)",
    "(手机话费|电费|燃气费)怎么(充|交)？",
    "今天是星期几？",
    "(周末|下周)去哪里玩比较好？",
    "(猫|狗)不吃东西怎么办？",
    "(感冒了|头疼)吃什么药好？",
    "帮我查一下(明天|{future_date})的航班",
    "(宽带|网络)不好用，找谁修？",
    "你会唱歌吗？",
    "我的手机屏幕碎了，去哪里修？",
    "今年春节放几天假？",
)

#: out-of-scope requests that sound like banking but are none of the 27 intents (other
#: institutions' cards and accounts, investments, deposits, social insurance ...)
OOS_NEAR_MISS_TEMPLATES: tuple[str, ...] = (
    "(股票|基金)怎么开户？",
    "炒股(要|需要)开什么账户？",
    "(住房|)公积金怎么提取？",
    "公积金(能|可以)取出来(装修|租房)吗？",
    "社保卡(丢了|坏了)怎么补办？",
    "社保卡怎么激活？",
    "手机卡(丢了|坏了)，怎么补办？",
    "(电话卡|手机号)怎么注销？",
    "(饭卡|公交卡|门禁卡)丢了，去哪补办？",
    "(游戏账号|微信号)被冻结了怎么解封？",
    "银行的保险箱怎么租？",
    "(车险|医疗险)理赔要多久？",
    "(美元|日元|欧元)今天的汇率是多少？",
    "黄金(现在|今天)多少钱一克？",
    "定期存款利率是多少？",
    "理财产品(收益怎么样|有什么推荐)？",
    "(国债|大额存单)怎么买？",
    "(附近|最近)的网点几点(开门|关门)？",
    "附近哪有ATM？",
    "个人所得税APP怎么(登录|注册)？",
    "(车辆|汽车)年检要带什么？",
    "信用卡积分怎么兑换礼品？",
    "数字人民币钱包怎么开通？",
    "外币怎么兑换？",
    "(电费|燃气费)账单怎么查？",
    "医保卡余额怎么查？",
    "你们银行招(柜员|实习生)吗？",
    "(房产证|营业执照)怎么办理？",
)

#: out-of-scope requests for training rows only (``generate_demo_corpus(oos_train=N)``):
#: chit-chat and other services, none a template of :data:`OOS_TEMPLATES`, so valid and test
#: keep out-of-scope phrasing the model never trained on
OOS_TRAIN_TEMPLATES: tuple[str, ...] = (
    "(帮我|)查一下(后天|{future_date})(广州|南京|武汉|重庆|西安)的天气",
    "(明天|今天|这两天)出门要带伞吗？",
    "最近(降温|升温)了吗？要不要多穿点？",
    "(晚饭|午饭)吃什么好？(给点建议|你推荐一下)",
    "(帮我|)推荐一家(日料店|烧烤店|咖啡馆|面馆)",
    "(蛋糕|饺子|酸菜鱼)怎么做才好吃？",
    "(你|)今年几岁了？",
    "你(喜欢|爱看)什么(电影|动画片)？",
    "(说个|讲个)(绕口令|脑筋急转弯)(吧|听听)",
    "我(失眠了|睡不着)，(有什么办法|怎么办)？",
    "(帮我|)(打个车|叫个车)去(公司|火车南站|商场)",
    "(地铁|公交)(末班车|首班车)几点？",
    "(帮我|)写一首关于(春天|大海|月亮)的诗",
    "(一公里等于多少米|一斤等于多少克)？",
    "(最近|这周)有什么(演唱会|展览|话剧)？",
    "(狗狗|猫咪)(打疫苗|洗澡)去哪里比较好？",
    "孩子(发烧了|咳嗽)，(要不要去医院|怎么办)？",
    "(跑步|健身)怎么(减肥|练腹肌)？",
    "(帮我|)设置一个(十|二十|三十)分钟的倒计时",
    "(把|)客厅的(灯|空调)(打开|关掉)",
    "英语(单词|口语)怎么(背|练)比较快？",
    "(洗衣机|冰箱)坏了，(找谁修|怎么报修)？",
    "(今天|明天)(限行|限号)吗？",
    "(月亮|太阳)离地球有多远？",
    "(哪款|什么)手机拍照(最好|好看)？",
    "你(会不会|能不能)下(象棋|围棋)？",
    "(今晚|周末)有什么好看的(球赛|直播)？",
    "(搬家|装修)公司(哪家好|怎么找)？",
    "(早上好|晚上好)，(今天|)过得怎么样？",
    "(驾照|驾驶证)(考试|科目一)怎么(预习|准备)？",
)

#: near misses for training rows only: they sound like money matters but are none of the 27
#: intents (insurance claims, shares and funds, tax, phone top-up, train tickets, pensions,
#: other payment apps); none a template of :data:`OOS_NEAR_MISS_TEMPLATES`
OOS_NEAR_MISS_TRAIN_TEMPLATES: tuple[str, ...] = (
    "(车子被刮了|住院花了不少钱)，保险理赔(怎么申请|需要什么材料)？",
    "(股票|A股)(怎么买卖|交易时间是几点到几点)？",
    "(炒股|买股票)的佣金(怎么算|是多少)？",
    "(基金|ETF)(怎么赎回|赎回以后几天能拿到钱)？",
    "个税(年度汇算|专项附加扣除)怎么(填|办)？",
    "帮我给(这个号码|我妈的手机)充(五十|一百)块话费",
    "(12306|火车票)怎么(抢票|选座)？",
    "(黄金|白银)(走势怎么样|还会涨吗)？",
    "比特币(能买吗|怎么买)？",
    "(养老保险|医保)断缴了(怎么补缴|有影响吗)？",
    "公积金缴存基数(怎么调|是多少)？",
    "(电子社保卡|医保电子凭证)怎么(申领|使用)？",
    "(支付宝|微信)(零钱|余额宝)怎么提现？",
    "(微信|支付宝)(实名认证|绑定的手机号)怎么改？",
    "(车辆购置税|契税)怎么(交|算)？",
    "开发票需要(什么信息|公司税号吗)？",
    "个体户(怎么报税|每年要年报吗)？",
    "(彩票|双色球)(怎么兑奖|中奖了去哪领)？",
    "(券商|证券公司)(哪家佣金低|怎么选)？",
    "(外汇|美股)账户怎么开？",
    "(房租|物业费)(怎么交|可以线上交吗)？",
    "(ETC|高速通行卡)怎么(办理|充值)？",
    "(养老金|退休金)每个月(几号发|能领多少)？",
    "(医保|社保)的报销比例是多少？",
)

# -- minimal pairs: rendered twice with the same draws, without and with the negation --
#: (intent without the negation, intent with it, template with one <pos|neg> marker)
PAIR_TEMPLATES: tuple[tuple[str, str, str], ...] = (
    ("apply_instalment", "cancel_instalment",
     "这笔{amount}的账单我<要/想/打算|不要/不想/不打算>分期了"),
    ("apply_instalment", "cancel_instalment", "(上个月|这个月)的账单<还是要|不>办分期了"),
    ("apply_instalment", "cancel_instalment",
     "(上个月|昨天)那笔{amount}的消费<要/想|不要/不想>分期"),
    ("add_insurance", "refuse_insurance", "这个(保险|意外险)我<要|不要/不需要/不接受>"),
    ("add_insurance", "refuse_insurance", "<给我|别给我>加上这个保险"),
    ("add_insurance", "refuse_insurance", "捆绑的保险我<接受|不接受>"),
    ("report_card_loss", "unfreeze_card", "(那张|尾号{card}的)卡<还是要|不用/不需要>挂失了"),
    ("report_card_loss", "unfreeze_card", "挂失<还是要办|不用办/就不办>了，(那张|这张)卡"),
    ("report_card_loss", "unfreeze_card", "(那张|这张)卡<还是|不用/不需要>(办|)挂失(吧|)"),
    ("enable_autopay", "cancel_autopay", "自动还款我<要|不要/不想要>了"),
    ("enable_autopay", "cancel_autopay", "以后<|不要/别>从尾号{card}的卡自动扣款"),
    ("enable_autopay", "cancel_autopay", "每个月<帮我|别/不要>自动扣款还信用卡"),
    # the negation on the request's own verb (开通, 办, 买, 挂失): "I don't want X switched
    # on" asks for the other intent of the pair, as the contrasts' 不想自动还款了 does
    ("apply_instalment", "cancel_instalment", "我<想|不想/不打算/没打算>办(账单|消费)分期"),
    ("apply_instalment", "cancel_instalment",
     "<麻烦帮我申请|不用申请/不需要申请>(这笔|)(账单|消费)分期"),
    ("add_insurance", "refuse_insurance", "我<想|不想/不打算/没打算>买这个(保险|意外险)"),
    ("add_insurance", "refuse_insurance", "<帮我|不用/别>加上(信用卡的|)(账户安全险|附加险)"),
    ("report_card_loss", "unfreeze_card", "我<想|不想/不打算>把(这张|那张|尾号{card}的)卡挂失"),
    ("report_card_loss", "unfreeze_card", "<麻烦帮我办|不用办/不需要办>(信用卡|银行卡)的挂失"),
    ("enable_autopay", "cancel_autopay", "我<想|不想/不打算/没打算>开通自动(还款|扣款)"),
    ("enable_autopay", "cancel_autopay",
     "<帮我开通|不需要开通/用不着开通>(信用卡|房贷)的自动(还款|扣款)"),
)


# -- contrasts: two intents, the same two options, the negation on the other one -----------
_NEG = "(不想|不要|不打算|不准备|不用|没打算)"
_AFF = "(还是|我想|我要|改成|换成|就|那就|帮我)"
_LUMP = "(一次还清|全额还款|一次性还|全部还掉|一口气还完|一次结清)"
_INSTAL = "(分期|分期付款|办分期|做分期|分几期还|按月分期还)"
_PLAIN = "(只办贷款|光办贷款|单办贷款|只办信用卡|只开卡)"
_INSURE = "(加保险|买这个保险|加上附加险|买意外险|加账户安全险|要这份保险)"
_MANUAL = "(手动还|自己还|自己转账还|每月自己还)"
_AUTO = "(自动还款|自动扣款|绑卡自动还|每月自动扣款)"
_BLOCK = "(挂失|挂失这张卡|办挂失|把卡挂失)"
_UNBLOCK = "(解冻|解除挂失|恢复使用|把卡解冻)"

#: frames in which the option [A] is turned down and [B] chosen
CONTRAST_FRAMES: tuple[str, ...] = (
    f"{_NEG}[A](了|)，{_AFF}[B](吧|了|就行|)",
    f"[A](就|)(算了|不要了|不考虑了)，{_AFF}[B](吧|)",
    "(我|)(考虑了一下|想了想|商量了一下)，(不|不想|不打算)[A]了，(还是|就)[B](吧|)",
    "[B](就行|就好|吧)，[A](我|)(不要|不需要|不考虑)(了|)",
    "[A]就不用了，(帮我|麻烦)[B]",
    "不用[A]了，[B](吧|就行|)",
    "(先|)别[A]，(帮我|)[B]",
)

#: (intent, the option it turns down, the option it chooses): the two intents of a family
#: share every word, only the scope of the negation tells them apart
CONTRASTS: tuple[tuple[str, str, str], ...] = (
    ("apply_instalment", _LUMP, _INSTAL),
    ("cancel_instalment", _INSTAL, _LUMP),
    ("add_insurance", _PLAIN, _INSURE),
    ("refuse_insurance", _INSURE, _PLAIN),
    ("enable_autopay", _MANUAL, _AUTO),
    ("cancel_autopay", _AUTO, _MANUAL),
    ("report_card_loss", _UNBLOCK, _BLOCK),
    ("unfreeze_card", _BLOCK, _UNBLOCK),
)

# -- corrections: "not A, but B", the customer setting a misunderstanding right ---------------
#: frames in which the customer wants [B], not [A]
CORRECTION_FRAMES: tuple[str, ...] = (
    "我不是(要|想)[A]，(是|而是|我是)(要|想)[B]",
    "(我|)(要|想)[B]，不是(要|想)[A]",
    "(你|)(搞错了|理解错了|听错了)，我(要|想)[B]，不(要|想)[A]",
    "(我|)不是(要|想)[A]的意思，我是想[B]",
    "[B]，[A]的话(就|)不用了",
    "(我|)说的是[B]，不是[A]",
)

#: (intent, what it wants, intent, what that one wants): each intent's corrections decline
#: the other's request, so the two share every word
CORRECTIONS: tuple[tuple[str, str, str, str], ...] = (
    ("repayment_date_query", "(查还款日|问还款日是哪天|确认还款日)",
     "change_repayment_date", "(改还款日|修改还款日|把还款日往后调)"),
    ("transfer_limit_query", "(查转账限额|问转账限额是多少)",
     "raise_transfer_limit", "(提高转账限额|调高转账限额|把转账限额调高)"),
    ("credit_limit_increase", "(提信用卡额度|提高信用额度|提额)",
     "raise_transfer_limit", "(提高转账限额|调高转账限额|提转账额度)"),
    ("annual_fee_query", "(问年费多少|查年费|了解年费怎么收)",
     "fee_waiver", "(免年费|申请减免年费|把年费退了)"),
    ("cancel_card", "(注销这张卡|销户|把卡注销)",
     "report_card_loss", "(挂失|把卡挂失|挂失这张卡)"),
    ("early_repayment", "(提前还款|把贷款提前还了)",
     "early_repayment_penalty", "(问提前还款的违约金|了解提前还款要多少违约金)"),
    ("apply_instalment", "(办分期|把账单分期)",
     "instalment_fee_query", "(问分期手续费|了解分期要多少手续费)"),
    ("overdue_consequence", "(问逾期会怎样|了解逾期的后果)",
     "deferred_repayment", "(申请延期还款|把还款往后延)"),
    ("bill_query", "(查账单|看这个月账单)", "refund_query", "(查退款|问退款到哪了)"),
    ("loan_rate_query", "(查现在的房贷利率|问我的贷款利率)",
     "lpr_rate_change", "(问LPR调整后我的利率|了解LPR下调对月供的影响)"),
)
