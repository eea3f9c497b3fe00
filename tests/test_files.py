"""File hashing (``headwise._files``) against hashlib on the whole bytes at once."""

from __future__ import annotations

import hashlib

import pytest

from headwise._files import BLOCK, file_sha256, hash_file_into


@pytest.mark.parametrize("size", [0, 1, BLOCK - 1, BLOCK, 2 * BLOCK + 7])
def test_file_sha256_is_the_sha256_of_the_bytes(tmp_path, size):
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_sha256(path) == file_sha256(str(path)) == hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256(b"prefix")
    hash_file_into(digest, path)
    assert digest.hexdigest() == hashlib.sha256(b"prefix" + data).hexdigest()


def test_a_missing_file_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        file_sha256(tmp_path / "nothing")
