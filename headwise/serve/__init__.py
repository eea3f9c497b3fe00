"""The intent service: FastAPI app, dynamic micro-batching of requests.

``headwise serve MODEL`` runs :func:`create_app` under uvicorn. It answers with the
classifier's predictor (:mod:`headwise.intent.inference`, the one path from texts to
answers that the library, ``headwise predict`` and the file stream run too: a network on
PyTorch or onnxruntime, a compound multi-label + slots one too, a TF-IDF model or an
ensemble), optionally behind API keys (:class:`ApiKeys`) and a per-key rate limit
(:class:`RateLimiter`), both enforced by :class:`AccessGuard`, and reloadable in place
(:class:`ServedModel`); ``headwise export MODEL --onnx OUT`` (:mod:`headwise.onnx`) writes
the graph the ``onnx`` runtime reads (Transformer classifiers, single-label or compound,
with onnxruntime's fused operators). The default
runtime, ``auto``, serves on onnxruntime when ``MODEL/model.onnx`` is an export of the
model's weights and on PyTorch otherwise.
"""

from headwise.serve.access import AccessGuard
from headwise.serve.app import app_from_environment, create_app
from headwise.serve.auth import ApiKeys, KeyFileError
from headwise.serve.batching import BatcherClosed, MicroBatcher
from headwise.serve.config import ServeConfig
from headwise.serve.ratelimit import RateLimiter
from headwise.serve.served import ServedModel
from headwise.serve.startup import load_served_predictor

__all__ = [
    "AccessGuard",
    "ApiKeys",
    "BatcherClosed",
    "KeyFileError",
    "MicroBatcher",
    "RateLimiter",
    "ServeConfig",
    "ServedModel",
    "app_from_environment",
    "create_app",
    "load_served_predictor",
]
