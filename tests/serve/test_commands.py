"""``headwise serve`` options -> ServeConfig, and the worker factory's config hand-over."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from answers import intent_of
from fastapi.testclient import TestClient
from serve_helpers import wait_ready

from headwise.cli import build_parser
from headwise.commands.serve_options import config_from_args, process_from_args
from headwise.serve import ServeConfig, app_from_environment, create_app
from headwise.serve.config import CONFIG_ENV


def test_serve_options_make_the_config(tmp_path):
    args = build_parser().parse_args(
        ["serve", "m", "--runtime", "m.onnx", "--set", "max_batch_size=8", "--set",
         "max_wait_ms=1.5", "--set", "batching=false", "--set", "long_text=chunk", "--set",
         "chunk_stride=16", "--set", "max_texts=4", "--workers", "2"])
    cfg = config_from_args(args)
    assert cfg == ServeConfig(model_dir="m", runtime="onnx", onnx_path="m.onnx",
                              batching=False, max_batch_size=8, max_wait_ms=1.5,
                              long_text="chunk", chunk_stride=16, max_texts=4, workers=2)
    assert ServeConfig.from_json(cfg.to_json()) == cfg
    with pytest.raises(ValueError, match="--workers"):
        config_from_args(build_parser().parse_args(["serve", "m", "--workers", "0"]))
    # onnxruntime when a matching export exists, else PyTorch: the default everywhere
    assert config_from_args(build_parser().parse_args(["serve", "m"])).runtime == "auto"
    assert ServeConfig().runtime == "auto"
    for runtime in ("torch", "onnx", "auto"):
        args = build_parser().parse_args(["serve", "m", "--runtime", runtime])
        assert config_from_args(args).runtime == runtime
    cfg = config_from_args(build_parser().parse_args(["serve", "m", "--runtime", "auto:x.onnx"]))
    assert (cfg.runtime, cfg.onnx_path) == ("auto", "x.onnx")
    # --config FILE: the same settings as a JSON object; --set wins over it
    settings = tmp_path / "serve.json"
    settings.write_text(json.dumps({"max_wait_ms": 2, "top_k": 5, "log_level": "warning",
                                    "graceful_timeout": 3}))
    args = build_parser().parse_args(["serve", "m", "--config", str(settings),
                                      "--set", "top_k=2"])
    cfg = config_from_args(args)
    assert (cfg.max_wait_ms, cfg.top_k) == (2.0, 2) and isinstance(cfg.max_wait_ms, float)
    process = process_from_args(args)
    assert (process.log_level, process.graceful_timeout, process.access_log) == (
        "warning", 3, False)


@pytest.mark.parametrize("argv, message", [
    (["--set", "max_batch_size=eight"], 'max_batch_size="eight": max_batch_size is int'),
    (["--set", "batching=1"], "batching is bool"),
    (["--set", "colour=red"], "--set colour: no such setting"),
    (["--set", "workers=2"], "workers is not a setting: --workers sets it"),
    (["--set", "onnx_path=m.onnx"], "--runtime FILE.onnx sets it"),
    (["--set", "freeze_gc=true"], "headwise serve itself sets it"),
    (["--set", "max_batch_size"], "give FIELD=VALUE"),
    (["--set", "log_level=loud"], "log_level must be one of"),
    (["--set", "max_wait_ms=-1"], "max_wait_ms must be >= 0"),
    (["--set", "chunk_length=wide"], 'chunk_length="wide": chunk_length is int or float'),
    (["--set", "chunk_length=4"], "chunk_length must be a fraction"),
    (["--set", "chunk_length=1.5"], "chunk_length must be a fraction"),
    (["--set", "long_text=truncate", "--set", "chunk_length=16"],
     "the truncate policy does not cut a text into windows"),
    (["--set", "long_text=head_tail", "--set", "chunk_stride=4"],
     "chunk_stride 4 is the stride of a chunked policy's windows"),
])
def test_bad_settings_are_refused_naming_the_field(argv, message):
    from headwise.commands.serve_options import process_from_args

    with pytest.raises(ValueError, match=re.escape(message)):
        args = build_parser().parse_args(["serve", "m", *argv])
        config_from_args(args)
        process_from_args(args)


def test_the_window_width_setting_keeps_tokens_apart_from_fractions():
    """``--set chunk_length=N``: an integer is a count of tokens, a number with a point a
    fraction of the maximum length; both travel to the workers unchanged."""
    for value, want in (("16", 16), ("0.5", 0.5), ("1.0", 1.0), ("null", None)):
        cfg = config_from_args(build_parser().parse_args(
            ["serve", "m", "--set", f"chunk_length={value}", "--set", "long_text=chunk_max"]))
        assert cfg.chunk_length == want and type(cfg.chunk_length) is type(want)
        again = ServeConfig.from_json(cfg.to_json())
        assert again == cfg and type(again.chunk_length) is type(want)
    assert ServeConfig(chunk_length=8).long_text == "auto"  # a network's chunk_max
    # the stride: a count of tokens, or "sentence" (windows that start at sentences)
    for value, want in (("4", 4), ("sentence", "sentence"), ("null", None)):
        cfg = config_from_args(build_parser().parse_args(
            ["serve", "m", "--set", f"chunk_stride={value}"]))
        assert cfg.chunk_stride == want and ServeConfig.from_json(cfg.to_json()) == cfg


@pytest.mark.parametrize("bad, match", [({"runtime": "tensorrt"}, "runtime"),
                                        ({"long_text": "drop"}, "long_text"),
                                        ({"chunk_length": 0}, "chunk_length must be"),
                                        ({"chunk_length": True}, "chunk_length must be"),
                                        ({"chunk_length": 0.0}, "chunk_length must be"),
                                        ({"chunk_stride": 0}, "chunk_stride must be a "
                                                              "positive number of tokens"),
                                        ({"chunk_stride": True}, "chunk_stride must be"),
                                        ({"chunk_stride": "sentences"}, "or 'sentence', got "
                                                                        "'sentences'"),
                                        ({"chunk_length": 16, "long_text": "head_tail"},
                                         "the head_tail policy does not cut"),
                                        ({"chunk_length": 16, "long_text": "reject"},
                                         "the reject policy does not cut"),
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
    for extra in ([], ["--set", "access_log=true"]):
        assert run(build_parser().parse_args(["serve", str(encoder_dir), *extra])) == 0
    (app, kw), (_, kw_logged) = calls
    assert kw["access_log"] is False and kw_logged["access_log"] is True
    assert app.state.serve.config.freeze_gc


@pytest.mark.skipif(not hasattr(os, "confstr"), reason="glibc's malloc only")
def test_chunk_policy_steadies_the_heap_at_start(encoder_dir):
    # process-wide and made once: checked in a fresh interpreter, which loads the model
    # with "truncate" (the heap is left alone) before "chunk" (the heap is steadied)
    code = ("import sys; from headwise.serve import ServeConfig; "
            "from headwise.serve.startup import load_served_predictor; "
            "from headwise.models.heap import heap_is_steady\n"
            "for policy in sys.argv[2:]:\n"
            "    load_served_predictor(ServeConfig(model_dir=sys.argv[1], long_text=policy), "
            "report=None)\n"
            "    print(policy, heap_is_steady())")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", code, str(encoder_dir), "truncate", "chunk"],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split("\n")[:2] == ["truncate False", "chunk True"]


# --- the address: checked before anything is announced ---------------------------------------
@pytest.mark.parametrize("port", ["99999", "65536", "-1", "eighty"])
def test_a_port_outside_the_range_is_a_usage_error(port, capsys):
    from headwise.cli import main

    with pytest.raises(SystemExit) as e:
        main(["serve", "m", "--port", port])
    assert e.value.code == 2
    assert "not a port number" in capsys.readouterr().err


def test_a_busy_port_is_one_line_before_any_banner(encoder_dir, monkeypatch, capsys):
    import socket

    import uvicorn

    from headwise.cli import main

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: calls.append(kw))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))  # loopback only
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", str(encoder_dir), "--runtime", "torch", "--host", "127.0.0.1",
                     "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [f"headwise serve: error: port {port} on 127.0.0.1 is in use "
                                f"(another server?); stop it or choose another with --port"]
    assert not calls


def test_port_0_announces_the_port_it_chose(encoder_dir, monkeypatch, capsys):
    import uvicorn

    from headwise.cli import main

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(kw))
    assert main(["serve", str(encoder_dir), "--runtime", "torch", "--port", "0"]) == 0
    (kw,) = calls
    assert 0 < kw["port"] <= 65535
    banner = capsys.readouterr().err.splitlines()[-1]
    assert f"http://127.0.0.1:{kw['port']} (docs at /docs)" in banner


def test_a_bilstm_beside_a_stale_onnx_file_is_not_sent_to_export(bilstm_dir, tmp_path):
    import shutil

    from headwise.serve.startup import load_served_predictor

    model = tmp_path / "bilstm"
    shutil.copytree(bilstm_dir, model)
    reasons: list[str] = []
    load_served_predictor(ServeConfig(model_dir=str(model)), report=reasons.append)
    (model / "model.onnx").write_bytes(b"an old file from another model")
    load_served_predictor(ServeConfig(model_dir=str(model)), report=reasons.append)
    for reason in reasons:  # export refuses a BiLSTM: never suggest it
        assert "runtime auto: using torch" in reason and "BiLSTMClassifier" in reason
        assert "headwise export" not in reason and "export again" not in reason
    assert "model.onnx is ignored" in reasons[1]
    with pytest.raises(ValueError, match="--runtime onnx: .*BiLSTM") as e:
        load_served_predictor(ServeConfig(model_dir=str(model), runtime="onnx"), report=None)
    assert "export" not in str(e.value).replace("ONNX export supports", "")


# --- predict: options anywhere, long texts noted, bounded echo, quiet broken pipe ------------
def test_predict_takes_options_between_model_and_texts(encoder_dir, capsys):
    from headwise.cli import main

    assert main(["predict", str(encoder_dir), "--json", "i lost my card", "--top-k", "1",
                 "my balance"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["text"] for x in lines] == ["i lost my card", "my balance"]
    assert all(len(x["top_k"]) == 1 for x in lines)


def test_predict_notes_a_truncated_text_and_echoes_a_bounded_prefix(encoder_dir, capsys):
    from headwise.cli import main
    from headwise.commands.predict import ECHO_CHARS
    from headwise.intent.classifier import IntentClassifier
    from headwise.intent.inference import load_predictor
    from headwise.intent.inference.bucketing import long_text_note

    clf = IntentClassifier.load(encoder_dir)
    huge = "transfer money to my savings " * 35_000  # about a million characters
    long = "send money to my friend and then transfer fifty pounds to my savings now"
    assert main(["predict", str(encoder_dir), "--json", "--long-text", "truncate", "hi", long,
                 huge]) == 0
    out = capsys.readouterr().out
    assert len(out) < 3000  # not the million characters back
    short, cut, whole = (json.loads(x) for x in out.splitlines())
    assert short["long_text"] is None and short["text"] == "hi" and short["text_chars"] == 2
    n = clf.tokenizer.lengths([long])[0]
    assert cut["long_text"] == long_text_note("truncated", n, clf.max_length, 1)
    assert cut["text"] == long and cut["text_chars"] == len(long)
    assert whole["text_chars"] == len(huge)
    assert whole["text"] == huge[:ECHO_CHARS] + "…"
    assert whole["long_text"]["policy"] == "truncated"
    assert whole["long_text"]["tokens"] == clf.tokenizer.lengths([huge])[0]
    truncating = load_predictor(clf, runtime="torch", long_text="truncate")
    assert intent_of(whole) == truncating.predictions([huge])[0][0].intent
    # the plain output is bounded too, and says what was cut
    assert main(["predict", str(encoder_dir), "--long-text", "truncate", huge]) == 0
    plain = capsys.readouterr().out
    assert len(plain) < 1000 and f"{len(huge)} characters" in plain
    assert f"long text: {whole['long_text']['tokens']} tokens over {clf.max_length}, " \
           f"truncated (read the first {clf.max_length})" in plain


def test_long_text_notes_of_an_ensemble_name_the_network_that_cut_most(encoder_dir):
    from headwise.intent.classifier import IntentClassifier
    from headwise.intent.ensemble import EnsembleClassifier
    from headwise.intent.inference import ProbabilityPredictor

    a, b = IntentClassifier.load(encoder_dir), IntentClassifier.load(encoder_dir)
    b.max_length = 8
    text = "send money to my friend"
    n = a.tokenizer.lengths([text])[0]
    assert 8 < n <= a.max_length
    _, notes = ProbabilityPredictor(EnsembleClassifier([a, b])).predictions(["hi", text])
    assert notes == [None, {"policy": "truncated", "tokens": n, "max_length": 8, "chunks": 1,
                            "window": 8, "stride": None, "pooling": None, "chunk": None,
                                "span": None}]
    assert a.predictor().predictions(["hi", text])[1] == [None, None]


def test_predict_into_a_closed_pipe_exits_quietly(encoder_dir, tmp_path):
    texts = tmp_path / "texts.txt"  # ~400 KB of answers: far more than a pipe holds
    line = "i lost my card " * 12
    texts.write_text(f"{line}\n" * 1000)
    with texts.open("rb") as stdin:
        proc = subprocess.Popen([sys.executable, "-m", "headwise.cli", "predict",
                                 str(encoder_dir), "--json"], stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = json.loads(proc.stdout.readline())
        proc.stdout.close()  # `| head -1`
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=300) == 141
    assert first["text"] == line.strip()
    assert "Broken pipe" not in err and "Traceback" not in err, err
