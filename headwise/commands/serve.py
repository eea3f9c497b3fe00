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
in flight finish (for up to ``--graceful-timeout`` seconds) and are answered with
``Connection: close``; then the batcher finishes and the command exits with status 0.
SIGHUP reloads the key files and the model (one worker: in place, the new model loaded and
warmed up beside the old; several workers: uvicorn replaces them one by one).

``--ray`` serves the same app as a Ray Serve deployment instead of under uvicorn
(:mod:`headwise.integrations.ray_serve`, ``pip install headwise[ray]``): ``--replicas N``
or ``--autoscale MIN:MAX`` [``--target-ongoing-requests K``] replicas, each with its own
copy of the model, behind Serve's HTTP proxy on ``--host``/``--port``; on a local Ray
instance started here, or on the cluster at ``--ray-address``. ``--workers`` and SIGHUP
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

if TYPE_CHECKING:
    from headwise.serve.config import ServeConfig
    from headwise.serve.runtime import OnnxRuntime, TorchRuntime

#: ``headwise.serve.config.RUNTIMES`` and ``LONG_TEXT_POLICIES``, repeated so that
#: building the parser does not import the service (FastAPI, torch); a test keeps them equal
RUNTIMES = ("auto", "torch", "onnx")
LONG_TEXT_POLICIES = ("truncate", "chunk", "reject")
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def port_number(text: str) -> int:
    """``--port``'s type: an integer in 1-65535, or 0 for a free port (argparse's usage
    error otherwise)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (1-65535, or 0 for "
                                         f"a free one)")
    return port


def positive_rate(text: str) -> float:
    """``--rate-limit``'s type: a positive, finite number of requests per second."""
    try:
        rate = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of requests per second: {text!r}"
                                         ) from None
    if not 0 < rate < float("inf"):
        raise argparse.ArgumentTypeError(f"the rate must be positive requests per second, "
                                         f"got {text}")
    return rate


def positive_int(text: str) -> int:
    """``--burst``'s type: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_number(text: str) -> float:
    """``--target-ongoing-requests``' type: a positive, finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def replica_range(text: str) -> tuple[int, int]:
    """``--autoscale``'s type: ``MIN:MAX`` replicas, ``0 <= MIN <= MAX``, ``MAX >= 1``."""
    low, sep, high = text.partition(":")
    try:
        if not sep:
            raise ValueError
        counts = int(low), int(high)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not MIN:MAX replicas (e.g. 1:8): {text!r}"
                                         ) from None
    if counts[0] < 0 or counts[1] < 1 or counts[0] > counts[1]:
        raise argparse.ArgumentTypeError(f"MIN:MAX needs 0 <= MIN <= MAX and MAX >= 1, got "
                                         f"{text}")
    return counts


