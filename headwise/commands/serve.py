"""``headwise serve``: the intent service over HTTP (FastAPI under uvicorn), for any saved
classifier: a single-label network (Transformer, BiLSTM, pretrained encoder), a compound
(multi-label + slots) one, a TF-IDF model or an ensemble.

The address is checked before anything is announced: a port outside 0-65535 is a usage
error, and one that is in use (or an address this machine does not have) ends the command
with one line and status 1 before the start-up banner. Port 0 asks for a free port, which
is chosen then and announced (the banner always names the port the service listens on).
So are the key files (``--api-key-file``, ``--admin-key-file``): one that cannot be read,
holds no key or a bad line ends the command with ``FILE:LINE: problem``.

SIGTERM (or SIGINT) drains the service the way uvicorn does: the listening socket is closed
at once, so new connections are refused; idle keep-alive connections are closed; requests
in flight finish (for up to the ``graceful_timeout`` setting's seconds) and are answered with
``Connection: close``; then the batcher finishes and the command exits with status 0.
SIGHUP reloads the key files and the model (one worker: in place, the new model loaded and
warmed up beside the old; several workers: uvicorn replaces them one by one).

``--ray`` serves the same app as a Ray Serve deployment instead of under uvicorn
(:mod:`headwise.integrations.ray_serve`, ``pip install headwise[ray]``): ``--replicas N``
or ``--replicas MIN:MAX`` (``--set target_ongoing_requests=K``) replicas, each with its own
copy of the model, behind Serve's HTTP proxy on ``--host``/``--port``; on a local Ray
instance started here (``--ray``), or on the cluster at ``--ray ADDRESS``. ``--workers`` and SIGHUP
reloading are refused there (Serve runs replicas; deploy again to reload them).
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

from headwise.commands._common import RUNTIMES
from headwise.commands.serve_options import (
    ServeProcess,
    add_serve_options,
    check_ray_options,
    config_from_args,
    process_from_args,
)

if TYPE_CHECKING:
    from headwise.intent.inference.runtime import OnnxRuntime, TorchRuntime
    from headwise.serve.config import ServeConfig

__all__ = ["add_parser", "check_address", "run", "url"]

def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve", help="serve a classifier over HTTP",
        description="Serve any classifier that `headwise train`, `soup` or `ensemble` saved: "
        "a single-label network (Transformer, BiLSTM, pretrained encoder), a compound "
        "(multi-label + slots) classifier, a TF-IDF model or an ensemble. POST /v1/predict "
        "(top-k intents, out-of-scope flag; a compound classifier answers every intent and "
        "its slots), POST /v1/explain (token attribution with its "
        "completeness error, per-head attention and rollout where there are heads; every "
        "kind but an ensemble), "
        "GET /healthz, /readyz, /metrics (Prometheus); the OpenAPI schema at /openapi.json "
        "and its pages at /docs (served offline). Concurrent requests are gathered into "
        "micro-batches. onnxruntime serves Transformer classifiers, single-label or "
        "compound (their `headwise export`, else the export runtime auto caches); everything "
        "else (a BiLSTM, a TF-IDF model, an ensemble) is served by PyTorch or "
        "scikit-learn. Long texts are read in windows, the most confident answering "
        "(long_text auto); a compound classifier takes truncate "
        "or reject, a TF-IDF model or an ensemble truncate only. The model "
        "directory and the address are checked before the server starts.")
    add_serve_options(p)
    p.set_defaults(func=run)


def check_address(host: str, port: int) -> int:
    """Refuse an address the service could not listen on, before anything is announced:
    bind a socket to it as uvicorn will (IPv6 when the host has a colon,
    ``SO_REUSEADDR``), then let it go.

    Args:
        host: the address to listen on.
        port: the port; 0 for a free one.

    Returns:
        The port: ``port``, or the free one the system chose for 0.

    Raises:
        OSError: the port is in use, the host is not an address of this machine, or
            the port needs privileges (one line, naming the address).
    """
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise OSError(f"port {port} on {host} is in use (another server?); stop it "
                              f"or choose another with --port") from None
            raise OSError(f"cannot listen on {host} port {port}: "
                          f"{e.strerror or e}") from None
        return int(sock.getsockname()[1])


def url(host: str, port: int) -> str:
    """The service's address as a URL (an IPv6 host in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def runtime_summary(runtime: TorchRuntime | OnnxRuntime, *, auto: bool = False) -> str:
    """The start-up line's words for the runtime in use, e.g. ``runtime onnx (auto,
    m/model.onnx)``.

    Args:
        runtime: the predictor's runtime.
        auto: it was chosen by ``--runtime auto``.
    """
    notes = ["auto"] if auto else []
    path = getattr(runtime, "path", None)
    if path is not None:
        notes.append(f"{path}{', int8' if getattr(runtime, 'quantized', False) else ''}")
    return f"runtime {runtime.name}" + (f" ({', '.join(notes)})" if notes else "")


