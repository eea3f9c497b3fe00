"""The built-in demo corpus: determinism, held-out template families, slices, annotations,
minimal pairs, files."""

from __future__ import annotations

import bisect
import csv
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from headwise.demo import (
    DEMO_INTENTS,
    DemoExample,
    Slot,
    Span,
    generate_demo_corpus,
    read_demo_jsonl,
    write_demo_corpus,
)
from headwise.demo.families import TRAIN_OOS_GROUPS, assign_families, catalogue, family_of
from headwise.demo.phenomena import CODE_MIX, surface_pool
from headwise.demo.render import annotate
from headwise.demo.values import (
    parse_amount,
    parse_date,
    parse_duration,
    parse_ordinal,
    parse_rate,
    parse_rate_change,
    parse_slot,
)
from headwise.text import OOS_LABEL, category_lexicon
from headwise.text.chinese_numerals import chinese_numeral, parse_chinese_numeral
from headwise.text.slices import COMPOUND_PHENOMENA, PHENOMENA
from headwise.text.typos import TYPOS

CATEGORIES = {"negation", "number", "domain"}
SLOT_NAMES = {"amount", "rate_change_bp", "rate_spread_bp", "rate_percent", "ordinal",
              "duration_months", "date", "card_tail"}
# written here, not taken from the generator: characters that negate, words holding one
# that do not, and domain words every occurrence of which must be marked
NEGATION_CHARS = "不没别未无拒"
NOT_NEGATING = ("不好意思", "对不起", "别人", "别的", "分别", "特别", "区别", "差不多", "无聊")
DOMAIN_WORDS = ("提前还款", "违约金", "手续费", "分期", "基点", "LPR", "保险", "挂失", "转账",
                "限额", "年费", "利率", "逾期", "自动还款")


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[DemoExample]]:
    return generate_demo_corpus(seed=0)


@functools.cache
def corpus_with(compound_share: float) -> dict[str, list[DemoExample]]:
    return generate_demo_corpus(seed=0, compound_share=compound_share)


@pytest.fixture(scope="module", params=[0.0, 0.25], ids=["default", "compound"])
def any_corpus(request) -> dict[str, list[DemoExample]]:
    """The default corpus, and one with a quarter compound questions."""
    return corpus_with(request.param)


def every(corpus):
    return [ex for split in corpus.values() for ex in split]


def digest(corpus) -> str:
    return hashlib.sha256(repr(corpus).encode()).hexdigest()


def test_deterministic_for_a_seed_and_across_hash_seeds():
    a = generate_demo_corpus(seed=3, per_intent=12, oos=10)
    assert a == generate_demo_corpus(seed=3, per_intent=12, oos=10)
    assert a != generate_demo_corpus(seed=4, per_intent=12, oos=10)
    # string hashing is randomised per process; the corpus must not depend on it
    code = ("import hashlib; from headwise.demo.corpus import generate_demo_corpus; "
            "print(hashlib.sha256(repr(generate_demo_corpus(seed=3, per_intent=12, oos=10))"
            ".encode()).hexdigest())")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == digest(a)


def test_intents_and_split_sizes(corpus):
    assert len(DEMO_INTENTS) >= 22 and OOS_LABEL not in DEMO_INTENTS
    for intent, (name, description) in DEMO_INTENTS.items():
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", intent)
        assert re.search(r"[\u4e00-\u9fff]", name) and len(description) > 10
    assert set(corpus) == {"train", "valid", "test"}
    counts = {name: Counter(ex.label for ex in split) for name, split in corpus.items()}
    for intent in DEMO_INTENTS:  # 120 = 84 + 18 + 18
        assert (counts["train"][intent], counts["valid"][intent], counts["test"][intent]) == (
            84, 18, 18), intent
    assert set(counts["train"]) == set(DEMO_INTENTS)
    assert counts["valid"][OOS_LABEL] == 75 and counts["test"][OOS_LABEL] == 75
    assert {len(corpus[s]) for s in ("valid", "test")} == {18 * len(DEMO_INTENTS) + 75}


def test_no_text_twice(any_corpus):
    texts = [ex.text for ex in every(any_corpus)]
    assert len(texts) == len(set(texts))
    small = generate_demo_corpus(seed=1, per_intent=5, oos=3)
    assert [len(small[s]) for s in ("train", "valid", "test")] == [
        3 * len(DEMO_INTENTS), len(DEMO_INTENTS) + 2, len(DEMO_INTENTS) + 1]


