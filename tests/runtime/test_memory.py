"""Memory statistics, capacity and out-of-memory behaviour of the virtual-HBM allocator."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys

import pytest
import torch


def _allocated() -> int:
    return torch.neuron.memory_allocated()


def test_allocation_is_rounded_to_512_bytes_and_freed_exactly():
    before = _allocated()
    x = torch.empty(1000, device="neuron")  # 4000 bytes -> 4096
    assert _allocated() - before == 4096
    y = torch.empty(10, dtype=torch.int8, device="neuron")  # 10 -> 512
    assert _allocated() - before == 4096 + 512
    del x, y
    assert _allocated() == before


def test_memory_stats_use_cuda_key_names():
    stats = torch.neuron.memory_stats()
    for key in (
        "allocated_bytes.all.current",
        "allocated_bytes.all.peak",
        "reserved_bytes.all.current",
        "active_bytes.all.current",
        "allocation.all.current",
        "segment.all.current",
        "requested_bytes.all.current",
        "num_alloc_retries",
        "num_ooms",
        "num_tensor_frees",
    ):
        assert key in stats, key


def test_nested_memory_stats_hold_the_flat_ones_along_their_paths():
    keep = torch.ones(1000, device="neuron")
    flat, nested = torch.neuron.memory_stats(), torch.neuron.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] >= keep.nbytes
    assert nested["num_ooms"] == flat["num_ooms"]
    leaves = {}

    def collect(level, prefix):
        for key, value in level.items():
            if isinstance(value, dict):
                collect(value, f"{prefix}{key}.")
            else:
                leaves[prefix + key] = value

    collect(nested, "")
    assert leaves == dict(flat)


def test_peak_and_reset():
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.max_memory_allocated()
    x = torch.empty(2**20, device="neuron")
    del x
    assert torch.neuron.max_memory_allocated() - base == 4 * 2**20
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == _allocated()


def test_freed_blocks_stay_reserved_until_empty_cache():
    # Other tests' garbage, collected inside the test (pytest -n 2), freed blocks that x then reused
    # or counted 5 frees for one: the test runs with the collector off, after a collection.
    gc.collect()
    gc.disable()
    try:
        torch.neuron.synchronize()  # frees that wait for launches land before the cache is emptied
        torch.neuron.empty_cache()
        reserved = torch.neuron.memory_reserved()
        x = torch.empty(2**18, device="neuron")
        assert torch.neuron.memory_reserved() == reserved + 2**20
        frees = torch.neuron.memory_stats()["num_tensor_frees"]
        del x
        assert torch.neuron.memory_stats()["num_tensor_frees"] == frees + 1
        assert torch.neuron.memory_reserved() == reserved + 2**20
        y = torch.empty(2**17, device="neuron")  # reuses the cached block
        assert torch.neuron.memory_reserved() == reserved + 2**20
        del y
        torch.neuron.empty_cache()
        assert torch.neuron.memory_reserved() == reserved
    finally:
        gc.enable()


def test_tensors_have_unique_non_overlapping_addresses():
    a = torch.empty(100, device="neuron")
    b = torch.empty(100, device="neuron")
    assert a.data_ptr() != b.data_ptr()
    assert abs(a.data_ptr() - b.data_ptr()) >= 400
    assert a[10:].data_ptr() == a.data_ptr() + 40


def test_out_of_memory_raises_and_the_process_carries_on():
    num_ooms = torch.neuron.memory_stats()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError, match=r"neuron:0 out of memory. Tried to allocate 32.00 GiB"):
        torch.empty(8 * 2**30, device="neuron")
    assert torch.neuron.memory_stats()["num_ooms"] == num_ooms + 1
    x = torch.ones(4, device="neuron")
    assert x.sum().item() == 4.0


@pytest.mark.parametrize(
    ("fraction", "error", "message"),
    [
        (1, TypeError, "Invalid type for fraction argument, must be `float`"),
        (1.5, ValueError, "Invalid fraction value: 1.5. Allowed range: 0~1"),
        (-0.1, ValueError, "Invalid fraction value: -0.1. Allowed range: 0~1"),
    ],
)
def test_memory_fraction_misuse_raises_as_cuda(fraction, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        torch.neuron.set_per_process_memory_fraction(fraction)


def test_capacity_from_environment_and_fraction():
    env = dict(os.environ, TORCH_NEURONX_HBM_CAPACITY="64MiB")
    code = (
        "import torch\n"
        "assert torch.neuron.get_device_properties(0).total_memory == 64 * 2**20\n"
        "x = torch.empty(8 * 2**20, device='neuron')\n"
        "try:\n"
        "    torch.empty(9 * 2**20, device='neuron')\n"
        "except torch.OutOfMemoryError:\n"
        "    print('oom')\n"
        "torch.neuron.set_per_process_memory_fraction(0.25)\n"
        "del x\n"
        "torch.neuron.empty_cache()\n"
        "try:\n"
        "    torch.empty(5 * 2**20, device='neuron')\n"
        "except torch.OutOfMemoryError:\n"
        "    print('oom at a quarter')\n"
        # the device still reports its whole capacity, as CUDA's does under a fraction (helper-62)
        "print(torch.neuron.get_device_properties(0).total_memory // 2**20, torch.neuron.mem_get_info()[1] // 2**20)\n"
        "print(torch.neuron.get_per_process_memory_fraction())\n"
        "torch.neuron.set_per_process_memory_fraction(0.0)\n"
        "try:\n"
        "    torch.empty(1, device='neuron')\n"
        "except torch.OutOfMemoryError:\n"
        "    print('oom at none')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:5] == ["oom", "oom at a quarter", "64 64", "0.25", "oom at none"]


def test_accelerator_memory_apis_agree():
    x = torch.empty(1024, device="neuron")
    assert torch.accelerator.memory_allocated() == torch.neuron.memory_allocated()
    free, total = torch.neuron.mem_get_info()
    assert total == 24 * 2**30 and 0 < free <= total
    del x


def test_memory_summary_reports_the_statistics():
    x = torch.empty(1024, device="neuron")
    summary = torch.neuron.memory_summary()
    assert summary.startswith("neuron:0 memory summary (capacity 24.00 GiB)")
    assert "Allocated memory" in summary and "num_ooms" in summary
    del x
