"""Files: the SHA-256 of a file, read a block at a time (saved weights, an exported graph's
source weights, a pretrained package's checkpoint, a detector's arrays), and the mode of a
file written by a library that ignores the umask (:func:`follow_umask`)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

__all__ = ["file_sha256", "follow_umask", "hash_file_into", "umask"]

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


def umask() -> int:
    """The process's umask, read without changing it where Linux shows it
    (``/proc/self/status``), else by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(path: str | Path) -> None:
    """Give the file at ``path`` the mode a plain ``open`` would (``0o666`` less the umask:
    0644 under the usual 022). ``safetensors``' ``save_file`` and ``tempfile.mkstemp``
    create files 0600, which another user (a container's non-root one reading a mounted
    model) cannot read."""
    os.chmod(path, 0o666 & ~umask())