def test_out_of_scope_only_in_valid_and_test(corpus):
    assert all(ex.label != OOS_LABEL for ex in corpus["train"])
    oos = [ex for ex in every(corpus) if ex.label == OOS_LABEL]
    assert len(oos) == 150 and all(ex.intents == () for ex in oos)
    texts = " ".join(ex.text for ex in oos)
    # far off-topic chat (weather, food, jokes, tickets ...) and banking-sounding near misses,
    # from many templates (which topics a seed draws varies)
    topics = ("天气|下雨|多少度", "外卖|餐厅|火锅", "笑话|故事", "火车票|高铁票|机票",
              "电影|电视剧")
    assert sum(bool(re.search(w, texts)) for w in topics) >= 4
    near = [ex for ex in oos if ex.family.startswith("oos_near.")]
    assert 0.3 <= len(near) / len(oos) <= 0.5
    assert len({ex.template for ex in oos}) >= 40


#: sha256 of repr(generate_demo_corpus(...)) and of the files write_demo_corpus wrote, on the
#: code before the training out-of-scope families existed (main at 3ae35b1), moved on purpose
#: since when the minimal pairs gained the negation on the request's own verb (issue 37 item
#: 2), and the compound ones again when the drop families gained the request taken back by
#: its object and verb (headwise.demo.joins.TAKE_BACKS, issue 34): the corpus without those
#: families stays byte-identical
BEFORE_OOS_TRAIN = {
    "default": "e6e31ec56e92ab8354de98d68765a589a8f085744d04c56f6b7b0b5a3e251bc5",
    "compound": "b1538b562188eb8c6c88621f0326696f96dd3e6a248a6fbad741ab06ed7ebd4d",
    "small": "fcc3515b4c2438831a85e46942edad64fc422d08ee199c79f8450210a009f3e4",
    "files": "14a94fd50574f4a572e6376cfbe6d59776e886de7f93326d0c9172f7dd1c8937"}


def test_without_oos_train_the_corpus_is_what_it_was(tmp_path):
    assert digest(corpus_with(0.0)) == BEFORE_OOS_TRAIN["default"]
    assert digest(corpus_with(0.25)) == BEFORE_OOS_TRAIN["compound"]
    small = generate_demo_corpus(seed=3, per_intent=12, oos=10, oos_train=0)
    assert digest(small) == BEFORE_OOS_TRAIN["small"]
    paths = write_demo_corpus(tmp_path, seed=1, per_intent=30, oos=40, compound_share=0.25)
    h = hashlib.sha256()
    for name in sorted(paths):
        h.update(name.encode())
        h.update(paths[name].read_bytes())
    assert h.hexdigest() == BEFORE_OOS_TRAIN["files"]


@pytest.mark.parametrize("share", [0.0, 0.25])
def test_oos_train_adds_training_rows_of_their_own_families_and_leaves_valid_and_test(share):
    base = corpus_with(share)
    more = generate_demo_corpus(seed=0, compound_share=share, oos_train=200)
    # valid and test: the same rows in the same order
    assert more["valid"] == base["valid"] and more["test"] == base["test"]
    oos = [ex for ex in more["train"] if ex.label == OOS_LABEL]
    rest = [ex for ex in more["train"] if ex.label != OOS_LABEL]
    assert len(oos) == 200 and sorted(rest, key=repr) == sorted(base["train"], key=repr)
    assert all(ex.intents == () and ex.slots == () for ex in oos)
    groups = Counter(ex.family.rpartition(".")[0] for ex in oos)
    assert groups == {"oos_near_train": 80, "oos_train": 120}  # NEAR_MISS_SHARE 0.4
    assert all("oos_near_miss" in ex.slices for ex in oos
               if ex.family.startswith("oos_near_train"))
    assert len({ex.family for ex in oos}) > 40  # most of the families drawn
    # no family, template or text of valid or test; no text twice
    held = {ex.family for name in ("valid", "test") for ex in more[name]}
    assert not {ex.family for ex in oos} & held
    texts = [ex.text for ex in every(more)]
    assert len(texts) == len(set(texts))
    # mixed in, not appended; deterministic for a seed
    assert any(ex.label == OOS_LABEL for ex in more["train"][:100])
    assert more == generate_demo_corpus(seed=0, compound_share=share, oos_train=200)
    with pytest.raises(ValueError, match="oos_train"):
        generate_demo_corpus(oos_train=-1)


