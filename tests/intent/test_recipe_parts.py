"""A recipe by part (headwise.intent.training.recipe_parts): every field in one part, files
written flat or by part read the same, and misfiled or repeated fields are refused."""

from __future__ import annotations

import dataclasses
import json

import pytest

from headwise.intent import IntentRecipe
from headwise.intent.training.recipe_parts import PARTS, part_of, recipe_parts

NESTED = {"architecture": {"model": "transformer", "d_model": 64, "num_layers": 1},
          "training": {"epochs": 3, "lr": 0.002, "seed": 4},
          "levers": {"linear_probe": True},
          "decision": {"ood_detector": "energy", "max_reject": 0.05}}


def test_every_field_is_in_exactly_one_part():
    listed = [name for names in PARTS.values() for name in names]
    fields = [f.name for f in dataclasses.fields(IntentRecipe)]
    assert sorted(listed) == sorted(fields) and len(listed) == len(set(listed))
    assert part_of("tfidf_c") == "levers" and part_of("model") == "architecture"
    with pytest.raises(KeyError, match="'nope' is not a recipe field"):
        part_of("nope")


def test_by_part_and_flat_build_the_same_recipe_and_round_trip():
    flat = {k: v for part in NESTED.values() for k, v in part.items()}
    assert IntentRecipe.from_dict(NESTED) == IntentRecipe.from_dict(flat)
    mixed = {**NESTED, "batch_size": 8}  # a flat field beside the parts
    assert IntentRecipe.from_dict(mixed).batch_size == 8
    recipe = IntentRecipe.from_dict(NESTED)
    by_part = recipe.to_dict(by_part=True)
    assert list(by_part) == list(PARTS)
    assert IntentRecipe.from_dict(by_part) == recipe
    assert recipe_parts({"lr": 0.1, "model": "bilstm"}) == {
        "architecture": {"model": "bilstm"}, "training": {"lr": 0.1}}


@pytest.mark.parametrize("data, message", [
    ({"training": {"d_model": 64}}, "'d_model' is under 'training'; it belongs to "
                                    "'architecture'"),
    ({"training": {"lr": 0.1}, "lr": 0.2}, r"'lr' is given twice \('training' and at the "
                                           r"top level\)"),
    ({"lr": 0.2, "training": {"lr": 0.1}}, r"'lr' is given twice \(the top level and "
                                           r"'training'\)"),
    ({"levers": ["linear_probe"]}, "part 'levers' must be an object of its fields"),
    ({"training": {"learning_rate": 0.1}}, r"unknown recipe keys \['learning_rate'\]"),
])
def test_misfiled_repeated_and_unknown_fields_are_refused(data, message):
    with pytest.raises(ValueError, match=message):
        IntentRecipe.from_dict(data)


def test_a_recipe_file_by_part_trains_from_the_command_line(tmp_path):
    from headwise.cli import main

    data = tmp_path / "train.csv"
    rows = [("my card is lost", "lost"), ("i lost my card", "lost"), ("card gone", "lost"),
            ("what is my balance", "balance"), ("show my balance", "balance"),
            ("balance please", "balance")] * 3
    data.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows), encoding="utf-8")
    cfg = tmp_path / "recipe.json"
    cfg.write_text(json.dumps({"architecture": {"model": "tfidf"},
                               "levers": {"tfidf_c": 3.0}, "training": {"seed": 2}}))
    assert IntentRecipe.read_config(cfg) == {"model": "tfidf", "tfidf_c": 3.0, "seed": 2}
    assert main(["train", "--data", str(data), "--config", str(cfg), "--out",
                 str(tmp_path / "m"), "--quiet"]) == 0
    summary = json.loads((tmp_path / "m" / "train_summary.json").read_text())
    assert summary["recipe"]["tfidf_c"] == 3.0 and summary["recipe"]["seed"] == 2
    cfg.write_text(json.dumps({"architecture": {"model": "tfidf", "tfidf_c": 3.0}}))
    with pytest.raises(ValueError, match=r"recipe.json: 'tfidf_c' is under 'architecture'; "
                                         r"it belongs to 'levers'"):
        IntentRecipe.read_config(cfg)
