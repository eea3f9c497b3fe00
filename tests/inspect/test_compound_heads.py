"""The head analysis of a compound (multi-label) model: join words and numbers of the second
request as categories, exact match as the score, bad cases grouped by slice, the report and
`headwise inspect`, and the BiLSTM joint model refused."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from headwise.cli import main
from headwise.demo.corpus import generate_demo_corpus
from headwise.inspect import (
    InspectOptions,
    NoAttentionError,
    gradient_importance,
    inspect_classifier,
    label_ids,
    link_slices,
    segment,
    write_report,
)
from headwise.inspect.categories import (
    JOIN,
    NUMBER_IN_SECOND,
    chinese_lexicon,
    join_lexicon,
    numbers_after_join,
)
from headwise.intent.compound import CompoundClassifier
from headwise.intent.compound.thresholds import Thresholds
from headwise.models import JointIntentSlotModel, ModelConfig
from headwise.models.lstm_joint import BiLSTMJointModel
from headwise.text.char_level import train_char_tokenizer

TINY = InspectOptions(importance_examples=4, ablation_examples=12, random_repeats=1,
                      faithfulness_examples=2, show_examples=4, pruning_step=0.5,
                      attribution_cases=1, agreement_examples=1)

#: hand-written texts, the characters of their connectives marked by hand
CHINESE_JOINS = [
    ("帮我把尾号1234的卡挂失，顺便补办一张", ["顺便"]),
    ("查一下账单，另外我还想提额到5万", ["另外"]),
    ("年费是多少？那就帮我免了", ["那就"]),
    ("先帮我挂失，再补办一张新卡", ["再"]),
    ("我想提前还款，不行的话就把还款日改到15号", ["不行的话", "就"]),
    ("帮我查一下账单", []),
    ("先冻结我丢的那张卡", []),  # 先 and 那 inside one request are no joins
]


def _marked(text: str, words: list[str]) -> set[int]:
    out: set[int] = set()
    for w in words:
        start = text.index(w)
        out.update(range(start, start + len(w)))
    return out


def test_chinese_join_words_are_exactly_the_hand_marked_ones():
    texts = [t for t, _ in CHINESE_JOINS]
    tok = train_char_tokenizer(texts)
    lex = join_lexicon(texts)
    assert lex.names == [JOIN]
    for text, words in CHINESE_JOINS:
        seg = segment(tok, text, 64)
        marks = lex.mark(text, seg.spans, seg.special)[0]
        got = {c for u in np.flatnonzero(marks) for c in range(*seg.spans[u])}
        assert got == _marked(text, words), text


def test_english_join_words_are_whole_words():
    lex = join_lexicon(["block my card and then send a new one"])
    for text, words in [("block my card and then send a new one", ["and then"]),
                        ("refund the fee, also raise my limit to 500", ["also"]),
                        ("the brand new card was handed to me", [])]:
        got = {text[s:e] for s, e in lex.spans(text)[JOIN]}
        assert got == set(words), text


def test_numbers_in_second_are_the_numbers_after_the_first_join():
    cases = [  # text, the number of the second request (or None)
        ("帮我把尾号1234的卡挂失，顺便把额度提到50000", "50000"),
        ("要是尾号1234的卡办不了，就帮我转3000", "3000"),  # 要是 opens the text: no end
        ("查一下那笔300元的消费", None),
        ("转账限额是多少？另外查一下退款", None),
    ]
    numbers, joins = chinese_lexicon(), join_lexicon([c[0] for c in cases])
    tok = train_char_tokenizer([c[0] for c in cases])
    for text, second in cases:
        seg = segment(tok, text, 64)
        cat = numbers.mark(text, seg.spans, seg.special)
        got = numbers_after_join(joins.mark(text, seg.spans, seg.special)[0],
                                 cat[numbers.names.index("number")], seg.special)
        assert [seg.units[u] for u in np.flatnonzero(got)] == ([second] if second else [])


def test_the_join_lexicon_finds_the_demo_corpus_joins():
    """Every joined message of the demo corpus whose join has words (not a bare comma or
    question mark: join.10, join.7) has a join word found."""
    corpus = generate_demo_corpus(seed=0, per_intent=6, compound_share=0.3)
    joined = [e for split in corpus.values() for e in split
              if e.template.startswith("join.")
              and e.template.split(":")[0] not in ("join.10", "join.7")]
    assert len(joined) > 20
    lex = join_lexicon([e.text for e in joined])
    missed = [e.text for e in joined if not lex.spans(e.text)[JOIN]]
    assert not missed


@pytest.fixture(scope="module")
def chinese_compound():
    """An untrained tiny joint Transformer on the demo corpus with compound questions, and
    the test split it is analysed on."""
    corpus = generate_demo_corpus(seed=0, per_intent=4, oos=4, compound_share=0.3)
    examples = corpus["train"] + corpus["test"]
    intents = sorted({i for e in examples for i in e.intents})
    tok = train_char_tokenizer([e.text for e in examples])
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=16, num_layers=2, num_heads=2,
                      d_ff=32, num_labels=len(intents), labels=intents, max_position=96,
                      pad_token_id=tok.pad_token_id, dropout=0.0, attention_dropout=0.0,
                      model_type="joint_intent_slot", multi_label=True,
                      slot_tags=["O", "B-amount", "I-amount"])
    clf = CompoundClassifier(JointIntentSlotModel(cfg).eval(), tok, intents, max_length=96)
    test = [e for e in corpus["test"] if "compound" in e.slices][:10] + corpus["test"][:6]
    return clf, test


def test_compound_categories_in_the_analysis(chinese_compound):
    clf, test = chinese_compound
    analysis = inspect_classifier(
        clf, [e.text for e in test], [e.intents for e in test],
        spans=[[(s.start, s.end, s.category) for s in e.spans] for e in test],
        slices=[e.slices for e in test],
        options=replace(TINY, show_examples=len(test), ablation=False, pruning=False))
    assert analysis["categories"] == ["negation", "number", "domain", JOIN, NUMBER_IN_SECOND]
    assert analysis["model"]["task"] == "multi_label" and analysis["score"] == "exact match"
    joins = join_lexicon([e.text for e in test])
    tok = clf.tokenizer
    for ex in analysis["examples"]:  # each shown example's join units, found independently
        seg = segment(tok, ex["text"], clf.max_length)
        want = np.flatnonzero(joins.mark(ex["text"], seg.spans, seg.special)[0]).tolist()
        assert ex["categories"][JOIN] == [u for u in want if u < len(ex["units"])]
        numbers = set(ex["categories"]["number"])
        assert set(ex["categories"][NUMBER_IN_SECOND]) <= numbers
        if ex["categories"][NUMBER_IN_SECOND]:
            assert min(ex["categories"][NUMBER_IN_SECOND]) > min(ex["categories"][JOIN])
    assert analysis["compound"]["texts_with_join"] >= 1
    roles = {r["role"] for row in analysis["roles"] for head in row for r in head}
    assert set(map(tuple, analysis["compound"]["join_heads"])) == {
        (la, h) for la, row in enumerate(analysis["roles"]) for h, rs in enumerate(row)
        if JOIN in {r["role"] for r in rs}}
    assert roles  # the statistics made roles of some kind


@pytest.fixture(scope="module")
def english_analysis(trained_compound_dir, compound_corpus):
    """The tiny trained compound model's analysis of some of its corpus, new phrasings with
    joins, and two rows whose gold set its answers cannot match; and the reference: the
    classifier's own answers and whether each is the gold set."""
    clf = CompoundClassifier.load(trained_compound_dir)
    rows = [(e.text, tuple(e.intents)) for e in compound_corpus[::3]] + [
        ("refund the 20 pounds and then send 50 pounds to my sister", ("refund", "transfer")),
        ("why was i charged 75 pounds, also refund it", ("charge", "refund")),
        ("send 300 pounds to my sister then refund 90 pounds", ("transfer", "refund")),
        # gold sets the answers cannot match, with correct examples of the same set: bad
        # cases with references
        ("refund the 300 pounds please", ("charge", "refund")),
        ("send 90 pounds to my sister", ("charge", "refund"))]
    texts, gold = [t for t, _ in rows], [g for _, g in rows]
    slices = [("compound",) if len(g) > 1 else ("plain",) for g in gold]
    analysis = inspect_classifier(clf, texts, gold, slices=slices,
                                  options=replace(TINY, ablation_examples=len(texts)))
    answers = [frozenset(i for i, _ in p.intents) for p in clf.predict(texts)]
    right = np.array([a == frozenset(g) for a, g in zip(answers, gold, strict=True)])
    return clf, gold, slices, answers, right, analysis


