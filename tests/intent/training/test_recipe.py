"""The recipe by part (headwise.intent.training.recipe): each part holds only its own fields,
what the parts cannot mean together is refused once with the field's path, old flat files
are refused naming each field's new place, and ``headwise train`` maps its options onto
recipe paths by one rule."""

from __future__ import annotations

import dataclasses
import io
import json
from contextlib import redirect_stdout

import pytest
from tiny_corpus import INTENTS

import headwise.intent.training.pipeline as pipeline_mod
from headwise.cli import main
from headwise.commands.train import EXPOSED, option_of
from headwise.intent import IntentRecipe, train_intent_classifier
from headwise.intent.training.recipe import (
    ARCHITECTURES,
    PARTS,
    BiLSTM,
    Decision,
    Levers,
    MultiLabel,
    PretrainedEncoder,
    SingleLabel,
    Tfidf,
    Transformer,
    architecture_from_spec,
    default_train,
)
from headwise.train import TrainConfig

ROWS = [(t, k) for k, ts in INTENTS.items() for t in ts]


# --- the parts ----------------------------------------------------------------------------
def _fields(cls):
    return {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_an_architecture_takes_no_field_of_another(name):
    own = _fields(ARCHITECTURES[name])
    others = sorted(set().union(*(_fields(c) for c in ARCHITECTURES.values())) - own)
    assert others, name
    for field in others:
        part = {"type": name, **({"name": "x"} if name == "pretrained" else {}), field: 1}
        data = {"architecture": part}
        with pytest.raises(ValueError, match=rf"\['{field}'\] are not fields of architecture "
                                             rf"\({name}\); its fields: "):
            IntentRecipe.from_dict(data)


def test_a_task_takes_only_its_own_fields():
    with pytest.raises(ValueError, match=r"\['per_intent_thresholds'\] are not fields of task "
                                         r"\(single_label\)"):
        IntentRecipe.from_dict({"task": {"per_intent_thresholds": True}})
    with pytest.raises(ValueError, match=r"\['select_on'\] are not fields of task "
                                         r"\(multi_label\)"):
        IntentRecipe.from_dict({"task": {"type": "multi_label", "select_on": "macro_f1"}})
    with pytest.raises(ValueError, match=r"task\.type must be one of \['single_label', "
                                         r"'multi_label'\]"):
        IntentRecipe.from_dict({"task": {"type": "both"}})


def test_the_train_part_is_the_trainers_own_config():
    assert PARTS["train"] == (TrainConfig,)
    recipe = IntentRecipe.from_dict({"train": {"max_grad_norm": 0.5, "precision": "bf16"}})
    assert (recipe.train.max_grad_norm, recipe.train.precision) == (0.5, "bf16")
    with pytest.raises(ValueError, match=r"\['learning_rate'\] are not fields of train "
                                         r"\(TrainConfig\)"):
        IntentRecipe.from_dict({"train": {"learning_rate": 0.1}})


def _everything_changed() -> list[IntentRecipe]:
    return [
        IntentRecipe(architecture=Transformer(d_model=64, num_heads=4, position="rope",
                                              model_overrides={"number_heads": [0]}),
                     train=dataclasses.replace(TrainConfig(), lr=2e-3, epochs=3, seed=7),
                     levers=Levers(label_smoothing=0.2, pretrain_epochs=1, pretrain_lr=1e-3,
                                   linear_probe=True, probe_c=2.0, blend="tfidf",
                                   blend_c=[1.0, 3.0]),
                     decision=Decision(prior_correction=0.5, max_reject=0.1,
                                       reject_budget=None, reject_confidence=None,
                                       ood_detector="max_prob"),
                     task=SingleLabel(select_on="macro_f1"), valid_fraction=0.2),
        IntentRecipe(architecture=PretrainedEncoder(name="/x", input_prefix="query: ",
                                                    trim_vocab=100,
                                                    model_overrides={"number_heads": [1]}),
                     task=MultiLabel(slots=False, per_intent_thresholds=True)),
        IntentRecipe(architecture=Tfidf(c=[1.0, 10.0]),
                     levers=Levers(class_weighting="balanced", label_cleaning="drop")),
        IntentRecipe(architecture=BiLSTM(lstm_hidden=32, lstm_pooling="attention"),
                     levers=Levers(gce_q=0.7, distill="tfidf", distill_weight=0.3)),
    ]


@pytest.mark.parametrize("recipe", _everything_changed(), ids=lambda r: r.architecture_name)
def test_every_part_round_trips_through_json(recipe):
    data = json.loads(json.dumps(recipe.to_dict()))
    assert IntentRecipe.from_dict(data) == recipe
    assert list(data) == [*PARTS, "valid_fraction"]
    assert data["architecture"]["type"] == recipe.architecture_name
    assert data["task"]["type"] == recipe.task.NAME


def test_defaults_follow_the_architecture():
    assert IntentRecipe().train.lr == 1e-3 and IntentRecipe().train.epochs == 20
    bilstm = IntentRecipe(architecture=BiLSTM())
    assert (bilstm.train.lr, bilstm.train.epochs) == (2e-3, 20)
    assert (bilstm.train.warmup_ratio, bilstm.train.patience) == (0.1, 5)
    assert architecture_from_spec("pretrained:e5") == PretrainedEncoder(name="e5")
    with pytest.raises(ValueError, match="--model must be one of"):
        architecture_from_spec("gpt")


def test_the_transformers_default_levers_are_the_measured_ones_and_a_dict_replaces_them():
    from headwise.intent.training.defaults import (
        DEFAULT_TRANSFORMER_OVERRIDES,
        DEFAULT_TRANSFORMER_POSITION,
    )

    t = Transformer()
    assert t.position == DEFAULT_TRANSFORMER_POSITION == "rope"
    assert t.model_overrides == DEFAULT_TRANSFORMER_OVERRIDES == {
        "number_heads": [0, 1], "negation_heads": [2, 3], "negation_scope": "clause",
        "negation_bias_init": 4.0}
    assert t.model_overrides is not DEFAULT_TRANSFORMER_OVERRIDES  # a copy per part
    t.model_overrides["number_heads"].append(5)
    assert Transformer().model_overrides["number_heads"] == [0, 1]
    # a dict given replaces them; {} is a plain Transformer
    assert Transformer(model_overrides={}).model_overrides == {}
    assert IntentRecipe.from_dict({"architecture": {"model_overrides": {
        "number_heads": [1]}}}).architecture.model_overrides == {"number_heads": [1]}
    # narrower layers lack heads 2 and 3: no default levers there, and named heads they
    # lack are refused naming the field
    assert Transformer(d_model=32, num_heads=2).model_overrides == {}
    assert Transformer(d_model=32, num_heads=4).model_overrides == DEFAULT_TRANSFORMER_OVERRIDES
    with pytest.raises(ValueError, match=r"architecture\.model_overrides\.negation_heads "
                                         r"\[2, 3\] names heads a layer of 2 heads lacks"):
        Transformer(d_model=32, num_heads=2, model_overrides={"negation_heads": [2, 3]})
    # the saved recipe says what was used, and reads back as it
    data = IntentRecipe(architecture=Transformer(d_model=32, num_heads=2)).to_dict()
    assert data["architecture"]["model_overrides"] == {}
    assert IntentRecipe.from_dict(data).architecture.model_overrides == {}


@pytest.mark.parametrize("data, message", [
    ({"train": {"epochs": "ten"}}, r"^train\.epochs must be an integer, got 'ten'"),
    ({"train": {"epochs": 2.5}}, r"^train\.epochs must be an integer"),
    ({"architecture": {"d_model": "64"}}, r"^architecture\.d_model must be an integer"),
    ({"levers": {"linear_probe": "yes"}}, r"^levers\.linear_probe must be true or false or "
                                          r"null"),
    ({"decision": {"reject_budget": "5%"}}, r"^decision\.reject_budget must be a number or "
                                            r"null"),
    ({"architecture": {"type": "tfidf", "c": [1.0, "x"]}}, r"^architecture\.c must be a "
                                                           r"number or a list of numbers"),
    ({"valid_fraction": 1.5}, r"^valid_fraction must be in \[0, 1\)"),
    ({"levers": []}, r"part 'levers' must be an object of its fields"),
    ({"extras": {}}, r"unknown recipe parts \['extras'\]"),
])
def test_wrong_values_are_refused_naming_the_path(data, message):
    with pytest.raises(ValueError, match=message):
        IntentRecipe.from_dict(data)


# --- what the parts mean together ---------------------------------------------------------
@pytest.mark.parametrize("data, message", [
    ({"architecture": {"type": "tfidf"}, "train": {"epochs": 3}},
     r"^train\.epochs does not apply to the tfidf architecture"),
    ({"architecture": {"type": "tfidf"}, "levers": {"label_smoothing": 0.2}},
     r"^levers\.label_smoothing does not apply to the tfidf architecture"),
    ({"architecture": {"type": "tfidf"}, "decision": {"ood_detector": "energy"}},
     r"^decision\.ood_detector does not apply to the tfidf architecture"),
    ({"architecture": {"type": "bilstm"}, "levers": {"linear_probe": True}},
     r"^levers\.linear_probe: LP-FT fits a head on a Transformer's or a pretrained"),
    ({"architecture": {"type": "pretrained", "name": "/x"}, "levers": {"pretrain_epochs": 1}},
     r"^levers\.pretrain_epochs: masked-LM self-pretraining is the from-scratch"),
    ({"architecture": {"type": "pretrained", "name": "/x",
                       "model_overrides": {"number_heads": [0]}}},
     r"^architecture\.model_overrides: single-label fine-tuning keeps the checkpoint's"),
    ({"architecture": {"type": "tfidf"}, "task": {"type": "multi_label"}},
     r"^task multi_label needs a Transformer, a BiLSTM or a pretrained encoder"),
    ({"task": {"type": "multi_label"}, "levers": {"gce_q": 0.5}},
     r"^levers\.gce_q is single-label training's"),
    ({"task": {"type": "multi_label"}, "levers": {"distill": "tfidf"}},
     r"^levers\.distill='tfidf' is single-label training's; the multi_label task distils a "
     r"compound teacher"),
    ({"levers": {"distill": "teacher"}},
     r"^levers\.distill='teacher' is the multi_label task's"),
    ({"task": {"type": "multi_label"}, "levers": {"label_cleaning": "drop"}},
     r"^levers\.label_cleaning is single-label training's"),
    ({"architecture": {"type": "bilstm"}, "task": {"type": "multi_label"},
      "levers": {"linear_probe": True}},
     r"^levers\.linear_probe: LP-FT fits a head on a Transformer's or a pretrained"),
    ({"task": {"type": "multi_label"}, "decision": {"max_reject": 0.1}},
     r"^decision\.max_reject does not apply to the multi_label task: a compound model "
     r"answers out-of-scope when no intent reaches its own threshold"),
    ({"levers": {"distill_weight": 0.2}}, r"^levers\.distill_weight is used only with "
                                          r"levers\.distill"),
    ({"levers": {"pretrain_lr": 0.1}}, r"^levers\.pretrain_lr is used only with "
                                       r"levers\.pretrain_epochs"),
    ({"levers": {"blend": "tfidf"}, "decision": {"ood_detector": "knn"}},
     r"decision\.ood_detector 'knn' scores the network alone"),
    ({"architecture": {"tokenizer": "char", "vocab_size": 100}},
     r"^architecture\.vocab_size is a WordPiece vocabulary's"),
    ({"architecture": {"d_model": 30, "num_heads": 4}},
     r"^architecture\.d_model \(30\) must be a positive multiple of architecture\.num_heads"),
    ({"architecture": {"model_overrides": {"d_model": 64}}},
     r"^architecture\.model_overrides: \['d_model'\] are fields of the part itself"),
    ({"architecture": {"model_overrides": {"depth": 2}}},
     r"^architecture\.model_overrides: \['depth'\] are not ModelConfig fields"),
    ({"architecture": {"type": "pretrained"}}, r"^architecture\.name: a pretrained encoder "
                                               r"needs its checkpoint"),
])
def test_what_the_parts_cannot_mean_together_is_refused(data, message):
    with pytest.raises(ValueError, match=message):
        IntentRecipe.from_dict(data)


def test_training_settings_are_refused_where_unused(tmp_path):
    tfidf = IntentRecipe(architecture=Tfidf())
    with pytest.raises(ValueError, match="a TF-IDF fit has no checkpoints"):
        train_intent_classifier(ROWS * 2, None, tfidf, out_dir=tmp_path / "m", resume=True)
    with pytest.raises(ValueError, match="valid_fraction is not used when validation data is "
                                         "given"):
        train_intent_classifier(ROWS * 2, ROWS, tfidf.replace(valid_fraction=0.3),
                                out_dir=tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_the_saved_recipe_is_the_recipe_by_part(tmp_path):
    recipe = IntentRecipe(architecture=Tfidf(c=3.0), train=dataclasses.replace(
        default_train(Tfidf()), seed=2, progress=False))
    run = train_intent_classifier(ROWS * 2, ROWS, recipe, out_dir=tmp_path / "m")
    saved = run.classifier.info["recipe"]
    assert saved == recipe.to_dict() and IntentRecipe.from_dict(saved) == recipe


# --- recipe files ---------------------------------------------------------------------------
def _csv(tmp_path):
    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"{t},{k}\n" for t, k in ROWS * 2),
                    encoding="utf-8")
    return data


