"""The English queries the serving benchmarks send (``serve.py``, ``batch_predict.py``,
``ray_serve.py``): deterministic, 4 to ~25 words, for models whose answers do not matter
(a random head: latency and throughput do not depend on what it learnt)."""

from __future__ import annotations

import numpy as np

INTENTS = [f"intent_{i}" for i in range(10)]
"""The label set of the benchmarks' random-head classifiers."""

SUBJECTS = ["my card", "the transfer", "my account balance", "a new mortgage", "my pin",
            "the exchange rate", "a refund", "my savings account", "the app", "a direct debit"]
VERBS = ["i need help with", "how do i check", "can you cancel", "why is there a problem with",
         "please tell me about", "i want to change"]
TAILS = ["", " today", " as soon as possible please", " because it has been three days and "
         "nobody has answered my emails", " from abroad while i am travelling in france"]


def bench_texts(n: int = 200, seed: int = 0) -> list[str]:
    """``n`` deterministic English queries of 4 to ~25 words (a verb phrase, a subject and
    a tail drawn with ``seed``)."""
    rng = np.random.default_rng(seed)
    return [f"{VERBS[rng.integers(len(VERBS))]} {SUBJECTS[rng.integers(len(SUBJECTS))]}"
            f"{TAILS[rng.integers(len(TAILS))]}" for _ in range(n)]
