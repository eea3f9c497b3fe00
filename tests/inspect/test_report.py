"""The written report (HTML, JSON, PNG) and ``headwise inspect``."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

from headwise.cli import main
from headwise.demo.corpus import write_demo_corpus
from headwise.intent.classifier import IntentClassifier
from headwise.intent.training.builders import build_intent_model
from headwise.intent.training.recipe import IntentRecipe


def _embedded(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


def test_report_files_and_self_contained_html(small_report):
    analysis, paths = small_report
    html = paths["html"].read_text(encoding="utf-8")
    assert not re.search(r"(?i)(https?:|ftp:|//[a-z0-9.-]+\.[a-z]{2,}/|@import|url\()", html)
    assert "<link" not in html and "src=" not in html
    assert '"Noto Sans CJK SC", "WenQuanYi Micro Hei"' in html
    data = _embedded(html)
    assert data["stats"] == analysis["stats"] and data["roles"] == analysis["roles"]
    stats = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert stats["stats"] == analysis["stats"] and "weights" not in stats["examples"][0]
    for name in ("head_grid", "pruning", "example_0"):
        assert paths[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the embedded weights are the word-level attention, one byte per weight
    ex = data["examples"][0]
    n = len(ex["units"])
    w = np.frombuffer(base64.b64decode(ex["weights"]), np.uint8).reshape(2, 4, n, n) / 255
    assert np.abs(w.sum(-1) - 1).max() < n / 255 + 1e-9


def test_analysis_sections(small_report):
    analysis, _ = small_report
    assert analysis["model"] == {"type": "EncoderClassifier", "layers": 2, "heads": 4,
                                 "pooling": "mean", "intents": analysis["model"]["intents"],
                                 "max_length": 48, "task": "single_label"}
    assert analysis["score"] == "accuracy" and analysis["compound"] is None
    assert analysis["category_source"] == "spans"
    assert len(analysis["roles"]) == 2 and len(analysis["roles"][0]) == 4
    assert analysis["pruning"]["importance"]["removed"] == [0, 2, 4, 6, 8]
    assert np.array(analysis["importance"]["gradient"]).shape == (2, 4)
    assert 0 <= analysis["accuracy"] <= 1
    assert len(analysis["examples"]) == 4
    # the bad cases' attribution view: per unit, summing to the completeness sum
    viewed = [c for c in analysis["bad_cases"]["cases"] if "attribution" in c]
    assert len(viewed) == min(3, len(analysis["bad_cases"]["cases"]))
    for c in viewed:
        a = c["attribution"]
        assert a["intent"] == c["predicted"] and a["completeness"]["within_tolerance"]
        assert sum(v for v in a["attribution"] if v is not None) == \
            pytest.approx(a["completeness"]["sum"], abs=1e-5)
    agreement = analysis["negation_agreement"]
    negation_heads = [[layer, head] for layer, row in enumerate(analysis["roles"])
                      for head, roles in enumerate(row)
                      if any(r["role"] == "negation" for r in roles)]
    assert agreement["heads"] == negation_heads
    assert agreement["verdict"] in {"agree", "disagree", "inconclusive", "no heads",
                                    "every head has the role", "no texts"}
    # the explanation methods ranked by deletion curves on 6 of the texts, best first
    methods = analysis["methods"]
    assert methods["texts"] == 6 and methods["fractions"] == [0.1, 0.2, 0.3, 0.4, 0.5]
    areas = [r["area"] for r in methods["methods"]]
    assert areas == sorted(areas, reverse=True)
    assert {r["method"] for r in methods["methods"]} == {"ig", "rollout", "attention", "random"}
    assert methods["most_faithful"] in (None, methods["leader"])
    json.dumps(analysis, allow_nan=False)


@pytest.fixture(scope="module")
def saved(tiny_clf, tmp_path_factory):
    d = tmp_path_factory.mktemp("inspect_cli")
    tiny_clf.save(d / "model")
    files = write_demo_corpus(d / "data", per_intent=3, oos=2)
    return d, files


def test_cli_writes_the_report(saved, capsys):
    d, files = saved
    out = d / "report"
    code = main(["inspect", str(d / "model"), "--data", str(files["test.jsonl"]), "--out",
                 str(out), "--set", "importance_examples=4", "--set",
                 "faithfulness_examples=2", "--set", "pruning=false", "--set",
                 "show_examples=3"])
    assert code == 0
    text = capsys.readouterr().out
    assert "layer 0:" in text and "report:" in text
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["category_source"] == "spans" and stats["pruning"] is None
    assert stats["data"]["source"].endswith("test.jsonl")
    # a CSV without spans uses the built-in Chinese lexicon; a JSON lexicon replaces it
    lex = d / "lex.json"
    lex.write_text(json.dumps({"refusal": ["不", "没"]}), encoding="utf-8")
    code = main(["inspect", str(d / "model"), "--data", str(files["test.csv"]), "--out",
                 str(d / "r2"), "--lexicon", str(lex), "--set", "pruning=false", "--set",
                 "ablation=false", "--set", "faithfulness_examples=0", "--set",
                 "importance_examples=2", "--set", "show_examples=1"])
    assert code == 0
    stats = json.loads((d / "r2" / "stats.json").read_text(encoding="utf-8"))
    assert stats["categories"] == ["refusal"] and stats["category_source"] == "lexicon"


def test_cli_settings_are_the_options_fields_by_one_rule(saved, capsys):
    import dataclasses

    from headwise.cli import build_parser
    from headwise.commands._common import scalar_fields
    from headwise.inspect import InspectOptions

    d, files = saved
    # every field but the head-role thresholds (an object) is a setting, named in --help
    assert set(scalar_fields(InspectOptions)) == {
        f.name for f in dataclasses.fields(InspectOptions)} - {"thresholds"}
    sub = next(a for a in build_parser(["inspect"])._actions if a.dest == "command")
    help_text = " ".join(sub.choices["inspect"].format_help().split())
    assert all(name in help_text for name in scalar_fields(InspectOptions))
    base = ["inspect", str(d / "model"), "--data", str(files["test.csv"]), "--out",
            str(d / "r3")]
    for extra, message in ((["--set", "pruning=maybe"], 'pruning="maybe": pruning is bool'),
                           (["--set", "show=3"], "--set show: no such setting"),
                           (["--set", "thresholds=1"], "--set thresholds: no such setting")):
        assert main([*base, *extra]) == 1
        assert message in capsys.readouterr().err
    assert not (d / "r3").exists()


def test_cli_refuses_a_bilstm(saved, tiny_clf, capsys):
    d, files = saved
    recipe = IntentRecipe.from_dict({
        "architecture": {"type": "bilstm", "lstm_embed_dim": 8, "lstm_hidden": 8}})
    model = build_intent_model(recipe, tiny_clf.tokenizer, tiny_clf.labels)
    IntentClassifier(model, tiny_clf.tokenizer, tiny_clf.labels).save(d / "bilstm")
    code = main(["inspect", str(d / "bilstm"), "--data", str(files["test.csv"]), "--out",
                 str(d / "r3")])
    assert code == 1
    assert "no multi-head attention" in capsys.readouterr().err


def test_example_views_embed_only_what_is_shown(tiny_clf, demo_examples):
    from headwise.inspect import example_views, segment

    long = max(demo_examples, key=lambda e: len(e.text))
    seg = segment(tiny_clf.tokenizer, long.text, tiny_clf.max_length)
    cats = np.zeros((1, len(seg.units)), bool)
    cats[0, 2] = True
    (view,) = example_views(tiny_clf, [seg], [cats], ["negation"], view_units=5)
    assert view["units"] == list(seg.units[:5]) and view["truncated"] == len(seg.units) - 5
    assert len(base64.b64decode(view["weights"])) == 2 * 4 * 5 * 5
    assert view["categories"] == {"negation": [2]} and len(view["rollout"]) == 5