@pytest.mark.parametrize("share", [0.0, 0.25])
def test_dropped_train_adds_rows_taking_a_request_back_from_training_families_only(share):
    import random

    from headwise.demo.joins import assign_compound_families

    base = generate_demo_corpus(seed=0, compound_share=share, oos_train=50)
    more = generate_demo_corpus(seed=0, compound_share=share, oos_train=50, dropped_train=150)
    # valid and test: the same rows in the same order; training keeps every row it had
    assert more["valid"] == base["valid"] and more["test"] == base["test"]
    old = {ex.text for ex in base["train"]}
    added = [ex for ex in more["train"] if ex.text not in old]
    assert len(added) == 150 and len(more["train"]) == len(base["train"]) + 150
    assert sorted((ex for ex in more["train"] if ex.text in old), key=repr) \
        == sorted(base["train"], key=repr)
    # one intent kept, tagged as a request taken back, with a negation span before it
    for ex in added:
        assert len(ex.intents) == 1 and ex.label == ex.intents[0] != OOS_LABEL, ex
        assert {"dropped_request", "negation_scope"} <= set(ex.slices), ex
        assert any(s.category == "negation" for s in ex.spans), ex.text
    assert len({ex.label for ex in added}) >= 15  # kept requests of many intents
    # only the families compound questions train on (the split of their own stream)
    split_of = assign_compound_families(random.Random("0:compound"))
    for ex in added:
        assert ex.family.startswith("drop.") and split_of[ex.family] == "train", ex.family
        assert all(split_of[family_of(c)] == "train" for c in ex.clauses), ex.clauses
    held = {ex.family for name in ("valid", "test") for ex in more[name]}
    held_clauses = {family_of(c) for name in ("valid", "test") for ex in more[name]
                    for c in ex.clauses}
    assert not {ex.family for ex in added} & held
    assert not {family_of(c) for ex in added for c in ex.clauses} & held_clauses
    texts = [ex.text for ex in every(more)]
    assert len(texts) == len(set(texts))
    # mixed in, deterministic for a seed
    assert any(ex.text not in old for ex in more["train"][:200])
    assert more == generate_demo_corpus(seed=0, compound_share=share, oos_train=50,
                                        dropped_train=150)
    with pytest.raises(ValueError, match="dropped_train"):
        generate_demo_corpus(dropped_train=-1)


def test_the_training_oos_templates_are_none_of_the_intents_and_none_of_valid_and_tests():
    from headwise.demo.lexicon import (
        OOS_NEAR_MISS_TEMPLATES,
        OOS_NEAR_MISS_TRAIN_TEMPLATES,
        OOS_TEMPLATES,
        OOS_TRAIN_TEMPLATES,
    )
    from headwise.demo.render import intent_templates

    train = OOS_TRAIN_TEMPLATES + OOS_NEAR_MISS_TRAIN_TEMPLATES
    assert not set(train) & set(OOS_TEMPLATES + OOS_NEAR_MISS_TEMPLATES)
    assert len(set(train)) == len(train)
    intents = {t for ts in intent_templates().values() for t in ts}
    assert not set(train) & intents
    # the request words of intents that a near miss could be read as are kept out (the
    # walkthrough's off-topic check, 周末想带孩子去动物园..., stays unseen too)
    for word in ("还款", "贷款", "分期", "挂失", "转账", "年费", "手续费", "账单", "退款",
                 "额度", "利率", "逾期", "信用卡", "动物园", "门票"):
        assert not any(word in t for t in train), word


def test_written_files_carry_the_training_oos_rows(tmp_path):
    paths = write_demo_corpus(tmp_path, seed=2, per_intent=6, oos=4, oos_train=10)
    with paths["train.csv"].open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sum(r["label"] == OOS_LABEL for r in rows) == 10
    assert [r["text"] for r in rows] == [
        ex.text for ex in generate_demo_corpus(seed=2, per_intent=6, oos=4,
                                               oos_train=10)["train"]]


