"""Ray Serve: the intent service as a Ray Serve deployment (``pip install headwise[ray]``).

``headwise serve MODEL --ray`` runs the very app ``headwise serve`` runs (:func:`create_app`:
the same endpoints, schemas, limits, micro-batcher, ``/healthz``, ``/readyz``, Prometheus
``/metrics``, API keys and rate limits) as the ingress of a Ray Serve deployment, one app
per replica, so its answers are the same bytes::

    from headwise.integrations.ray_serve import Autoscaling, build_deployment
    from headwise.serve import ServeConfig
    from ray import serve

    app = build_deployment(ServeConfig(model_dir="/models/intent"),
                           autoscaling=Autoscaling(1, 8, target_ongoing_requests=4))
    serve.run(app, name="headwise", route_prefix="/")

Each replica builds its app from the :class:`~headwise.serve.config.ServeConfig` (as JSON:
no model travels; the model directory and any key files must be readable where the
replicas run) when Serve starts it, and reports healthy, so receives requests, only once
its model is loaded and warmed up (its ``check_health``); a replica whose warm-up fails
is replaced by Serve. Serve's proxy spreads requests over the replicas; when one dies,
the requests in flight on it are answered 500 by the proxy (a client may send them again:
``/v1/predict`` is a pure function) and the later ones go to the live replicas while
Serve starts a new one.

What cannot work across replicas is refused: ``workers`` (uvicorn processes; Serve runs
replicas instead), SIGHUP reloading (``sighup_reload``), and ``POST /admin/reload``, which
would reach one replica: it answers 409 naming the way to reload all of them (deploy
again: Serve replaces the replicas one by one). ``/metrics`` reports the replica that
answered the scrape (each has its own counters, like uvicorn's worker processes); Ray's
own metrics cover the deployment as a whole.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from headwise.serve.config import ServeConfig

__all__ = ["APP_NAME", "DEPLOYMENT_NAME", "INSTALL_HINT", "Autoscaling", "RayService",
           "ServiceApp", "build_deployment", "check_config", "connect", "deploy",
           "import_serve", "run"]

#: what to install for this module
INSTALL_HINT = "pip install headwise[ray]"
#: the Serve application ``headwise serve --ray`` deploys (at route ``/``)
APP_NAME = "headwise"
#: the name of its one deployment
DEPLOYMENT_NAME = "IntentService"
#: longest a new replica's first health check waits for the model's warm-up (seconds)
READY_WAIT_S = 60.0
#: what ``POST /admin/reload`` answers under Ray Serve (409)
RELOAD_REFUSAL = ("the service runs as a Ray Serve deployment and this request reaches one "
                  "of its replicas; deploy it again (run `headwise serve --ray` again, or "
                  "serve.run / serve deploy) and Serve replaces the replicas one by one, "
                  "each loading the model and the key files again")


def import_serve() -> Any:
    """The ``ray.serve`` module.

    Raises:
        ImportError: Ray Serve is not installed (the message names :data:`INSTALL_HINT`).
    """
    try:
        import ray  # noqa: F401
        from ray import serve
    except ImportError as e:
        raise ImportError(f"Ray Serve is not installed ({e}); {INSTALL_HINT}") from None
    return serve


@dataclass(frozen=True)
class Autoscaling:
    """Serve's autoscaling of the deployment: between ``min_replicas`` and
    ``max_replicas`` replicas, aiming at ``target_ongoing_requests`` requests in progress
    per replica.

    Raises:
        ValueError: a count below its minimum (0 replicas at least, 1 at most), ``min``
            over ``max``, or a target that is not a positive number (naming the field).
    """

    min_replicas: int
    max_replicas: int
    target_ongoing_requests: float = 2.0

    def __post_init__(self) -> None:
        for name, low in (("min_replicas", 0), ("max_replicas", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) is over max_replicas "
                             f"({self.max_replicas})")
        target = self.target_ongoing_requests
        if isinstance(target, bool) or not isinstance(target, int | float) \
                or not 0 < target < float("inf"):
            raise ValueError(f"target_ongoing_requests must be a positive number, got "
                             f"{target!r}")

    @classmethod
    def parse(cls, text: str, target_ongoing_requests: float | None = None) -> Autoscaling:
        """``MIN:MAX`` (``headwise serve --replicas MIN:MAX``' form), e.g. ``1:8``.

        Raises:
            ValueError: not two integers separated by a colon, or as the constructor.
        """
        low, sep, high = text.partition(":")
        try:
            if not sep:
                raise ValueError
            counts = int(low), int(high)
        except ValueError:
            raise ValueError(f"autoscale must be MIN:MAX replicas (e.g. 1:8), got "
                             f"{text!r}") from None
        if target_ongoing_requests is None:
            return cls(*counts)
        return cls(*counts, target_ongoing_requests=target_ongoing_requests)

    def to_serve(self) -> dict[str, Any]:
        """The deployment's ``autoscaling_config``."""
        return {"min_replicas": self.min_replicas, "max_replicas": self.max_replicas,
                "target_ongoing_requests": self.target_ongoing_requests}


def check_config(config: ServeConfig) -> ServeConfig:
    """The config a replica serves: ``config`` with the garbage collector frozen after
    warm-up (a replica is a process of its own), after refusing what replicas cannot do.

    Raises:
        ValueError: ``workers`` over 1 or ``sighup_reload``, naming them.
    """
    if config.workers != 1:
        raise ValueError(f"workers={config.workers} (--workers): under Ray Serve the "
                         f"service runs replicas, not uvicorn worker processes; ask for "
                         f"replicas (--replicas N or --replicas MIN:MAX) instead")
    if config.sighup_reload:
        raise ValueError("sighup_reload: a replica does not receive the signals of the "
                         "process that deployed it; deploy again to reload the replicas")
    return dataclasses.replace(config, freeze_gc=True)


class ServiceApp:
    """An ASGI app that is the service's app (:func:`headwise.serve.app.create_app` of
    ``config``), built where it first runs: in a Ray Serve replica, at the lifespan start
    Serve runs before the replica takes requests. Pickling it carries only the config.

    Args:
        config: the service settings.
        reload_refusal: what ``POST /admin/reload`` answers (409); None lets it reload.
    """

    def __init__(self, config: ServeConfig, *, reload_refusal: str | None = RELOAD_REFUSAL
                 ) -> None:
        self.config_json = config.to_json()
        self.reload_refusal = reload_refusal
        self._app: Any = None
        self._lock: asyncio.Lock | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"config_json": self.config_json, "reload_refusal": self.reload_refusal}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(ServeConfig.from_json(state["config_json"]),  # type: ignore[misc]
                      reload_refusal=state["reload_refusal"])

    @property
    def state(self) -> Any:
        """The built app's :class:`~headwise.serve.state.ServiceState`; None before."""
        return None if self._app is None else self._app.state.serve

    def build(self) -> Any:
        """The FastAPI app (built once)."""
        if self._app is None:
            from headwise.serve.app import create_app

            app = create_app(ServeConfig.from_json(self.config_json))
            app.state.serve.reload_refusal = self.reload_refusal
            self._app = app
        return self._app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if self._app is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if self._app is None:  # off the event loop: it may take seconds
                    await asyncio.to_thread(self.build)
        await self._app(scope, receive, send)


