"""``torch.neuron``: the device module of the neuron backend, what ``torch.cuda`` is to CUDA.

Registered as ``torch.neuron`` when torch is imported (decision 1). Everything here is cheap: the
device runtime (JAX) starts at the first op on a neuron tensor.
"""

from __future__ import annotations

import torch

from torch_neuronx.device import amp
from torch_neuronx.device.core import (
    current_device,
    device,
    device_count,
    device_of,
    get_device_capability,
    get_device_name,
    get_device_properties,
    get_sync_debug_mode,
    init,
    is_available,
    is_initialized,
    set_device,
    set_sync_debug_mode,
    synchronize,
)
from torch_neuronx.device.memory import (
    empty_cache,
    get_per_process_memory_fraction,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from torch_neuronx.device.random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from torch_neuronx.device.streams import Event, Stream, current_stream, default_stream, set_stream, stream

#: ``torch.cuda.OutOfMemoryError``'s counterpart: the exception an allocation past the capacity raises.
OutOfMemoryError = torch.OutOfMemoryError
#: ``torch.cuda.StreamContext``'s counterpart: the context manager :func:`stream` returns.
StreamContext = stream


def is_current_stream_capturing() -> bool:
    """False: neuron has no stream capture (CUDA graphs); code that asks before a synchronizing call
    (``torch.cuda.is_current_stream_capturing``) may go on."""
    return False


__all__ = [
    "Event",
    "OutOfMemoryError",
    "Stream",
    "StreamContext",
    "amp",
    "current_device",
    "current_stream",
    "default_generators",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_sync_debug_mode",
    "get_per_process_memory_fraction",
    "get_rng_state",
    "get_rng_state_all",
    "init",
    "initial_seed",
    "is_available",
    "is_bf16_supported",
    "is_current_stream_capturing",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_sync_debug_mode",
    "set_per_process_memory_fraction",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
]


def get_amp_supported_dtype() -> list[torch.dtype]:
    """Dtypes ``torch.autocast("neuron", dtype=...)`` accepts: bfloat16 (Trainium's native 16-bit
    matmul type, the default), float16 and float32 (its ops then run in float32, as CUDA's
    autocast honours ``dtype=torch.float32``)."""
    return [torch.bfloat16, torch.float16, torch.float32]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def _is_in_bad_fork() -> bool:
    """True in a child forked after the parent used the device (the child must not use it)."""
    from torch_neuronx import _C

    return _C._in_bad_fork()


def __getattr__(name: str) -> object:
    if name == "_initialized":
        # What torch.utils.checkpoint asks before saving and restoring a device's RNG state.
        return is_initialized()
    if name == "default_generators":
        from torch_neuronx import _C

        return tuple(_C._default_generator(i) for i in range(_C._device_count()))
    raise AttributeError(f"module 'torch.neuron' has no attribute {name!r}")
