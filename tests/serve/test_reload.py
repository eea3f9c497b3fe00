"""Hot reload: a new model is loaded and warmed up beside the old one and swapped in at
once; every answer comes from one model; a failed load keeps the old model serving."""

from __future__ import annotations

import asyncio
import gc
import shutil
import threading
import time

import httpx
import pytest
import torch
from answers import intent_of
from fastapi.testclient import TestClient
from serve_helpers import wait_ready
from tiny_models import TEXTS, tiny_tokenizer

from headwise.intent.classifier import IntentClassifier
from headwise.serve import ServeConfig, create_app
from headwise.serve import state as state_module

KEY = "reload-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("reload") / "keys.txt"
    path.write_text(KEY + "\n")
    return path


def _reference(model_dir) -> dict[str, dict]:
    """Each text's answer from IntentClassifier.predict, the reference of the service."""
    clf = IntentClassifier.load(model_dir)
    return {p.text: {"intent": p.intent, "top_k": p.top_k}
            for p in clf.predict(TEXTS, top_k=3)}


def _is(prediction: dict, want: dict) -> bool:
    """The served answer is the reference's: same intents, probabilities within 1e-5."""
    got = [(k["intent"], k["confidence"]) for k in prediction["top_k"]]
    return intent_of(prediction) == want["intent"] and len(got) == len(want["top_k"]) and all(
        g[0] == w[0] and abs(g[1] - w[1]) < 1e-5
        for g, w in zip(got, want["top_k"], strict=True))


def test_answers_across_a_swap_each_come_from_one_model(encoder_dir, other_encoder_dir,
                                                         key_file):
    old, new = _reference(encoder_dir), _reference(other_encoder_dir)
    # the two models disagree on every text, so an answer says which one gave it
    assert all(max(abs(a - b) for (_, a), (_, b) in zip(old[t]["top_k"], new[t]["top_k"],
                                                         strict=True)) > 1e-3 for t in TEXTS)
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(key_file),
                                 max_wait_ms=2.0))
    log: list[tuple[float, float, list[str], httpx.Response]] = []

    async def run() -> tuple[httpx.Response, float, float]:
        async with app.router.lifespan_context(app):
            while not app.state.serve.ready:
                await asyncio.sleep(0.01)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t",
                                         headers=AUTH) as c:
                stop = asyncio.Event()

                async def client(k: int) -> None:
                    i = k
                    while not stop.is_set():
                        texts = [TEXTS[(i + j) % len(TEXTS)] for j in range(1 + i % 3)]
                        i += 7
                        t0 = time.perf_counter()
                        r = await c.post("/v1/predict", json={"texts": texts})
                        log.append((t0, time.perf_counter(), texts, r))

                clients = [asyncio.create_task(client(k)) for k in range(8)]
                await asyncio.sleep(0.3)
                asked = time.perf_counter()
                reload = await c.post("/admin/reload",
                                      json={"model_dir": str(other_encoder_dir)})
                swapped = time.perf_counter()
                await asyncio.sleep(0.3)
                stop.set()
                await asyncio.gather(*clients)
        return reload, asked, swapped

    reload, asked, swapped = asyncio.run(run())
    assert reload.status_code == 200, reload.text
    body = reload.json()
    assert body["model"] == "other" and body["previous_model"] == "encoder"
    assert body["generation"] == 2 and body["load_seconds"] > 0
    failed = [r for *_, r in log if r.status_code != 200]
    assert not failed, failed[:3]
    models = {"encoder": (old, new), "other": (new, old)}
    seen = {"encoder": 0, "other": 0}
    for t0, t1, texts, r in log:
        answer = r.json()
        mine, theirs = models[answer["model"]]
        seen[answer["model"]] += 1
        for text, p in zip(texts, answer["predictions"], strict=True):
            assert _is(p, mine[text]) and not _is(p, theirs[text]), (answer["model"], p)
        if t0 > swapped:  # asked after the swap: the new model
            assert answer["model"] == "other"
        if t1 < asked:  # answered before the reload was asked for: the old model
            assert answer["model"] == "encoder"
    assert seen["encoder"] > 10 and seen["other"] > 10, seen


def test_the_old_model_serves_while_the_new_one_loads(encoder_dir, other_encoder_dir,
                                                      key_file, monkeypatch):
    started, release = threading.Event(), threading.Event()
    real = state_module.load_served_predictor

    def slow_load(*args, **kwargs):  # a slow disk: the load waits until told
        started.set()
        assert release.wait(10)
        return real(*args, **kwargs)

    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(key_file)))
    # the reload's, not the first
    monkeypatch.setattr(state_module, "load_served_predictor", slow_load)

    async def run() -> list[httpx.Response]:
        async with app.router.lifespan_context(app):
            while not app.state.serve.ready:
                await asyncio.sleep(0.01)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t",
                                         headers=AUTH) as c:
                first = asyncio.create_task(c.post("/admin/reload", json={
                    "model_dir": str(other_encoder_dir)}))
                while not started.is_set():
                    await asyncio.sleep(0.005)
                during = await c.post("/v1/predict", json={"texts": TEXTS[:2]})
                second = await c.post("/admin/reload")
                ready = await c.get("/readyz")
                release.set()
                done = await first
                after = await c.post("/v1/predict", json={"texts": TEXTS[:2]})
        return [during, second, ready, done, after]

    during, second, ready, done, after = asyncio.run(run())
    assert during.status_code == 200 and during.json()["model"] == "encoder"
    assert second.status_code == 409 and second.json()["error"]["type"] == "reload_in_progress"
    assert ready.status_code == 200
    assert done.status_code == 200 and after.json()["model"] == "other"