def _ingress_class(serve: Any, app: ServiceApp) -> type:
    """The deployment class: Serve's ASGI ingress around ``app``, with a health check
    that passes once the replica's model is warmed up."""

    class IntentService:
        """The headwise intent service, one app per replica."""

        async def check_health(self) -> None:
            """Pass once the model is loaded and warmed up (a new replica's first check
            waits for it, up to :data:`READY_WAIT_S`); fail while shutting down."""
            deadline = time.monotonic() + READY_WAIT_S
            while True:
                state = self.app.state  # type: ignore[attr-defined]  # Serve's wrapper
                if state is not None and state.stopping:
                    raise RuntimeError("the service is shutting down")
                if state is not None and state.ready:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the model is not ready {READY_WAIT_S:g} s after "
                                       f"the replica started (did its warm-up fail? see "
                                       f"the replica's log)")
                await asyncio.sleep(0.02)

    return serve.ingress(app)(IntentService)


def build_deployment(config: ServeConfig, *, replicas: int | None = None,
                     autoscaling: Autoscaling | None = None,
                     max_ongoing_requests: int | None = None,
                     cpus_per_replica: float | None = None,
                     graceful_timeout_s: float = 30.0, log_level: str = "info",
                     access_log: bool = False, name: str = DEPLOYMENT_NAME,
                     deployment_options: dict[str, Any] | None = None) -> Any:
    """The intent service as a bound Ray Serve application (for ``serve.run``).

    Args:
        config: the service settings (``workers`` must be 1 and ``sighup_reload`` off).
        replicas: a fixed number of replicas (default 1 without ``autoscaling``).
        autoscaling: replicas between a minimum and a maximum, by requests in progress.
        max_ongoing_requests: most requests a replica takes at once (the rest wait in
            the proxy); default twice ``config.max_batch_size``, so that a replica can
            gather a full batch while another runs.
        cpus_per_replica: CPUs Ray reserves for each replica (default
            ``config.threads``, or 1 when that is 0, in which case the replica runs as
            many inference threads as it has CPUs).
        graceful_timeout_s: on scale-down, redeploy or shutdown, how long a replica's
            requests in flight get to finish.
        log_level: the replicas' log level (``"info"``, ...).
        access_log: log a line per request in the replicas' logs.
        name: the deployment's name.
        deployment_options: further keyword arguments of ``serve.deployment`` (e.g.
            ``health_check_period_s``), over the ones these arguments set.

    Returns:
        A Serve ``Application``.

    Raises:
        ImportError: Ray Serve is not installed.
        ValueError: both ``replicas`` and ``autoscaling``, ``replicas < 1``, a
            non-positive ``max_ongoing_requests`` or ``cpus_per_replica``, or what
            :func:`check_config` refuses.
    """
    config = check_config(config)
    if replicas is not None and autoscaling is not None:
        raise ValueError("give replicas (--replicas N) or autoscaling (--replicas MIN:MAX), "
                         "not both")
    if replicas is not None and (not isinstance(replicas, int) or isinstance(replicas, bool)
                                 or replicas < 1):
        raise ValueError(f"replicas must be a positive integer, got {replicas!r}")
    if max_ongoing_requests is None:
        max_ongoing_requests = 2 * config.max_batch_size
    if not isinstance(max_ongoing_requests, int) or max_ongoing_requests < 1:
        raise ValueError(f"max_ongoing_requests must be a positive integer, got "
                         f"{max_ongoing_requests!r}")
    if cpus_per_replica is None:
        cpus_per_replica = config.threads or 1
    if not cpus_per_replica > 0:
        raise ValueError(f"cpus_per_replica must be positive, got {cpus_per_replica!r}")
    if config.threads == 0:  # as many inference threads as CPUs reserved (onnxruntime
        # would otherwise take every core of the machine in every replica)
        config = dataclasses.replace(config, threads=max(1, round(cpus_per_replica)))
    if not graceful_timeout_s >= 0:
        raise ValueError(f"graceful_timeout_s must be >= 0, got {graceful_timeout_s!r}")
    serve = import_serve()
    scaling: dict[str, Any] = {"autoscaling_config": autoscaling.to_serve()} \
        if autoscaling is not None else {"num_replicas": replicas or 1}
    options: dict[str, Any] = dict(
        name=name, max_ongoing_requests=max_ongoing_requests,
        ray_actor_options={"num_cpus": cpus_per_replica},
        graceful_shutdown_timeout_s=graceful_timeout_s,
        # the first check waits for the warm-up (check_health): give it the time
        health_check_timeout_s=READY_WAIT_S + 30,
        logging_config={"log_level": log_level.upper(), "enable_access_log": access_log},
        **scaling)
    options.update(deployment_options or {})
    return serve.deployment(_ingress_class(serve, ServiceApp(config)), **options).bind()


