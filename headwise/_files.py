"""Hashing files: the SHA-256 of a file, read a block at a time (saved weights, an exported
graph's source weights, a pretrained package's checkpoint, a detector's arrays)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

__all__ = ["file_sha256", "hash_file_into"]

#: bytes read at a time
BLOCK = 1 << 20


def hash_file_into(digest: Any, path: str | Path) -> None:
    """Feed the bytes of the file at ``path`` to ``digest`` (a ``hashlib`` object), a block
    at a time."""
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            digest.update(block)


def file_sha256(path: str | Path) -> str:
    """The hex SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    hash_file_into(digest, path)
    return digest.hexdigest()
