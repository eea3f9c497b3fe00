"""steady_heap: glibc's mmap threshold fixed, checked with glibc's own counters.

Each case runs in a fresh interpreter: the setting is process-wide and made once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from headwise.models import heap
from headwise.models.heap import steady_heap

try:
    GLIBC = bool(os.confstr("CS_GNU_LIBC_VERSION"))
except (ValueError, OSError, AttributeError):
    GLIBC = False
needs_glibc = pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")

# malloc 4 MiB, free it, malloc 4 MiB again: mallinfo2().hblks counts the mmapped chunks.
# glibc's default raises its threshold to the freed chunk's size, so the second buffer comes
# from the heap (0 mapped); with the threshold fixed at 1 MiB it is mapped on its own (1).
# The probe loads headwise/models/heap.py by its path (argv[2]): the module needs only the
# standard library, and importing it by name would first run headwise.models' __init__,
# which imports PyTorch (seconds per interpreter) into a probe that does not use it.
PROBE = """
import ctypes, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("heap", sys.argv[2])
heap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(heap)
heap_is_steady, steady_heap = heap.heap_is_steady, heap.steady_heap

class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = Mallinfo2
applied = steady_heap() if sys.argv[1] == "steady" else None
size = 4 << 20
libc.free(libc.malloc(size))
before = libc.mallinfo2().hblks
p = libc.malloc(size)
mapped = libc.mallinfo2().hblks - before
libc.free(p)
print(json.dumps({"applied": applied, "mapped": mapped, "steady": heap_is_steady()}))
"""


def _run(code: str, *args: str, env: dict[str, str] | None = None) -> dict:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                         env={**clean, **(env or {})}, capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_glibc
def test_default_glibc_serves_a_freed_size_from_the_heap():
    got = _run(PROBE, "default", heap.__file__)
    assert got == {"applied": None, "mapped": 0, "steady": False}


@needs_glibc
def test_steady_heap_maps_large_buffers_on_their_own():
    got = _run(PROBE, "steady", heap.__file__)
    assert got == {"applied": True, "mapped": 1, "steady": True}


@needs_glibc
def test_a_users_malloc_setting_is_left_alone():
    # the user's 64 MiB threshold stands: a 4 MiB buffer stays on the heap
    got = _run(PROBE, "steady", heap.__file__, env={"MALLOC_MMAP_THRESHOLD_": str(64 << 20)})
    assert got == {"applied": True, "mapped": 0, "steady": True}


@needs_glibc
def test_hierarchical_encoder_sets_it_only_when_asked_and_without_gradients():
    # one interpreter, "off" before "on" (the setting, once made, stays for the process)
    code = """
    import json, sys, torch
    from headwise.models import EncoderClassifier, preset
    from headwise.models.chunked import HierarchicalEncoder
    from headwise.models.heap import heap_is_steady

    model = EncoderClassifier(preset("tiny", num_labels=2))
    seen = {}
    for mode in sys.argv[1:]:
        hier = HierarchicalEncoder(model, chunk_len=16, stride=8, steady_memory=mode == "on")
        ids = torch.randint(3, 200, (50,))
        hier.train()(ids)          # training with gradients: the allocator is not touched
        after_train = heap_is_steady()
        hier.eval().encode_long(ids)
        seen[mode] = [after_train, heap_is_steady()]
    print(json.dumps(seen))
    """
    assert _run(code, "off", "on") == {"off": [False, False], "on": [False, True]}


@pytest.mark.parametrize("bad", [0, 4095, (32 << 20) + 1, 1.5, True, "1"])
def test_threshold_out_of_range_is_refused(bad):
    with pytest.raises(ValueError, match="threshold"):
        steady_heap(bad)
