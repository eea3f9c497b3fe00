"""headwise: multi-head attention, Transformer models, and intent recognition built on them."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from headwise._lazy import lazy_names

try:
    __version__ = version("headwise")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+local"

# loaded on first use, so that ``import headwise`` stays light
_LAZY = {"from_pretrained": "headwise.loading", "save_pretrained": "headwise.loading"}

__all__ = ["__version__", "from_pretrained", "save_pretrained"]

__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)
