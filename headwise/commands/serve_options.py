"""The options of ``headwise serve``: the parser's arguments, their types (a port, replica
counts), the service settings that ``--config FILE`` and ``--set FIELD=VALUE`` give (one
rule: FIELD is a field of :class:`~headwise.serve.config.ServeConfig` or of
:class:`ServeProcess`), and the checks that turn them into a ``ServeConfig`` or refuse them
(the Ray settings without ``--ray``; a rate limit without API keys ...). Building the parser
imports nothing of the service (FastAPI, torch).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwise.commands._common import RUNTIMES, parse_assignment, runtime_choice, typed_value

if TYPE_CHECKING:
    from headwise.serve.config import ServeConfig

__all__ = ["LOG_LEVELS", "OWN_OPTIONS", "ServeProcess", "add_serve_options",
           "check_ray_options", "config_from_args", "port_number", "positive_int",
           "process_from_args", "replica_count", "settings_from_args"]

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


@dataclass
class ServeProcess:
    """The settings of the ``headwise serve`` process that are not the service's own
    (:class:`~headwise.serve.config.ServeConfig`): set, like those, by ``--config`` and
    ``--set FIELD=VALUE``.

    Attributes:
        log_level: uvicorn's (and the service logger's) level, one of :data:`LOG_LEVELS`.
        access_log: log a line per request (off by default: each line is formatted and
            written on the event loop that serves the requests).
        graceful_timeout: on SIGTERM or SIGINT the listening socket closes at once and idle
            keep-alive connections are closed; requests in flight get this many seconds to
            finish, then the command exits (status 0 on SIGTERM).
        target_ongoing_requests: ``--ray --replicas MIN:MAX``: requests in progress per
            replica the autoscaler aims at (None: Serve's default, 2).
        max_ongoing_requests: ``--ray``: most requests a replica takes at once, the rest
            waiting in the proxy (None: twice ``max_batch_size``, so that a replica can
            gather a full batch).

    Raises:
        ValueError: a value out of its range, naming the field.
    """

    log_level: str = "info"
    access_log: bool = False
    graceful_timeout: int = 30
    target_ongoing_requests: float | None = None
    max_ongoing_requests: int | None = None

    def __post_init__(self) -> None:
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}, got "
                             f"{self.log_level!r}")
        if self.graceful_timeout < 0:
            raise ValueError(f"graceful_timeout must be >= 0 seconds, got "
                             f"{self.graceful_timeout}")
        if self.target_ongoing_requests is not None and not \
                0 < self.target_ongoing_requests < float("inf"):
            raise ValueError(f"target_ongoing_requests must be a positive number, got "
                             f"{self.target_ongoing_requests}")
        if self.max_ongoing_requests is not None and self.max_ongoing_requests < 1:
            raise ValueError(f"max_ongoing_requests must be at least 1, got "
                             f"{self.max_ongoing_requests}")


#: ServeConfig fields that ``--config``/``--set`` do not take, and what sets them instead
OWN_OPTIONS = {"model_dir": "MODEL", "runtime": "--runtime", "onnx_path": "--runtime FILE.onnx",
               "workers": "--workers", "api_key_file": "--api-key-file",
               "admin_key_file": "--admin-key-file", "freeze_gc": "headwise serve itself",
               "sighup_reload": "headwise serve itself"}
#: the ServeConfig fields settable by ``--config``/``--set`` (``headwise.serve.config``,
#: repeated so that building the parser does not import the service; a test keeps them equal)
SERVICE_SETTINGS = ("batching", "max_batch_size", "max_wait_ms", "max_texts", "max_text_chars",
                    "max_body_bytes", "long_text", "chunk_length", "chunk_stride", "top_k",
                    "threads", "warmup", "model_name", "open_metrics", "rate_limit", "burst",
                    "playground", "playground_roles")
#: the settings only ``--ray`` reads
RAY_SETTINGS = ("target_ongoing_requests", "max_ongoing_requests")


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


def positive_int(text: str) -> int:
    """A positive integer (argparse's usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def replica_count(text: str) -> int | tuple[int, int]:
    """``--replicas``' type: ``N`` (a fixed number, at least 1), or ``MIN:MAX`` replicas that
    Serve autoscales, ``0 <= MIN <= MAX``, ``MAX >= 1`` (read and checked by
    :meth:`~headwise.integrations.ray_serve.Autoscaling.parse`)."""
    from headwise.integrations.ray_serve import Autoscaling  # imports no Ray

    if ":" not in text:
        return positive_int(text)
    try:
        scaling = Autoscaling.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return scaling.min_replicas, scaling.max_replicas


def add_serve_options(p: argparse.ArgumentParser) -> None:
    """Every option of ``headwise serve`` on its parser ``p``."""
    p.add_argument("model", metavar="MODEL", help="directory saved by `headwise train`, "
                   "`headwise soup` or `headwise ensemble`")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=8000,
                   help="port, 1-65535, or 0 for a free one, announced (default 8000)")
    p.add_argument("--workers", type=int, default=1,
                   help="worker processes, each with its own copy of the model (default 1)")
    p.add_argument("--runtime", type=runtime_choice, default=("auto", None),
                   metavar="|".join(RUNTIMES) + "|FILE.onnx",
                   help="inference path: auto (the default) uses onnxruntime when "
                        "MODEL/model.onnx exists and reproduces the model's weights, else "
                        "PyTorch, saying why; FILE.onnx: onnxruntime on that export; "
                        "auto:FILE.onnx: that file, as auto")
    p.add_argument("--config", metavar="FILE", help="JSON object of settings, as --set "
                   "names them (--set wins)")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE",
                   help="a setting, VALUE as JSON or a string; repeatable. The service's "
                   "(ServeConfig, docs/serving.md): " + ", ".join(SERVICE_SETTINGS)
                   + "; the process's: " + ", ".join(
                       f.name for f in dataclasses.fields(ServeProcess))
                   + " (e.g. --set max_batch_size=16 --set long_text=chunk)")
    access = p.add_argument_group(
        "access", "API keys. With --api-key-file every path but /healthz and /readyz needs "
        "a key, sent as 'Authorization: Bearer KEY' or 'X-API-Key: KEY', else 401; keys are "
        "compared in constant time and never logged. SIGHUP or POST /admin/reload reload "
        "the key files and the model; the key files are also read again when they change. "
        "Settings: open_metrics (/metrics without a key), rate_limit (requests per second "
        "per key, per worker: 429 with Retry-After over it) and burst (the bucket's size).")
    access.add_argument("--api-key-file", metavar="FILE",
                        help="the API keys, one per line (blank lines and # comments "
                             "ignored; each at least 16 printable ASCII characters without "
                             "spaces); without it the service is open and /admin/* is off")
    access.add_argument("--admin-key-file", metavar="FILE",
                        help="the keys POST /admin/reload takes instead of --api-key-file's "
                             "(so that the systems that query the service cannot change it)")
    ray = p.add_argument_group(
        "Ray Serve (pip install headwise[ray])", "--ray runs the same app, endpoints and "
        "answers as a Ray Serve deployment: replicas, each with its own copy of the model "
        "and micro-batcher, behind Serve's HTTP proxy on --host/--port. --workers and SIGHUP "
        "reloading do not apply there (POST /admin/reload answers 409: deploy again to "
        "replace the replicas); /metrics reports the replica that answered, and rate_limit "
        "applies per replica. Each replica reserves the threads setting's CPUs (1 when not "
        "set) and runs as many inference threads. Settings: target_ongoing_requests, "
        "max_ongoing_requests.")
    ray.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                     help="serve as a Ray Serve deployment instead of under uvicorn: on the "
                          "running cluster at ADDRESS (auto, HOST:6379 or ray://HOST:10001), "
                          "which must be able to read MODEL and the key files; without it, "
                          "on a local Ray instance started here, ended with the command")
    ray.add_argument("--replicas", type=replica_count, metavar="N|MIN:MAX",
                     help="N replicas (default 1), or between MIN and MAX, scaled by Serve "
                          "by the requests in progress")


def settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The settings ``--config`` and ``--set`` give (``--set`` wins), by field, each checked
    against its field's type (a whole number is a float's value too).

    Raises:
        ValueError: an unreadable file, a field that is not a setting (naming what sets it,
            for one that has its own option), or a value of the wrong type.
    """
    given: dict[str, Any] = {}
    if getattr(args, "config", None):
        from pathlib import Path

        try:
            data = json.loads(Path(args.config).read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"--config {args.config}: not JSON ({e})") from None
        if not isinstance(data, dict):
            raise ValueError(f"--config {args.config}: give a JSON object of settings")
        given.update(data)
    for item in getattr(args, "set", None) or []:
        key, value = parse_assignment(item, "FIELD")
        given[key] = value
    from headwise.serve.config import ServeConfig

    out = {}
    for key, value in given.items():
        if key in OWN_OPTIONS:
            raise ValueError(f"{key} is not a setting: {OWN_OPTIONS[key]} sets it")
        cls = ServeProcess if key in {f.name for f in dataclasses.fields(ServeProcess)} \
            else ServeConfig if key in SERVICE_SETTINGS else None
        if cls is None:
            raise ValueError(f"--set {key}: no such setting; the settings: "
                             f"{', '.join(SERVICE_SETTINGS)}, "
                             f"{', '.join(f.name for f in dataclasses.fields(ServeProcess))}")
        out[key] = typed_value(cls, key, value)
    return out


def process_from_args(args: argparse.Namespace) -> ServeProcess:
    """The :class:`ServeProcess` settings of ``--config`` and ``--set``."""
    names = {f.name for f in dataclasses.fields(ServeProcess)}
    return ServeProcess(**{k: v for k, v in settings_from_args(args).items() if k in names})


def check_ray_options(args: argparse.Namespace) -> None:
    """Refuse the Ray options and settings without ``--ray``, and with it what cannot work
    there.

    Raises:
        ValueError: naming the option or setting.
    """
    process = process_from_args(args)
    given = ([] if args.replicas is None else ["--replicas"]) + [
        name for name in RAY_SETTINGS if getattr(process, name) is not None]
    if args.ray is None:
        if given:
            raise ValueError(f"{given[0]} is for --ray, which is not given")
        return
    if args.workers != 1:
        raise ValueError(f"--workers {args.workers} does not apply under --ray: Ray Serve "
                         f"runs replicas, not uvicorn worker processes; ask for --replicas "
                         f"N or --replicas MIN:MAX")
    if process.target_ongoing_requests is not None and not isinstance(args.replicas, tuple):
        raise ValueError("target_ongoing_requests needs --replicas MIN:MAX (it is the "
                         "autoscaler's target)")
    if args.ray and args.port == 0:
        raise ValueError("--port 0 (a free port) needs the local Ray instance: the proxies "
                         "of the cluster at --ray ADDRESS listen on every node; name a port")


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    """The :class:`ServeConfig` the options and settings describe.

    Raises:
        ValueError: a bad option or setting, naming it.
    """
    from headwise.serve.config import ServeConfig

    if args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    if args.admin_key_file is not None and args.api_key_file is None:
        raise ValueError("--admin-key-file needs --api-key-file (without it the other "
                         "endpoints are open to everyone)")
    runtime, onnx_path = args.runtime
    service = {k: v for k, v in settings_from_args(args).items() if k in SERVICE_SETTINGS}
    return ServeConfig(model_dir=args.model, runtime=runtime, onnx_path=onnx_path,
                       api_key_file=args.api_key_file, admin_key_file=args.admin_key_file,
                       workers=args.workers, **service)
