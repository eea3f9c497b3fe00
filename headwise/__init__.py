"""headwise: multi-head attention, Transformer models, and intent recognition built on them."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("headwise")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+local"

# loaded on first use, so that ``import headwise`` stays light
_LAZY = {"from_pretrained": "headwise.loading", "save_pretrained": "headwise.loading"}

__all__ = ["__version__", "from_pretrained", "save_pretrained"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'headwise' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
