"""``headwise serve MODEL --ray``: the intent service as a Ray Serve deployment.

The options and refusals are checked without Ray. On a local Ray instance (two CPUs, one
Serve application of two replicas shared by the module's tests) the deployment answers
the same requests with the same bytes as ``headwise serve``'s app, and a replica killed
under load is replaced while every request is still answered.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import Counter

import pytest
import torch
from tiny_corpus import INTENTS

from headwise.cli import build_parser, main
from headwise.commands.serve_options import check_ray_options
from headwise.intent.classifier import IntentClassifier
from headwise.models import EncoderClassifier, ModelConfig
from headwise.serve import ServeConfig
from headwise.text.tokenizer import Tokenizer

KEY = "ray-Serve-key-0123456789abcdef"
ADMIN_KEY = "ray-Admin-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}
TEXTS = [t for ts in INTENTS.values() for t in ts]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny random-weight Transformer on the three intents (answers need no training)."""
    tok = Tokenizer.train_wordpiece(TEXTS * 3, 120, min_frequency=1)
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=32, num_layers=2, num_heads=4,
                      d_ff=64, num_labels=len(INTENTS), labels=list(INTENTS),
                      max_position=64, pad_token_id=tok.pad_token_id, dropout=0.0)
    model = EncoderClassifier(cfg).eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0, 1.0)
    clf = IntentClassifier(model, tok, list(INTENTS), temperature=1.5, threshold=0.4,
                           max_length=12)
    return clf.save(tmp_path_factory.mktemp("ray") / "intent")


@pytest.fixture(scope="module")
def key_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keys")
    (folder / "keys").write_text(f"{KEY}\n")
    (folder / "admin").write_text(f"{ADMIN_KEY}\n")
    return str(folder / "keys"), str(folder / "admin")


def _args(*argv: str):
    return build_parser(["serve"]).parse_args(["serve", "m", *argv])


# --- without Ray -----------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--replicas", "2"], "--replicas is for --ray"),
    (["--replicas", "1:4"], "--replicas is for --ray"),
    (["--set", "max_ongoing_requests=8"], "max_ongoing_requests is for --ray"),
    (["--ray", "--workers", "2"], "--workers 2 does not apply under --ray"),
    (["--ray", "--replicas", "2", "--set", "target_ongoing_requests=4"],
     "target_ongoing_requests needs --replicas MIN:MAX"),
    (["--ray", "auto", "--port", "0"], "--port 0"),
])
def test_ray_options_are_refused_where_they_cannot_work(argv, message):
    with pytest.raises(ValueError, match=message):
        check_ray_options(_args(*argv))


@pytest.mark.parametrize("value", ["0", "x", "4:1", "1:0", "-1:2", "a:b"])
def test_replicas_must_be_a_count_or_a_replica_range(value, capsys):
    with pytest.raises(SystemExit) as e:
        _args("--ray", "--replicas", value)
    assert e.value.code == 2 and "--replicas" in capsys.readouterr().err


