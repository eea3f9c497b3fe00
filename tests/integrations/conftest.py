"""One local Ray instance (two CPUs) for the session, shared by the Ray Data and the Ray
Serve tests: starting one, and shutting it down, takes seconds."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(scope="session")
def ray_instance():
    """``ray`` on a local instance of two CPUs, started here unless this process joined
    one already (then it is left as it was)."""
    ray = pytest.importorskip("ray")
    owns = not ray.is_initialized()
    if owns:
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=False)
    try:
        yield ray
    finally:
        if owns:
            ray.shutdown()