def test_a_flat_recipe_file_is_refused_naming_each_fields_new_place(tmp_path, capsys):
    cfg = tmp_path / "old.json"
    cfg.write_text(json.dumps({"model": "bilstm", "d_model": 64, "epochs": 3,
                               "label_smoothing": 0.2, "ood_detector": "energy",
                               "select_on": "macro_f1", "tfidf_c": 2.0}))
    with pytest.raises(ValueError) as e:
        IntentRecipe.from_json(cfg)
    message = str(e.value)
    assert message.startswith(f"{cfg} is in the flat recipe form of earlier headwise "
                              f"versions; a recipe is now by part")
    for old, new in (("model", "architecture.type"), ("d_model", "architecture.d_model"),
                     ("epochs", "train.epochs"), ("label_smoothing", "levers.label_smoothing"),
                     ("ood_detector", "decision.ood_detector"),
                     ("select_on", "task.select_on"), ("tfidf_c", "architecture.c")):
        assert f"{old} is now {new}" in message
    # the old by-part form too (its "training" part)
    cfg.write_text(json.dumps({"training": {"lr": 0.1}}))
    with pytest.raises(ValueError, match="lr is now train.lr"):
        IntentRecipe.read_config(cfg)
    cfg.write_text(json.dumps({"model": "tfidf"}))
    assert main(["train", "--data", str(_csv(tmp_path)), "--config", str(cfg), "--out",
                 str(tmp_path / "m")]) == 1
    assert "model is now architecture.type" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


