"""Seeding and saving every random number generator a training run touches."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch
from torch import Tensor


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and every CUDA device), Python's ``random`` and NumPy's global RNG."""
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - user code may draw from the global RNG
    torch.manual_seed(seed)


def torch_rng_states(device: torch.device) -> dict[str, Tensor]:
    """The torch generator states (uint8 tensors): ``cpu`` and, on CUDA, ``cuda``."""
    states = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        states["cuda"] = torch.cuda.get_rng_state(device)
    return states


def set_torch_rng_states(states: dict[str, Tensor], device: torch.device) -> None:
    """Restore what :func:`torch_rng_states` returned."""
    torch.set_rng_state(states["cpu"].cpu().to(torch.uint8))
    if device.type == "cuda" and "cuda" in states:
        torch.cuda.set_rng_state(states["cuda"].cpu().to(torch.uint8), device)


def host_rng_states() -> dict[str, Any]:
    """Python ``random`` and NumPy global states as JSON-ready values."""
    np_state = np.random.get_state(legacy=False)  # noqa: NPY002
    return {
        "python": _tuples_to_lists(random.getstate()),
        "numpy": {"bit_generator": np_state["bit_generator"],
                  "key": np_state["state"]["key"].tolist(),
                  "pos": int(np_state["state"]["pos"]),
                  "has_gauss": int(np_state["has_gauss"]),
                  "gauss": float(np_state["gauss"])},
    }


def set_host_rng_states(states: dict[str, Any]) -> None:
    """Restore what :func:`host_rng_states` returned (after a JSON round trip)."""
    version, internal, gauss_next = states["python"]
    random.setstate((version, tuple(internal), gauss_next))
    s = states["numpy"]
    np.random.set_state({  # noqa: NPY002
        "bit_generator": s["bit_generator"],
        "state": {"key": np.asarray(s["key"], dtype=np.uint32), "pos": s["pos"]},
        "has_gauss": s["has_gauss"], "gauss": s["gauss"]})


def _tuples_to_lists(x: Any) -> Any:
    if isinstance(x, tuple | list):
        return [_tuples_to_lists(v) for v in x]
    return x
