"""Freed device buffers return to the system: glibc's mmap threshold pinned (runtime/host_memory.py)."""

from __future__ import annotations

import ctypes
import os

import pytest
import torch

from torch_neuronx import _config
from torch_neuronx.runtime import host_memory


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (malloc.h): every field a size_t."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
        + ("keepcost",)
    ]


def _mapped_bytes() -> int:
    """Bytes glibc's malloc holds in blocks mapped one by one (``mallinfo2().hblkhd``)."""
    library = ctypes.CDLL(None)
    library.mallinfo2.restype = _MallInfo2
    return library.mallinfo2().hblkhd


@pytest.mark.skipif(
    host_memory._glibc() is None or host_memory.user_set_threshold(os.environ) or not _config.pin_mmap_threshold(),
    reason="glibc's mmap threshold is not pinned by the runtime here",
)
def test_buffer_allocated_after_a_larger_one_was_freed_is_still_mapped():
    """Unpinned, freeing the 16 MiB buffer raises glibc's threshold past 1 MiB, and the 1 MiB buffer
    comes from (and stays in) malloc's heaps; pinned, it is a mapping of its own, gone when freed."""
    torch.ones(1, device="neuron").cpu()  # the runtime started
    large = torch.ones(4 * 2**20, device="neuron")
    torch.neuron.synchronize()
    del large
    torch.neuron.synchronize()
    before = _mapped_bytes()
    small = torch.full((2**18,), 3.0, device="neuron")  # 1 MiB
    torch.neuron.synchronize()
    assert _mapped_bytes() - before >= 2**20
    torch.testing.assert_close(small.cpu(), torch.full((2**18,), 3.0))
    del small
    torch.neuron.synchronize()
    assert _mapped_bytes() - before < 2**20


def test_threshold_the_user_set_is_kept():
    assert host_memory.user_set_threshold({"MALLOC_MMAP_THRESHOLD_": "65536"})
    assert host_memory.user_set_threshold({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=1"})
    assert not host_memory.user_set_threshold({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})
    assert not host_memory.user_set_threshold({})


def test_malformed_setting_raises(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_PIN_MMAP_THRESHOLD", "sometimes")
    with pytest.raises(ValueError, match=r"TORCH_NEURONX_PIN_MMAP_THRESHOLD='sometimes' is not a boolean"):
        _config.pin_mmap_threshold()