# --- the command line ----------------------------------------------------------------------
class _Stop(Exception):
    pass


@pytest.fixture
def captured(monkeypatch):
    got = []

    def capture(train, valid, recipe, **kwargs):
        got.append(recipe)
        raise _Stop

    monkeypatch.setattr(pipeline_mod, "train_intent_classifier", capture)
    return got


def _get(recipe, path):
    value = recipe
    for key in path.split("."):
        value = value[key] if isinstance(value, dict) else getattr(value, key)
    return value


#: a value for every exposed option, as typed and as the recipe holds it
TYPED = {"train.epochs": ("3", 3), "train.lr": ("0.002", 0.002), "train.seed": ("4", 4),
         "train.precision": ("bf16", "bf16"), "decision.oos_labels": ("其他", "其他")}


def test_the_rule_makes_a_switch_of_a_bool_field_and_set_reaches_the_others():
    import argparse

    from headwise.commands.train import add_field_options, apply_field_options

    p = argparse.ArgumentParser()
    paths = ("levers.linear_probe", "task.slots", "levers.blend")
    add_field_options(p, paths)
    data: dict = {}
    apply_field_options(p.parse_args(["--linear-probe", "--no-slots", "--blend", "tfidf"]),
                        data, paths)
    assert data == {"levers": {"linear_probe": True, "blend": "tfidf"},
                    "task": {"slots": False}}
    data = {}
    apply_field_options(p.parse_args([]), data, paths)
    assert data == {}


