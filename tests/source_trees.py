"""The package's and its callers' source, parsed with ``ast`` once per test session: the
source checks (tests/test_no_compat.py, tests/test_layering.py) each read every module, and
parsing is most of their time. A file is parsed again when it changes (its path, size and
modification time are the key), so a check pointed at a temporary package sees that one."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def _parsed(path: Path, mtime_ns: int, size: int) -> tuple[ast.Module, tuple[ast.AST, ...]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return tree, tuple(ast.walk(tree))


def _key(path: Path) -> tuple[Path, int, int]:
    stat = path.stat()
    return path.resolve(), stat.st_mtime_ns, stat.st_size


def parse(path: Path) -> ast.Module:
    """The module at ``path``, parsed (shared between the checks: do not change it)."""
    return _parsed(*_key(path))[0]


def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the module at ``path``, in :func:`ast.walk`'s order."""
    return _parsed(*_key(path))[1]