def test_spans_and_slots_slice_to_their_text(any_corpus):
    names = Counter()
    for ex in every(any_corpus):
        assert not re.search(r"[(){}<>|\[\]]", ex.text), ex.text  # no template notation left
        assert ex.label in DEMO_INTENTS or ex.label == OOS_LABEL
        assert ex.label == OOS_LABEL or ex.intents[0] == ex.label
        assert all(i in DEMO_INTENTS for i in ex.intents)
        ends = 0
        for span in ex.spans:  # sorted, non-overlapping, inside the text
            assert span.category in CATEGORIES
            assert ends <= span.start < span.end <= len(ex.text)
            ends = span.end
        numbers = [s for s in ex.spans if s.category == "number"]
        for slot in ex.slots:
            names[slot.name] += 1
            assert slot.name in SLOT_NAMES and ex.text[slot.start:slot.end] == slot.text
            assert parse_slot(slot.name, slot.text) == slot.value  # parsed by another route
            inside = [s for s in numbers if slot.start <= s.start and s.end <= slot.end]
            assert all(s.value == slot.value for s in inside)
        assert all(any(sl.start <= s.start and s.end <= sl.end for sl in ex.slots)
                   for s in numbers)
        covered = {i for s in numbers for i in range(s.start, s.end)}
        assert all(i in covered for i, c in enumerate(ex.text) if c.isdigit()), ex.text
    assert set(names) == SLOT_NAMES


def test_negations_and_domain_terms_are_all_marked(any_corpus):
    lexicon = category_lexicon()
    for ex in every(any_corpus):
        marked = {cat: set() for cat in CATEGORIES}
        for span in ex.spans:
            marked[span.category].update(range(span.start, span.end))
            if span.category != "number":
                assert ex.text[span.start:span.end] in lexicon[span.category]
        exempt = {i for word in NOT_NEGATING for m in re.finditer(word, ex.text)
                  for i in range(m.start(), m.end())}
        for i, c in enumerate(ex.text):
            a_not_a = 0 < i < len(ex.text) - 1 and ex.text[i - 1] == ex.text[i + 1]
            if c in NEGATION_CHARS and i not in exempt and not (c in "不没" and a_not_a):
                assert i in marked["negation"], (ex.text, i)
        for word in DOMAIN_WORDS:
            for m in re.finditer(word, ex.text):
                assert set(range(m.start(), m.end())) <= marked["domain"], (ex.text, word)


def test_annotations_of_one_example_by_hand():
    amount = {"amount": 30500.0, "currency": "CNY"}
    spans = annotate("这笔30500块钱的账单我不打算分期了", [(2, 7, amount)])
    assert spans == [(2, 7, "number", amount), (10, 12, "domain", None),
                     (13, 16, "negation", None), (16, 18, "domain", None)]
    ex = DemoExample("这笔30500块钱的账单我不打算分期了", "cancel_instalment",
                     ("cancel_instalment",), tuple(Span(*sp) for sp in spans),
                     (Slot("amount", 2, 9, "30500块钱", amount),), "pair.0:0",
                     ("numbers", "negation_scope"))
    assert ex.family == "pair.0"
    hash(ex)  # usable in sets although slot values are dicts
    # the A-not-A question and 不好意思 negate nothing
    assert [sp[2] for sp in annotate("不好意思，提前还款要不要违约金", [])] == ["domain", "domain"]


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
@pytest.mark.parametrize("per_intent", [6, 30, 120])
def test_no_template_or_family_in_two_splits(seed, per_intent):
    corpus = generate_demo_corpus(seed=seed, per_intent=per_intent, oos=40)
    templates = {name: {ex.template for ex in split} for name, split in corpus.items()}
    families = {name: {ex.family for ex in split} for name, split in corpus.items()}
    for a, b in (("train", "valid"), ("train", "test"), ("valid", "test")):
        assert not templates[a] & templates[b], (a, b)
        assert not families[a] & families[b], (a, b)
    known = {t.id: t for t in catalogue()}
    for split in corpus.values():
        for ex in split:
            assert ex.template in known and family_of(ex.template) == ex.family
            assert known[ex.template].intent in (ex.label, OOS_LABEL) or \
                known[ex.template].negated == ex.label


