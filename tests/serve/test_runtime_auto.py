"""``--runtime auto`` (the default): onnxruntime when MODEL/model.onnx (or --onnx) is an
export of these very weights, else PyTorch with the reason on stderr in one line."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch
from answers import confidence_of, intent_of
from fastapi.testclient import TestClient
from serve_helpers import wait_ready
from tiny_models import MAX_LENGTH, TEXTS

from headwise._files import file_sha256
from headwise.cli import main
from headwise.intent.classifier import IntentClassifier
from headwise.models.io import WEIGHTS_NAME
from headwise.onnx.export import export_onnx
from headwise.serve import ServeConfig, create_app, load_served_predictor
from headwise.serve.config import CONFIG_ENV


@pytest.fixture(scope="module")
def exported_dir(encoder_dir, tmp_path_factory):
    """A copy of the encoder directory holding its own export as model.onnx."""
    d = tmp_path_factory.mktemp("auto") / "model"
    shutil.copytree(encoder_dir, d)
    export_onnx(IntentClassifier.load(d).model, d / "model.onnx", max_length=MAX_LENGTH,
                weights_sha256=file_sha256(d / WEIGHTS_NAME))
    return d


def _engine(model_dir, **config):
    reasons: list[str] = []
    predictor = load_served_predictor(ServeConfig(model_dir=str(model_dir), **config),
                         report=reasons.append)
    return predictor, reasons


def test_auto_serves_a_matching_export_on_onnxruntime(exported_dir):
    predictor, reasons = _engine(exported_dir)
    assert predictor.runtime.name == "onnx" and reasons == []
    assert predictor.runtime.path == exported_dir / "model.onnx"
    torch_engine, _ = _engine(exported_dir, runtime="torch")
    assert torch_engine.runtime.name == "torch"  # an explicit choice ignores the file
    for got, want in zip(predictor.predict(TEXTS), torch_engine.predict(TEXTS), strict=True):
        assert intent_of(got) == intent_of(want)
        assert confidence_of(got) == pytest.approx(confidence_of(want), abs=1e-4)
    with TestClient(create_app(ServeConfig(model_dir=str(exported_dir)))) as c:
        wait_ready(c)
        assert c.post("/v1/predict", json={"texts": TEXTS[:2]}).json()["runtime"] == "onnx"


def test_auto_takes_the_file_named_by_onnx_path(encoder_dir, exported_dir):
    predictor, reasons = _engine(encoder_dir, onnx_path=str(exported_dir / "model.onnx"))
    assert predictor.runtime.name == "onnx" and reasons == []


def test_auto_without_an_export_says_why_on_one_stderr_line(encoder_dir, capsys):
    assert not (encoder_dir / "model.onnx").exists()
    predictor = load_served_predictor(ServeConfig(model_dir=str(encoder_dir)))
    assert predictor.runtime.name == "torch"
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("headwise serve: runtime auto: using torch: no ONNX export at")
    assert f"headwise export {encoder_dir} --onnx" in line


def _stale_copy(exported_dir, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(exported_dir, other)
    clf = IntentClassifier.load(other)
    with torch.no_grad():
        clf.model.classifier.bias.add_(1.0)
    clf.save(other)  # new weights; model.onnx stays the old export
    return other


def test_auto_falls_back_on_a_stale_or_broken_export(exported_dir, tmp_path):
    other = _stale_copy(exported_dir, tmp_path)
    predictor, (reason,) = _engine(other)
    assert predictor.runtime.name == "torch"
    assert "runtime auto: using torch:" in reason and "exported from other weights" in reason
    assert "\n" not in reason
    (other / "model.onnx").write_bytes(b"not onnx")
    predictor, (reason,) = _engine(other)
    assert predictor.runtime.name == "torch" and "not a loadable ONNX model" in reason
    assert "\n" not in reason
    # the explicit choice still refuses what auto steps around
    with pytest.raises(ValueError, match="not a loadable ONNX model"):
        _engine(other, runtime="onnx")


def test_auto_falls_back_without_onnxruntime(exported_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import raises ImportError
    predictor, (reason,) = _engine(exported_dir)
    assert predictor.runtime.name == "torch" and "onnxruntime cannot be imported" in reason


@pytest.fixture
def fake_uvicorn(monkeypatch):
    import uvicorn

    calls: list[tuple] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    monkeypatch.delenv(CONFIG_ENV, raising=False)  # restored after the test
    return calls


def test_the_startup_line_names_the_runtime_chosen(exported_dir, encoder_dir, fake_uvicorn,
                                                   capsys):
    import os

    assert main(["serve", str(exported_dir), "--workers", "2"]) == 0
    err = capsys.readouterr().err
    assert f"runtime onnx (auto, {exported_dir / 'model.onnx'})" in err
    assert "using torch" not in err
    # the workers are told what was chosen, so they neither decide nor report again
    assert json.loads(os.environ[CONFIG_ENV])["runtime"] == "onnx"
    assert main(["serve", str(encoder_dir)]) == 0
    reason, startup = capsys.readouterr().err.strip().splitlines()
    assert reason.startswith("headwise serve: runtime auto: using torch:")
    assert "runtime torch (auto)," in startup
    assert main(["serve", str(exported_dir), "--runtime", "torch"]) == 0
    startup = capsys.readouterr().err
    assert "runtime torch," in startup and "auto" not in startup
    assert len(fake_uvicorn) == 3
