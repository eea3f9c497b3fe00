"""The options of ``headwise serve``: the parser's arguments, their types (a port, a rate,
replica counts), and the checks that turn them into a
:class:`~headwise.serve.config.ServeConfig` or refuse them (the Ray options without
``--ray``; a rate limit without API keys ...). Building the parser imports nothing of the
service (FastAPI, torch).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from headwise.serve.config import ServeConfig

__all__ = ["LOG_LEVELS", "LONG_TEXT_POLICIES", "RAY_OPTIONS", "RUNTIMES", "add_serve_options",
           "check_ray_options", "config_from_args", "port_number", "positive_int",
           "positive_number", "positive_rate", "replica_range"]

#: ``headwise.intent.inference.RUNTIMES`` and ``LONG_TEXT_POLICIES``, repeated so that
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
    """``--autoscale``'s type: ``MIN:MAX`` replicas, ``0 <= MIN <= MAX``, ``MAX >= 1``
    (read and checked by :meth:`~headwise.integrations.ray_serve.Autoscaling.parse`)."""
    from headwise.integrations.ray_serve import Autoscaling  # imports no Ray

    try:
        scaling = Autoscaling.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return scaling.min_replicas, scaling.max_replicas


#: the options that only --ray reads, by their argparse names
RAY_OPTIONS = ("ray_address", "replicas", "autoscale", "target_ongoing_requests",
               "max_ongoing_requests")


def add_serve_options(p: argparse.ArgumentParser) -> None:
    """Every option of ``headwise serve`` on its parser ``p``."""
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
    p.add_argument("--no-playground", action="store_true",
                   help="do not offer GET /playground, the page that explains messages in a "
                        "browser (on by default; its data calls need a key like /v1/*)")
    p.add_argument("--playground-roles", metavar="STATS_JSON",
                   help="the stats.json of `headwise inspect MODEL --data DATA --out DIR`: "
                        "the playground shows its head roles beside the heads")
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
    no_playground = getattr(args, "no_playground", False)
    playground_roles = getattr(args, "playground_roles", None)
    if playground_roles is not None and no_playground:
        raise ValueError("--playground-roles are shown by the playground, which "
                         "--no-playground turns off")
    return ServeConfig(model_dir=args.model, runtime=args.runtime, onnx_path=args.onnx,
                       batching=not args.no_batching, max_batch_size=args.max_batch_size,
                       max_wait_ms=args.max_wait_ms, max_texts=args.max_texts,
                       max_text_chars=args.max_text_chars, max_body_bytes=args.max_body_bytes,
                       long_text=args.long_text, chunk_stride=args.chunk_stride,
                       top_k=args.top_k, threads=args.threads, api_key_file=api_key_file,
                       admin_key_file=getattr(args, "admin_key_file", None),
                       open_metrics=getattr(args, "open_metrics", False),
                       rate_limit=rate_limit, burst=getattr(args, "burst", None),
                       workers=args.workers, playground=not no_playground,
                       playground_roles=playground_roles)
