"""Recipe fields of the wrong type are refused with the field's name, as one-line errors
of ``headwise train --config``."""

from __future__ import annotations

import json

import pytest

from headwise.intent import IntentRecipe


@pytest.mark.parametrize("fields,message", [
    ({"epochs": "ten"}, "'epochs' must be an integer or null, got 'ten'"),
    ({"epochs": 2.5}, "'epochs' must be an integer or null, got 2.5"),
    ({"d_model": "64"}, "'d_model' must be an integer, got '64'"),
    ({"lr": True}, "'lr' must be a number or null, got True"),
    ({"tfidf_c": [1, "x"]}, "'tfidf_c' must be a number or a list of numbers"),
    ({"linear_probe": "yes"}, "'linear_probe' must be true or false"),
    ({"model_overrides": []}, "'model_overrides' must be an object"),
    ({"trim_vocab": 2.5}, "'trim_vocab' must be a string or an integer"),
    ({"input_prefix": 3}, "'input_prefix' must be a string or null"),
])
def test_wrong_types_name_the_field(fields, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        IntentRecipe.from_dict(fields)


def test_right_types_pass_and_ints_are_numbers():
    # each field on a model kind that uses it (tfidf_c on a Transformer is refused)
    r = IntentRecipe.from_dict({"lr": 1, "d_ff": None, "epochs": 3})
    assert r.lr == 1 and r.epochs == 3
    t = IntentRecipe.from_dict({"model": "tfidf", "tfidf_c": [1, 3.0], "prior_correction": 0.5})
    assert t.tfidf_c == [1, 3.0] and t.prior_correction == 0.5
    assert IntentRecipe.from_dict({"model": "pretrained:any", "trim_vocab": 5}).trim_vocab == 5


def test_cli_reports_a_wrong_type_in_one_line(tmp_path, capsys):
    from headwise.cli import main

    data = tmp_path / "t.csv"
    data.write_text("text,label\na,x\nb,y\n", encoding="utf-8")
    cfg = tmp_path / "r.json"
    cfg.write_text(json.dumps({"epochs": "ten"}))
    assert main(["train", "--data", str(data), "--config", str(cfg), "--out",
                 str(tmp_path / "m"), "--model", "transformer"]) == 1
    err = capsys.readouterr().err
    assert "'epochs' must be an integer or null, got 'ten'" in err
    assert "Traceback" not in err
