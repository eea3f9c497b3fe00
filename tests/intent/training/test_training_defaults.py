"""Training defaults chosen by measurement: each encoder family's learning rate, epochs and
LP-FT (headwise.intent.training.defaults), filled into a recipe only where it is unset, and
what ``headwise train`` says and saves."""

from __future__ import annotations

import pytest

from headwise.intent import IntentRecipe, train_intent_classifier
from headwise.intent.training.builders import with_family_defaults
from headwise.intent.training.defaults import (
    DEFAULT_EPOCHS,
    DEFAULT_LR,
    FAMILY_DEFAULTS,
    checkpoint_family,
    family_defaults,
)

transformers = pytest.importorskip("transformers")
from hf_checkpoints import chinese_bert, xlmr_unigram  # noqa: E402

ROWS = [("我的信用卡被冻结了", "freeze"), ("卡被冻结了怎么解冻", "freeze"),
        ("my card is frozen", "freeze"), ("每个月15号还款太早了", "repay_date"),
        ("能不能改到25号还款", "repay_date"), ("change my repayment date", "repay_date")]


def test_measured_families_have_their_own_defaults():
    bert, xlmr = FAMILY_DEFAULTS["bert"], FAMILY_DEFAULTS["xlm-roberta"]
    assert (bert.lr, bert.epochs, bert.linear_probe) == (2e-5, 6, True)  # MiniLM, BANKING77
    assert (xlmr.lr, xlmr.epochs, xlmr.linear_probe) == (5e-5, 3, True)  # e5-small
    assert "BANKING77" in bert.measured and "CIC" in xlmr.measured
    roberta = FAMILY_DEFAULTS["roberta"]  # no measurement of its own: says so
    assert (roberta.lr, roberta.epochs) == (xlmr.lr, xlmr.epochs)
    assert "no RoBERTa measurement" in roberta.measured
    other = family_defaults("electra")
    assert (other.lr, other.epochs) == (DEFAULT_LR["pretrained"], DEFAULT_EPOCHS["pretrained"])
    assert family_defaults(None) == other


def test_only_unset_fields_are_filled_and_the_line_names_them():
    recipe = IntentRecipe.from_dict({
        "architecture": {"type": "pretrained", "name": "/somewhere"},
        "train": {"lr": 1e-4}})
    filled, line = with_family_defaults(recipe, "bert")
    assert (filled.train.lr, filled.train.epochs, filled.levers.linear_probe) == (1e-4, 6, True)
    assert line.startswith("defaults for a bert encoder: epochs 6, linear_probe True (")
    assert "lr" not in line.split("(")[0]
    explicit = IntentRecipe.from_dict({
        "architecture": {"type": "pretrained", "name": "/somewhere"},
        "train": {"lr": 1e-4, "epochs": 2},
        "levers": {"linear_probe": False}})
    assert with_family_defaults(explicit, "bert") == (explicit, None)
    with pytest.raises(ValueError, match="pretrained encoder's, not 'transformer'"):
        with_family_defaults(IntentRecipe(), "bert")


def test_a_given_value_equal_to_the_default_is_kept():
    """A learning rate typed on purpose is never replaced, even when it equals the generic
    pretrained default; only the fields left out are the family's to fill."""
    given = IntentRecipe.from_dict({
        "architecture": {"type": "pretrained", "name": "/somewhere"},
        "train": {"lr": DEFAULT_LR["pretrained"]}})
    assert given.train_defaulted == {"epochs"}
    filled, line = with_family_defaults(given, "bert")
    assert (filled.train.lr, filled.train.epochs) == (DEFAULT_LR["pretrained"], 6)
    assert "lr" not in line.split("(")[0] and filled.train_defaulted == frozenset()
    # built in Python without a train part: both are the family's
    from headwise.intent.training.recipe import PretrainedEncoder

    bare = IntentRecipe(architecture=PretrainedEncoder(name="/somewhere"))
    assert bare.train_defaulted == {"lr", "epochs"}
    assert with_family_defaults(bare, "bert")[0].train.lr == FAMILY_DEFAULTS["bert"].lr
    with pytest.raises(ValueError, match="train_defaulted names"):
        IntentRecipe(train_defaulted=frozenset({"batch_size"}))