@dataclass
class RayService:
    """The service deployed on Ray Serve by :func:`deploy`.

    Attributes:
        url: where Serve's HTTP proxy answers, e.g. ``http://127.0.0.1:8000``.
        app_name: the Serve application's name.
        owns_ray: :func:`deploy` started the Ray instance (so :meth:`stop` ends it).
        http_note: why the proxy does not listen where it was asked (Serve was already
            running on the cluster with other HTTP options), else None.
    """

    url: str
    app_name: str
    owns_ray: bool
    http_note: str | None = None

    def stop(self) -> None:
        """Delete the application (its replicas drain their requests in flight); then,
        when :func:`deploy` started Ray here, shut Serve and Ray down."""
        import ray
        from ray import serve

        if not ray.is_initialized():
            return
        try:
            serve.delete(self.app_name)
        finally:
            if self.owns_ray:
                serve.shutdown()
                ray.shutdown()


def _proxy_address(asked: tuple[str, int]) -> tuple[str, int]:
    """The host and port Serve's proxies listen on: those asked for, unless Serve was
    already running with others (Serve keeps its own then, and says so in a warning)."""
    try:  # the running Serve's HTTP options: no public API gives them
        from ray.serve.context import _get_global_client

        options = _get_global_client().http_config
        return str(options.host), int(options.port)
    except Exception:
        return asked


