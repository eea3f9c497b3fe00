"""Compound questions in the demo corpus (``compound_share``), checked by reading the data:
shares, held-out join and clause families, intent pairs unseen in training, requests taken
back by a negation, slot spans and values, determinism, and the default left as it was."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path

import pytest

from headwise.demo import DEMO_INTENTS, generate_demo_corpus, read_demo_jsonl, write_demo_corpus
from headwise.demo.families import family_of
from headwise.demo.joins import RELATED_PAIRS
from headwise.slots import normalize_slot
from headwise.text import OOS_LABEL

SPLITS = ("train", "valid", "test")
SHARE = 0.25
SURFACE = {"typo", "synonym", "code_mixed"}  # layers that may rewrite a topic word
# written here, not taken from the generator: words that name each intent's request
KEYWORDS: dict[str, str] = {
    "early_repayment": "提前还|提前结清|还清",
    "early_repayment_penalty": "违约金|手续费",
    "lpr_rate_change": "LPR",
    "loan_rate_query": "利率|基点",
    "apply_instalment": "分期|分[0-9一二两三四五六七八九十]+(期|个月|年)",
    "cancel_instalment": "分期",
    "instalment_fee_query": "手续费|费率|利息",
    "report_card_loss": "挂失|冻结",
    "unfreeze_card": "解冻|冻结|解锁",
    "reissue_card": "补|新卡|办一张",
    "cancel_card": "注销|销户|销卡",
    "transfer_limit_query": "限额|转多少",
    "raise_transfer_limit": "限额|额度",
    "transfer_failed": "转账|转的|转了|转不出",
    "add_insurance": "险",
    "refuse_insurance": "险",
    "annual_fee_query": "年费",
    "fee_waiver": "年费",
    "repayment_date_query": "还款日|来得及",
    "change_repayment_date": "还款日",
    "overdue_consequence": "逾期|征信",
    "deferred_repayment": "延期|宽限|延到|往后推",
    "credit_limit_increase": "额度|提额",
    "bill_query": "账单|还款额",
    "refund_query": "退款|退的",
    "enable_autopay": "自动",
    "cancel_autopay": "自动",
}
CLAUSE_BREAK = re.compile(r"[，,。？?！!： ]")
# sha256 of the files write_demo_corpus writes for the default corpus (compound_share 0),
# last changed on purpose when the minimal pairs gained the negation on the request's own
# verb (我不想开通自动还款, issue 37 item 2): the default corpus stays byte for byte what it
# is unless a change means to move it
BEFORE = {
    (0, 120, 150): "384ac6c265bc530a84bde95851833f9076f0d4494ad377568aa58ef712ad0ac9",
    (3, 12, 10): "f9b2823e14e060971036a96363c358ce6b8de91656e0e8acd8d9d0f90c8e7992",
}


def pairs(intents) -> set[tuple[str, str]]:
    return {tuple(sorted(p)) for p in combinations(intents, 2)}


@pytest.fixture(scope="module", params=[(0, 12), (1, 30)], ids=["seed0-12", "seed1-30"])
def corpus(request):
    seed, per_intent = request.param
    return generate_demo_corpus(seed=seed, per_intent=per_intent, oos=20,
                                compound_share=SHARE)


def files_digest(directory: Path, **kwargs) -> str:
    """The files' digest as that code wrote them: every JSON line's ``reference_date`` (the
    corpus's "today", written since) is taken out, the rest is kept byte for byte."""
    paths = write_demo_corpus(directory, **kwargs)
    h = hashlib.sha256()
    for name in sorted(paths):
        h.update(name.encode())
        data = paths[name].read_bytes()
        if name.endswith(".jsonl"):
            rows = [json.loads(line) for line in data.decode("utf-8").splitlines()]
            assert all(r.pop("reference_date") == "2026-01-15" for r in rows)
            data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
        h.update(data)
    return h.hexdigest()


def test_keywords_cover_every_intent():
    assert set(KEYWORDS) == set(DEMO_INTENTS)


def test_a_quarter_of_each_split_has_several_intents(corpus):
    for name in SPLITS:
        rows = corpus[name]
        multi = sum(len(ex.intents) > 1 for ex in rows)
        assert abs(multi / len(rows) - SHARE) < 0.02, (name, multi, len(rows))
        sizes = Counter(len(ex.intents) for ex in rows)
        assert sizes[2] > 0 and sizes[3] > 0, (name, sizes)  # pairs and triples
        for ex in rows:
            assert ex.label == (ex.intents[0] if ex.intents else OOS_LABEL)
            assert len(set(ex.intents)) == len(ex.intents)
            assert ("compound" in ex.slices) == (len(ex.intents) > 1), ex


def test_no_join_clause_or_template_family_in_two_splits(corpus):
    templates = {name: {ex.template for ex in corpus[name]} for name in SPLITS}
    families = {name: {ex.family for ex in corpus[name]} for name in SPLITS}
    clauses = {name: {c for ex in corpus[name] for c in ex.clauses} for name in SPLITS}
    clause_families = {name: {family_of(c) for c in clauses[name]} for name in SPLITS}
    for a, b in (("train", "valid"), ("train", "test"), ("valid", "test")):
        for sets in (templates, families, clauses, clause_families):
            assert not sets[a] & sets[b], (a, b, sets[a] & sets[b])
    for name in SPLITS:  # each split is joined in at least two ways, and takes requests back
        joins = {f for f in families[name] if f.startswith("join.")}
        assert len(joins) >= 2 and any(f.startswith("drop.") for f in families[name]), name
    texts = [ex.text for name in SPLITS for ex in corpus[name]]
    assert len(texts) == len(set(texts))


def test_test_holds_intent_pairs_never_together_in_training(corpus):
    trained = {p for ex in corpus["train"] for p in pairs(ex.intents)}
    related = {tuple(sorted(p)) for p in RELATED_PAIRS}
    assert not any("unseen_pair" in ex.slices for ex in corpus["train"])
    unseen = {}
    for name in ("valid", "test"):
        unseen[name] = set()
        for ex in corpus[name]:
            new = pairs(ex.intents) - trained
            assert ("unseen_pair" in ex.slices) == bool(new), ex
            unseen[name] |= new
        tagged = sum("unseen_pair" in ex.slices for ex in corpus[name])
        multi = sum(len(ex.intents) > 1 for ex in corpus[name])
        assert tagged >= 0.2 * multi, (name, tagged, multi)
    assert len(unseen["test"]) >= 10 and len(unseen["valid"]) >= 5
    assert unseen["test"] & related  # intents that belong together, never seen together
    # both kinds of pairs in every split: intents that belong together and ones that do not
    for name in SPLITS:
        kinds = Counter(bool(pairs(ex.intents) & related) for ex in corpus[name]
                        if len(ex.intents) == 2)
        assert kinds[True] >= 0.25 * sum(kinds.values()) and kinds[False] > 0, (name, kinds)


def test_a_request_taken_back_is_not_labelled(corpus):
    checked = 0
    for name in SPLITS:
        dropped = [ex for ex in corpus[name] if "dropped_request" in ex.slices]
        assert len(dropped) >= 0.05 * len(corpus[name]), name
        for ex in dropped:
            assert len(ex.intents) == 1 and "negation_scope" in ex.slices, ex
            negations = [s for s in ex.spans if s.category == "negation"]
            assert negations, ex.text
            # the clause of the first negation holds what is taken back
            start = max((m.end() for m in CLAUSE_BREAK.finditer(ex.text, 0, negations[0].start)),
                        default=0)
            end = next((m.start() for m in CLAUSE_BREAK.finditer(ex.text, negations[0].end)),
                       len(ex.text))
            # every slot is in the request kept, none in the one taken back
            assert all(slot.start >= end for slot in ex.slots), ex.text
            assert ("numbers_in_second" in ex.slices) == bool(ex.slots), ex
            if (SURFACE | {"long_context"}) & set(ex.slices):  # a context clause may
                continue  # hold a negation of its own (手机用得不熟)
            negated, rest = ex.text[start:end], ex.text[end:]
            (kept,) = ex.intents
            taken_back = [i for i in DEMO_INTENTS
                          if i != kept and re.search(KEYWORDS[i], negated)]
            assert taken_back, (ex.text, negated)
            assert re.search(KEYWORDS[kept], rest), (ex.text, kept)
            checked += 1
    assert checked >= 10


def test_slots_slice_to_their_text_and_normalise(corpus):
    names, later = Counter(), 0
    for name in SPLITS:
        for ex in corpus[name]:
            for slot in ex.slots:
                assert ex.text[slot.start:slot.end] == slot.text, ex
                assert normalize_slot(slot.name, slot.text) == slot.value, (ex.text, slot)
                if ex.clauses:
                    names[slot.name] += 1
            if "numbers_in_second" in ex.slices:
                assert ex.slots and ("numbers" in ex.slices), ex
                later += 1
            spans = [s for s in ex.spans if s.category == "number"]
            assert all(any(sl.start <= s.start and s.end <= sl.end for sl in ex.slots)
                       for s in spans), ex
    assert later > 0
    assert {"amount", "ordinal", "date", "card_tail", "duration_months",
            "rate_percent", "rate_change_bp"} <= set(names), names


def test_deterministic_for_a_seed_and_across_hash_seeds():
    kwargs = {"per_intent": 12, "oos": 10, "compound_share": SHARE}
    a = generate_demo_corpus(seed=3, **kwargs)
    assert a == generate_demo_corpus(seed=3, **kwargs)
    assert a != generate_demo_corpus(seed=4, **kwargs)
    code = ("import hashlib; from headwise.demo.corpus import generate_demo_corpus; "
            "print(hashlib.sha256(repr(generate_demo_corpus(seed=3, per_intent=12, oos=10, "
            "compound_share=0.25)).encode()).hexdigest())")
    env = {**os.environ, "PYTHONHASHSEED": "4321"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == hashlib.sha256(repr(a).encode()).hexdigest()


@pytest.mark.parametrize("key", sorted(BEFORE))
def test_the_default_corpus_is_byte_for_byte_as_before(key, tmp_path):
    seed, per_intent, oos = key
    kwargs = {"seed": seed, "per_intent": per_intent, "oos": oos}
    assert files_digest(tmp_path / "a", **kwargs) == BEFORE[key]
    assert files_digest(tmp_path / "b", compound_share=0.0, **kwargs) == BEFORE[key]


def test_compound_files_parse_back_and_share_is_checked(tmp_path):
    kwargs = {"seed": 2, "per_intent": 6, "oos": 4, "compound_share": SHARE}
    corpus = generate_demo_corpus(**kwargs)
    paths = write_demo_corpus(tmp_path, **kwargs)
    for name in SPLITS:
        assert read_demo_jsonl(paths[f"{name}.jsonl"]) == corpus[name]
    assert any(ex.clauses for ex in corpus["train"])
    for bad in (-0.1, 0.8):
        with pytest.raises(ValueError, match="compound_share"):
            generate_demo_corpus(compound_share=bad)


def test_clauses_joins_and_pairs_are_sound_data():
    import random

    from headwise.demo.joins import (
        CLAUSES,
        CONFLICTING_PAIRS,
        DROP_FAMILIES,
        JOIN_FAMILIES,
        TAKE_BACKS,
        TOPICS,
        clause_catalogue,
        join_catalogue,
    )
    from headwise.demo.render import render

    assert set(CLAUSES) == set(DEMO_INTENTS)
    for intent, families in CLAUSES.items():  # one family each for test, valid and training
        assert len(families) >= 3, intent
    for clause in clause_catalogue():  # each clause names its intent's request
        for seed in range(5):
            text = render(clause.template, random.Random(seed), final=False).text
            assert re.search(KEYWORDS[clause.intent], text), (clause.id, text)
    joins = join_catalogue()
    assert len({j.family for j in joins}) == len(JOIN_FAMILIES) + len(DROP_FAMILIES)
    for k in range(len(JOIN_FAMILIES)):  # every join family joins two intents of any kind
        assert any(j.family == f"join.{k}" and j.parts == 2 and not j.fee_only
                   for j in joins), k
    conflicting = {i for pair in CONFLICTING_PAIRS for i in pair}
    for intent, topics in TOPICS.items():  # taking it back must not be an intent of its own
        assert intent in DEMO_INTENTS and intent not in conflicting, intent
        assert all(not re.search("[不没别未无拒{}()0-9]", t) for t in topics), topics
        assert all(re.search(KEYWORDS[intent], t) for t in topics), topics
    for intent, pairs in TAKE_BACKS.items():  # the request's own object and verb
        assert intent in DEMO_INTENTS, intent
        for obj, verb in pairs:
            assert not re.search("[不没别未无拒{}()0-9]", obj + verb), (obj, verb)
            assert re.search(KEYWORDS[intent], verb + obj), (intent, obj, verb)
    drops = [j for j in joins if j.family.startswith("drop.")]
    assert {j.takes_back for j in drops} == {frozenset("X"), frozenset("OV")}
    for k in range(len(DROP_FAMILIES)):  # a family names what it takes back one way
        assert len({j.takes_back for j in drops if j.family == f"drop.{k}"}) == 1, k
    for a, b in RELATED_PAIRS:
        assert a in DEMO_INTENTS and b in DEMO_INTENTS and a != b
        assert {a, b} not in [set(p) for p in CONFLICTING_PAIRS]


def test_a_request_taken_back_by_its_object_and_verb():
    """Issue 34's example is a message the generator writes, labelled with the request kept;
    a template refuses an intent it cannot name."""
    import random

    from headwise.demo.joins import (
        TAKE_BACKS,
        TOPICS,
        can_take_back,
        clause_catalogue,
        join_catalogue,
        render_dropped,
    )

    joins = {j.id: j for j in join_catalogue()}
    by_verb = [j for j in joins.values() if j.takes_back == {"O", "V"}]
    by_topic = [j for j in joins.values() if j.takes_back == {"X"}]
    assert by_verb and by_topic
    keep = next(c for c in clause_catalogue()
                if c.intent == "credit_limit_increase" and c.template == "提额")
    template = next(j for j in by_verb if j.template.startswith("[O](就|)不[V]了"))
    texts = {render_dropped(template, "add_insurance", keep, random.Random(seed))
             .utterance.text for seed in range(200)}
    assert "保险不加了，帮我提额就行" in texts
    message = render_dropped(template, "add_insurance", keep, random.Random(0))
    assert message.clauses == (keep.id,)  # only the request kept is a clause of it
    # insurance is taken back only by its own verb: no topic, so no [X] template
    assert "add_insurance" in TAKE_BACKS and "add_insurance" not in TOPICS
    assert not can_take_back(by_topic[0], "add_insurance")
    with pytest.raises(ValueError, match="cannot take back add_insurance"):
        render_dropped(by_topic[0], "add_insurance", keep, random.Random(0))
    assert not can_take_back(by_verb[0], "bill_query")  # neither a topic nor a verb pair
    assert can_take_back(by_topic[0], "bill_query") == ("bill_query" in TOPICS)