def test_without_ray_serve_the_command_ends_in_one_line(model_dir, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # "import ray" raises ImportError
    monkeypatch.setitem(sys.modules, "ray.serve", None)
    assert main(["serve", str(model_dir), "--ray"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install headwise[ray]" in err and "--ray" in err


def test_the_command_hands_its_settings_to_ray_serve(model_dir, key_files, monkeypatch,
                                                     capsys):
    from headwise.integrations import ray_serve

    calls = []

    def fake_run(config, *, on_ready, **kwargs):
        calls.append((config, kwargs))
        on_ready(ray_serve.RayService(url="http://127.0.0.1:8123", app_name="headwise",
                                      owns_ray=True))
        return 0

    monkeypatch.setattr(ray_serve, "import_serve", lambda: None)  # Ray need not be here
    monkeypatch.setattr(ray_serve, "run", fake_run)
    assert main(["serve", str(model_dir), "--ray", "--replicas", "1:4",
                 "--set", "target_ongoing_requests=3", "--port", "0", "--set",
                 "max_batch_size=8", "--api-key-file", key_files[0], "--set",
                 "graceful_timeout=7"]) == 0
    ((config, kwargs),) = calls
    assert config.model_dir == str(model_dir) and config.max_batch_size == 8
    assert config.runtime == "onnx"  # resolved here: the replicas do not decide again
    assert config.api_key_file == key_files[0] and config.workers == 1
    assert kwargs["autoscaling"] == ray_serve.Autoscaling(1, 4, target_ongoing_requests=3)
    assert kwargs["replicas"] is None and kwargs["max_ongoing_requests"] == 16
    assert kwargs["port"] > 0 and kwargs["address"] is None  # port 0: a free one, chosen
    assert kwargs["graceful_timeout_s"] == 7
    err = capsys.readouterr().err
    assert "a single-label classifier, 3 intents" in err and "http://127.0.0.1:8123" in err
    assert "1-4 replicas (autoscaled, target 3 requests" in err and "API keys required" in err

    calls.clear()
    assert main(["serve", str(model_dir), "--ray", "--replicas", "3", "--port", "0",
                 "--api-key-file", key_files[0], "--set", "rate_limit=5"]) == 0
    ((config, kwargs),) = calls
    assert kwargs["replicas"] == 3 and kwargs["autoscaling"] is None
    assert kwargs["max_ongoing_requests"] == 64  # twice the default batch of 32
    err = capsys.readouterr().err
    assert "3 replicas, up to 64 requests each" in err and "rate limit is per replica" in err
    # a bad model directory is refused before Ray starts
    assert main(["serve", str(model_dir.parent / "none"), "--ray"]) == 1
    assert not calls[1:]


def test_autoscaling_settings_are_checked():
    from headwise.integrations.ray_serve import Autoscaling

    assert Autoscaling.parse("2:8", 4).to_serve() == {
        "min_replicas": 2, "max_replicas": 8, "target_ongoing_requests": 4}
    assert Autoscaling.parse("0:1").target_ongoing_requests == 2.0
    for text in ("8", "x:2", "1:2:3"):
        with pytest.raises(ValueError, match="MIN:MAX"):
            Autoscaling.parse(text)
    with pytest.raises(ValueError, match="over max_replicas"):
        Autoscaling(3, 2)
    with pytest.raises(ValueError, match="max_replicas"):
        Autoscaling(0, 0)
    with pytest.raises(ValueError, match="target_ongoing_requests"):
        Autoscaling(1, 2, target_ongoing_requests=0)


def test_what_replicas_cannot_do_is_refused(model_dir):
    from headwise.integrations.ray_serve import Autoscaling, build_deployment, check_config

    config = ServeConfig(model_dir=str(model_dir))
    assert check_config(config) == ServeConfig(model_dir=str(model_dir), freeze_gc=True)
    with pytest.raises(ValueError, match="workers=2 .*--replicas"):
        build_deployment(ServeConfig(model_dir=str(model_dir), workers=2))
    with pytest.raises(ValueError, match="sighup_reload"):
        build_deployment(ServeConfig(model_dir=str(model_dir), sighup_reload=True))
    with pytest.raises(ValueError, match="not both"):
        build_deployment(config, replicas=2, autoscaling=Autoscaling(1, 2))
    with pytest.raises(ValueError, match="replicas must be a positive integer"):
        build_deployment(config, replicas=0)
    with pytest.raises(ValueError, match="max_ongoing_requests"):
        build_deployment(config, max_ongoing_requests=0)


def test_the_deployment_carries_the_settings(model_dir, monkeypatch):
    serve = pytest.importorskip("ray.serve")
    import pickle

    from headwise.integrations.ray_serve import Autoscaling, ServiceApp, build_deployment

    seen = {}
    ingress = serve.ingress

    def deployment(cls, **options):
        seen.update(options, cls=cls)
        return type("Bindable", (), {"bind": lambda self: "bound"})()

    def capture(app):
        seen["config"] = ServeConfig.from_json(app.config_json)
        return ingress(app)

    monkeypatch.setattr(serve, "deployment", deployment)
    monkeypatch.setattr(serve, "ingress", capture)
    config = ServeConfig(model_dir=str(model_dir), max_batch_size=4, threads=2)
    assert build_deployment(config, autoscaling=Autoscaling(1, 3, 5), graceful_timeout_s=9,
                            log_level="warning",
                            deployment_options={"health_check_period_s": 2}) == "bound"
    assert seen["autoscaling_config"] == {"min_replicas": 1, "max_replicas": 3,
                                          "target_ongoing_requests": 5}
    assert "num_replicas" not in seen and seen["max_ongoing_requests"] == 8
    assert seen["ray_actor_options"] == {"num_cpus": 2}  # --threads CPUs per replica
    assert seen["graceful_shutdown_timeout_s"] == 9 and seen["health_check_period_s"] == 2
    assert seen["logging_config"] == {"log_level": "WARNING", "enable_access_log": False}
    assert seen["config"] == ServeConfig(model_dir=str(model_dir), max_batch_size=4,
                                         threads=2, freeze_gc=True)
    build_deployment(ServeConfig(model_dir=str(model_dir)), replicas=3)
    assert seen["num_replicas"] == 3 and seen["ray_actor_options"] == {"num_cpus": 1}
    assert seen["config"].threads == 1  # as many inference threads as CPUs reserved
    # the ingress app travels as its config only (the GC frozen: a replica is a process
    # of its own), and is built where it runs
    app = ServiceApp(ServeConfig(model_dir=str(model_dir), freeze_gc=True))
    assert app.build() is app.build()
    carried = pickle.loads(pickle.dumps(app))
    assert carried.state is None and carried.config_json == app.config_json
    assert carried.build().state.serve.reload_refusal == app.reload_refusal


def test_run_serves_until_stopped_and_takes_the_signals_after_ray(model_dir, monkeypatch):
    import signal

    from headwise.integrations import ray_serve

    events = []
    stop = threading.Event()

    class Service(ray_serve.RayService):
        def stop(self) -> None:
            events.append(("stop", self.owns_ray))

    def connect(address, num_cpus):
        # the command's handlers come after Ray's start (which installs its own)
        events.append(("connect", address, signal.getsignal(signal.SIGTERM) is previous))
        return True

    def deploy(config, **kwargs):
        events.append(("deploy", kwargs))
        return Service(url="http://127.0.0.1:1", app_name="headwise", owns_ray=False)

    def ready(service):
        assert signal.getsignal(signal.SIGTERM) is not previous
        events.append(("ready", service.url))
        stop.set()

    previous = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(ray_serve, "import_serve", lambda: None)
    monkeypatch.setattr(ray_serve, "build_deployment", lambda config, **kw: events.append(
        ("checked", sorted(kw))))
    monkeypatch.setattr(ray_serve, "connect", connect)
    monkeypatch.setattr(ray_serve, "deploy", deploy)
    config = ServeConfig(model_dir=str(model_dir))
    assert ray_serve.run(config, on_ready=ready, stop=stop, address="auto", port=9,
                         replicas=2) == 0
    assert events == [("checked", ["replicas"]), ("connect", "auto", True),
                      ("deploy", {"port": 9, "replicas": 2}), ("ready", "http://127.0.0.1:1"),
                      ("stop", True)]
    assert signal.getsignal(signal.SIGTERM) is previous  # given back


def test_a_replica_is_healthy_once_warmed_up(model_dir, monkeypatch):
    import asyncio

    serve = pytest.importorskip("ray.serve")
    from headwise.integrations import ray_serve

    monkeypatch.setattr(ray_serve, "READY_WAIT_S", 0.2)
    cls = ray_serve._ingress_class(serve, ray_serve.ServiceApp(ServeConfig()))
    state = type("State", (), {"ready": False, "stopping": False})()
    replica = type("Replica", (), {"app": type("App", (), {"state": None})()})()

    async def checks():
        with pytest.raises(RuntimeError, match="not ready 0.2 s after"):  # never built
            await cls.check_health(replica)
        replica.app.state = state
        task = asyncio.ensure_future(cls.check_health(replica))  # waits for the warm-up
        await asyncio.sleep(0.05)
        assert not task.done()
        state.ready = True
        await asyncio.wait_for(task, 1)
        state.stopping = True
        with pytest.raises(RuntimeError, match="shutting down"):
            await cls.check_health(replica)

    asyncio.run(checks())


# --- on a local Ray instance -----------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(model_dir, key_files) -> ServeConfig:
    # one inference thread in both services: the thread count changes how float32 sums
    # are split, so the last digits of a confidence (as for `headwise serve --threads`)
    return ServeConfig(model_dir=str(model_dir), runtime="torch", threads=1, max_texts=4,
                       max_text_chars=200, max_body_bytes=700, api_key_file=key_files[0],
                       admin_key_file=key_files[1])


@pytest.fixture(scope="module")
def ray_service(model_dir, key_files, ray_instance):
    """Two replicas of the service on the session's local Ray instance (two CPUs,
    ``ray_instance`` in conftest.py), Serve's proxy on a free port; health checks every
    second, so that a dead replica is noticed at once. Serve goes at the end of the module
    (Ray, at the end of the session)."""
    pytest.importorskip("ray.serve")
    from ray import serve

    from headwise.integrations.ray_serve import deploy

    # two replicas would wait forever for CPUs that the actors of an earlier test (Ray
    # Data's) hold: wait until they are given back
    deadline = time.monotonic() + 30
    while ray_instance.available_resources().get("CPU", 0) < 2:
        assert time.monotonic() < deadline, \
            f"2 CPUs of the Ray instance are not free: {ray_instance.available_resources()}"
        time.sleep(0.05)
    service = deploy(_config(model_dir, key_files), port=_free_port(), replicas=2,
                     graceful_timeout_s=0.5, deployment_options={"health_check_period_s": 1})
    assert not service.owns_ray
    try:
        yield service
    finally:
        try:
            service.stop()  # the application and its replicas
        finally:
            serve.shutdown()  # the controller and the proxy


@pytest.fixture(scope="module")
def reference(model_dir, key_files):
    """``headwise serve``'s app on the same settings, in this process (whose PyTorch
    thread count is given back afterwards)."""
    from fastapi.testclient import TestClient

    from headwise.serve import create_app

    threads = torch.get_num_threads()
    try:
        with TestClient(create_app(_config(model_dir, key_files))) as client:
            deadline = time.monotonic() + 10
            while client.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "the reference service is not ready"
                time.sleep(0.01)
            yield client
    finally:
        torch.set_num_threads(threads)


#: (method, path, headers, body bytes): answers, limits, errors and refusals
REQUESTS = [
    ("POST", "/v1/predict", AUTH, {"text": "i lost my card"}),
    ("POST", "/v1/predict", AUTH, {"texts": ["send money to my friend", "what is my balance",
                                             "我的信用卡丢了"]}),
    ("POST", "/v1/predict", AUTH, {"texts": "a much longer question about the balance of my "
                                            "current account and a transfer", "top_k": 2}),
    ("POST", "/v1/predict", AUTH, {"texts": ["check how much is left"], "threshold": 0.9}),
    ("POST", "/v1/predict", {"X-API-Key": KEY}, {"texts": ["wire money to another bank"],
                                                 "top_k": 1}),
    ("POST", "/v1/predict", AUTH, {"texts": ["a", "b", "c", "d", "e"]}),   # 422 too many
    ("POST", "/v1/predict", AUTH, {"texts": ["   "]}),                      # 422 empty
    ("POST", "/v1/predict", AUTH, {"text": "x" * 201}),                     # 422 too long
    ("POST", "/v1/predict", AUTH, {"text": "hi", "colour": 1}),             # 422 unknown
    ("POST", "/v1/predict", AUTH, b'{"text": "hi"'),                        # 400 bad JSON
    ("POST", "/v1/predict", AUTH, {"texts": ["y" * 190] * 4}),              # 413 body
    ("POST", "/v1/predict", {}, {"text": "i lost my card"}),                # 401 no key
    ("POST", "/v1/predict", {"X-API-Key": "wrong-key-0123456789abcdef"}, {"text": "hi"}),
    ("POST", "/v1/explain", AUTH, {"text": "my card was stolen"}),
    ("GET", "/healthz", {}, None),
    ("GET", "/readyz", {}, None),
    ("GET", "/v1/nothing", AUTH, None),                                     # 404
    ("GET", "/openapi.json", AUTH, None),
]


def _send(client, method, path, headers, body):
    content = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    return client.request(method, path, headers={"Content-Type": "application/json",
                                                 **headers}, content=content)


def test_ray_serve_answers_with_the_same_bytes_as_headwise_serve(ray_service, reference):
    import httpx

    with httpx.Client(base_url=ray_service.url, timeout=30) as client:
        for method, path, headers, body in REQUESTS:
            want = _send(reference, method, path, headers, body)
            got = _send(client, method, path, headers, body)
            assert (got.status_code, got.content) == (want.status_code, want.content), \
                (method, path, body)
            assert got.headers["content-type"] == want.headers["content-type"]
    statuses = Counter(_send(reference, *r).status_code for r in REQUESTS)
    assert statuses == {200: 9, 422: 4, 400: 1, 413: 1, 401: 2, 404: 1}


def test_metrics_and_reload_under_ray_serve(ray_service):
    import httpx

    with httpx.Client(base_url=ray_service.url, timeout=30) as client:
        assert client.get("/metrics").status_code == 401  # keys guard /metrics as before
        metrics = client.get("/metrics", headers=AUTH)
        assert metrics.status_code == 200 and "headwise_ready 1.0" in metrics.text
        assert 'headwise_requests_total{endpoint="/v1/predict"' in metrics.text
        # /admin/reload would reach one replica: refused, naming the way to reload them all
        assert client.post("/admin/reload", headers=AUTH).status_code == 401  # not admin
        refused = client.post("/admin/reload", headers={"X-API-Key": ADMIN_KEY})
        assert refused.status_code == 409
        error = refused.json()["error"]
        assert error["type"] == "reload_unsupported" and "Ray Serve" in error["message"]


def _replicas() -> set[str]:
    import ray

    return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
            if a["name"].startswith("SERVE_REPLICA::")}


def test_a_killed_replica_is_replaced_and_no_request_fails(ray_service):
    """Two replicas; one is killed (``ray.kill``) while four clients send requests. Serve's
    proxy answers 500 to a request that was in flight on the killed replica (it cannot
    know whether it ran) and routes every later one to the live replica; each client
    retries once on a 5xx or a connection error (``/v1/predict`` is a pure function,
    safe to repeat). No request fails after its retry; Serve starts a new replica, and
    once the other old replica is killed too, the new one answers alone."""
    import httpx
    import ray
    from ray import serve

    old = _replicas()
    assert len(old) == 2
    first_failures, failures, answered = [], [], []
    stop = threading.Event()

    def client_loop() -> None:
        with httpx.Client(base_url=ray_service.url, timeout=30, headers=AUTH) as client:
            while not stop.is_set():
                for attempt in (1, 2):
                    try:
                        r = client.post("/v1/predict", json={"texts": ["i lost my card"]})
                        status = r.status_code
                    except httpx.TransportError as e:
                        status = type(e).__name__
                    if status == 200:
                        answered.append(time.monotonic())
                        break
                    (first_failures if attempt == 1 else failures).append(status)

    threads = [threading.Thread(target=client_loop) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        killed, survivor = sorted(old)
        ray.kill(ray.get_actor(killed, namespace="serve"), no_restart=True)
        deadline = time.monotonic() + 60
        while True:  # Serve notices the death and starts a new replica
            now = _replicas()
            status = serve.status().applications["headwise"].deployments["IntentService"]
            if killed not in now and len(now) == 2 and \
                    status.replica_states.get("RUNNING", 0) == 2:
                break
            assert time.monotonic() < deadline, f"no new replica: {status}"
            time.sleep(0.2)
        (new,) = now - old
        ray.kill(ray.get_actor(survivor, namespace="serve"), no_restart=True)
        after = time.monotonic()
        deadline = after + 30
        while sum(t > after + 0.5 for t in answered) < 20:  # the new replica answers alone
            assert time.monotonic() < deadline, "the new replica does not answer"
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    print(f"\nkilled {killed}, replaced by {new}: {len(answered)} requests answered, "
          f"{len(first_failures)} answered on their retry ({Counter(first_failures)})")
    assert failures == [] and len(answered) > 40
