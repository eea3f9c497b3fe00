"""Micro-batching: gathering, limits, draining; batched answers equal unbatched ones."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from serve_helpers import post_concurrently
from tiny_models import TEXTS

from headwise.intent.classifier import IntentClassifier
from headwise.intent.decision.temperature import calibrated_probs
from headwise.intent.inference import SingleLabelPredictor, TorchRuntime
from headwise.intent.inference.bucketing import length_bucket
from headwise.serve import BatcherClosed, MicroBatcher, ServeConfig, create_app

LONG = "send money to my friend and then transfer fifty pounds to my savings account now " \
       "and check my balance"


def _recording(calls: list[list]):
    def run(items):
        calls.append(list(items))
        return [x * 10 for x in items]
    return run


def test_concurrent_requests_are_gathered_up_to_the_batch_size():
    calls: list[list] = []

    async def main():
        b = MicroBatcher(_recording(calls), max_batch_size=4, max_wait_s=0.2)
        await b.start()
        results = await asyncio.gather(*(b.submit([i]) for i in range(10)))
        await b.stop()
        return results

    results = asyncio.run(main())
    assert results == [[i * 10] for i in range(10)]
    assert [len(c) for c in calls] == [4, 4, 2]
    assert [x for c in calls for x in c] == list(range(10))  # first come, first served


def test_a_lone_request_runs_at_once():
    calls: list[list] = []

    async def main():
        b = MicroBatcher(_recording(calls), max_batch_size=64, max_wait_s=0.5)
        await b.start()
        start = time.perf_counter()
        out = await b.submit([1, 2])
        took = time.perf_counter() - start
        await asyncio.sleep(0.6)  # longer than max_wait: the next one is alone again
        start = time.perf_counter()
        await b.submit([3])
        took_again = time.perf_counter() - start
        await b.stop()
        return out, took, took_again

    out, took, took_again = asyncio.run(main())
    assert out == [10, 20] and calls == [[1, 2], [3]]
    assert took < 0.25 and took_again < 0.25  # far below the 0.5 s max_wait


def test_a_request_soon_after_another_waits_at_most_max_wait_for_company():
    calls: list[list] = []

    async def main():
        b = MicroBatcher(_recording(calls), max_batch_size=64, max_wait_s=0.2)
        await b.start()
        first = asyncio.ensure_future(b.submit([1]))  # alone: runs at once
        await asyncio.sleep(0.01)
        start = time.perf_counter()
        second = asyncio.ensure_future(b.submit([2]))  # 10 ms later: waits for company
        await asyncio.sleep(0.02)
        third = asyncio.ensure_future(b.submit([3]))  # joins the second's batch
        results = await asyncio.gather(first, second, third)
        took = time.perf_counter() - start
        await b.stop()
        return results, took

    results, took = asyncio.run(main())
    assert results == [[10], [20], [30]]
    assert calls == [[1], [2, 3]]
    assert 0.15 <= took < 1.0  # the second waited (about max_wait) for others to join


def test_a_batch_that_fills_runs_without_waiting_out_max_wait():
    calls: list[list] = []

    async def main():
        b = MicroBatcher(_recording(calls), max_batch_size=4, max_wait_s=5.0)
        await b.start()
        await b.submit([0])  # alone: runs at once
        second = asyncio.ensure_future(b.submit([1]))  # not alone: waits for company
        await asyncio.sleep(0.05)
        start = time.perf_counter()
        rest = [asyncio.ensure_future(b.submit([i])) for i in (2, 3, 4, 5, 6)]
        results = await asyncio.gather(second, *rest[:2])  # the batch of 1, 2, 3, 4
        took = time.perf_counter() - start
        closing = time.perf_counter()
        await b.stop()  # the last two do not wait out max_wait either
        return results + [r.result() for r in rest[2:]], took, time.perf_counter() - closing

    results, took, closing = asyncio.run(main())
    assert results == [[i * 10] for i in range(1, 7)]
    assert calls == [[0], [1, 2, 3, 4], [5, 6]]
    assert took < 2.0 and closing < 2.0  # far below the 5 s max_wait


def test_requests_are_never_split_and_big_ones_run_alone():
    calls: list[list] = []

    async def main():
        b = MicroBatcher(_recording(calls), max_batch_size=3, max_wait_s=0.1)
        await b.start()
        out = await asyncio.gather(b.submit([1, 2]), b.submit([3, 4, 5, 6]), b.submit([7]))
        await b.stop()
        return out

    assert asyncio.run(main()) == [[10, 20], [30, 40, 50, 60], [70]]
    assert calls == [[1, 2], [3, 4, 5, 6], [7]]


def test_batching_off_runs_each_request_alone():
    calls: list[list] = []

    async def main():
        b = MicroBatcher(_recording(calls), max_batch_size=64, batching=False)
        await b.start()
        out = await asyncio.gather(*(b.submit([i, i]) for i in range(5)))
        await b.stop()
        return out

    assert asyncio.run(main()) == [[i * 10, i * 10] for i in range(5)]
    assert sorted(map(tuple, calls)) == [(i, i) for i in range(5)]


def test_stop_finishes_submitted_work_then_refuses_new_work():
    calls: list[list] = []

    def slow(items):
        time.sleep(0.05)
        return _recording(calls)(items)

    async def main():
        b = MicroBatcher(slow, max_batch_size=2, max_wait_s=0.5)
        await b.start()
        pending = [asyncio.ensure_future(b.submit([i])) for i in range(5)]
        await asyncio.sleep(0)  # let them queue
        await b.stop()  # must not wait out max_wait, and must not drop anything
        with pytest.raises(BatcherClosed):
            await b.submit([9])
        return [p.result() for p in pending]

    start = time.perf_counter()
    assert asyncio.run(main()) == [[i * 10] for i in range(5)]
    assert time.perf_counter() - start < 0.45


def test_a_failing_batch_fails_each_of_its_callers():
    def boom(items):
        raise RuntimeError("model exploded")

    async def main():
        b = MicroBatcher(boom, max_batch_size=8, max_wait_s=0.05)
        await b.start()
        out = await asyncio.gather(b.submit([1]), b.submit([2]), return_exceptions=True)
        await b.stop()
        return out

    out = asyncio.run(main())
    assert all(isinstance(e, RuntimeError) and "exploded" in str(e) for e in out)


def test_length_buckets():
    assert [length_bucket(n) for n in (1, 8, 9, 16, 17, 100)] == [8, 8, 16, 16, 32, 128]


@pytest.mark.parametrize("policy", ["truncate", "chunk"])
def test_batched_logits_equal_unbatched(encoder_dir, policy):
    clf = IntentClassifier.load(encoder_dir)
    stride = 4 if policy == "chunk" else None  # a stride is the chunked policies' only
    predictor = SingleLabelPredictor(clf, TorchRuntime(clf.model), long_text=policy,
                                     chunk_stride=stride, max_rows=64)
    texts = [*TEXTS, LONG, "hi", LONG[:40]]
    items = predictor.encode(texts)
    assert any(len(i.chunks) > 1 for i in items) == (policy == "chunk")
    together = calibrated_probs(predictor.logits(items), clf.temperature)
    alone = np.concatenate([calibrated_probs(predictor.logits([i]), clf.temperature)
                            for i in items])
    np.testing.assert_allclose(together, alone, atol=1e-6, rtol=0)
    np.testing.assert_array_equal(np.argsort(-together, 1, kind="stable"),
                                  np.argsort(-alone, 1, kind="stable"))
    if policy == "truncate":  # and both equal the classifier's own unbatched answers
        ref = np.concatenate([clf.predict_proba([t]) for t in texts])
        np.testing.assert_allclose(together, ref, atol=1e-6, rtol=0)
    else:  # chunk-and-pool = HierarchicalEncoder with mean pooling over the same windows
        from headwise.models.chunked import HierarchicalEncoder

        tok = clf.tokenizer
        hier = HierarchicalEncoder(clf.model, chunk_len=predictor.window, stride=4,
                                   cls_id=tok.cls_token_id, sep_id=tok.sep_token_id).eval()
        ids = tok([LONG], max_length=None)["input_ids"][0][1:-1]
        import torch

        with torch.no_grad():
            want = calibrated_probs(hier(ids)["logits"].double(), clf.temperature)
        np.testing.assert_allclose(together[len(TEXTS)], want[0], atol=1e-6, rtol=0)


def test_concurrent_http_requests_get_their_unbatched_answers(encoder_dir):
    config = ServeConfig(model_dir=str(encoder_dir), max_batch_size=16, max_wait_ms=20,
                         long_text="chunk")
    app = create_app(config)
    predictor = app.state.serve.predictor
    rng = np.random.default_rng(0)
    pool = [*TEXTS, LONG]
    requests = [[pool[j] for j in rng.choice(len(pool), size=int(rng.integers(1, 4)))]
                for _ in range(24)]

    responses, metrics = post_concurrently(app, requests)
    for texts, r in zip(requests, responses, strict=True):
        assert r.status_code == 200
        want = predictor.predict(texts, top_k=3)  # one request alone, no other rows around
        for got, ref in zip(r.json()["predictions"], want, strict=True):
            assert [k["intent"] for k in got["top_k"]] == [k["intent"] for k in ref["top_k"]]
            np.testing.assert_allclose([k["confidence"] for k in got["top_k"]],
                                       [k["confidence"] for k in ref["top_k"]], atol=1e-6)
            assert got["long_text"] == ref["long_text"]
    batches = [ln for ln in metrics.splitlines() if ln.startswith("headwise_batch_size_count")]
    assert float(batches[0].split()[-1]) <= 1 + 12  # warm-up + shared forward passes