#: the options that only --ray reads, by their argparse names
RAY_OPTIONS = ("ray_address", "replicas", "autoscale", "target_ongoing_requests",
               "max_ongoing_requests")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve", help="serve a classifier over HTTP",
        description="Serve any classifier that `headwise train`, `soup` or `ensemble` saved: "
        "a single-label network (Transformer, BiLSTM, pretrained encoder), a compound "
        "(multi-label + slots) classifier, a TF-IDF model or an ensemble. POST /v1/predict "
        "(top-k intents, out-of-scope flag; a compound classifier answers every intent and "
        "its slots), POST /v1/explain (per-head attention and rollout, Transformers only), "
        "GET /healthz, /readyz, /metrics (Prometheus); the OpenAPI schema at /openapi.json "
        "and its pages at /docs (served offline). Concurrent requests are gathered into "
        "micro-batches. onnxruntime serves Transformer classifiers exported with `headwise "
        "export`; everything else (a BiLSTM, a compound classifier, a TF-IDF model, an "
        "ensemble) is served by PyTorch or scikit-learn. A compound classifier takes no "
        "--long-text chunk, a TF-IDF model or an ensemble truncate only. The model "
        "directory and the address are checked before the server starts.")
    p.add_argument("model", metavar="MODEL", help="directory saved by `headwise train`, "
                   "`headwise soup` or `headwise ensemble`")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=8000,
                   help="port, 1-65535, or 0 for a free one, announced (default 8000)")
    p.add_argument("--workers", type=int, default=1,
                   help="worker processes, each with its own copy of the model (default 1)")
    p.add_argument("--runtime", choices=RUNTIMES, default="auto",
                   help="inference path: onnxruntime or PyTorch; auto (the default) uses "
                        "onnxruntime when the ONNX file exists and reproduces the model's "
                        "weights, else PyTorch, saying why")
    p.add_argument("--onnx", metavar="FILE",
                   help="ONNX file for --runtime onnx or auto (default MODEL/model.onnx, "
                        "written by `headwise export MODEL --onnx MODEL/model.onnx`)")
    p.add_argument("--max-batch-size", type=int, default=32,
                   help="most texts gathered into one forward pass (default 32)")
    p.add_argument("--max-wait-ms", type=float, default=5.0,
                   help="longest a text waits for others to join its batch (default 5)")
    p.add_argument("--no-batching", action="store_true",
                   help="run every request on its own forward pass")
    p.add_argument("--long-text", choices=LONG_TEXT_POLICIES, default="truncate",
                   help="texts over the model's maximum length: truncate, chunk (overlapping "
                        "windows, pooled) or reject with 422 (default truncate)")
    p.add_argument("--chunk-stride", type=int, help="tokens between window starts for "
                   "--long-text chunk (default half a window)")
    p.add_argument("--max-texts", type=int, default=64, help="texts per request (default 64)")
    p.add_argument("--max-text-chars", type=int, default=10_000,
                   help="characters per text (default 10000)")
    p.add_argument("--max-body-bytes", type=int, default=1 << 20,
                   help="largest request body (default 1 MiB)")
    p.add_argument("--top-k", type=int, default=3, help="default intents per text (default 3)")
    p.add_argument("--threads", type=int, default=0,
                   help="inference threads per worker (default: the runtime's choice)")
    p.add_argument("--graceful-timeout", type=int, default=30,
                   help="on SIGTERM or SIGINT the listening socket closes at once (new "
                        "connections are refused) and idle keep-alive connections are "
                        "closed; requests in flight get this many seconds to finish, then "
                        "the command exits, with status 0 on SIGTERM (default 30)")
    p.add_argument("--log-level", default="info", choices=LOG_LEVELS,
                   help="uvicorn's log level (default info)")
    p.add_argument("--access-log", action="store_true",
                   help="log a line per request (off by default: each line is formatted "
                        "and written on the event loop that serves the requests)")
    access = p.add_argument_group(
        "access", "API keys and rate limits. With --api-key-file every path but /healthz and "
        "/readyz needs a key, sent as 'Authorization: Bearer KEY' or 'X-API-Key: KEY', else "
        "401; keys are compared in constant time and never logged. SIGHUP or POST "
        "/admin/reload reload the key files and the model; the key files are also read "
        "again when they change.")
    access.add_argument("--api-key-file", metavar="FILE",
                        help="the API keys, one per line (blank lines and # comments "
                             "ignored; each at least 16 printable ASCII characters without "
                             "spaces); without it the service is open and /admin/* is off")
    access.add_argument("--admin-key-file", metavar="FILE",
                        help="the keys POST /admin/reload takes instead of --api-key-file's "
                             "(so that the systems that query the service cannot change it)")
    access.add_argument("--open-metrics", action="store_true",
                        help="serve /metrics without a key (for a Prometheus scraper "
                             "without one)")
    access.add_argument("--rate-limit", type=positive_rate, metavar="R",
                        help="requests per second per API key (a token bucket; over it: 429 "
                             "with Retry-After); per worker process. Needs --api-key-file")
    access.add_argument("--burst", type=positive_int, metavar="B",
                        help="requests a key may send at once, the bucket's size (default: "
                             "R rounded up). Needs --rate-limit")
    ray = p.add_argument_group(
        "Ray Serve (pip install headwise[ray])", "--ray runs the same app, endpoints and "
        "answers as a Ray Serve deployment: replicas, each with its own copy of the model "
        "and micro-batcher, behind Serve's HTTP proxy on --host/--port, on a local Ray "
        "instance started here or on a running cluster. --workers and SIGHUP reloading do "
        "not apply there (POST /admin/reload answers 409: deploy again to replace the "
        "replicas); /metrics reports the replica that answered, and --rate-limit applies "
        "per replica. Each replica reserves --threads CPUs (1 when not given) and runs as "
        "many inference threads.")
    ray.add_argument("--ray", action="store_true",
                     help="serve as a Ray Serve deployment instead of under uvicorn")
    ray.add_argument("--ray-address", metavar="ADDRESS",
                     help="a running Ray cluster (auto, HOST:6379 or ray://HOST:10001), "
                          "which must be able to read MODEL and the key files (default: a "
                          "local Ray instance started here, ended with the command)")
    ray.add_argument("--replicas", type=positive_int, metavar="N",
                     help="a fixed number of replicas (default 1)")
    ray.add_argument("--autoscale", type=replica_range, metavar="MIN:MAX",
                     help="let Serve scale the replicas between MIN and MAX by the requests "
                          "in progress")
    ray.add_argument("--target-ongoing-requests", type=positive_number, metavar="K",
                     help="requests in progress per replica the autoscaler aims at "
                          "(default 2, Serve's). Needs --autoscale")
    ray.add_argument("--max-ongoing-requests", type=positive_int, metavar="N",
                     help="most requests a replica takes at once, the rest waiting in the "
                          "proxy (default: twice --max-batch-size, so that a replica can "
                          "gather a full batch)")
    p.set_defaults(func=run)


