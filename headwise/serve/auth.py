"""API keys of the intent service: read from a file, checked in constant time, reloadable.

A key file holds one key per line; blank lines and lines starting with ``#`` are ignored,
and white space around a key is dropped. A key is at least :data:`MIN_KEY_CHARS` printable
ASCII characters without spaces (what an HTTP header carries unchanged), e.g. the output of
``python -c "import secrets; print(secrets.token_urlsafe(32))"``. A bad line stops the
read with ``FILE:LINE: problem``, never quoting the key.

:class:`ApiKeys` keeps only the SHA-256 digests of the keys. A presented key is hashed and
compared with every digest by :func:`hmac.compare_digest`, all of them whatever matches,
so neither the time taken nor an early exit tells a caller how much of a key it guessed,
nor which key matched. A key's identity for the rate limit and the logs is a short prefix
of its digest (:attr:`ApiKeys.identify`); the key itself is never logged or stored.

:meth:`ApiKeys.reload` reads the file again (on SIGHUP, ``POST /admin/reload``, or when
:meth:`ApiKeys.refresh` sees its modification time or size change); a file that cannot be
read or holds a bad line keeps the keys in use. A file that reads without a key locks
everyone out (the operator emptied it); at start-up it is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

log = logging.getLogger("headwise.serve")

#: the shortest key accepted (16 random URL-safe characters are 96 bits)
MIN_KEY_CHARS = 16
#: characters of the digest's hex that name a key in logs and rate-limit buckets
KEY_ID_CHARS = 12


class KeyFileError(ValueError):
    """A key file that cannot be used, with ``FILE:LINE: problem`` (never the key)."""


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def read_key_file(path: str | Path) -> list[str]:
    """The keys of a key file, in file order, without repeats.

    Args:
        path: the file.

    Returns:
        The keys (possibly none: a file of comments only).

    Raises:
        KeyFileError: a line that is not a valid key (``FILE:LINE: problem``), or a file
            that is not UTF-8.
        OSError: the file cannot be read.
    """
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise KeyFileError(f"{path}: not UTF-8 (byte 0x{raw[e.start]:02x} at offset "
                           f"{e.start})") from None
    keys: dict[str, None] = {}
    for number, line in enumerate(text.splitlines(), 1):
        key = line.strip()
        if not key or key.startswith("#"):
            continue
        if not all("!" <= ch <= "~" for ch in key):
            raise KeyFileError(f"{path}:{number}: a key must be printable ASCII without "
                               f"spaces (what an HTTP header carries unchanged)")
        if len(key) < MIN_KEY_CHARS:
            raise KeyFileError(f"{path}:{number}: a key of {len(key)} characters is too short "
                               f"to be secret (at least {MIN_KEY_CHARS}; `python -c \"import "
                               f"secrets; print(secrets.token_urlsafe(32))\"` makes one)")
        keys[key] = None
    return list(keys)


class ApiKeys:
    """The keys of a key file, for checking presented keys.

    Args:
        path: the key file (:func:`read_key_file`).
        clock: seconds, for :meth:`refresh`'s pace (default :func:`time.monotonic`); the
            attribute of that name may be replaced.
        check_every_s: :meth:`refresh` looks at the file at most this often.
        require_keys: refuse a file without keys (start-up), else lock everyone out.

    Raises:
        KeyFileError, OSError: as :func:`read_key_file`; KeyFileError for a file without
            keys when ``require_keys``.
    """

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.monotonic,
                 check_every_s: float = 1.0, require_keys: bool = True) -> None:
        self.path = Path(path)
        self.clock = clock
        self.check_every_s = check_every_s
        self._digests: tuple[bytes, ...] = ()
        self._signature: tuple[int, int, int] | None = None
        self._failed_signature: object = None
        self._next_check = float("-inf")
        self.reload()
        if require_keys and not self._digests:
            raise KeyFileError(f"{self.path}: no keys (one key per line; blank lines and "
                               f"# comments are ignored)")

    def __len__(self) -> int:
        return len(self._digests)

    def _stat(self) -> tuple[int, int, int]:
        st = os.stat(self.path)
        return st.st_mtime_ns, st.st_size, st.st_ino

    def reload(self) -> int:
        """Read the file again and use its keys from now on.

        Returns:
            The number of keys now in use.

        Raises:
            KeyFileError, OSError: the file could not be used; the keys in use are kept.
        """
        signature = self._stat()
        keys = read_key_file(self.path)
        self._digests = tuple(_digest(k) for k in keys)
        self._signature = signature
        self._failed_signature = None
        if not keys:
            log.warning("%s holds no keys: every request that needs a key is refused",
                        self.path)
        return len(keys)

    def refresh(self) -> None:
        """Reload when the file's modification time, size or inode changed (looked at
        most every ``check_every_s``); a failure is logged once per change of the file,
        and the keys in use are kept."""
        now = self.clock()
        if now < self._next_check:
            return
        self._next_check = now + self.check_every_s
        try:
            signature: object = self._stat()
        except OSError as e:
            signature, problem = "unreadable", e
        else:
            if signature in (self._signature, self._failed_signature):
                return
            try:
                n = self.reload()
            except (KeyFileError, OSError) as e:
                problem = e
            else:
                log.info("reloaded %d API keys from %s (the file changed)", n, self.path)
                return
        if signature != self._failed_signature:
            log.error("could not reload the API keys, keeping the %d in use: %s",
                      len(self._digests), problem)
        self._failed_signature = signature

    def identify(self, presented: Iterable[str]) -> str | None:
        """Which key the presented ones hold, when every one of them is a valid key.

        A request that carries a wrong key beside a valid one (a bearer token that is not
        a key, and a valid ``X-API-Key``) is not let in: a credential that was presented
        and is invalid is refused (RFC 6750, section 3.1), whatever else came with it.
        Every presented key is compared with every key of the file, in constant time
        (:func:`hmac.compare_digest` on SHA-256 digests, no early exit).

        Args:
            presented: the keys a request carried (none, one or two headers).

        Returns:
            The identity (:data:`KEY_ID_CHARS` hex characters of its digest) of the first
            presented key, or None: no key presented, or one that is not valid.
        """
        found: bytes | None = None
        every = True
        for candidate in presented:
            d = _digest(candidate)
            match: bytes | None = None
            for known in self._digests:
                if hmac.compare_digest(d, known) and match is None:
                    match = known
            every = every and match is not None
            found = found or match
        return found.hex()[:KEY_ID_CHARS] if found is not None and every else None