def access_summary(config: ServeConfig, keys: int | None, admin_keys: int | None) -> str:
    """The start-up line's words for who may query the service, e.g. ``API keys required
    (3 keys; admin: 1 key; 10 requests/s per key, burst 20)``; never a key."""
    if keys is None:
        return "open to everyone (no --api-key-file; /admin/* is off)"

    def n(count: int) -> str:
        return f"{count} key{'s' if count != 1 else ''}"

    parts = [n(keys)]
    if admin_keys is not None:
        parts.append(f"admin: {n(admin_keys)}")
    if config.rate_limit is not None:
        parts.append(f"{config.rate_limit:g} requests/s per key, burst {config.bucket_size}")
    if config.open_metrics:
        parts.append("/metrics open")
    return f"API keys required ({'; '.join(parts)})"


def log_config(level: str) -> dict:
    """uvicorn's logging configuration with the service's own logger (``headwise.serve``:
    reloads, refused key files, warm-up failures) on uvicorn's handler, at ``level``; it
    applies in every worker process."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["headwise.serve"] = {"handlers": ["default"], "level": level.upper(),
                                           "propagate": False}
    return config


class _Terminated(BaseException):
    """SIGTERM before the service listens: end the command (status 0, nothing to drain)."""


def scaling_summary(args: argparse.Namespace, process: ServeProcess, rate_limit: float | None,
                    max_ongoing: int) -> str:
    """The start-up line's words for the replicas of ``--ray``, e.g. ``Ray Serve: 2
    replicas, up to 64 requests each at once``."""
    if isinstance(args.replicas, tuple):
        low, high = args.replicas
        target = process.target_ongoing_requests
        replicas = (f"{low}-{high} replicas (autoscaled, target {target or 2:g} requests in "
                    f"progress per replica)")
    else:
        n = args.replicas or 1
        replicas = f"{n} replica{'s' if n != 1 else ''}"
    where = f"the cluster at {args.ray}" if args.ray else "a local Ray instance"
    rate = "; the rate limit is per replica" if rate_limit else ""
    return (f"Ray Serve on {where}: {replicas}, up to {max_ongoing} requests each at "
            f"once{rate}")


def _run_ray(args: argparse.Namespace) -> int:
    """``headwise serve MODEL --ray``: deploy on Ray Serve, serve until SIGTERM/SIGINT."""
    from pathlib import Path

    try:
        from headwise.integrations import ray_serve

        ray_serve.import_serve()
    except ImportError as e:
        raise ValueError(f"--ray needs {e}") from None
    from headwise.serve.auth import ApiKeys
    from headwise.serve.docs_pages import docs_available
    from headwise.serve.predict_api import api_for
    from headwise.serve.startup import load_served_predictor

    config = config_from_args(args)
    process = process_from_args(args)
    keys = {name: len(ApiKeys(path)) if path else None for name, path in
            (("api", config.api_key_file), ("admin", config.admin_key_file))}
    local = not args.ray
    summary = "model read by the replicas"
    if local or Path(config.model_dir).exists():
        # refuse a bad model directory before Ray starts; a cluster may see other paths
        predictor = load_served_predictor(config)
        chosen = predictor.runtime.name if predictor.runtime.name in RUNTIMES else config.runtime
        auto = args.runtime[0] == "auto" and chosen != "auto"
        summary = (f"{api_for(predictor).described} classifier, {len(predictor.labels)} intents, "
                   f"{runtime_summary(predictor.runtime, auto=auto)}")
        # the replicas serve what was chosen here (and do not decide, or report, again)
        config = dataclasses.replace(config, runtime=chosen)
        del predictor
    port = check_address(args.host, args.port) if local else args.port
    autoscale = isinstance(args.replicas, tuple)
    autoscaling = None if not autoscale else ray_serve.Autoscaling(
        *args.replicas, **({} if process.target_ongoing_requests is None else
                           {"target_ongoing_requests": process.target_ongoing_requests}))
    max_ongoing = process.max_ongoing_requests or 2 * config.max_batch_size
    docs = "docs at /docs" if docs_available() else "schema at /openapi.json"

    def announce(service: ray_serve.RayService) -> None:
        if service.http_note:
            print(f"headwise serve: {service.http_note}", file=sys.stderr)
        print(f"headwise serve: {summary}, {service.url} ({docs}); "
              f"{access_summary(config, keys['api'], keys['admin'])}; "
              f"{scaling_summary(args, process, config.rate_limit, max_ongoing)}",
              file=sys.stderr, flush=True)

    return ray_serve.run(config, on_ready=announce, address=args.ray or None,
                         host=args.host, port=port,
                         replicas=None if autoscale else args.replicas,
                         autoscaling=autoscaling, max_ongoing_requests=max_ongoing,
                         graceful_timeout_s=process.graceful_timeout,
                         log_level=process.log_level, access_log=process.access_log)


def run(args: argparse.Namespace) -> int:
    check_ray_options(args)
    if args.ray is not None:
        return _run_ray(args)
    import uvicorn

    from headwise.serve.app import create_app
    from headwise.serve.auth import ApiKeys
    from headwise.serve.config import CONFIG_ENV
    from headwise.serve.docs_pages import docs_available
    from headwise.serve.predict_api import api_for
    from headwise.serve.startup import load_served_predictor

    config = config_from_args(args)
    process = process_from_args(args)
    # the key files before the model: a bad line is found in a moment, never echoing a key
    keys = {name: len(ApiKeys(path)) if path else None for name, path in
            (("api", config.api_key_file), ("admin", config.admin_key_file))}
    # refuses a bad model directory before anything starts
    predictor = load_served_predictor(config)
    port = check_address(args.host, args.port)  # and a busy port, before the banner
    # a TF-IDF model or an ensemble has one path ("tfidf", "ensemble"): nothing to choose
    chosen = predictor.runtime.name if predictor.runtime.name in RUNTIMES else config.runtime
    # the process is the service, so its garbage collector may skip what warm-up left alive
    config = dataclasses.replace(config, freeze_gc=True, sighup_reload=args.workers == 1)
    if args.workers > 1:
        # the workers serve what was chosen here (and do not decide, or report, again);
        # one worker keeps the runtime asked for, which a reload into a new directory uses
        config = dataclasses.replace(config, runtime=chosen)
    # uvicorn's "auto" loop and HTTP parser are uvloop and httptools (dependencies of
    # headwise where they install), several times cheaper per request than asyncio and h11
    common = dict(host=args.host, port=port, log_level=process.log_level,
                  log_config=log_config(process.log_level), access_log=process.access_log,
                  timeout_graceful_shutdown=process.graceful_timeout)
    docs = "docs at /docs" if docs_available() else "schema at /openapi.json"
    auto_chosen = args.runtime[0] == "auto" and chosen != "auto"
    print(f"headwise serve: {api_for(predictor).described} classifier, "
          f"{len(predictor.labels)} intents, "
          f"{runtime_summary(predictor.runtime, auto=auto_chosen)}, "
          f"{url(args.host, port)} ({docs}); "
          f"{access_summary(config, keys['api'], keys['admin'])}", file=sys.stderr)
    if args.workers > 1:
        del predictor  # each worker loads its own copy
        os.environ[CONFIG_ENV] = config.to_json()
        uvicorn.run("headwise.serve.app:app_from_environment", factory=True,
                    workers=args.workers, **common)
        return 0
    app = create_app(config, predictor)
    state = app.state.serve

    def on_sigterm(signum: int, frame: object) -> None:
        # uvicorn takes SIGTERM while it serves, drains, and on its way out raises the
        # signal again for the handler it found, this one: the drain is done, so the end
        # is a normal one (status 0), not a death by signal (143). Before uvicorn took
        # the signal, nothing listens yet: end the command.
        if not state.stopping:
            raise _Terminated

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_sigterm) if main_thread else None
    try:
        uvicorn.run(app, **common)
    except _Terminated:
        print("headwise serve: SIGTERM before the service was up: stopped", file=sys.stderr)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0