def test_compound_analysis_scores_exact_match_and_groups_bad_cases(english_analysis):
    clf, gold, slices, answers, right, analysis = english_analysis
    assert analysis["accuracy"] == pytest.approx(right.mean())
    assert analysis["pruning"]["base_accuracy"] == pytest.approx(right.mean())
    assert analysis["ablation"]["base_accuracy"] == pytest.approx(right.mean())
    bad = analysis["bad_cases"]
    assert bad["misclassified"] == int((~right).sum())
    assert len(bad["cases"]) >= 2 and all(c["references"] > 0 for c in bad["cases"])
    assert len(bad["cases"]) + bad["without_reference"] == bad["misclassified"]
    for case in bad["cases"]:
        i = case["index"]
        assert not right[i]
        assert case["gold"] == " + ".join(sorted(gold[i], key=clf.intents.index))
        assert case["predicted"] == (" + ".join(sorted(answers[i], key=clf.intents.index))
                                     or "(none)")
        assert case["slices"] == list(slices[i])
    by_slice = {r["slice"]: r for r in bad["by_slice"]}
    for name in ("compound", "plain"):
        rows_in = [k for k, s in enumerate(slices) if name in s]
        assert by_slice[name]["examples"] == len(rows_in)
        assert by_slice[name]["bad"] == int((~right[rows_in]).sum())
    assert {JOIN, NUMBER_IN_SECOND} <= set(analysis["categories"])
    assert analysis["compound"]["texts_with_join"] == 3  # and then, also, then
    assert analysis["compound"]["texts_with_number_in_second"] == 2  # 50, 90 after a join


