"""The onnxruntime session options every headwise ONNX file runs with: the runtime's live
session carries them, and its thread pool does no work once a run has returned (read from
the pool threads' own CPU clocks in /proc, against their work during the runs)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from headwise.onnx import SPIN_CONFIG, session_options

ort = pytest.importorskip("onnxruntime")


def test_options_hold_threads_optimisations_and_the_spinning_policy():
    options = session_options(2)
    assert options.intra_op_num_threads == 2
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    for key, value in SPIN_CONFIG.items():
        assert options.get_session_config_entry(key) == value
    assert SPIN_CONFIG["session.force_spinning_stop"] == "1"  # no spinning after a run
    assert session_options(0).intra_op_num_threads == 0  # onnxruntime's default
    assert session_options(np.int64(3)).intra_op_num_threads == 3  # a numpy count too
    with pytest.raises(TypeError):  # the policy is a constant
        SPIN_CONFIG["session.force_spinning_stop"] = "0"  # type: ignore[index]


@pytest.mark.parametrize("threads", [-1, 1.5, True, "2"])
def test_bad_thread_counts_are_refused(threads):
    with pytest.raises(ValueError, match="threads"):
        session_options(threads)


def _matmul_chain(path: Path, width: int = 384, layers: int = 6) -> Path:
    """A graph of ``layers`` (rows, width) x (width, width) products: parallel sections
    large enough for the intra-op pool to share out."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, last = [], [], "x"
    for i in range(layers):
        w = numpy_helper.from_array((rng.standard_normal((width, width)) / width ** 0.5)
                                    .astype(np.float32), name=f"w{i}")
        inits.append(w)
        nodes.append(helper.make_node("MatMul", [last, f"w{i}"], [f"h{i}"]))
        last = f"h{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, width])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, [None, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _thread_ticks() -> dict[str, int]:
    """user + system clock ticks of each thread of this process."""
    ticks = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        ticks[task.name] = int(fields[11]) + int(fields[12])
    return ticks


@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                    reason="reads per-thread CPU clocks in /proc; needs two cores")
def test_the_pool_works_during_runs_and_rests_after_them(tmp_path):
    """The threads the session starts do a share of the runs (so they are the pool; runs
    go on until they have, up to 20 s), and in the half second after the last run returns
    they use at most one clock tick."""
    before = set(_thread_ticks())
    session = ort.InferenceSession(str(_matmul_chain(tmp_path / "chain.onnx")),
                                   session_options(2), providers=["CPUExecutionProvider"])
    pool = set(_thread_ticks()) - before
    assert pool, "the session started no intra-op thread"
    x = np.random.default_rng(1).standard_normal((256, 384)).astype(np.float32)
    start = _thread_ticks()
    deadline = time.perf_counter() + 20.0  # a loaded machine schedules the pool late
    while True:
        for _ in range(20):
            session.run(None, {"x": x})
        ran = _thread_ticks()
        if sum(ran[t] - start[t] for t in pool) > 0 or time.perf_counter() > deadline:
            break
    if sum(ran[t] - start[t] for t in pool) == 0:
        pytest.skip("the pool was never scheduled during the runs (a loaded machine): "
                    "its rest after them says nothing")
    time.sleep(0.5)
    rested = _thread_ticks()
    assert sum(rested[t] - ran[t] for t in pool) <= 1
