"""headwise: multi-head attention, Transformer models, and intent recognition built on them."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("headwise")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+local"

__all__ = ["__version__"]