def test_the_compound_report_writes_and_shows_in_a_browser(english_analysis, tmp_path):
    analysis = english_analysis[-1]
    paths = write_report(analysis, tmp_path / "report", title="compound")
    stats = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert stats["compound"]["join_heads"] == analysis["compound"]["join_heads"]
    assert stats["bad_cases"]["by_slice"] == analysis["bad_cases"]["by_slice"]
    assert (tmp_path / "report" / "figures" / "pruning.png").is_file()
    from browser_cdp import find_browser, load_page

    browser = find_browser()
    if browser is None:
        pytest.skip("headless Chromium is not installed (the page is checked in a browser "
                    "where it is)")
    report = load_page(browser, paths["html"], element="#grid", expressions={
        "summary": "document.getElementById('summary').textContent",
        "bad": "document.getElementById('bad').textContent"})
    assert report.errors == []
    assert "exact match" in report.values["summary"]
    assert "compound model: heads on join words" in report.values["summary"]
    assert "Bad cases by slice" in report.values["bad"]


def test_compound_importance_is_the_gradient_of_the_models_own_loss(
        trained_compound_dir, compound_corpus):
    """Gate gradients of a compound model: those of the joint model's own multi-label
    loss (binary cross-entropy summed over intents), one text at a time."""
    clf = CompoundClassifier.load(trained_compound_dir)
    rows = compound_corpus[:3]
    gold = label_ids(clf, [r.intents for r in rows])
    assert gold.shape == (3, len(clf.intents)) and set(np.unique(gold)) <= {0, 1}
    got = gradient_importance(clf, [r.text for r in rows], gold, normalize=False)
    layers = [m for m in clf.model.modules() if hasattr(m, "head_gate")]
    want = np.zeros(got.shape)
    for r, g in zip(rows, gold, strict=True):
        batch = clf.tokenizer([r.text], max_length=clf.max_length)
        for m in layers:
            m.head_gate.requires_grad_(True)
        x = clf.model(input_ids=batch["input_ids"],
                      attention_mask=batch["attention_mask"].bool())["logits"][0].double()
        y = torch.as_tensor(g, dtype=torch.float64)
        # binary cross-entropy, written out: -y log s(x) - (1 - y) log(1 - s(x)), summed
        loss = (torch.clamp(x, min=0) - x * y + torch.log1p(torch.exp(-x.abs()))).sum()
        grads = torch.autograd.grad(loss, [m.head_gate for m in layers])
        for m in layers:
            m.head_gate.requires_grad_(False)
        want += np.stack([t.abs().double().numpy() for t in grads])
    np.testing.assert_allclose(got, want / len(rows), rtol=1e-4, atol=1e-9)
    # an unknown intent makes the whole row unknown; an empty set is out of scope, known
    assert label_ids(clf, [("nope",), ()]).tolist() == [[-1] * len(clf.intents),
                                                       [0] * len(clf.intents)]


def test_link_slices_counts_every_bad_example_per_slice():
    bad = {"cases": [{"index": 2}]}
    out = link_slices(bad, [("a",), ("a", "b"), ("b",), None],
                      wrong=np.array([False, True, True, True]),
                      known=np.array([True, True, True, False]))
    assert out["slices"] == {"b": 1}
    assert out["by_slice"] == [
        {"slice": "b", "examples": 2, "bad": 2, "share": 1.0, "listed": 1},
        {"slice": "a", "examples": 2, "bad": 1, "share": 0.5, "listed": 0}]


def _bilstm_compound(examples) -> CompoundClassifier:
    tok = train_char_tokenizer([e.text for e in examples])
    cfg = ModelConfig(vocab_size=tok.vocab_size, model_type="bilstm_joint", lstm_embed_dim=8,
                      lstm_hidden=8, num_labels=2, labels=["a", "b"], max_position=64,
                      pad_token_id=tok.pad_token_id, multi_label=True)
    return CompoundClassifier(BiLSTMJointModel(cfg).eval(), tok, ["a", "b"],
                              thresholds=Thresholds(0.5))


