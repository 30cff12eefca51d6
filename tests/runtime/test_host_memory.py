"""Freed device buffers return to the system: glibc's mmap threshold pinned (runtime/host_memory.py)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

from torch_neuronx import _config
from torch_neuronx.runtime import host_memory

#: Run in a process of its own (a pin is for the whole process; the device is not started, which
#: keeps it to about a second past ``import torch``): pins the threshold, then frees a 16 MiB block,
#: which unpinned raises glibc's threshold past 1 MiB, and checks that a 1 MiB block is still a
#: mapping of its own (``mallinfo2().hblkhd``: bytes in blocks mapped one by one), gone once freed.
#: XLA's CPU buffers are such blocks: docs/compile.md, "Where the memory goes".
_PINNED_PROCESS = """
import ctypes
from torch_neuronx.runtime import host_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
mapped = lambda: libc.mallinfo2().hblkhd
print("pinned", host_memory.pin_mmap_threshold())
libc.free(libc.malloc(16 * 2**20))
before = mapped()
block = libc.malloc(2**20)
held = mapped() - before
libc.free(block)
print("mapped while held", held, "after free", mapped() - before)
"""


def _run_pinned_process(pin: str) -> tuple[bool, int, int]:
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")}
    env["TORCH_NEURONX_PIN_MMAP_THRESHOLD"] = pin
    done = subprocess.run(
        [sys.executable, "-c", _PINNED_PROCESS], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    words = done.stdout.split()
    return words[words.index("pinned") + 1] == "True", int(words[words.index("held") + 1]), int(words[-1])


@pytest.mark.skipif(host_memory._glibc() is None, reason="the pin is glibc's mallopt")
def test_pinned_threshold_maps_blocks_after_a_larger_one_was_freed():
    pinned, held, after_free = _run_pinned_process("1")
    assert pinned
    assert held >= 2**20
    assert after_free < 2**20


def test_threshold_the_user_set_is_kept():
    assert host_memory.user_set_threshold({"MALLOC_MMAP_THRESHOLD_": "65536"})
    assert host_memory.user_set_threshold({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=1"})
    assert not host_memory.user_set_threshold({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})
    assert not host_memory.user_set_threshold({})


def test_threshold_is_left_alone_by_default(monkeypatch):
    monkeypatch.delenv("TORCH_NEURONX_PIN_MMAP_THRESHOLD", raising=False)
    assert not _config.pin_mmap_threshold()
    assert not host_memory.pin_mmap_threshold()


def test_malformed_setting_raises(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_PIN_MMAP_THRESHOLD", "sometimes")
    with pytest.raises(ValueError, match=r"TORCH_NEURONX_PIN_MMAP_THRESHOLD='sometimes' is not a boolean"):
        _config.pin_mmap_threshold()


def _resident_anonymous_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:"))


@pytest.mark.skipif(host_memory._glibc() is None, reason="malloc_trim is glibc's")
@pytest.mark.skipif(host_memory.user_set_threshold(os.environ), reason="the blocks may be mapped on their own")
def test_trim_returns_freed_heap_memory():
    # 32 MiB of 64 KiB blocks (below the mmap threshold, so from a heap), each followed by a block
    # still held, which keeps glibc from giving them back on its own (it trims only a heap's free top)
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks, kept = [], []
    for _ in range(512):
        blocks.append(libc.malloc(64 * 1024))
        kept.append(libc.malloc(64 * 1024))
        ctypes.memset(blocks[-1], 1, 64 * 1024)
    held = _resident_anonymous_kb()
    for block in blocks:
        libc.free(block)
    freed = _resident_anonymous_kb()
    host_memory.trim()
    trimmed = _resident_anonymous_kb()
    for block in kept:
        libc.free(block)
    assert freed > held - 4 * 1024  # glibc keeps the freed blocks' pages: at most 4 MiB went back
    assert trimmed < freed - 24 * 1024  # the trim gave back at least 24 of the 32 MiB
