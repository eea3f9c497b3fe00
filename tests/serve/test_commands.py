"""``headwise serve`` options -> ServeConfig, and the worker factory's config hand-over."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient
from serve_helpers import wait_ready

from headwise.cli import build_parser
from headwise.commands.serve import config_from_args
from headwise.serve import ServeConfig, app_from_environment, create_app
from headwise.serve.config import CONFIG_ENV


def test_serve_options_make_the_config():
    args = build_parser().parse_args(
        ["serve", "m", "--runtime", "onnx", "--onnx", "m.onnx", "--max-batch-size", "8",
         "--max-wait-ms", "1.5", "--no-batching", "--long-text", "chunk", "--chunk-stride",
         "16", "--max-texts", "4", "--workers", "2"])
    cfg = config_from_args(args)
    assert cfg == ServeConfig(model_dir="m", runtime="onnx", onnx_path="m.onnx",
                              batching=False, max_batch_size=8, max_wait_ms=1.5,
                              long_text="chunk", chunk_stride=16, max_texts=4)
    assert ServeConfig.from_json(cfg.to_json()) == cfg
    with pytest.raises(ValueError, match="--workers"):
        config_from_args(build_parser().parse_args(["serve", "m", "--workers", "0"]))
    # onnxruntime when a matching export exists, else PyTorch: the default everywhere
    assert config_from_args(build_parser().parse_args(["serve", "m"])).runtime == "auto"
    assert ServeConfig().runtime == "auto"
    for runtime in ("torch", "onnx", "auto"):
        args = build_parser().parse_args(["serve", "m", "--runtime", runtime])
        assert config_from_args(args).runtime == runtime


@pytest.mark.parametrize("bad, match", [({"runtime": "tensorrt"}, "runtime"),
                                        ({"long_text": "drop"}, "long_text"),
                                        ({"max_batch_size": 0}, "max_batch_size"),
                                        ({"max_wait_ms": -1}, "max_wait_ms")])
def test_bad_config_values_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        ServeConfig(**bad)
    with pytest.raises(ValueError, match="unknown serve config keys"):
        ServeConfig.from_json('{"colour": 1}')


def test_worker_factory_reads_the_config_from_the_environment(encoder_dir, monkeypatch):
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    with pytest.raises(RuntimeError, match="headwise serve"):
        app_from_environment()
    monkeypatch.setenv(CONFIG_ENV, ServeConfig(model_dir=str(encoder_dir), top_k=1).to_json())
    with TestClient(app_from_environment()) as c:
        wait_ready(c)
        (p,) = c.post("/v1/predict", json={"texts": "my balance"}).json()["predictions"]
    assert len(p["top_k"]) == 1


def test_freeze_gc_moves_what_warm_up_left_out_of_the_collectors_reach(encoder_dir):
    import gc

    gc.unfreeze()
    try:
        with TestClient(create_app(ServeConfig(model_dir=str(encoder_dir)))) as c:
            wait_ready(c)
            assert gc.get_freeze_count() == 0  # off by default: the process is not ours
        with TestClient(create_app(ServeConfig(model_dir=str(encoder_dir),
                                               freeze_gc=True))) as c:
            wait_ready(c)
            assert gc.get_freeze_count() > 0
            assert c.post("/v1/predict", json={"texts": "my balance"}).status_code == 200
    finally:
        gc.unfreeze()


def test_serve_runs_uvicorn_without_access_log_and_with_a_frozen_gc(encoder_dir, monkeypatch):
    import uvicorn

    from headwise.commands.serve import run

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    for extra in ([], ["--access-log"]):
        assert run(build_parser().parse_args(["serve", str(encoder_dir), *extra])) == 0
    (app, kw), (_, kw_logged) = calls
    assert kw["access_log"] is False and kw_logged["access_log"] is True
    assert app.state.serve.config.freeze_gc


@pytest.mark.skipif(not hasattr(os, "confstr"), reason="glibc's malloc only")
@pytest.mark.parametrize("policy", ["truncate", "chunk"])
def test_chunk_policy_steadies_the_heap_at_start(encoder_dir, policy):
    # process-wide and made once: checked in a fresh interpreter
    code = ("import sys; from headwise.serve import ServeConfig; "
            "from headwise.serve.startup import load_engine; "
            "from headwise.models.heap import heap_is_steady; "
            "load_engine(ServeConfig(model_dir=sys.argv[1], long_text=sys.argv[2]), report=None); "
            "print(heap_is_steady())")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", code, str(encoder_dir), policy], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == str(policy == "chunk")