def _compound_dir(path):
    from headwise.intent.compound.classifier import CompoundClassifier
    from headwise.intent.compound.thresholds import Thresholds
    from headwise.models import ModelConfig
    from headwise.models.joint import JointIntentSlotModel

    tok = tiny_tokenizer()
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=16, num_layers=1, num_heads=2,
                      d_ff=32, num_labels=3, labels=["a", "b", "c"], max_position=64,
                      pad_token_id=tok.pad_token_id, dropout=0.0,
                      model_type="joint_intent_slot", multi_label=True, slot_tags=None)
    clf = CompoundClassifier(JointIntentSlotModel(cfg).eval(), tok, ["a", "b", "c"],
                             thresholds=Thresholds(0.4), max_length=12)
    return clf.save(path)


def test_a_failed_reload_keeps_the_old_model_serving(encoder_dir, key_file, tmp_path,
                                                     caplog):
    broken = tmp_path / "broken"
    shutil.copytree(encoder_dir, broken)
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    compound = _compound_dir(tmp_path / "compound")
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(key_file)))
    with TestClient(app, headers=AUTH) as c:
        wait_ready(c)
        before = c.post("/v1/predict", json={"texts": TEXTS}).json()
        for target, why in ((tmp_path / "missing", "no model directory"),
                            (tmp_path, "holds none of"), (broken, ""),
                            (compound, "compound (multi-label + slots) classifier and the "
                                       "service serves a single-label one")):
            caplog.clear()
            r = c.post("/admin/reload", json={"model_dir": str(target)})
            assert r.status_code == 422, r.text
            err = r.json()["error"]
            assert err["type"] == "reload_failed"
            assert err["message"].startswith(f"could not load {target}: ")
            assert why in err["message"] and err["message"].endswith("still serving encoder")
            assert any("model reload failed, still serving encoder" in x.getMessage()
                       for x in caplog.records)
            assert c.post("/v1/predict", json={"texts": TEXTS}).json() == before
        assert c.get("/readyz").status_code == 200
        metrics = c.get("/metrics").text
        assert 'headwise_reloads_total{result="failed",what="model"} 4.0' in metrics
        assert "headwise_model_generation 1.0" in metrics


def test_reload_into_another_kind_of_single_label_model(encoder_dir, bilstm_dir, key_file):
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(key_file)))
    with TestClient(app, headers=AUTH) as c:
        wait_ready(c)
        assert c.post("/v1/explain", json={"text": "i lost my card"}).status_code == 200
        r = c.post("/admin/reload", json={"model_dir": str(bilstm_dir), "keys": False})
        assert r.status_code == 200 and r.json()["model"] == "bilstm"
        want = IntentClassifier.load(bilstm_dir).predict(TEXTS[:3], top_k=3)
        got = c.post("/v1/predict", json={"texts": TEXTS[:3]}).json()
        assert got["model"] == "bilstm"
        assert [intent_of(p) for p in got["predictions"]] == [w.intent for w in want]
        r = c.post("/v1/explain", json={"text": "i lost my card"})  # no heads, attribution
        assert r.status_code == 200 and r.json()["attention"] is None
        assert r.json()["model"] == "bilstm"
        assert c.get("/healthz").json()["model"] == "bilstm"
        # an empty body reloads the directory served now
        r = c.post("/admin/reload", content=b"")
        assert r.status_code == 200 and r.json()["model_dir"] == str(bilstm_dir)
        assert r.json()["generation"] == 3 and r.json()["previous_model"] == "bilstm"
        assert "headwise_model_generation 3.0" in c.get("/metrics").text


@pytest.mark.parametrize("body, match", [
    ({"model_dir": "x", "model": False}, "model_dir names a model to load"),
    ({"model": False, "keys": False}, "nothing to reload"),
    ({"model_dir": ""}, "model_dir"),
    ({"colour": "red"}, "colour"),
    ({"model": "yes"}, "model"),
])
def test_bad_reload_bodies_are_422_naming_the_field(encoder_dir, key_file, body, match):
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(key_file),
                                 warmup=False))
    with TestClient(app, headers=AUTH) as c:
        wait_ready(c)
        r = c.post("/admin/reload", json=body)
        assert r.status_code == 422 and match in r.json()["error"]["message"], r.text
        r = c.post("/admin/reload", content=b"model=1",
                   headers={"content-type": "text/plain"})
        assert r.status_code == 415


def test_several_workers_refuse_the_endpoint_and_sighup_reloads(encoder_dir, key_file):
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(key_file),
                                 workers=2, warmup=False))
    with TestClient(app, headers=AUTH) as c:
        wait_ready(c)
        r = c.post("/admin/reload")
        assert r.status_code == 409 and r.json()["error"]["type"] == "reload_unsupported"
        assert "SIGHUP to the main process" in r.json()["error"]["message"]

    # on_sighup (what the signal calls) reloads in the background, freezing the gc again
    gc.unfreeze()
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(key_file),
                                 freeze_gc=True))

    async def run() -> int:
        async with app.router.lifespan_context(app):
            state = app.state.serve
            while not state.ready:
                await asyncio.sleep(0.01)
            gc.unfreeze()
            state.on_sighup()
            while state.served.generation == 1:
                await asyncio.sleep(0.01)
            while state.reloading:
                await asyncio.sleep(0.01)
            return gc.get_freeze_count()

    try:
        assert asyncio.run(run()) > 0
        assert app.state.serve.served.generation == 2
    finally:
        gc.unfreeze()
