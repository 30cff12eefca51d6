"""Memory statistics of the neuron device, with ``torch.cuda``'s names and meaning.

Requests are rounded up to 512 bytes, as CUDA's caching allocator rounds them; freed blocks stay
reserved (cached) until :func:`empty_cache`. See csrc/runtime/NeuronAllocator.h.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any

import torch

from torch_neuronx import _C
from torch_neuronx.device.core import _index

__all__ = [
    "empty_cache",
    "get_per_process_memory_fraction",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "max_memory_cached",
    "memory_cached",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
]


def memory_stats(device: torch.device | int | str | None = None) -> OrderedDict[str, Any]:
    """The allocator's statistics for a core: ``torch.cuda.memory_stats()``'s keys
    (``allocated_bytes.all.current``, ``reserved_bytes.all.peak``, ``num_ooms``, ...) plus
    ``num_tensor_frees``, the number of storages freed."""
    index = _index(device)
    stats = OrderedDict(torch.accelerator.memory_stats(index))
    stats["num_tensor_frees"] = _C._num_tensor_frees(index)
    return OrderedDict(sorted(stats.items()))


def memory_allocated(device: torch.device | int | str | None = None) -> int:
    """Bytes held by live tensors on a core (each allocation rounded up to 512 bytes)."""
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device: torch.device | int | str | None = None) -> int:
    """Peak of :func:`memory_allocated` since the start or :func:`reset_peak_memory_stats`."""
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device: torch.device | int | str | None = None) -> int:
    """Bytes reserved by the allocator on a core: allocated plus cached free blocks."""
    return torch.accelerator.memory_reserved(_index(device))


def max_memory_reserved(device: torch.device | int | str | None = None) -> int:
    return torch.accelerator.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device: torch.device | int | str | None = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: torch.device | int | str | None = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """Releases the cached free blocks of every core (``memory_reserved`` drops to what is allocated
    in segments still in use)."""
    for index in range(_C._device_count()):
        _C._empty_cache(index)


def mem_get_info(device: torch.device | int | str | None = None) -> tuple[int, int]:
    """(free, total) bytes of a core's HBM capacity."""
    return torch.accelerator.get_memory_info(_index(device))


def set_per_process_memory_fraction(fraction: float, device: torch.device | int | str | None = None) -> None:
    """Limits this process to ``fraction`` of a core's HBM capacity, like the CUDA function: an
    allocation that would reserve more raises ``torch.OutOfMemoryError`` (0.0: every one does).
    The device's reported capacity (``get_device_properties().total_memory``, ``mem_get_info``'s
    total) stays the whole HBM, as CUDA's does.

    Raises:
        TypeError: ``fraction`` is not a float (CUDA's check and words).
        ValueError: ``fraction`` is not in [0, 1] (CUDA's check and words).
    """
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(_index(device), fraction)


def get_per_process_memory_fraction(device: torch.device | int | str | None = None) -> float:
    """The fraction :func:`set_per_process_memory_fraction` set for a core (1.0 unless set)."""
    return _C._memory_fraction(_index(device))


def _format_bytes(count: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(count) >= size:
            return f"{count / size:.2f} {unit}"
    return f"{count} B"


def memory_summary(device: torch.device | int | str | None = None, abbreviated: bool = False) -> str:
    """A readable table of :func:`memory_stats` for a core: current, peak, allocated and freed
    amounts of allocated, active, reserved and requested memory, then the event counters.
    ``abbreviated`` keeps only the byte totals."""
    index = _index(device)
    stats = memory_stats(index)
    rows = [
        ("Allocated memory", "allocated_bytes"),
        ("Active memory", "active_bytes"),
        ("Requested memory", "requested_bytes"),
        ("Reserved memory", "reserved_bytes"),
    ]
    if not abbreviated:
        rows += [
            ("Allocations", "allocation"),
            ("Active allocations", "active"),
            ("Segments", "segment"),
            ("Non-releasable memory", "inactive_split_bytes"),
        ]
    lines = [
        f"neuron:{index} memory summary (capacity {_format_bytes(_C._memory_capacity(index))})",
        f"{'metric':<24}{'current':>14}{'peak':>14}{'allocated':>14}{'freed':>14}",
    ]
    for title, key in rows:
        values = [stats[f"{key}.all.{metric}"] for metric in ("current", "peak", "allocated", "freed")]
        shown = [_format_bytes(v) if key.endswith("bytes") else str(v) for v in values]
        lines.append(f"{title:<24}" + "".join(f"{value:>14}" for value in shown))
    if not abbreviated:
        for key in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free", "num_tensor_frees"):
            lines.append(f"{key:<24}{stats[key]:>14}")
    return "\n".join(lines)


def _deprecated(name: str, replacement: Any, message: str) -> Any:
    """``torch.neuron.<name>``: ``replacement`` after torch.cuda's ``FutureWarning`` for its namesake."""

    def deprecated(device: torch.device | int | str | None = None) -> Any:
        warnings.warn(message, FutureWarning, stacklevel=2)
        return replacement(device)

    deprecated.__name__ = deprecated.__qualname__ = name
    deprecated.__doc__ = f"Deprecated: :func:`{replacement.__name__}`, with torch.cuda's ``FutureWarning``."
    return deprecated


memory_cached = _deprecated(
    "memory_cached", memory_reserved, "torch.neuron.memory_cached has been renamed to torch.neuron.memory_reserved"
)
max_memory_cached = _deprecated(
    "max_memory_cached",
    max_memory_reserved,
    "torch.neuron.max_memory_cached has been renamed to torch.neuron.max_memory_reserved",
)
reset_max_memory_allocated = _deprecated(
    "reset_max_memory_allocated",
    reset_peak_memory_stats,
    "torch.neuron.reset_max_memory_allocated now calls torch.neuron.reset_peak_memory_stats, which resets /all/ "
    "peak memory stats.",
)
reset_max_memory_cached = _deprecated(
    "reset_max_memory_cached",
    reset_peak_memory_stats,
    "torch.neuron.reset_max_memory_cached now calls torch.neuron.reset_peak_memory_stats, which resets /all/ "
    "peak memory stats.",
)