def test_a_bilstm_joint_model_is_refused(demo_examples, tmp_path, capsys):
    clf = _bilstm_compound(demo_examples)
    with pytest.raises(NoAttentionError, match="BiLSTMJointModel.*no attention heads"):
        inspect_classifier(clf, [demo_examples[0].text], [("a",)])
    clf.save(tmp_path / "bilstm")
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"text": demo_examples[0].text, "intents": ["a"]}) + "\n",
                    encoding="utf-8")
    code = main(["inspect", str(tmp_path / "bilstm"), "--data", str(data), "--out",
                 str(tmp_path / "out")])
    assert code != 0
    assert "no attention heads" in capsys.readouterr().err


def test_inspect_command_on_a_compound_model(trained_compound_dir, compound_corpus, tmp_path,
                                             capsys):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": e.text, "intents": list(e.intents)}) + "\n"
                            for e in compound_corpus[::4]), encoding="utf-8")
    sets = [f"--set={k}={json.dumps(v)}" for k, v in TINY.__dict__.items()
            if k != "thresholds"] + ["--set=pruning=false", "--set=ablation=false"]
    assert main(["inspect", str(trained_compound_dir), "--data", str(data), "--out",
                 str(tmp_path / "out"), *sets]) == 0
    out = capsys.readouterr().out
    assert "compound model: heads on join words" in out
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    assert stats["model"]["task"] == "multi_label"
    assert stats["categories"][-2:] == [JOIN, NUMBER_IN_SECOND]


def test_the_demo_writes_the_compound_transformers_report(chinese_compound, tmp_path, capsys):
    from headwise.commands.demo import write_compound_report
    from headwise.demo.runner import DemoSettings

    clf, _ = chinese_compound
    clf.save(tmp_path / "compound" / "transformer")
    s = DemoSettings(seed=0, per_intent=4, compound_share=0.3)
    html = write_compound_report(tmp_path, s, options=replace(TINY, pruning=False))
    assert html == tmp_path / "compound" / "transformer" / "report" / "index.html"
    assert html.is_file()
    stats = json.loads((html.parent / "stats.json").read_text(encoding="utf-8"))
    assert stats["score"] == "exact match" and stats["categories"][-2:] == [JOIN,
                                                                           NUMBER_IN_SECOND]
    test = generate_demo_corpus(seed=0, per_intent=4, compound_share=0.3)["test"]
    by_slice = {r["slice"]: r for r in stats["bad_cases"]["by_slice"]}
    assert by_slice["compound"]["examples"] == sum("compound" in e.slices for e in test)
    out = capsys.readouterr().out
    assert f"head-analysis report of the compound Transformer: {html}" in out


@pytest.mark.parametrize("quick", [True, False])
def test_the_demo_command_reports_the_compound_transformer(quick, monkeypatch, tmp_path):
    """--quick writes the Transformer's report in this process; a full run leaves both
    reports to the second process (told to write them), which prints their lines after the
    single-label tables."""
    from headwise.cli import build_parser
    from headwise.commands import demo as command

    calls = []

    class Background:  # the second process, started before the single-label part
        def __init__(self, out, s, pretrained, report, threads, log):
            calls.append(f"compound, report {report}")

        def ready(self):
            calls.append("ready")

        def done(self):
            return True

        def result(self):
            return {"results": {}, "lines": [], "report": ["transformer report"],
                    "compound_report": ["compound report"]}

        def stop(self):
            return None

    def run_demo(*a, before_timing, **k):  # the models trained, then the timing hook
        calls.append("demo")
        before_timing()

    monkeypatch.setattr(command, "run_demo", run_demo)
    monkeypatch.setattr(command, "_Background", Background)
    monkeypatch.setattr(command, "pretrained_demo_recipe", lambda s: {})
    monkeypatch.setattr(command, "train_compound_models", lambda *a, **k: {"bilstm": {}})
    monkeypatch.setattr(command, "compare_compound_models", lambda *a, **k: None)
    monkeypatch.setattr(command, "print", calls.append, raising=False)
    monkeypatch.setattr(command, "write_demo_report", lambda *a, **k: calls.append("report"))
    monkeypatch.setattr(command, "write_compound_report",
                        lambda *a, **k: calls.append("compound report"))
    argv = ["demo", "--out", str(tmp_path)] + (["--quick"] if quick else [])
    args = build_parser(["demo"]).parse_args(argv)
    assert args.func(args) == 0
    calls = [c for c in calls if c.startswith("compound, ") or c in (
        "demo", "ready", "report", "transformer report", "compound report")]
    assert calls == (["demo", "report"] if quick else
                     ["compound, report True", "demo", "ready", "transformer report",
                      "compound report"])