def test_family_assignment_is_by_seed_and_holds_out_one_family_per_group():
    templates = catalogue()
    import random
    a, b = assign_families(templates, random.Random(0)), assign_families(templates,
                                                                         random.Random(1))
    assert a != b and a == assign_families(templates, random.Random(0))
    for intent in DEMO_INTENTS:
        own = Counter(split for family, split in a.items()
                      if family.rpartition(".")[0] == intent)
        assert own["test"] == 1 and own["valid"] == 1 and own["train"] >= 3, intent
    assert all(a[t.family] in ("valid", "test") for t in templates
               if t.intent == OOS_LABEL and t.group not in TRAIN_OOS_GROUPS)
    # the families written for training rows go to train, drawing nothing from the source
    trained = [t for t in templates if t.group in TRAIN_OOS_GROUPS]
    assert trained and all(a[t.family] == "train" and t.intent == OOS_LABEL for t in trained)
    rng = random.Random(0)
    assign_families([t for t in templates if t.group not in TRAIN_OOS_GROUPS], rng)
    other = random.Random(0)
    assign_families(templates, other)
    assert rng.getstate() == other.getstate()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_phenomenon_is_in_the_test_split(seed):
    # compound questions only come with compound_share (tests/demo/test_demo_compound.py)
    for share, names in ((0.0, set(PHENOMENA) - set(COMPOUND_PHENOMENA)),
                         (0.25, set(PHENOMENA))):
        corpus = generate_demo_corpus(seed=seed, compound_share=share)
        for name in ("valid", "test"):
            counts = Counter(x for ex in corpus[name] for x in ex.slices)
            assert set(counts) == names, (name, counts)
            assert min(counts.values()) >= 10, counts


def test_slices_say_what_the_text_shows(any_corpus):
    typos = [form for _, forms in TYPOS for form in forms]
    english = [form for _, forms in CODE_MIX for form in forms]
    for ex in every(any_corpus):
        assert ex.slices and set(ex.slices) <= set(PHENOMENA), ex
        assert list(ex.slices) == sorted(ex.slices, key=PHENOMENA.index)
        assert ("plain" in ex.slices) == (ex.slices == ("plain",))
        assert ("numbers" in ex.slices) == bool(ex.slots), ex
        assert ("oos_near_miss" in ex.slices) == ex.family.startswith("oos_near."), ex
        if "typo" in ex.slices:
            assert any(t in ex.text for t in typos), ex.text
        if "code_mixed" in ex.slices:  # a typo may land in a half-English form (自懂pay)
            assert any(e in ex.text for e in english) or (
                "typo" in ex.slices and re.search("[A-Za-z]", ex.text)), ex.text
        if "negation_scope" in ex.slices:  # a negation word, or a refusal (A就算了，B)
            assert any(s.category == "negation" for s in ex.spans) or "算了" in ex.text, ex.text
        if ex.slices == ("plain",):
            assert not re.search("[a-z]", ex.text), ex.text


def test_held_out_surface_forms_never_reach_training(corpus):
    held = [form for entry in set(TYPOS) - set(surface_pool("TYPOS", 0, True))
            for form in entry[1]]
    assert held
    train = " ".join(ex.text for ex in corpus["train"])
    rest = " ".join(ex.text for name in ("valid", "test") for ex in corpus[name])
    assert not [form for form in held if form in train]
    assert any(form in rest for form in held)


def test_near_miss_out_of_scope_texts_are_never_in_scope_texts(corpus):
    near = [ex for ex in every(corpus) if "oos_near_miss" in ex.slices]
    assert len(near) == 60 and all(ex.label == OOS_LABEL and ex.intents == () for ex in near)
    in_scope = {ex.text for ex in every(corpus) if ex.label != OOS_LABEL}
    assert not {ex.text for ex in near} & in_scope
    texts = " ".join(ex.text for ex in near)
    # 60 draws from the near-miss templates: other institutions' cards and accounts (股票开户,
    # 炒股开什么账户) among them
    assert all(w in texts for w in ("公积金", "社保卡", "账户"))
    for seed in (1, 2):
        other = generate_demo_corpus(seed=seed, per_intent=30, oos=60)
        in_scope = {ex.text for ex in every(other) if ex.label != OOS_LABEL}
        assert not {ex.text for ex in every(other) if "oos_near_miss" in ex.slices} & in_scope


def minimal_pairs(examples):
    """(negated, plain) examples whose texts differ only where the first has a negation."""
    index = sorted((ex.text, i) for i, ex in enumerate(examples))
    keys = [t for t, _ in index]
    found = []
    for ex in examples:
        for span in ex.spans:
            if span.category != "negation":
                continue
            head, tail = ex.text[:span.start], ex.text[span.end:]
            for j in range(bisect.bisect_left(keys, head), len(keys)):
                other = examples[index[j][1]]
                if not other.text.startswith(head):
                    break
                middle = len(other.text) - len(head) - len(tail)
                if (0 <= middle <= 4 and other.text.endswith(tail) and other.label != ex.label
                        and not any(s.category == "negation" for s in other.spans)):
                    found.append((ex, other))
    return found


