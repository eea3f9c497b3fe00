"""Every recipe field and training option on every training path: honoured (the value
reaches the tokenizer, the model, the Trainer or the fit it configures), or refused with a
message naming the field and the path (``headwise.intent.training.recipe_paths``)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.utils.class_weight import compute_class_weight
from tiny_corpus import INTENTS

import headwise.intent.compound.training as compound_mod
import headwise.intent.training.cleaning
import headwise.intent.training.pipeline as pipeline_mod
import headwise.intent.training.recipe as recipe_mod
import headwise.intent.training.trimming
import headwise.text
from headwise.cli import build_parser, main
from headwise.intent import IntentRecipe, train_intent_classifier
from headwise.intent.compound.training import (
    CompoundObjective,
    balanced_multilabel_weights,
    multilabel_intent_loss,
    train_compound_classifier,
)
from headwise.intent.training.builders import build_intent_model
from headwise.intent.training.recipe_paths import (
    COMPOUND,
    COMPOUND_PRETRAINED,
    NEEDS,
    OPTIONS,
    PATHS,
    SETTING_USES,
    USES,
    check_recipe_paths,
    kind_paths,
)
from headwise.loading import save_pretrained
from headwise.models.io import model_config
from headwise.text import train_tokenizer

ROWS = [(t, k) for k, ts in INTENTS.items() for t in ts]
COMPOUNDS = (COMPOUND, COMPOUND_PRETRAINED)

#: a non-default, valid value of every recipe field but ``model`` (which picks the path),
#: small enough to train in a second
VALUES = {
    "tokenizer": "wordpiece", "vocab_size": 150, "max_length": 20, "d_model": 24,
    "num_layers": 1, "num_heads": 4, "d_ff": 40, "fusion": "glu", "norm": "rmsnorm",
    "position": "rope", "pooling": "cls", "dropout": 0.05, "attention_dropout": 0.05,
    "lstm_embed_dim": 12, "lstm_hidden": 10, "lstm_pooling": "attention", "epochs": 1,
    "batch_size": 16, "lr": 2e-3, "weight_decay": 0.02, "warmup_ratio": 0.2,
    "schedule": "cosine", "patience": 3, "seed": 7, "label_smoothing": 0.2, "gce_q": 0.7,
    "distill": "tfidf", "distill_weight": 0.3, "blend": "tfidf", "select_on": "macro_f1",
    "input_prefix": "query: ", "trim_vocab": 8, "pretrain_epochs": 1, "pretrain_lr": 5e-3,
    "pretrain_mask_prob": 0.2, "linear_probe": True, "probe_c": 2.0, "tfidf_c": 3.0,
    "prior_correction": 0.5, "label_cleaning": "drop", "class_weighting": "balanced",
    "valid_fraction": 0.25, "max_reject": 0.05, "reject_budget": 0.2, "reject_confidence": 0.9,
    "ood_detector": "energy",
    "model_overrides": {"number_heads": [0]}, "progress": False,
}
#: a value that fits one path better (the BiLSTM has no attention heads)
ON_PATH = {("model_overrides", "bilstm"): {"lstm_layers": 2}}


def value(name, path):
    return ON_PATH.get((name, path), VALUES[name])


def model_for(path, encoder="/nonexistent/encoder"):
    return {"transformer": "transformer", "bilstm": "bilstm", "tfidf": "tfidf",
            COMPOUND: "transformer"}.get(path, f"pretrained:{encoder}")


def test_the_table_declares_every_field_path_and_option(capsys):
    fields = [f.name for f in dataclasses.fields(IntentRecipe)]
    assert sorted(USES) == sorted(fields)
    assert sorted(VALUES) == sorted(set(fields) - {"model"})
    for uses in [*USES.values(), *SETTING_USES.values()]:
        assert uses and uses <= set(PATHS)
    for name, v in VALUES.items():
        assert v != recipe_mod.IntentRecipe.__dataclass_fields__[name].default, name
    assert set(NEEDS) <= set(USES)
    # every option a message names is an option of `headwise train`
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    usage = capsys.readouterr().out
    for name, option in OPTIONS.items():
        assert name in USES or name in SETTING_USES, name
        for flag in option.split("/"):
            assert f"{flag} " in usage or f"{flag}\n" in usage, flag


# --- refused: every field on every path that does not use it -----------------------------
REFUSED = [(n, p) for n in VALUES for p in PATHS if p not in USES[n]]


def _train(path, recipe, out, compound_corpus=(), **kwargs):
    if path in COMPOUNDS:
        return train_compound_classifier(compound_corpus, None, recipe, out_dir=out, **kwargs)
    return train_intent_classifier(ROWS, None, recipe, out_dir=out, **kwargs)


#: what a field of NEEDS is given beside it here (so that its own refusal is tested)
WITH = {"distill_weight": {"distill": "tfidf"}, "pretrain_lr": {"pretrain_epochs": 1},
        "pretrain_mask_prob": {"pretrain_epochs": 1}, "probe_c": {"linear_probe": True},
        "tfidf_c": {"blend": "tfidf"}}


@pytest.mark.parametrize("name, path", REFUSED)
def test_a_field_the_path_does_not_use_is_refused_naming_both(name, path, tmp_path,
                                                              compound_corpus):
    with pytest.raises(ValueError) as e:
        _train(path, IntentRecipe(model=model_for(path), **WITH.get(name, {}),
                                  **{name: value(name, path)}), tmp_path / "m", compound_corpus)
    message = str(e.value)
    # the field opens the message, or follows the field it needs (refused the same way)
    assert f"{name} " in message and PATHS[path] in message, message
    assert message.startswith(f"{name} ") or name in WITH, message
    assert f"({OPTIONS[name]})" in message if name in OPTIONS else True
    assert not (tmp_path / "m").exists()  # refused before any work


def test_the_messages_read_as_the_issue_asks():
    with pytest.raises(ValueError) as e:
        IntentRecipe(model="tfidf", label_smoothing=0.2)
    assert str(e.value) == (
        "label_smoothing (--label-smoothing) is not used by the tfidf model (TF-IDF n-grams "
        "and a linear model); remove it or use the from-scratch Transformer (--model "
        "transformer), the BiLSTM (--model bilstm) or a pretrained encoder (--model "
        "pretrained:DIR)")
    with pytest.raises(ValueError, match=r"^gce_q is not used by compound \(multi-label\) "
                                         r"training of the Transformer; remove it or use "
                                         r"single-label training \(without --multi-label\)$"):
        check_recipe_paths(IntentRecipe(gce_q=0.5), {COMPOUND})
    # several at once: the first named, the others counted and listed
    with pytest.raises(ValueError, match=r"^tokenizer is not used .* \(and 1 more: d_model "):
        IntentRecipe(model="pretrained:x", tokenizer="char", d_model=64)


def test_defaults_pass_everywhere_and_explicit_defaults_do_not():
    for path in PATHS:
        check_recipe_paths(IntentRecipe(model=model_for(path)), {path})
    tfidf = IntentRecipe(model="tfidf")
    with pytest.raises(ValueError, match=r"^label_smoothing \(--label-smoothing\) is not used "
                                         r"by the tfidf model"):
        check_recipe_paths(tfidf, {"tfidf"}, explicit={"label_smoothing"})
    check_recipe_paths(tfidf, {"tfidf"}, explicit={"tfidf_c", "seed", "model"})


def test_a_kind_refuses_at_construction_what_none_of_its_paths_use():
    assert kind_paths("transformer") == {"transformer", COMPOUND}
    IntentRecipe(pretrain_epochs=1)  # the Transformer pre-trains, single-label or compound
    IntentRecipe(gce_q=0.5)  # compound refuses it, single-label uses it: refused at training
    with pytest.raises(ValueError, match="^lstm_hidden is not used by the from-scratch "
                                         "Transformer or compound"):
        IntentRecipe(lstm_hidden=8)


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_a_field_without_what_it_needs_is_refused(name):
    fields = {name: VALUES[name]}
    if name == "vocab_size":
        fields["tokenizer"] = "char"
    with pytest.raises(ValueError, match=rf"^{name}( \(--[a-z-]+\))? is used only with "):
        IntentRecipe(**fields)


def test_settings_and_valid_fraction_are_refused_where_unused(tmp_path, compound_corpus):
    for setting in ("resume", "keep_checkpoints"):
        with pytest.raises(ValueError, match=rf"^{setting} \(--{setting.replace('_', '-')}\) "
                                             r"is not used by the tfidf model"):
            _train("tfidf", IntentRecipe(model="tfidf"), tmp_path / "t", **{setting: True})
    with pytest.raises(ValueError, match=r"^per_intent_thresholds \(--per-intent-thresholds\) "
                                         r"is not used by the from-scratch Transformer"):
        check_recipe_paths(IntentRecipe(), {"transformer"}, settings=["per_intent_thresholds"])
    with pytest.raises(ValueError, match=r"^format \(--format\) is not used by compound"):
        check_recipe_paths(IntentRecipe(), {COMPOUND}, settings=["format"])
    r = IntentRecipe(valid_fraction=0.3)
    with pytest.raises(ValueError, match=r"^valid_fraction \(--no-valid\) is not used when "
                                         r"validation data is given"):
        train_intent_classifier(ROWS, ROWS, r, out_dir=tmp_path / "v")
    with pytest.raises(ValueError, match=r"^valid_fraction \(--no-valid\)"):
        train_compound_classifier(compound_corpus, compound_corpus, r, out_dir=tmp_path / "c")


# --- honoured: one run per path with every field it uses set, each value seen arriving ----
class _Spy:
    """Records the bound arguments of calls to functions it wraps (and still calls them)."""

    def __init__(self, monkeypatch):
        self.monkeypatch = monkeypatch
        self.calls = {}

    def wrap(self, module, name):
        original = getattr(module, name)
        signature = inspect.signature(original)

        def spy(*args, **kwargs):
            self.calls.setdefault(name, []).append(
                signature.bind(*args, **kwargs).arguments)
            return original(*args, **kwargs)

        self.monkeypatch.setattr(module, name, spy)

    def arg(self, name, param, index=-1):
        return self.calls[name][index][param]


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    """A tiny headwise encoder directory, for ``pretrained:DIR``."""
    texts = [t for t, _ in ROWS] + ["i was charged twice for 1,200 pounds refund it"]
    tok = train_tokenizer(texts, kind="wordpiece", vocab_size=150)
    torch.manual_seed(0)
    model = build_intent_model(IntentRecipe(d_model=16, num_layers=1, num_heads=2, d_ff=32),
                               tok, ["a", "b"])
    return save_pretrained(model, tok, tmp_path_factory.mktemp("enc") / "encoder")


def _observe(name, path, spy, clf, info):
    """What training did with field ``name``: read off the call, model or Trainer it
    configures."""
    trainer = spy.calls.get("Trainer", [{}])[-1].get("model")
    config = spy.calls.get("Trainer", [{}])[-1].get("config")
    tfidf = path == "tfidf"
    shape = ("d_model", "num_layers", "num_heads", "d_ff", "fusion", "norm", "position",
             "pooling", "attention_dropout", "dropout", "lstm_embed_dim", "lstm_hidden",
             "lstm_pooling")
    if name in shape:
        return getattr(model_config(clf.model), name)
    if name in ("epochs", "batch_size", "lr", "weight_decay", "warmup_ratio", "schedule",
                "patience"):
        return getattr(config, name)
    if name in ("seed", "progress"):
        return spy.arg("fit_tfidf", name) if tfidf else getattr(config, name)
    weights = getattr(trainer, "class_weights", getattr(trainer, "weights", None))
    pretrain = spy.calls.get("pretrain_encoder", [{}])[-1]
    return {
        "tokenizer": lambda: spy.arg("train_tokenizer", "kind"),
        "vocab_size": lambda: spy.arg("train_tokenizer", "vocab_size"),
        "max_length": lambda: clf.max_length,
        "label_smoothing": lambda: trainer.label_smoothing,
        "gce_q": lambda: trainer.gce_q,
        "distill": lambda: info["distill"]["teacher"],
        "distill_weight": lambda: trainer.teacher_weight,
        "select_on": lambda: config.early_stopping_metric,
        "input_prefix": lambda: clf.tokenizer.input_prefix,
        "trim_vocab": lambda: spy.arg("trim_for_task", "reserve"),
        "pretrain_epochs": lambda: pretrain["config"].epochs,
        "pretrain_lr": lambda: pretrain["config"].lr,
        "pretrain_mask_prob": lambda: pretrain["probability"],
        "linear_probe": lambda: bool(spy.calls.get("fit_linear_probe")),
        "probe_c": lambda: spy.arg("fit_linear_probe", "c"),
        "tfidf_c": lambda: spy.arg("fit_tfidf", "c"),
        "prior_correction": lambda: spy.arg("fit_tfidf", "prior_correction") if tfidf
        else spy.arg("correct_on_validation", "setting"),
        "label_cleaning": lambda: spy.arg("clean_labels", "mode"),
        "class_weighting": lambda: spy.arg("fit_tfidf", "class_weight") if tfidf
        else "none" if weights is None else "balanced",
        "valid_fraction": lambda: spy.arg("validation_split", "fraction") if path not in
        COMPOUNDS else info["valid_examples"] / (info["train_examples"] + info["valid_examples"]),
        "max_reject": lambda: spy.arg("calibrate_on_validation", "max_reject"),
        "reject_budget": lambda: spy.arg("calibrate_on_validation", "reject_budget"),
        "reject_confidence": lambda: spy.arg("calibrate_on_validation", "reject_confidence"),
        "ood_detector": lambda: info["ood"]["detector"],
        "model_overrides": lambda: {k: getattr(model_config(clf.model), k)
                                    for k in value("model_overrides", path)},
    }[name]()


@pytest.mark.parametrize("path", list(PATHS))
def test_every_field_the_path_uses_reaches_its_training(path, encoder_dir, compound_corpus,
                                                        tmp_path, monkeypatch):
    spy = _Spy(monkeypatch)
    for module, names in ((pipeline_mod, ("Trainer", "pretrain_encoder", "fit_linear_probe",
                                        "clean_labels", "fit_tfidf", "correct_on_validation",
                                        "calibrate_on_validation", "validation_split")),
                          (compound_mod, ("Trainer", "pretrain_encoder")),
                          (headwise.text, ("train_tokenizer",)),
                          (headwise.intent.training.trimming, ("trim_for_task",))):
        for name in names:
            spy.wrap(module, name)
    # blend excludes ood_detector 'energy' (the blend answers out-of-scope on its own top
    # probability), and a network's tfidf_c needs blend: both are followed in
    # tests/intent/test_blending.py (test_blend_fields_reach_the_tfidf_fit)
    used = [n for n in VALUES if path in USES[n]
            and not (n in ("blend", "tfidf_c") and path != "tfidf")]
    recipe = IntentRecipe(model=model_for(path, encoder_dir),
                          **{n: value(n, path) for n in used})
    if path in COMPOUNDS:
        result = train_compound_classifier(compound_corpus, None, recipe, out_dir=tmp_path)
    else:
        result = train_intent_classifier(ROWS * 2, None, recipe, out_dir=tmp_path)
    clf, info = result.classifier, result.classifier.info
    seen = {}
    for name in used:
        got = _observe(name, path, spy, clf, info)
        want = value(name, path)
        if name == "valid_fraction" and path in COMPOUNDS:  # round(27 * 0.25) of 27 held out
            want = round(len(compound_corpus) * want) / len(compound_corpus)
        if got != want:
            seen[name] = (got, want)
    assert seen == {}, f"{path}: fields that did not arrive (got, wanted): {seen}"
    assert info["recipe"] == recipe.to_dict()


# --- the compound intent head: smoothing and balanced weights against references ----------
def _joint(intents=4, tags=("O", "B-x", "I-x")):
    tok = train_tokenizer([t for t, _ in ROWS], kind="wordpiece", vocab_size=120)
    assert tok.vocab_size > 40  # the ids of _batch
    torch.manual_seed(0)
    recipe = IntentRecipe(d_model=16, num_layers=1, num_heads=2, d_ff=32, dropout=0.0,
                          attention_dropout=0.0)
    return build_intent_model(recipe, tok, [f"i{k}" for k in range(intents)],
                              model_type="joint_intent_slot", multi_label=True,
                              slot_tags=list(tags)).eval()


def _batch(seed=0, n=5, intents=4, length=7):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 40, (n, length), generator=g)
    mask = torch.ones(n, length, dtype=torch.bool)
    mask[0, 5:] = False
    labels = (torch.rand(n, intents, generator=g) < 0.4).float()
    tags = torch.randint(0, 3, (n, length), generator=g)
    tags[:, 0] = -100
    return ids, mask, labels, tags


def test_without_smoothing_or_weights_the_objective_is_the_models_own_loss():
    model = _joint()
    ids, mask, labels, tags = _batch()
    own = model(input_ids=ids, attention_mask=mask, labels=labels, tag_labels=tags)
    ours = CompoundObjective(model)(input_ids=ids, attention_mask=mask, labels=labels,
                                    tag_labels=tags)
    torch.testing.assert_close(ours["intent_loss"], own["intent_loss"], rtol=0, atol=1e-6)
    torch.testing.assert_close(ours["loss"], own["loss"], rtol=0, atol=1e-6)


def test_smoothing_is_two_class_cross_entropy_smoothing_per_intent():
    torch.manual_seed(1)
    logits = torch.randn(6, 4, dtype=torch.float64)
    labels = (torch.rand(6, 4) < 0.5).double()
    eps = 0.2
    got = multilabel_intent_loss(logits, labels, label_smoothing=eps)
    # each intent is a two-class problem with logits [0, z]: PyTorch's own smoothed CE
    two = torch.stack([torch.zeros_like(logits), logits], -1).reshape(-1, 2)
    want = F.cross_entropy(two, labels.long().reshape(-1), label_smoothing=eps,
                           reduction="sum") / logits.shape[0]
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)
    model = _joint()
    ids, mask, labels, tags = _batch(seed=2)
    out = CompoundObjective(model, label_smoothing=eps)(input_ids=ids, attention_mask=mask,
                                                       labels=labels, tag_labels=tags)
    z = out["logits"].double()
    t = labels.double() * (1 - eps) + eps / 2
    by_hand = -(t * torch.log(torch.sigmoid(z)) + (1 - t) * torch.log(torch.sigmoid(-z)))
    torch.testing.assert_close(out["intent_loss"].double(), by_hand.sum() / len(z),
                               rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out["loss"], out["intent_loss"] + out["tag_loss"])


def test_balanced_weights_are_sklearns_per_intent_and_weigh_the_loss():
    targets = [[1, 0, 0, 1], [0, 0, 1, 1], [0, 0, 0, 1], [1, 0, 0, 1], [0, 0, 0, 1]]
    w = balanced_multilabel_weights(targets).double().numpy()
    y = np.asarray(targets)
    for j in (0, 2):
        np.testing.assert_allclose(w[:, j], compute_class_weight("balanced", classes=np.array(
            [0, 1]), y=y[:, j]), rtol=1e-6)
    # intent 1 (never) and 3 (always) are one-class: weight 1 both ways
    np.testing.assert_array_equal(w[:, 1], [1, 1])
    np.testing.assert_array_equal(w[:, 3], [1, 1])
    torch.manual_seed(3)
    logits = torch.randn(5, 4, dtype=torch.float64)
    got = multilabel_intent_loss(logits, torch.tensor(y, dtype=torch.float64),
                                 label_smoothing=0.1, weights=torch.tensor(w))
    z, t = logits.numpy(), y * 0.9 + 0.05
    per = np.where(y == 1, w[1], w[0]) * -(t * np.log(1 / (1 + np.exp(-z)))
                                           + (1 - t) * np.log(1 / (1 + np.exp(z))))
    assert math.isclose(float(got), per.sum() / 5, rel_tol=1e-6)
    with pytest.raises(ValueError, match="0 or 1"):
        balanced_multilabel_weights([[0.5, 1.0]])
    with pytest.raises(ValueError, match=r"positive and \(2, 4\)"):
        CompoundObjective(_joint(), weights=torch.ones(2, 3))


# --- the command line: options and --config go through the same check --------------------
def _csv(tmp_path):
    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"{t},{k}\n" for t, k in ROWS), encoding="utf-8")
    return data


def test_cli_refuses_an_option_the_model_does_not_use(tmp_path, capsys):
    data = _csv(tmp_path)
    assert main(["train", "--data", str(data), "--model", "tfidf", "--label-smoothing", "0.1",
                 "--out", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert "label_smoothing (--label-smoothing) is not used by the tfidf model (TF-IDF " \
           "n-grams and a linear model); remove it or use the from-scratch Transformer " \
           "(--model transformer)" in err
    assert "Traceback" not in err and not (tmp_path / "m").exists()
    cfg = tmp_path / "r.json"
    cfg.write_text(json.dumps({"label_smoothing": 0.1, "tfidf_c": 3.0}))  # its default too
    assert main(["train", "--data", str(data), "--model", "tfidf", "--config", str(cfg),
                 "--out", str(tmp_path / "m")]) == 1
    assert "label_smoothing (--label-smoothing) is not used by the tfidf" in \
        capsys.readouterr().err
    assert main(["train", "--data", str(data), "--model", "tfidf", "--resume",
                 "--out", str(tmp_path / "m")]) == 1
    assert "resume (--resume) is not used by the tfidf model" in capsys.readouterr().err
    assert main(["train", "--data", str(data), "--model", "bilstm", "--per-intent-thresholds",
                 "--out", str(tmp_path / "m")]) == 1
    assert "per_intent_thresholds (--per-intent-thresholds) is not used by the BiLSTM" in \
        capsys.readouterr().err


def test_cli_refuses_on_the_compound_path(tmp_path, capsys, compound_corpus):
    data = tmp_path / "c.jsonl"
    data.write_text("".join(json.dumps({"text": e.text, "intents": list(e.intents)}) + "\n"
                            for e in compound_corpus), encoding="utf-8")
    assert main(["train", "--data", str(data), "--linear-probe", "--out",
                 str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert "linear_probe (--linear-probe) is not used by compound (multi-label) training " \
           "of the Transformer; remove it or use single-label training" in err
    assert main(["train", "--data", str(data), "--text-column", "q", "--out",
                 str(tmp_path / "m")]) == 1
    assert "text_column (--text-column) is not used by compound" in capsys.readouterr().err


class _Stop(Exception):
    pass


@pytest.mark.parametrize("multi_label", [False, True])
def test_cli_label_smoothing_reaches_the_recipe(multi_label, tmp_path, monkeypatch,
                                                compound_corpus):
    got = []

    def capture(train, valid, recipe, **kwargs):
        got.append(recipe)
        raise _Stop

    if multi_label:
        monkeypatch.setattr(compound_mod, "train_compound_classifier", capture)
        data = tmp_path / "c.jsonl"
        data.write_text("".join(json.dumps({"text": e.text, "intents": list(e.intents)})
                                + "\n" for e in compound_corpus), encoding="utf-8")
    else:
        monkeypatch.setattr(pipeline_mod, "train_intent_classifier", capture)
        data = _csv(tmp_path)
    with pytest.raises(_Stop):
        main(["train", "--data", str(data), "--model", "transformer", "--label-smoothing",
              "0.25", "--out", str(tmp_path / "m")])
    assert got[0].label_smoothing == 0.25


def test_the_readme_holds_the_recipe_table_of_the_code():
    from pathlib import Path

    from headwise.intent.training.recipe_paths import recipe_table

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    table = readme.split("<!-- recipe-fields:begin -->\n", 1)[1].split(
        "\n<!-- recipe-fields:end -->", 1)[0]
    assert table == recipe_table(IntentRecipe), \
        "README's recipe table is stale: paste recipe_table(IntentRecipe)"
    rows = [r for r in table.splitlines()[2:]]
    assert len(rows) == len(dataclasses.fields(IntentRecipe))
    assert all(r.count(" | ") >= 3 and not r.endswith("|  |") for r in rows)
