"""Dynamic micro-batching: concurrent requests share one forward pass.

Each request hands its items (encoded texts) to :meth:`MicroBatcher.submit` and awaits
its results. A collector task takes the oldest waiting request, then keeps gathering
requests until the batch holds ``max_batch_size`` items or the oldest request has waited
``max_wait_s``, and runs the whole batch once on a dedicated inference thread, so the event
loop keeps accepting requests meanwhile. A request's items are never split across batches
(a request larger than ``max_batch_size`` runs as a batch of its own).

A request that arrives alone (no other request arrived within ``max_wait_s`` before it)
runs at once, without waiting: under light load nobody is coming to share its batch, and
waiting would only add ``max_wait_s`` to its latency. While a batch runs, new requests queue
up and form the next batch, so under load batches still fill.

With ``batching=False`` every request runs on its own (still on the inference thread, one
at a time), which is the baseline the benchmark compares against.

The collector is woken only when it has something to decide: a request arriving at an
empty queue, the waiting requests filling a batch, the oldest one's deadline, or
:meth:`MicroBatcher.stop`. Requests that arrive while it gathers (or while a batch runs)
only join the queue, so a request costs the event loop an append and a future, not a
wake-up of the collector each.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class BatcherClosed(RuntimeError):
    """The batcher is shutting down and takes no new work."""


@dataclass
class _Job(Generic[T]):
    items: list[T]
    future: asyncio.Future
    enqueued: float = field(default_factory=time.monotonic)
    alone: bool = False  # no other request arrived within max_wait_s before this one


class MicroBatcher(Generic[T, R]):
    """Gather items from concurrent callers and run them through ``run`` together.

    Args:
        run: maps a list of items to a sequence of as many results (in order); runs on
            the inference thread.
        max_batch_size: most items in one call of ``run``.
        max_wait_s: longest the oldest waiting request waits for others to join.
        batching: False runs each request's items as a call of their own.
        on_batch: called after each ``run`` with (items, seconds), e.g. for metrics.

    Raises:
        ValueError: a non-positive batch size or a negative wait.
    """

    def __init__(self, run: Callable[[list[T]], Sequence[R]], *, max_batch_size: int = 32,
                 max_wait_s: float = 0.005, batching: bool = True,
                 on_batch: Callable[[int, float], Any] | None = None) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
        self._run = run
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.batching = batching
        self._on_batch = on_batch
        self._queue: deque[_Job[T]] = deque()
        self._queued = 0  # items in the queue
        # the collector's sleep: set while it waits, with whether a full batch wakes it
        self._waiter: asyncio.Future | None = None
        self._wake_when_full = False
        self._task: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closing = False
        self._in_flight = 0
        self._last_arrival = float("-inf")

    @property
    def pending(self) -> int:
        """Items waiting or running."""
        return self._queued + self._in_flight

    async def start(self) -> None:
        """Start the inference thread (and the collector task when batching)."""
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="headwise-infer")
        self._closing = False
        if self.batching:
            self._task = asyncio.get_running_loop().create_task(self._collect())

    async def stop(self) -> None:
        """Refuse new work, finish everything already submitted, then stop the thread."""
        self._closing = True
        self._wake()
        if self._task is not None:
            await self._task
            self._task = None
        while self._in_flight:  # unbatched requests still on the inference thread
            await asyncio.sleep(0.001)
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    async def run_in_thread(self, fn: Callable[..., R], *args: Any) -> R:
        """Run ``fn(*args)`` on the inference thread (e.g. a warm-up or an explanation),
        in turn with the batches."""
        if self._executor is None:
            raise BatcherClosed("the batcher is not running")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def submit(self, items: Sequence[T]) -> list[R]:
        """Queue items and wait for their results.

        Raises:
            BatcherClosed: the batcher is stopping or not started.
            Exception: whatever ``run`` raised for the batch holding these items.
        """
        if self._closing or self._executor is None:
            raise BatcherClosed("the service is shutting down")
        items = list(items)
        if not self.batching:
            return list(await self._timed(items))
        fut = asyncio.get_running_loop().create_future()
        job = _Job(items, fut)
        job.alone = job.enqueued - self._last_arrival > self.max_wait_s
        self._last_arrival = job.enqueued
        self._queue.append(job)
        self._queued += len(items)
        if not self._wake_when_full or self._queued >= self.max_batch_size:
            self._wake()
        return await fut

    async def _timed(self, items: list[T]) -> Sequence[R]:
        self._in_flight += len(items)
        start = time.perf_counter()
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                self._executor, self._run, items)
        finally:
            self._in_flight -= len(items)
        if len(results) != len(items):
            raise RuntimeError(f"run returned {len(results)} results for {len(items)} items")
        if self._on_batch is not None:
            self._on_batch(len(items), time.perf_counter() - start)
        return results

    def _take(self) -> list[_Job[T]]:
        jobs = [self._queue.popleft()]
        size = len(jobs[0].items)
        while self._queue and size + len(self._queue[0].items) <= self.max_batch_size:
            size += len(self._queue[0].items)
            jobs.append(self._queue.popleft())
        self._queued -= size
        return jobs

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _sleep(self, seconds: float | None) -> None:
        """Wait until woken (:meth:`_wake`) or, given ``seconds``, until they have passed;
        with ``seconds`` only a full batch (or :meth:`stop`) wakes the collector early."""
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        self._wake_when_full = seconds is not None
        timer = None if seconds is None else loop.call_later(seconds, self._wake)
        try:
            await waiter
        finally:
            self._waiter = None
            self._wake_when_full = False
            if timer is not None:
                timer.cancel()

    async def _collect(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                await self._sleep(None)
                continue
            first = self._queue[0]
            # a request that came alone does not wait for company (see the module docstring)
            deadline = first.enqueued + (0.0 if first.alone and len(self._queue) == 1
                                         else self.max_wait_s)
            remaining = deadline - time.monotonic()
            if self._queued < self.max_batch_size and not self._closing and remaining > 0:
                await self._sleep(remaining)
            jobs = self._take()
            batch = [item for job in jobs for item in job.items]
            try:
                results = await self._timed(batch)
            except Exception as e:  # hand the failure to every caller of this batch
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(e)
                continue
            start = 0
            for job in jobs:
                n = len(job.items)
                if not job.future.done():  # a caller that went away cancelled its future
                    job.future.set_result(list(results[start:start + n]))
                start += n
