"""``--runtime auto`` (the default): onnxruntime when MODEL/model.onnx (or --onnx) is an
export of these very weights; with no such file, the export it builds once into the user
cache (keyed by the model files' hash, never in the model directory); else PyTorch with the
reason on stderr in one line."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import time

import pytest
import torch
from answers import confidence_of, intent_of
from fastapi.testclient import TestClient
from serve_helpers import wait_ready
from tiny_corpus import INTENTS
from tiny_models import MAX_LENGTH, TEXTS

from headwise._files import file_sha256
from headwise.cli import main
from headwise.intent.classifier import IntentClassifier
from headwise.intent.inference.load import ONNX_TOLERANCE, onnx_cache_path
from headwise.models.io import WEIGHTS_NAME
from headwise.onnx.export import export_onnx
from headwise.serve import ServeConfig, create_app, load_served_predictor
from headwise.serve.config import CONFIG_ENV


@pytest.fixture(scope="module", autouse=True)
def onnx_cache(tmp_path_factory):
    """headwise's cache folder for this module's tests (HEADWISE_CACHE): the exports
    runtime auto builds go to its ``onnx/``."""
    root = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HEADWISE_CACHE", str(root))
        yield root / "onnx"


@pytest.fixture(scope="module")
def exported_dir(encoder_dir, tmp_path_factory):
    """A copy of the encoder directory holding its own export as model.onnx."""
    d = tmp_path_factory.mktemp("auto") / "model"
    shutil.copytree(encoder_dir, d)
    export_onnx(IntentClassifier.load(d).model, d / "model.onnx", max_length=MAX_LENGTH,
                weights_sha256=file_sha256(d / WEIGHTS_NAME))
    return d


def _served_predictor(model_dir, **config):
    reasons: list[str] = []
    predictor = load_served_predictor(ServeConfig(model_dir=str(model_dir), **config),
                         report=reasons.append)
    return predictor, reasons


def test_auto_serves_a_matching_export_on_onnxruntime(exported_dir):
    predictor, reasons = _served_predictor(exported_dir)
    assert predictor.runtime.name == "onnx" and reasons == []
    assert predictor.runtime.path == exported_dir / "model.onnx"
    torch_predictor, _ = _served_predictor(exported_dir, runtime="torch")
    assert torch_predictor.runtime.name == "torch"  # an explicit choice ignores the file
    for got, want in zip(predictor.predict(TEXTS), torch_predictor.predict(TEXTS), strict=True):
        assert intent_of(got) == intent_of(want)
        assert confidence_of(got) == pytest.approx(confidence_of(want), abs=1e-4)
    with TestClient(create_app(ServeConfig(model_dir=str(exported_dir)))) as c:
        wait_ready(c)
        assert c.post("/v1/predict", json={"texts": TEXTS[:2]}).json()["runtime"] == "onnx"


def test_auto_takes_the_file_named_by_onnx_path(encoder_dir, exported_dir):
    predictor, reasons = _served_predictor(encoder_dir, onnx_path=str(exported_dir / "model.onnx"))
    assert predictor.runtime.name == "onnx" and reasons == []


def _files(directory):
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.iterdir()}


def _same_answers(got, want):
    """The same intents, and confidences within the export check's tolerance."""
    for g, w in zip(got, want, strict=True):
        assert intent_of(g) == intent_of(w) and g["out_of_scope"] == w["out_of_scope"]
        assert [k["intent"] for k in g["top_k"]] == [k["intent"] for k in w["top_k"]]
        assert [k["confidence"] for k in g["top_k"]] == pytest.approx(
            [k["confidence"] for k in w["top_k"]], abs=ONNX_TOLERANCE)


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory):
    """A Transformer classifier fresh from `headwise train`, never exported."""
    d = tmp_path_factory.mktemp("trained")
    rows = [(t, k) for k, ts in INTENTS.items() for t in ts]
    (d / "train.csv").write_text("text,label\n" + "".join(f"{t},{k}\n" for t, k in rows * 4),
                                 encoding="utf-8")
    (d / "recipe.json").write_text(json.dumps({
        "architecture": {"type": "transformer", "d_model": 32, "num_layers": 1,
                         "num_heads": 4, "d_ff": 64, "vocab_size": 200, "max_length": 16},
        "train": {"epochs": 2, "batch_size": 8, "lr": 3e-3}}))
    assert main(["train", "--data", str(d / "train.csv"), "--config", str(d / "recipe.json"),
                 "--out", str(d / "model"), "--quiet", "--model", "transformer"]) == 0
    return d / "model"


