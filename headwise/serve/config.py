"""``ServeConfig``: every knob of the intent service in one JSON-serialisable dataclass.

``headwise serve`` builds one from its options; with ``--workers N`` it travels to each
uvicorn worker process as JSON in the :data:`CONFIG_ENV` environment variable.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from headwise.intent.inference.bucketing import (
    LONG_TEXT_POLICIES,
    SENTENCE_STRIDE,
    check_chunk_length,
    check_windowed,
)
from headwise.intent.inference.load import RUNTIMES

#: environment variable carrying the JSON config to uvicorn worker processes
CONFIG_ENV = "HEADWISE_SERVE_CONFIG"


@dataclass
class ServeConfig:
    """Settings of the intent service.

    Attributes:
        model_dir: the classifier directory (written by ``headwise train``): an intent
            classifier, or a compound (multi-label + slots) one, which is served with the
            torch runtime and without ``"chunk"``.
        runtime: ``"auto"`` (the default: onnxruntime when the ONNX file exists and
            reproduces these weights, else PyTorch, saying why on stderr), ``"torch"``
            (PyTorch, inference mode) or ``"onnx"`` (onnxruntime; a missing or stale file
            is an error).
        onnx_path: the ONNX file for ``runtime="onnx"`` or ``"auto"`` (default
            ``MODEL/model.onnx``).
        batching: gather concurrent requests into one forward pass; False runs each
            request on its own.
        max_batch_size: most texts in one gathered batch.
        max_wait_ms: longest a text waits for others to join its batch.
        max_texts: most texts in one ``/v1/predict`` request.
        max_text_chars: longest text in characters (longer is refused with 422).
        max_body_bytes: largest request body (larger is refused with 413).
        long_text: what a text over the model's maximum length in tokens gets
            (:data:`~headwise.intent.inference.bucketing.LONG_TEXT_POLICIES`): ``"auto"``
            (a single network: its architecture's,
            :data:`~headwise.intent.inference.bucketing.DEFAULT_LONG_TEXT`; other kinds:
            ``"truncate"``), ``"truncate"``, ``"head_tail"``, ``"chunk"`` (windows' pooled
            vectors averaged), ``"chunk_max"`` (the most confident in-scope window
            decides), ``"chunk_in_scope"`` (the window the out-of-scope score finds most in
            scope decides), ``"chunk_span"`` (the span of in-scope windows around the most
            confident one, read again, decides), or refused with 422 (``"reject"``).
        chunk_length: the width of the windows of ``"chunk"``, ``"chunk_max"``,
            ``"chunk_in_scope"`` and ``"chunk_span"`` (``"auto"`` on a single network is
            one of these: its architecture's,
            :data:`~headwise.intent.inference.bucketing.DEFAULT_LONG_TEXT`): an
            int, that many tokens (special tokens included, at least
            :data:`~headwise.intent.inference.bucketing.MIN_CHUNK_LENGTH`, at most the
            model's maximum length), or a float in (0, 1], that fraction of the model's
            maximum length (:func:`~headwise.intent.inference.bucketing.window_length`);
            None: :data:`~headwise.intent.inference.bucketing.DEFAULT_CHUNK_LENGTH`.
            Refused with a policy that does not chunk, and, when the model loads, for a
            width the model cannot take or a kind that does not chunk.
        chunk_stride: tokens between window starts for the chunked policies (default:
            half the window body), or ``"sentence"`` (windows that start at the text's
            sentences); refused with a policy that does not chunk.
        top_k: intents listed per text when the request does not say.
        threads: intra-op threads of the inference runtime (0: the library's default).
        warmup: run a few forward passes before reporting ready.
        freeze_gc: once warmed up, collect garbage and move every object then alive out of
            the cyclic garbage collector's reach (:func:`gc.freeze`): its full passes then
            scan what requests allocate, not the model and the libraries, which took
            ~200 ms per pass under load (a latency spike for every request in flight).
            Process-wide, so off unless the process is the service (``headwise serve``
            turns it on).
        model_name: the name reported in responses (default: the directory's name).
        api_key_file: a file of API keys, one per line (blank lines and ``#`` comments
            ignored; :mod:`headwise.serve.auth`). Given, every path but ``/healthz`` and
            ``/readyz`` (and ``/metrics`` with ``open_metrics``) needs one of its keys, in
            ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``. None: the service is open
            and ``/admin/*`` is off.
        admin_key_file: a file of the keys ``/admin/*`` takes instead of
            ``api_key_file``'s (the keys that may reload the model need not be those that
            query it). Needs ``api_key_file``.
        open_metrics: ``/metrics`` needs no key.
        rate_limit: requests per second per API key (a token bucket,
            :mod:`headwise.serve.ratelimit`); None: no limit. Needs ``api_key_file``.
        burst: the bucket's size, requests a key may send at once (default: the rate
            rounded up, at least 1). Needs ``rate_limit``.
        workers: uvicorn worker processes (``/admin/reload`` serves one worker only, so it
            refuses to reload when there are several: SIGHUP to the main process replaces
            them one by one).
        sighup_reload: reload the keys and the model on SIGHUP (``headwise serve`` turns it
            on with one worker; it needs the event loop in the main thread).
        playground: offer ``GET /playground``, a page that explains messages in a browser
            through ``/v1/predict`` and ``/v1/explain`` (:mod:`headwise.serve.playground`).
        playground_roles: a head analysis' ``stats.json`` (``headwise inspect``) whose head
            roles the playground shows beside the heads (default: only the roles the model
            was built with). Needs ``playground``.

    Raises:
        ValueError: an unknown runtime or policy, a size that is not positive, or an
            access setting without what it needs (naming the field).
    """

    model_dir: str = ""
    runtime: str = "auto"
    onnx_path: str | None = None
    batching: bool = True
    max_batch_size: int = 32
    max_wait_ms: float = 5.0
    max_texts: int = 64
    max_text_chars: int = 10_000
    max_body_bytes: int = 1 << 20
    long_text: str = "auto"
    chunk_length: int | float | None = None
    chunk_stride: int | str | None = None
    top_k: int = 3
    threads: int = 0
    warmup: bool = True
    freeze_gc: bool = False
    model_name: str | None = None
    api_key_file: str | None = None
    admin_key_file: str | None = None
    open_metrics: bool = False
    rate_limit: float | None = None
    burst: int | None = None
    workers: int = 1
    sighup_reload: bool = False
    playground: bool = True
    playground_roles: str | None = None

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {RUNTIMES}, got {self.runtime!r}")
        if self.long_text not in LONG_TEXT_POLICIES:
            raise ValueError(f"long_text must be one of {LONG_TEXT_POLICIES}, got "
                             f"{self.long_text!r}")
        if self.chunk_length is not None:
            check_chunk_length(self.chunk_length)
        if self.long_text != "auto":  # auto: a network's chunked policy, the others' truncate
            check_windowed(self.long_text, self.chunk_length, self.chunk_stride)
        for name in ("max_batch_size", "max_texts", "max_text_chars", "max_body_bytes",
                     "top_k"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not self.max_wait_ms >= 0:
            raise ValueError(f"max_wait_ms must be >= 0, got {self.max_wait_ms!r}")
        if self.chunk_stride is not None and not (
                self.chunk_stride == SENTENCE_STRIDE or (
                    isinstance(self.chunk_stride, int) and not isinstance(self.chunk_stride, bool)
                    and self.chunk_stride >= 1)):
            raise ValueError(f"chunk_stride must be a positive number of tokens or "
                             f"{SENTENCE_STRIDE!r}, got {self.chunk_stride!r}")
        if self.threads < 0:
            raise ValueError(f"threads must be >= 0, got {self.threads!r}")
        if self.playground_roles is not None and not self.playground:
            raise ValueError("playground_roles are shown by the playground: it needs "
                             "playground")
        self._check_access()

    def _check_access(self) -> None:
        """Refuse access settings that could not do what they say."""
        if self.admin_key_file is not None and self.api_key_file is None:
            raise ValueError("admin_key_file needs api_key_file (the keys of the other "
                             "endpoints): without it the service is open to everyone")
        if self.rate_limit is not None:
            if isinstance(self.rate_limit, bool) or not isinstance(
                    self.rate_limit, int | float) or not 0 < self.rate_limit < float("inf"):
                raise ValueError(f"rate_limit must be a positive number of requests per "
                                 f"second, got {self.rate_limit!r}")
            if self.api_key_file is None:
                raise ValueError("rate_limit is per API key: it needs api_key_file")
        if self.burst is not None:
            if not isinstance(self.burst, int) or isinstance(self.burst, bool) \
                    or self.burst < 1:
                raise ValueError(f"burst must be a positive integer, got {self.burst!r}")
            if self.rate_limit is None:
                raise ValueError("burst is the size of the rate limit's bucket: it needs "
                                 "rate_limit")
        if not isinstance(self.workers, int) or isinstance(self.workers, bool) \
                or self.workers < 1:
            raise ValueError(f"workers must be a positive integer, got {self.workers!r}")

    @property
    def bucket_size(self) -> int:
        """The rate limit's bucket size: ``burst``, else the rate rounded up (at least 1)."""
        if self.burst is not None:
            return self.burst
        return max(1, math.ceil(self.rate_limit or 1))

    def to_json(self) -> str:
        """The config as a JSON object."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeConfig:
        """Parse :meth:`to_json`'s output.

        Raises:
            ValueError: not a JSON object, unknown keys, or invalid values.
        """
        data: Any = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("the serve config must be a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown serve config keys {unknown}")
        return cls(**data)