def test_every_exposed_option_is_its_path_by_one_rule(tmp_path, captured, compound_corpus):
    assert set(TYPED) == set(EXPOSED)
    data = _csv(tmp_path)
    compound = tmp_path / "c.jsonl"
    compound.write_text("".join(json.dumps({"text": e.text, "intents": list(e.intents)}) + "\n"
                                for e in compound_corpus), encoding="utf-8")
    for path, (typed, want) in TYPED.items():
        option = option_of(path)
        assert option == "--" + path.split(".")[1].replace("_", "-")
        if typed is None:  # a switch: --NAME / --no-NAME
            option = option if want else "--no-" + option[2:]
        multi = path.startswith("task.")
        argv = ["train", "--data", str(compound if multi else data), "--model", "transformer",
                option, *([typed] if typed is not None else []), "--out", str(tmp_path / "m")]
        with pytest.raises(_Stop):
            main(argv)
        assert _get(captured[-1], path) == want, path


def test_set_reaches_any_field_and_options_win_over_the_config(tmp_path, captured):
    cfg = tmp_path / "r.json"
    cfg.write_text(json.dumps({"architecture": {"type": "bilstm", "lstm_hidden": 32},
                               "train": {"epochs": 9, "batch_size": 4}}))
    with pytest.raises(_Stop):
        main(["train", "--data", str(_csv(tmp_path)), "--config", str(cfg), "--epochs", "2",
              "--set", "architecture.lstm_pooling=attention", "--set", "train.max_grad_norm=0.5",
              "--set", "decision.reject_budget=null", "--set", "levers.label_smoothing=0.2",
              "--no-valid", "--quiet", "--out", str(tmp_path / "m")])
    r = captured[-1]
    assert isinstance(r.architecture, BiLSTM)
    assert (r.architecture.lstm_hidden, r.architecture.lstm_pooling) == (32, "attention")
    assert (r.train.epochs, r.train.batch_size, r.train.max_grad_norm) == (2, 4, 0.5)
    assert r.train.progress is False and r.valid_fraction == 0.0
    assert r.decision.reject_budget is None and r.levers.label_smoothing == 0.2


