"""Freed device buffers return to the system: glibc's mmap threshold pinned (runtime/host_memory.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from torch_neuronx import _config
from torch_neuronx.runtime import host_memory

#: Run in a process of its own, where TORCH_NEURONX_PIN_MMAP_THRESHOLD=1 pins the threshold (a pin
#: is for the whole process): allocates and frees a 16 MiB neuron buffer, which unpinned raises
#: glibc's threshold past 1 MiB, then checks that a 1 MiB buffer is still a mapping of its own
#: (``mallinfo2().hblkhd``: bytes in blocks mapped one by one), gone once the tensor is freed.
_PINNED_PROCESS = """
import ctypes
import torch

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
mapped = lambda: libc.mallinfo2().hblkhd
large = torch.ones(4 * 2**20, device="neuron")
torch.neuron.synchronize()
del large
torch.neuron.synchronize()
before = mapped()
small = torch.full((2**18,), 3.0, device="neuron")
torch.neuron.synchronize()
held = mapped() - before
torch.testing.assert_close(small.cpu(), torch.full((2**18,), 3.0))
del small
torch.neuron.synchronize()
print("mapped while held", held, "after free", mapped() - before)
"""


@pytest.mark.skipif(host_memory._glibc() is None, reason="the pin is glibc's mallopt")
def test_pinned_threshold_maps_buffers_after_a_larger_one_was_freed():
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")}
    env["TORCH_NEURONX_PIN_MMAP_THRESHOLD"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _PINNED_PROCESS], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    words = done.stdout.split()
    held, after_free = int(words[words.index("held") + 1]), int(words[-1])
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