def check_ray_options(args: argparse.Namespace) -> None:
    """Refuse the Ray options without ``--ray``, and with it what cannot work there.

    Raises:
        ValueError: naming the option.
    """
    given = [name for name in RAY_OPTIONS if getattr(args, name, None) is not None]
    if not getattr(args, "ray", False):
        if given:
            raise ValueError(f"--{given[0].replace('_', '-')} is for --ray, which is not "
                             f"given")
        return
    if args.workers != 1:
        raise ValueError(f"--workers {args.workers} does not apply under --ray: Ray Serve "
                         f"runs replicas, not uvicorn worker processes; ask for --replicas "
                         f"N or --autoscale MIN:MAX")
    if args.replicas is not None and args.autoscale is not None:
        raise ValueError("--replicas and --autoscale exclude each other: a fixed number of "
                         "replicas, or a range Serve scales within")
    if args.target_ongoing_requests is not None and args.autoscale is None:
        raise ValueError("--target-ongoing-requests needs --autoscale (it is the "
                         "autoscaler's target)")
    if args.ray_address is not None and args.port == 0:
        raise ValueError("--port 0 (a free port) needs the local Ray instance: the proxies "
                         "of the cluster at --ray-address listen on every node; name a port")


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


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    """The :class:`ServeConfig` the options describe."""
    from headwise.serve.config import ServeConfig

    if args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    api_key_file = getattr(args, "api_key_file", None)
    rate_limit = getattr(args, "rate_limit", None)
    needs = [("--admin-key-file", getattr(args, "admin_key_file", None), "--api-key-file",
              api_key_file, "without it the other endpoints are open to everyone"),
             ("--rate-limit", rate_limit, "--api-key-file", api_key_file,
              "the limit is per API key"),
             ("--burst", getattr(args, "burst", None), "--rate-limit", rate_limit,
              "it is the size of the rate limit's bucket")]
    for option, value, needed, given, why in needs:
        if value is not None and given is None:
            raise ValueError(f"{option} needs {needed} ({why})")
    return ServeConfig(model_dir=args.model, runtime=args.runtime, onnx_path=args.onnx,
                       batching=not args.no_batching, max_batch_size=args.max_batch_size,
                       max_wait_ms=args.max_wait_ms, max_texts=args.max_texts,
                       max_text_chars=args.max_text_chars, max_body_bytes=args.max_body_bytes,
                       long_text=args.long_text, chunk_stride=args.chunk_stride,
                       top_k=args.top_k, threads=args.threads, api_key_file=api_key_file,
                       admin_key_file=getattr(args, "admin_key_file", None),
                       open_metrics=getattr(args, "open_metrics", False),
                       rate_limit=rate_limit, burst=getattr(args, "burst", None),
                       workers=args.workers)


