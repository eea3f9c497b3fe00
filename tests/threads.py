"""One intra-op thread for a block of test code: what a trained fixture computes then does
not depend on the thread count of the test (or xdist worker) that asks for it first, and
training runs are bit-identical from run to run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """One intra-op thread inside, the count given back after."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
