"""Lazy public names for a package (PEP 562): ``name -> module``, imported on first use.

    __getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)

Importing one module of the package (a saved classifier's loader, the tokenizer) then does
not import every other one and the libraries they need.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, namespace: dict[str, Any], names: dict[str, str]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose public ``names`` live in the
    modules they map to; a name, once imported, is kept in ``namespace``.

    Args:
        package: the package's ``__name__`` (for the AttributeError message).
        namespace: the package's ``globals()``.
        names: public name -> the dotted module that defines it.
    """

    def __getattr__(name: str) -> Any:
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