def runtime_summary(runtime: TorchRuntime | OnnxRuntime, *, auto: bool = False) -> str:
    """The start-up line's words for the runtime in use, e.g. ``runtime onnx (auto,
    m/model.onnx)``.

    Args:
        runtime: the engine's runtime.
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


def scaling_summary(args: argparse.Namespace, max_ongoing: int) -> str:
    """The start-up line's words for the replicas of ``--ray``, e.g. ``Ray Serve: 2
    replicas, up to 64 requests each at once``."""
    if args.autoscale is not None:
        low, high = args.autoscale
        target = args.target_ongoing_requests
        replicas = (f"{low}-{high} replicas (autoscaled, target {target or 2:g} requests in "
                    f"progress per replica)")
    else:
        n = args.replicas or 1
        replicas = f"{n} replica{'s' if n != 1 else ''}"
    where = f"the cluster at {args.ray_address}" if args.ray_address else \
        "a local Ray instance"
    rate = "; the rate limit is per replica" if getattr(args, "rate_limit", None) else ""
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
    from headwise.serve.startup import load_engine

    config = config_from_args(args)
    keys = {name: len(ApiKeys(path)) if path else None for name, path in
            (("api", config.api_key_file), ("admin", config.admin_key_file))}
    local = args.ray_address is None
    summary = "model read by the replicas"
    if local or Path(config.model_dir).exists():
        # refuse a bad model directory before Ray starts; a cluster may see other paths
        engine = load_engine(config)
        chosen = engine.runtime.name if engine.runtime.name in RUNTIMES else config.runtime
        auto = args.runtime == "auto" and chosen != "auto"
        summary = (f"{engine.kind} classifier, {len(engine.labels)} intents, "
                   f"{runtime_summary(engine.runtime, auto=auto)}")
        # the replicas serve what was chosen here (and do not decide, or report, again)
        config = dataclasses.replace(config, runtime=chosen)
        del engine
    port = check_address(args.host, args.port) if local else args.port
    autoscaling = None if args.autoscale is None else ray_serve.Autoscaling(
        *args.autoscale, **({} if args.target_ongoing_requests is None else
                            {"target_ongoing_requests": args.target_ongoing_requests}))
    max_ongoing = args.max_ongoing_requests or 2 * config.max_batch_size
    docs = "docs at /docs" if docs_available() else "schema at /openapi.json"

    def announce(service: ray_serve.RayService) -> None:
        if service.http_note:
            print(f"headwise serve: {service.http_note}", file=sys.stderr)
        print(f"headwise serve: {summary}, {service.url} ({docs}); "
              f"{access_summary(config, keys['api'], keys['admin'])}; "
              f"{scaling_summary(args, max_ongoing)}", file=sys.stderr, flush=True)

    return ray_serve.run(config, on_ready=announce, address=args.ray_address,
                         host=args.host, port=port, replicas=args.replicas,
                         autoscaling=autoscaling, max_ongoing_requests=max_ongoing,
                         graceful_timeout_s=args.graceful_timeout, log_level=args.log_level,
                         access_log=args.access_log)


def run(args: argparse.Namespace) -> int:
    check_ray_options(args)
    if getattr(args, "ray", False):
        return _run_ray(args)
    import uvicorn

    from headwise.serve.app import create_app
    from headwise.serve.auth import ApiKeys
    from headwise.serve.config import CONFIG_ENV
    from headwise.serve.docs_pages import docs_available
    from headwise.serve.startup import load_engine

    config = config_from_args(args)
    # the key files before the model: a bad line is found in a moment, never echoing a key
    keys = {name: len(ApiKeys(path)) if path else None for name, path in
            (("api", config.api_key_file), ("admin", config.admin_key_file))}
    engine = load_engine(config)  # refuses a bad model directory before anything starts
    port = check_address(args.host, args.port)  # and a busy port, before the banner
    # a TF-IDF model or an ensemble has one path ("tfidf", "ensemble"): nothing to choose
    chosen = engine.runtime.name if engine.runtime.name in RUNTIMES else config.runtime
    # the process is the service, so its garbage collector may skip what warm-up left alive
    config = dataclasses.replace(config, freeze_gc=True, sighup_reload=args.workers == 1)
    if args.workers > 1:
        # the workers serve what was chosen here (and do not decide, or report, again);
        # one worker keeps the runtime asked for, which a reload into a new directory uses
        config = dataclasses.replace(config, runtime=chosen)
    # uvicorn's "auto" loop and HTTP parser are uvloop and httptools (dependencies of
    # headwise where they install), several times cheaper per request than asyncio and h11
    common = dict(host=args.host, port=port, log_level=args.log_level,
                  log_config=log_config(args.log_level), access_log=args.access_log,
                  timeout_graceful_shutdown=args.graceful_timeout)
    docs = "docs at /docs" if docs_available() else "schema at /openapi.json"
    print(f"headwise serve: {engine.kind} classifier, {len(engine.labels)} intents, "
          f"{runtime_summary(engine.runtime, auto=args.runtime == 'auto' and chosen != 'auto')}, "
          f"{url(args.host, port)} ({docs}); "
          f"{access_summary(config, keys['api'], keys['admin'])}", file=sys.stderr)
    if args.workers > 1:
        del engine  # each worker loads its own copy
        os.environ[CONFIG_ENV] = config.to_json()
        uvicorn.run("headwise.serve.app:app_from_environment", factory=True,
                    workers=args.workers, **common)
        return 0
    app = create_app(config, engine)
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
