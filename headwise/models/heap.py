"""Keep the C heap from growing with the number of forward passes (glibc).

PyTorch's CPU tensors come from ``malloc``. glibc serves a large request with ``mmap``
and hands it back to the system on ``free`` -- until the first such buffer is freed: from
then on it raises its *mmap threshold* to that buffer's size (up to 32 MiB) and serves
later large requests from its heap, where a freed buffer stays resident between live
ones. A loop of equal forward passes (the windows of a long text, or a service's
batches) then leaves more and more of the heap resident: the peak memory depends on the
heap's history rather than on what the code holds. Fixing the threshold (``mallopt
(M_MMAP_THRESHOLD)``, or the ``MALLOC_MMAP_THRESHOLD_`` environment variable) turns the
adjustment off, so every buffer above it is mapped and returned on its own and the
resident memory is what the live tensors need. The cost is a page fault per fresh page
of each large buffer, which ``benchmarks/long_attention.py`` measures beside the gain.

:func:`steady_heap` makes that setting once per process; it is what
:class:`~headwise.models.chunked.HierarchicalEncoder` (``steady_memory=True``) and
``headwise serve --set long_text=chunk`` call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

__all__ = ["DEFAULT_MMAP_THRESHOLD", "M_MMAP_THRESHOLD", "heap_is_steady", "steady_heap"]

#: glibc's ``mallopt`` parameter number of the mmap threshold (``malloc.h``)
M_MMAP_THRESHOLD = -3
#: the threshold :func:`steady_heap` sets: buffers of 1 MiB and more are mapped
DEFAULT_MMAP_THRESHOLD = 1 << 20
#: environment variables with which a user has fixed glibc's thresholds already
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                  "MALLOC_MMAP_MAX_")

_state: dict[str, int | None] = {"threshold": None}


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (looked up once: steady_heap runs on every call of a
    gradient-free chunked encode)."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
    except (ValueError, OSError, AttributeError):  # not glibc (musl, macOS, Windows)
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") else None


def steady_heap(threshold: int = DEFAULT_MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold for this process, so repeated forward passes on the CPU
    keep a flat resident memory (see the module docstring).

    A process-wide setting, made at most once: a later call with another threshold does
    not change it. Nothing is changed when the process was started with one of glibc's
    ``MALLOC_*_`` tuning variables or their ``GLIBC_TUNABLES`` (the user's choice stands;
    glibc has then already turned the adjustment off) or when the C library is not glibc.

    Args:
        threshold: size in bytes from which buffers are mapped on their own, 4 KiB to
            32 MiB.

    Returns:
        True when the heap is steady after the call (set now, earlier, or by the user's
        environment); False when the C library is not glibc or refused the setting.

    Raises:
        ValueError: a threshold outside 4 KiB to 32 MiB.
    """
    if not isinstance(threshold, int) or isinstance(threshold, bool) or \
            not 4096 <= threshold <= 32 << 20:
        raise ValueError(f"threshold must be an int from 4096 to {32 << 20} bytes, got "
                         f"{threshold!r}")
    if _state["threshold"] is not None:
        return True
    libc = _glibc()
    if libc is None:
        return False
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if any(name in os.environ for name in _USER_SETTINGS) or any(
            f"glibc.malloc.{t}" in tunables for t in ("mmap_threshold", "trim_threshold",
                                                      "top_pad", "mmap_max")):
        _state["threshold"] = -1
        return True
    if libc.mallopt(ctypes.c_int(M_MMAP_THRESHOLD), ctypes.c_int(threshold)) != 1:
        return False
    _state["threshold"] = threshold
    return True


def heap_is_steady() -> bool:
    """Whether :func:`steady_heap` has taken effect in this process."""
    return _state["threshold"] is not None