def test_the_command_line_refuses_what_the_architecture_has_not(tmp_path, capsys):
    data = _csv(tmp_path)
    assert main(["train", "--data", str(data), "--model", "bilstm", "--set",
                 "architecture.d_model=64", "--out", str(tmp_path / "m")]) == 1
    assert "['d_model'] are not fields of architecture (bilstm)" in capsys.readouterr().err
    assert main(["train", "--data", str(data), "--model", "tfidf", "--epochs", "2",
                 "--out", str(tmp_path / "m")]) == 1
    assert "train.epochs does not apply to the tfidf architecture" in capsys.readouterr().err
    assert main(["train", "--data", str(data), "--model", "transformer",
                 "--set", "task.per_intent_thresholds=true", "--out",
                 str(tmp_path / "m")]) == 1
    assert "['per_intent_thresholds'] are not fields of task (single_label)" in \
        capsys.readouterr().err
    assert main(["train", "--data", str(data), "--set", "lr=0.1", "--out",
                 str(tmp_path / "m")]) == 1
    assert "name a part and a field" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_the_command_line_refuses_single_label_data_options_for_multi_label(
        tmp_path, capsys, compound_corpus):
    data = tmp_path / "c.jsonl"
    data.write_text("".join(json.dumps({"text": e.text, "intents": list(e.intents)}) + "\n"
                            for e in compound_corpus), encoding="utf-8")
    assert main(["train", "--data", str(data), "--columns", "q", "--model", "transformer",
                 "--out", str(tmp_path / "m")]) == 1
    assert "--columns is single-label data's" in capsys.readouterr().err
    assert main(["train", "--data", str(data), "--set", "levers.label_cleaning=drop",
                 "--model", "transformer", "--out", str(tmp_path / "m")]) == 1
    assert "levers.label_cleaning is single-label training's" in capsys.readouterr().err


def test_train_help_is_short(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        main(["train", "--help"])
    lines = out.getvalue().splitlines()
    # 96 before the recipe had parts, 86 before the CLI was slimmed (issue 32)
    assert len(lines) <= 70, len(lines)
    for path in EXPOSED:
        assert any(line.strip().startswith(option_of(path)) for line in lines), path


@pytest.mark.parametrize("model", [["--model", "transformer"], []])
def test_headwise_train_checks_the_recipe_once(model, tmp_path, captured, monkeypatch):
    import headwise.intent.training.recipe.intent_recipe as recipe_mod
    from headwise.intent.training import builders

    monkeypatch.setattr(builders, "default_model", lambda texts: ("bilstm", "test default"))
    real, calls = recipe_mod._what_does_not_apply, []
    monkeypatch.setattr(recipe_mod, "_what_does_not_apply",
                        lambda r: calls.append(r) or real(r))
    with pytest.raises(_Stop):
        main(["train", "--data", str(_csv(tmp_path)), *model, "--out", str(tmp_path / "m")])
    assert len(calls) == 1 and calls[0] is captured[-1]
