"""The intent service: FastAPI app, dynamic micro-batching, the PyTorch and ONNX runtimes.

``headwise serve MODEL`` runs :func:`create_app` under uvicorn, for an intent classifier
(:class:`InferenceEngine`) or a compound multi-label + slots one (:class:`CompoundEngine`,
torch runtime only), optionally behind API keys (:class:`ApiKeys`) and a per-key rate limit
(:class:`RateLimiter`), both enforced by :class:`AccessGuard`, and reloadable in place
(:class:`ServedModel`); ``headwise export MODEL --onnx OUT`` (:mod:`headwise.onnx`) writes
the graph the ``onnx`` runtime reads (intent classifiers only, with onnxruntime's fused
operators). The default
runtime, ``auto``, serves on onnxruntime when ``MODEL/model.onnx`` is an export of the
model's weights and on PyTorch otherwise.
"""

from headwise.serve.access import AccessGuard
from headwise.serve.app import app_from_environment, create_app
from headwise.serve.auth import ApiKeys, KeyFileError
from headwise.serve.batching import BatcherClosed, MicroBatcher
from headwise.serve.bucketing import BucketedEngine, EncodedText, LongTextError
from headwise.serve.compound_engine import CompoundEngine, JointRow
from headwise.serve.config import LONG_TEXT_POLICIES, RUNTIMES, ServeConfig
from headwise.serve.engine import InferenceEngine
from headwise.serve.explain import Explanation, explain_text
from headwise.serve.ratelimit import RateLimiter
from headwise.serve.runtime import OnnxRuntime, TorchRuntime
from headwise.serve.served import ServedModel
from headwise.serve.startup import load_engine

__all__ = [
    "LONG_TEXT_POLICIES",
    "RUNTIMES",
    "AccessGuard",
    "ApiKeys",
    "BatcherClosed",
    "BucketedEngine",
    "CompoundEngine",
    "EncodedText",
    "Explanation",
    "InferenceEngine",
    "JointRow",
    "KeyFileError",
    "LongTextError",
    "MicroBatcher",
    "OnnxRuntime",
    "RateLimiter",
    "ServeConfig",
    "ServedModel",
    "TorchRuntime",
    "app_from_environment",
    "create_app",
    "explain_text",
    "load_engine",
]