def test_checkpoint_family_reads_the_config(tmp_path):
    assert checkpoint_family(chinese_bert(tmp_path / "bert")) == "bert"
    assert checkpoint_family(xlmr_unigram(tmp_path / "xlmr")) == "xlm-roberta"
    assert checkpoint_family(tmp_path / "nothing") is None
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "config.json").write_text("{}")
    assert checkpoint_family(tmp_path / "bare") is None


def test_training_fills_the_family_defaults_says_so_and_saves_them(tmp_path, monkeypatch):
    from headwise.intent.training import defaults

    directory = chinese_bert(tmp_path / "bert")
    # the bert family's values, but 1 epoch so that the test stays fast: what is checked is
    # that the unset fields take the table's values
    monkeypatch.setitem(defaults.FAMILY_DEFAULTS, "bert", defaults.FamilyDefaults(
        lr=3e-4, epochs=1, linear_probe=True, measured="a test's table"))
    notes: list[str] = []
    recipe = IntentRecipe.from_dict({
        "architecture": {"type": "pretrained", "name": f"{directory}", "max_length": 24,
                         "trim_vocab": "none"},
        "train": {"batch_size": 4, "progress": False}})
    result = train_intent_classifier(ROWS * 2, ROWS, recipe, out_dir=tmp_path / "m",
                                     report=notes.append)
    assert any(n.startswith("defaults for a bert encoder: lr 0.0003, epochs 1, "
                            "linear_probe True (a test's table)") for n in notes)
    info = result.classifier.info
    assert info["recipe"]["train"]["lr"] == 3e-4 and info["recipe"]["train"]["epochs"] == 1
    assert info["recipe"]["levers"]["linear_probe"] is True and info["linear_probe"] is not None
    assert info["pretrained"]["family"] == "bert" and info["epochs"] == 1
    from headwise.intent import IntentClassifier

    saved = IntentClassifier.load(tmp_path / "m").info["recipe"]
    assert (saved["train"]["lr"], saved["train"]["epochs"],
            saved["levers"]["linear_probe"]) == (3e-4, 1, True)


def test_no_linear_probe_on_the_command_line_turns_it_off(tmp_path, monkeypatch):
    from headwise.cli import main
    from headwise.intent.training import pipeline as pipeline_mod

    got = []

    class _Stop(Exception):
        pass

    def capture(train, valid, recipe, **kw):
        got.append(recipe)
        raise _Stop

    monkeypatch.setattr(pipeline_mod, "train_intent_classifier", capture)
    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in ROWS), encoding="utf-8")
    for flag, want in (("false", False), ("true", True), (None, None)):
        args = ["train", "--data", str(data), "--model", f"pretrained:{tmp_path}", "--out",
                str(tmp_path / "m")] + (["--set", f"levers.linear_probe={flag}"] if flag else [])
        with pytest.raises(_Stop):
            main(args)
        assert got[-1].levers.linear_probe is want
    # typed on a path that has no LP-FT: refused, never dropped in silence
    assert main(["train", "--data", str(data), "--model", "tfidf", "--set",
                 "levers.linear_probe=false", "--out", str(tmp_path / "t")]) != 0


def test_probe_c_goes_with_a_pretrained_encoders_default_lp_ft():
    pretrained = {"type": "pretrained", "name": "/x"}
    IntentRecipe.from_dict({"architecture": pretrained, "levers": {"probe_c": 3.0}})
    need = r"^levers\.probe_c is used only with levers\.linear_probe"
    with pytest.raises(ValueError, match=need):
        IntentRecipe.from_dict({"architecture": pretrained,
                                "levers": {"probe_c": 3.0, "linear_probe": False}})
    with pytest.raises(ValueError, match=need):
        IntentRecipe.from_dict({"levers": {"probe_c": 3.0}})