def connect(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Join the Ray cluster at ``address``, or start a local Ray instance (None), unless
    this process already did.

    Returns:
        Whether this call started a local Ray instance (its owner ends it).

    Raises:
        ValueError: ``num_cpus`` with an ``address`` (a cluster has its own).
    """
    import ray

    if address is not None and num_cpus is not None:
        raise ValueError(f"num_cpus is for a local Ray instance; the cluster at {address} "
                         f"has its own")
    if ray.is_initialized():
        return False
    # "local": a new instance, even where RAY_ADDRESS names a cluster (which the owner
    # would shut Serve down on)
    ray.init(address=address or "local", num_cpus=num_cpus, log_to_driver=False)
    return address is None


def deploy(config: ServeConfig, *, address: str | None = None, host: str = "127.0.0.1",
           port: int = 8000, num_cpus: int | None = None, app_name: str = APP_NAME,
           **deployment: Any) -> RayService:
    """Deploy the service on Ray Serve and return once every replica is ready.

    Args:
        config: the service settings.
        address: a running Ray cluster (``"auto"``, ``"HOST:6379"``, ``"ray://HOST:10001"``);
            None starts a local Ray instance here (ended by :meth:`RayService.stop`); the
            Ray this process already joined is used as it is (:func:`connect`).
        host, port: where Serve's HTTP proxy listens (when this call starts Serve).
        num_cpus: CPUs of a local Ray instance (default: the machine's).
        app_name: the Serve application's name (at route ``/``).
        **deployment: :func:`build_deployment`'s keyword arguments (``replicas``,
            ``autoscaling``, ...).

    Returns:
        The deployed :class:`RayService`.

    Raises:
        ImportError: Ray Serve is not installed.
        ValueError: what :func:`build_deployment` refuses, or ``num_cpus`` with an
            ``address`` (a cluster has its own).
        RuntimeError: Serve could not start the replicas (its message names the replica's
            error).
    """
    serve = import_serve()
    import ray

    app = build_deployment(config, **deployment)  # refuses bad settings before Ray starts
    owns = connect(address, num_cpus)
    try:
        serve.start(http_options={"host": host, "port": port})
        actual = _proxy_address((host, port))
        serve.run(app, name=app_name, route_prefix="/", blocking=False)
    except BaseException:
        if owns:
            ray.shutdown()
        raise
    note = None if actual == (host, port) else (
        f"Serve was already running on the cluster, with its proxies on {actual[0]} port "
        f"{actual[1]}: the asked {host} port {port} is not used")
    h, p = actual
    url = f"http://[{h}]:{p}" if ":" in h else f"http://{h}:{p}"
    return RayService(url=url, app_name=app_name, owns_ray=owns, http_note=note)


#: :func:`deploy`'s own keyword arguments (the others are :func:`build_deployment`'s)
_DEPLOY_ONLY = ("address", "host", "port", "num_cpus", "app_name")


def run(config: ServeConfig, *, on_ready: Callable[[RayService], None] | None = None,
        stop: threading.Event | None = None, **kwargs: Any) -> int:
    """Deploy the service (:func:`deploy`), serve until SIGTERM or SIGINT (or ``stop`` is
    set), then delete it (its replicas drain their requests in flight) and, when Ray was
    started here, shut Ray down. SIGHUP is refused with a line on stderr: it cannot
    reload the replicas (deploy again instead).

    Args:
        config: the service settings.
        on_ready: called with the :class:`RayService` once every replica is ready.
        stop: an event that ends the service when set (besides the signals).
        **kwargs: :func:`deploy`'s keyword arguments.

    Returns:
        0.
    """
    import_serve()
    # refuse bad settings before Ray starts
    build_deployment(config, **{k: v for k, v in kwargs.items() if k not in _DEPLOY_ONLY})
    done = stop or threading.Event()
    handlers: dict[int, Any] = {}
    # Ray's start installs its own SIGTERM handler (it aborts the process): take the
    # signals after it
    owns = connect(kwargs.pop("address", None), kwargs.pop("num_cpus", None))
    if threading.current_thread() is threading.main_thread():
        def on_stop(signum: int, frame: object) -> None:
            done.set()

        def on_hup(signum: int, frame: object) -> None:
            print("headwise serve: SIGHUP ignored: it cannot reload the replicas of a Ray "
                  "Serve deployment; run `headwise serve --ray` again (or serve.run / serve "
                  "deploy) and Serve replaces them one by one", file=sys.stderr, flush=True)

        for sig, handler in ((signal.SIGTERM, on_stop), (signal.SIGINT, on_stop),
                             (getattr(signal, "SIGHUP", None), on_hup)):
            if sig is not None:
                handlers[sig] = signal.signal(sig, handler)
    try:
        try:
            service = deploy(config, **kwargs)
        except BaseException:
            if owns:
                import ray

                ray.shutdown()
            raise
        service.owns_ray = owns
        try:
            if on_ready is not None:
                on_ready(service)
            while not done.wait(0.5):
                pass
        finally:
            service.stop()
    finally:
        for sig, previous in handlers.items():
            signal.signal(sig, previous)
    return 0
