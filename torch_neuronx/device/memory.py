"""Memory statistics of the neuron device, with ``torch.cuda``'s names and meaning.

Requests are rounded up to 512 bytes, as CUDA's caching allocator rounds them; freed blocks stay
reserved (cached) until :func:`empty_cache`. See csrc/runtime/NeuronAllocator.h.

The memory history (:func:`_record_memory_history`, :func:`_snapshot`, :func:`_dump_snapshot`,
:func:`memory_snapshot`) is ``torch.cuda.memory``'s: the same dictionary, which
``torch.cuda._memory_viz`` and pytorch.org/memory_viz read.
"""

from __future__ import annotations

import pickle
import sys
import warnings
from collections import OrderedDict
from typing import Any

import torch

from torch_neuronx import _C
from torch_neuronx._compat.torch_internals import augment_memory_snapshot_stack_traces
from torch_neuronx.device.core import _index

__all__ = [
    "empty_cache",
    "get_per_process_memory_fraction",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
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


def memory_stats_as_nested_dict(device: torch.device | int | str | None = None) -> dict[str, Any]:
    """:func:`memory_stats` as ``torch.cuda.memory_stats_as_nested_dict()`` gives it: each dotted
    key a path (``stats["allocated_bytes"]["all"]["current"]``), the undotted ones (``num_ooms``) at
    the top."""
    nested: dict[str, Any] = {}
    for key, value in memory_stats(device).items():
        *path, leaf = key.split(".")
        level = nested
        for part in path:
            level = level.setdefault(part, {})
        level[leaf] = value
    return nested


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


def _record_memory_history(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: torch.device | int | str | None = None,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
) -> None:
    """Starts recording the allocator's history on every core, as
    ``torch.cuda.memory._record_memory_history`` does: ``enabled="state"`` keeps the Python stack of
    each live allocation, ``"all"`` also records every action (``alloc``, ``free_requested``,
    ``free_completed``, ``segment_alloc``, ``segment_free``, ``oom``), the last ``max_entries`` per
    core; ``None`` stops and drops what was recorded. ``context`` says which actions keep a stack
    (``"state"``: live allocations only, ``"alloc"``: allocations, ``"all"``: frees too, ``None``:
    none). ``stacks`` ``"python"`` and ``"all"`` both record Python frames: the emulated device's C++
    frames tell nothing about the program. ``device`` is accepted for CUDA's signature; the record
    covers every core, as CUDA's covers every GPU. A free is immediate (PJRT keeps a buffer alive for
    pending work), so ``free_requested`` and ``free_completed`` come together.

    Raises:
        RuntimeError: ``enabled``, ``context`` or ``stacks`` is not one of those values (CUDA's words).
        NotImplementedError: ``compile_context``, ``global_record_annotations`` or ``skip_actions``,
            which neuron does not record.
    """
    del device
    if enabled not in (None, "state", "all"):
        raise RuntimeError("expected state to be 'state', 'all', or None")
    if context not in (None, "state", "alloc", "all"):
        raise RuntimeError("expected context to be 'state', 'alloc', 'all', or None")
    if stacks not in ("python", "all"):
        raise RuntimeError("expected stacks to be 'python', or 'all'")
    if compile_context or global_record_annotations or skip_actions:
        raise NotImplementedError(
            "torch.neuron.memory._record_memory_history: compile_context, global_record_annotations and "
            "skip_actions are not recorded on neuron; leave them at their defaults"
        )
    _C._record_memory_history(
        enabled is not None,
        enabled == "all",
        context is not None,
        context in ("alloc", "all"),
        context == "all",
        max_entries,
        clear_history,
    )


def _snapshot(device: torch.device | int | str | None = None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
    """The allocator's state and recorded history, ``torch.cuda.memory._snapshot()``'s dictionary:
    ``segments`` (every core's, each with ``device``, ``address``, ``total_size``, ``allocated_size``,
    ``blocks`` of ``size``, ``requested_size``, ``state`` and ``frames``) and ``device_traces`` (per
    core, the recorded actions, oldest first, each with ``action``, ``addr``, ``size``, ``time_us``
    and ``frames``). ``device`` is accepted for CUDA's signature (every core is in it)."""
    del device
    snapshot = _C._memory_snapshot()
    return augment_memory_snapshot_stack_traces(snapshot) if augment_with_fx_traces else snapshot


def _dump_snapshot(filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False) -> None:
    """Pickles :func:`_snapshot` to ``filename``, for pytorch.org/memory_viz or
    ``python -m torch.cuda._memory_viz``."""
    snapshot = _snapshot(augment_with_fx_traces=augment_with_fx_traces)
    with open(filename, "wb") as file:
        pickle.dump(snapshot, file)


def memory_snapshot(mempool_id: Any = None, include_traces: bool = True) -> list[dict[str, Any]]:
    """The segments of :func:`_snapshot`, ``torch.cuda.memory_snapshot()``'s list.

    Raises:
        NotImplementedError: ``mempool_id`` is given (neuron has one pool per core).
    """
    del include_traces
    if mempool_id is not None:
        raise NotImplementedError("torch.neuron.memory_snapshot: neuron has no memory pools (mempool_id)")
    return _snapshot()["segments"]
