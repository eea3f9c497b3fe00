"""The onnxruntime session options every headwise ONNX file is run with.

One place for them, so the inference runtime and the benchmarks' like-for-like baselines
(transformers' own model exported to ONNX) run a graph the same way:

* all of onnxruntime's graph optimisations;
* ``threads`` intra-op threads (0: onnxruntime's default, one per physical core);
* the intra-op pool **spins while a run is in progress** and **stops spinning when the run
  returns** (``session.force_spinning_stop``). A single query of a small encoder is a few
  hundred short parallel sections; a pool that sleeps between them pays a wake-up for each
  (the single-query latency rows of the serving and compound sections of BENCHMARKS.md),
  while a pool that keeps spinning after the run busies the cores the event loop, the
  tokenizer and any other process on the machine need between requests.
"""

from __future__ import annotations

from numbers import Integral
from types import MappingProxyType
from typing import Any

__all__ = ["SPIN_CONFIG", "session_options"]

#: the session config entries of the spinning policy, as onnxruntime names them
SPIN_CONFIG: MappingProxyType[str, str] = MappingProxyType({
    "session.intra_op.allow_spinning": "1",
    "session.inter_op.allow_spinning": "1",
    "session.force_spinning_stop": "1",
})


def session_options(threads: int = 0) -> Any:
    """An ``onnxruntime.SessionOptions`` as headwise runs every ONNX file (module docstring).

    Args:
        threads: intra-op threads; 0 leaves onnxruntime's default.

    Returns:
        The options, to pass to ``onnxruntime.InferenceSession``.

    Raises:
        ValueError: a negative or non-integer thread count.
    """
    import onnxruntime as ort

    if isinstance(threads, bool) or not isinstance(threads, Integral) or threads < 0:
        raise ValueError(f"threads must be a non-negative int (0: onnxruntime's default), "
                         f"got {threads!r}")
    options = ort.SessionOptions()
    if threads > 0:
        options.intra_op_num_threads = int(threads)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    for key, value in SPIN_CONFIG.items():
        options.add_session_config_entry(key, value)
    return options