def test_minimal_pairs_where_negation_changes_the_label(corpus):
    pairs = minimal_pairs(every(corpus))
    families = Counter((neg.label, plain.label) for neg, plain in pairs)
    assert len(pairs) >= 100 and len(families) >= 4, families
    assert ("cancel_instalment", "apply_instalment") in families
    assert ("refuse_insurance", "add_insurance") in families
    # the negation on the request's own verb (我不想开通自动还款) asks for the pair's other
    # intent, for every intent whose negation is an intent of its own
    for negated, verb in (("cancel_autopay", "开通"), ("cancel_instalment", "办"),
                          ("refuse_insurance", "买"), ("unfreeze_card", "挂失")):
        assert any(neg.label == negated and re.search(f"[不没别][^，。？]{{0,3}}{verb}", neg.text)
                   for neg, _ in pairs), negated
    test_pairs = minimal_pairs(corpus["test"])  # pairs stay together in one split
    assert len(test_pairs) >= 8


def test_negation_that_does_not_flip_and_compounds(corpus):
    def negated(intent):
        return [ex for ex in every(corpus) if ex.label == intent
                and any(s.category == "negation" for s in ex.spans)]
    # the plain side of each negation pair also has negations that keep its label
    for intent in ("apply_instalment", "add_insurance", "enable_autopay", "report_card_loss",
                   "early_repayment", "early_repayment_penalty"):
        assert len(negated(intent)) >= 10, intent
    assert any("不知道提前还款要不要违约金" in ex.text for ex in negated("early_repayment_penalty"))
    # compounds: 提前还款 alone vs with 违约金/手续费
    surface = {"typo", "synonym", "code_mixed"}  # these may rewrite the topic words
    penalty = [ex for ex in every(corpus) if ex.label == "early_repayment_penalty"
               and not surface & set(ex.slices)]
    assert len(penalty) > 40
    assert all("提前" in ex.text and re.search("违约金|手续费", ex.text) for ex in penalty)
    plain = [ex for ex in every(corpus) if ex.label == "early_repayment"]
    assert sum("违约金" in ex.text for ex in plain) >= 5
    multi = Counter(ex.intents for ex in every(corpus) if len(ex.intents) > 1)
    assert multi[("early_repayment_penalty", "early_repayment")] > 0
    assert multi[("report_card_loss", "reissue_card")] > 0


def test_slot_normalisation_by_hand():
    assert parse_amount("三千五百元") == 3500.0
    assert parse_amount("3,500.00元") == 3500.0
    assert parse_amount("1.5万") == 15000.0
    assert parse_amount("两万块") == 20000.0
    assert parse_amount("一万零五块钱") == 10005.0
    assert parse_rate_change("下调25个基点") == -25
    assert parse_rate_change("上调10个基点") == 10
    assert parse_rate_change("降了二十五bp") == -25
    assert parse_rate("3.85%") == 3.85 and parse_rate("百分之四点二") == 4.2
    assert parse_ordinal("第三期") == 3 and parse_ordinal("第12期") == 12
    assert parse_ordinal("第二十四期") == 24
    assert parse_duration("12期") == 12 and parse_duration("24个月") == 24
    assert parse_duration("两年") == 24
    assert parse_date("3月15日") == "2026-03-15"
    assert parse_date("下个月5号") == "2026-02-05"
    assert parse_date("上个月20号") == "2025-12-20"
    assert parse_date("明天") == "2026-01-16"
    assert parse_date("每月10号") == "R/2026-02-10/P1M"
    assert parse_date("每个月20日") == "R/2026-01-20/P1M"
    assert [chinese_numeral(n) for n in (12, 20, 105, 1005, 3500, 12000)] == [
        "十二", "二十", "一百零五", "一千零五", "三千五百", "一万二千"]
    assert chinese_numeral(20000, liang=True) == "两万"
    assert chinese_numeral(2500, liang=True) == "两千五百"
    assert all(parse_chinese_numeral(chinese_numeral(n, liang=liang)) == n
               for n in range(0, 120000, 7) for liang in (False, True))
    with pytest.raises(ValueError):
        parse_amount("三千五百美元")