def test_a_freshly_trained_model_is_served_by_onnxruntime_with_no_export_step(
        trained_dir, onnx_cache):
    before = _files(trained_dir)
    assert "model.onnx" not in before
    predictor, (note,) = _served_predictor(trained_dir)
    assert predictor.runtime.name == "onnx"
    path = predictor.runtime.path
    assert path == onnx_cache_path(IntentClassifier.load(trained_dir), trained_dir)
    assert path.is_relative_to(onnx_cache) and path.is_file()
    assert note.startswith(f"runtime auto: exported {trained_dir} to ONNX once, into {path}")
    assert "\n" not in note
    assert _files(trained_dir) == before  # nothing written into the model directory
    assert [p.name for p in path.parent.iterdir()] == ["model.onnx"]  # no staged file left
    torch_predictor, reasons = _served_predictor(trained_dir, runtime="torch")
    assert torch_predictor.runtime.name == "torch" and reasons == []  # torch still forces it
    _same_answers(predictor.predict(TEXTS), torch_predictor.predict(TEXTS))
    # the next start takes the cached file: nothing is built or said again
    again, reasons = _served_predictor(trained_dir)
    assert again.runtime.name == "onnx" and again.runtime.path == path and reasons == []
    explicit, reasons = _served_predictor(trained_dir, runtime="onnx")
    assert explicit.runtime.path == path and reasons == []


def test_a_read_only_model_directory_is_served_from_the_cache(encoder_dir, tmp_path,
                                                              onnx_cache):
    d = tmp_path / "mounted"
    shutil.copytree(encoder_dir, d)
    for f in d.iterdir():
        f.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    d.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    try:
        before = _files(d)
        predictor, _ = _served_predictor(d)
        assert predictor.runtime.name == "onnx"
        assert predictor.runtime.path.is_relative_to(onnx_cache)
        assert _files(d) == before
    finally:
        d.chmod(stat.S_IRWXU)


