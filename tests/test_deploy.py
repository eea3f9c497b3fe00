"""The deployment files (``deploy/``): the Kubernetes manifests parse and fit together,
their probes and the Dockerfile's health check name endpoints the service has (open
without an API key), the commands they run are valid ``headwise serve`` command lines,
and the Dockerfile's RUN commands, as a script, pass ``bash -n``."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from tiny_corpus import INTENTS

yaml = pytest.importorskip("yaml")

from headwise.cli import build_parser  # noqa: E402
from headwise.intent.classifier import IntentClassifier  # noqa: E402
from headwise.models import EncoderClassifier, ModelConfig  # noqa: E402
from headwise.text.tokenizer import Tokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


@pytest.fixture(scope="module")
def manifests() -> dict[str, dict]:
    docs = {}
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            assert doc["kind"] not in docs, f"two {doc['kind']}s"
            docs[doc["kind"]] = doc
    assert set(docs) == {"Deployment", "Service", "HorizontalPodAutoscaler"}
    return docs


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    texts = [t for ts in INTENTS.values() for t in ts]
    tok = Tokenizer.train_wordpiece(texts * 3, 120, min_frequency=1)
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=16, num_layers=1, num_heads=2,
                      d_ff=32, max_position=32, pad_token_id=tok.pad_token_id,
                      num_labels=3, labels=list(INTENTS))
    clf = IntentClassifier(EncoderClassifier(cfg).eval(), tok, list(INTENTS), max_length=16)
    return clf.save(tmp_path_factory.mktemp("deploy") / "model")


@pytest.fixture(scope="module")
def routes(model_dir) -> set[str]:
    from headwise.serve import ServeConfig, create_app

    app = create_app(ServeConfig(model_dir=str(model_dir), warmup=False))
    return {getattr(r, "path", None) for r in app.routes}


def dockerfile() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of deploy/Dockerfile, continuation lines joined as
    Docker joins them (the backslash and the line break dropped) and comments dropped."""
    out, pending = [], ""
    for line in (DEPLOY / "Dockerfile").read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1]
            continue
        text = pending + line
        pending = ""
        word, _, rest = text.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "a continuation line at the end of the Dockerfile"
    return out


def _container(manifests) -> dict:
    (container,) = manifests["Deployment"]["spec"]["template"]["spec"]["containers"]
    return container


def _serve_args(argv: list[str]):
    assert argv[:2] == ["headwise", "serve"], argv
    return build_parser(["serve"]).parse_args(argv[1:])


def test_the_manifests_fit_together(manifests):
    dep, svc, hpa = (manifests[k] for k in ("Deployment", "Service",
                                            "HorizontalPodAutoscaler"))
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"]["selector"].items() <= labels.items()
    port_names = {p["name"]: p["containerPort"] for p in _container(manifests)["ports"]}
    (port,) = svc["spec"]["ports"]
    assert port["targetPort"] in port_names
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", dep["metadata"]["name"])
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    assert "cpu" in _container(manifests)["resources"]["requests"]  # what Utilization reads


def test_probes_and_health_check_name_endpoints_of_the_service(manifests, routes, model_dir,
                                                               tmp_path):
    c = _container(manifests)
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    probes = [c[k]["httpGet"] for k in ("readinessProbe", "livenessProbe", "startupProbe")]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe in probes:
        assert probe["path"] in routes, probe
        assert probe["port"] in ports
    (health,) = [args for word, args in dockerfile() if word == "HEALTHCHECK"]
    url = re.search(r"http://127\.0\.0\.1:(\d+)(/\w+)", health)
    assert url and url.group(2) == "/healthz" and url.group(2) in routes
    # the ports agree: the container's, the health check's, the command's
    args = _serve_args(c["args"])
    assert int(url.group(1)) == args.port == ports["http"]
    # the probes get an answer (not 401) when the service requires API keys
    from fastapi.testclient import TestClient

    from headwise.serve import ServeConfig, create_app

    keys = tmp_path / "keys.txt"
    keys.write_text("k" * 32 + "\n", encoding="utf-8")
    app = create_app(ServeConfig(model_dir=str(model_dir), api_key_file=str(keys)))
    with TestClient(app) as client:
        for probe in probes:
            assert client.get(probe["path"]).status_code in (200, 503), probe
        assert client.post("/v1/predict", json={"texts": ["hi"]}).status_code == 401


def test_commands_are_valid_headwise_serve_command_lines(manifests):
    (cmd,) = [args for word, args in dockerfile() if word == "CMD"]
    argv = json.loads(cmd)  # exec form: the server is PID 1 and gets SIGTERM
    assert argv == ["headwise", "serve", "/model", "--host", "0.0.0.0"]
    args = _serve_args(argv)
    assert (args.model, args.host) == ("/model", "0.0.0.0")
    mounts = {m["mountPath"]: m for m in _container(manifests)["volumeMounts"]}
    k8s = _serve_args(_container(manifests)["args"])
    assert k8s.model in mounts and mounts[k8s.model]["readOnly"] is True
    grace = manifests["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    from headwise.commands.serve_options import process_from_args

    # requests in flight finish before SIGKILL
    assert grace > process_from_args(k8s).graceful_timeout


def test_dockerfile_installs_cpu_torch_as_a_non_root_user():
    steps = dockerfile()
    words = [w for w, _ in steps]
    assert words[0] == "FROM" and "USER" in words
    (user,) = [a for w, a in steps if w == "USER"]
    assert user not in ("root", "0")
    assert words.index("USER") > max(i for i, w in enumerate(words) if w == "RUN")
    run = "\n".join(a for w, a in steps if w == "RUN")
    assert re.search(r"--index-url https://download\.pytorch\.org/whl/cpu \"?torch==2\.13\.0",
                     run)
    assert "onnxruntime" in run
    for word, args in steps:  # what COPY takes exists in the build context
        if word == "COPY":
            *sources, _ = shlex.split(args)
            for src in sources:
                assert (ROOT / src).exists(), src
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
    assert {"!pyproject.toml", "!README.md", "!headwise/"} <= set(ignore)


def test_dockerfile_run_commands_pass_bash_n(tmp_path):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    script = tmp_path / "run.sh"
    script.write_text("set -eu\n" + "\n".join(a for w, a in dockerfile() if w == "RUN") + "\n",
                      encoding="utf-8")
    done = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    broken = tmp_path / "broken.sh"  # the check does catch a bad script
    broken.write_text(script.read_text() + "if then\n", encoding="utf-8")
    assert subprocess.run([bash, "-n", str(broken)], capture_output=True).returncode != 0