def test_written_files_parse_back(tmp_path):
    corpus = generate_demo_corpus(seed=2, per_intent=6, oos=4)
    paths = write_demo_corpus(tmp_path / "demo", seed=2, per_intent=6, oos=4)
    assert sorted(paths) == sorted(f"{s}.{ext}" for s in ("train", "valid", "test")
                                   for ext in ("csv", "jsonl"))
    for split, examples in corpus.items():
        with paths[f"{split}.csv"].open(encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        assert rows[0] == ["text", "label", "slices", "template"]
        assert rows[1:] == [[ex.text, ex.label, ";".join(ex.slices), ex.template]
                            for ex in examples]
        lines = paths[f"{split}.jsonl"].read_text(encoding="utf-8").splitlines()
        assert [json.loads(line) for line in lines] == [
            {"text": ex.text, "label": ex.label, "intents": list(ex.intents),
             "spans": [[s.start, s.end, s.category, s.value] for s in ex.spans],
             "slots": [{"name": s.name, "start": s.start, "end": s.end, "text": s.text,
                        "value": s.value} for s in ex.slots],
             "template": ex.template, "slices": list(ex.slices),
             "reference_date": "2026-01-15"}
            for ex in examples]
        assert read_demo_jsonl(paths[f"{split}.jsonl"]) == examples
    old = tmp_path / "old.jsonl"  # written before templates and slices were recorded
    old.write_text('{"text": "x", "label": "oos", "intents": [], "spans": [], "slots": []}\n',
                   encoding="utf-8")
    assert read_demo_jsonl(old) == [DemoExample("x", "oos", (), (), ())]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        read_demo_jsonl(bad)


def test_lexicon_and_argument_errors():
    lexicon = category_lexicon()
    assert set(lexicon) == {"negation", "domain"}
    assert {"不需要", "不接受", "不要", "没有"} <= set(lexicon["negation"])
    assert {"提前还款", "违约金", "分期", "基点", "LPR", "手续费", "保险"} <= set(lexicon["domain"])
    lexicon["negation"].clear()
    assert category_lexicon()["negation"]  # a copy
    with pytest.raises(ValueError, match="per_intent"):
        generate_demo_corpus(per_intent=2)
    with pytest.raises(ValueError, match="oos"):
        generate_demo_corpus(oos=-1)


def test_templates_parse_and_pairs_differ_only_at_the_marker():
    import random

    from headwise.demo.lexicon import (
        OOS_NEAR_MISS_TEMPLATES,
        OOS_NEAR_MISS_TRAIN_TEMPLATES,
        OOS_TEMPLATES,
        OOS_TRAIN_TEMPLATES,
        PAIR_TEMPLATES,
    )
    from headwise.demo.render import intent_templates, parse_template, render

    for intent, templates in intent_templates().items():
        assert len(templates) >= 8, intent
        for template in templates:
            assert all(i in DEMO_INTENTS for i in parse_template(template)[2]), template
    for template in (OOS_TEMPLATES + OOS_NEAR_MISS_TEMPLATES + OOS_TRAIN_TEMPLATES
                     + OOS_NEAR_MISS_TRAIN_TEMPLATES):
        parse_template(template)
    for pos, neg, template in PAIR_TEMPLATES:
        assert pos in DEMO_INTENTS and neg in DEMO_INTENTS
        for seed in range(20):
            a = render(template, random.Random(seed))
            b = render(template, random.Random(seed), negate=True)
            head = 0
            while a.text[head] == b.text[head]:
                head += 1
            tail = 0
            while tail < min(len(a.text), len(b.text)) - head and a.text[-1 - tail] == b.text[
                    -1 - tail]:
                tail += 1
            plain, negated = a.text[head:len(a.text) - tail], b.text[head:len(b.text) - tail]
            assert len(plain) <= 4 and len(negated) <= 4, (a.text, b.text)
            assert re.search("[不没别]", negated) and not re.search("[不没别]", plain)
    for bad in ("{nope}", "(a|b", "a>b"):
        with pytest.raises(ValueError):
            parse_template(bad)
    from headwise.demo.render import template_tags

    assert template_tags("分期不要了 #neg #order") == ("neg", "order")
    assert parse_template("分期不要了 #neg")[0] == parse_template("分期不要了")[0]
    with pytest.raises(ValueError, match="unknown tag"):
        template_tags("分期 #nope")