def test_with_no_writable_cache_auto_says_why_and_onnx_refuses(encoder_dir, tmp_path,
                                                               monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("HEADWISE_CACHE", str(blocker / "cache"))  # under a file: no folder
    predictor, (reason,) = _served_predictor(encoder_dir)
    assert predictor.runtime.name == "torch" and "\n" not in reason
    assert reason.startswith(f"runtime auto: using torch: no ONNX export at "
                             f"{encoder_dir / 'model.onnx'}, and none can be cached under "
                             f"{blocker / 'cache' / 'onnx'}")
    assert "HEADWISE_CACHE" in reason
    with pytest.raises(OSError):
        _served_predictor(encoder_dir, runtime="onnx")


def test_a_changed_model_gets_a_new_export_and_a_damaged_one_is_rebuilt(
        encoder_dir, tmp_path, onnx_cache):
    d = tmp_path / "model"
    shutil.copytree(encoder_dir, d)
    first, _ = _served_predictor(d)
    old = first.runtime.path
    # exports of other models: unused for 31 days, used a day ago, and one being built
    for name, days in (("unused", 31), ("recent", 1), ("building", None)):
        (onnx_cache / name).mkdir()
        if days is not None:
            (onnx_cache / name / "model.onnx").write_bytes(b"")
            when = time.time() - days * 86400
            os.utime(onnx_cache / name / "model.onnx", (when, when))
    clf = IntentClassifier.load(d)
    with torch.no_grad():
        clf.model.classifier.bias.add_(torch.arange(len(clf.labels), dtype=torch.float32))
    clf.save(d)  # new weights in the same directory
    predictor, (note,) = _served_predictor(d)
    assert predictor.runtime.name == "onnx" and predictor.runtime.path != old
    assert "exported" in note and old.is_file()  # the old model's export is not reused
    # building it dropped the export unused for ONNX_CACHE_DAYS, and only that one
    assert not (onnx_cache / "unused").exists()
    assert (onnx_cache / "recent" / "model.onnx").is_file() and (onnx_cache / "building").is_dir()
    torch_predictor, _ = _served_predictor(d, runtime="torch")
    _same_answers(predictor.predict(TEXTS), torch_predictor.predict(TEXTS))
    changed = [abs(confidence_of(a) - confidence_of(b)) for a, b in
               zip(torch_predictor.predict(TEXTS), first.predict(TEXTS), strict=True)]
    assert max(changed) > 100 * ONNX_TOLERANCE  # the old export would answer otherwise
    predictor.runtime.path.write_bytes(b"not onnx")
    rebuilt, (note,) = _served_predictor(d)
    assert rebuilt.runtime.name == "onnx" and rebuilt.runtime.path == predictor.runtime.path
    assert "the cached file was not usable" in note
    _same_answers(rebuilt.predict(TEXTS), torch_predictor.predict(TEXTS))


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
    predictor, (reason,) = _served_predictor(other)
    assert predictor.runtime.name == "torch"
    assert "runtime auto: using torch:" in reason and "exported from other weights" in reason
    assert "\n" not in reason
    (other / "model.onnx").write_bytes(b"not onnx")
    predictor, (reason,) = _served_predictor(other)
    assert predictor.runtime.name == "torch" and "not a loadable ONNX model" in reason
    assert "\n" not in reason
    # the explicit choice still refuses what auto steps around
    with pytest.raises(ValueError, match="not a loadable ONNX model"):
        _served_predictor(other, runtime="onnx")


def test_auto_falls_back_without_onnxruntime(exported_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import raises ImportError
    predictor, (reason,) = _served_predictor(exported_dir)
    assert predictor.runtime.name == "torch" and "onnxruntime cannot be imported" in reason


@pytest.fixture
def fake_uvicorn(monkeypatch):
    import uvicorn

    calls: list[tuple] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    monkeypatch.delenv(CONFIG_ENV, raising=False)  # restored after the test
    return calls


def test_the_startup_line_names_the_runtime_chosen(exported_dir, encoder_dir, bilstm_dir,
                                                   fake_uvicorn, capsys):
    assert main(["serve", str(exported_dir), "--workers", "2"]) == 0
    err = capsys.readouterr().err
    assert f"runtime onnx (auto, {exported_dir / 'model.onnx'})" in err
    assert "using torch" not in err
    # the workers are told what was chosen, so they neither decide nor report again
    assert json.loads(os.environ[CONFIG_ENV])["runtime"] == "onnx"
    assert main(["serve", str(encoder_dir), "--workers", "2"]) == 0
    cached = onnx_cache_path(IntentClassifier.load(encoder_dir), encoder_dir)
    assert f"runtime onnx (auto, {cached})" in capsys.readouterr().err
    # a worker with runtime onnx and no file beside the weights takes the cached export
    worker = load_served_predictor(ServeConfig.from_json(os.environ[CONFIG_ENV]), report=None)
    assert worker.runtime.path == cached
    assert main(["serve", str(bilstm_dir)]) == 0
    reason, startup = capsys.readouterr().err.strip().splitlines()
    assert reason.startswith("headwise serve: runtime auto: using torch:")
    assert "runtime torch (auto)," in startup
    assert main(["serve", str(exported_dir), "--runtime", "torch"]) == 0
    startup = capsys.readouterr().err
    assert "runtime torch," in startup and "auto" not in startup
    assert len(fake_uvicorn) == 4
