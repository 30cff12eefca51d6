"""NeuronCores as PyTorch devices: count, current core, ``torch.neuron.device``, synchronize."""

from __future__ import annotations

import socket
import uuid
import warnings
from typing import Any

import torch

from torch_neuronx import _C
from torch_neuronx.runtime import sync_debug

__all__ = [
    "current_device",
    "device",
    "device_count",
    "device_of",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_sync_debug_mode",
    "init",
    "is_available",
    "is_initialized",
    "set_device",
    "set_sync_debug_mode",
    "synchronize",
]


def _index(device: torch.device | int | str | None) -> int:
    """A core index from an int, "neuron:i", torch.device or None (the current core)."""
    if device is None:
        return _C._current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")  # torch.cuda's words
        index = device.index if device.index is not None else _C._current_device()
    else:
        index = int(device)
    _C._check_device_index(index)
    return index


def is_available() -> bool:
    """True when at least one NeuronCore is visible (NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES).

    Never raises, as ``torch.cuda.is_available``: a malformed variable makes no core visible and
    warns with the error :func:`device_count` raises, so that a script choosing its device with
    ``"neuron" if torch.neuron.is_available() else "cpu"`` does not fall back to the CPU silently.
    """
    error = _C._core_config_error()
    if error:
        warnings.warn(f"neuron: {error}; no NeuronCore is available", UserWarning, stacklevel=2)
        return False
    return _C._device_count() > 0


def device_count() -> int:
    """Number of visible NeuronCores; each is one ``neuron:i`` device.

    Raises:
        ValueError: NEURON_RT_VISIBLE_CORES or NEURON_RT_NUM_CORES is malformed.
    """
    error = _C._core_config_error()
    if error:
        raise ValueError(f"neuron: {error}")
    return _C._device_count()


#: Whether :func:`set_device` picked a core in this process (see :func:`is_initialized`).
_core_selected = False


def is_initialized() -> bool:
    """Whether the device state is initialized: the runtime has started (at the first op on a neuron
    tensor) or :func:`set_device` picked a core, as ``torch.cuda.set_device`` initializes CUDA.
    FakeTensor (DTensor's sharding propagation) places an index-less ``neuron`` device on the
    current core only when this is true, and on core 0 otherwise."""
    from torch_neuronx import runtime

    return _core_selected or runtime.started()


def current_device() -> int:
    """Index of this thread's current core (0 unless :func:`set_device` changed it)."""
    return _C._current_device()


def set_device(device: torch.device | int | str) -> None:
    """Sets this thread's current core; a negative index does nothing, as for ``torch.cuda.set_device``.

    Raises:
        RuntimeError: the index is not a visible core (as CUDA raises for a device ordinal it lacks).
        ValueError: ``device`` names another device type ("Expected a neuron device, but got: cpu").
    """
    global _core_selected
    if isinstance(device, int) and device < 0:
        return
    named = torch.device(device) if isinstance(device, (str, torch.device)) else None
    if named is not None and named.type == "neuron" and named.index is None:
        # torch.cuda.set_device("cuda")'s error (_get_device_index with optional=False)
        raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")
    _C._set_device(_index(device))
    _core_selected = True


def init() -> None:
    """Starts the device runtime now rather than at the first op on a neuron tensor, as
    ``torch.cuda.init`` initializes CUDA; does nothing once it has started."""
    from torch_neuronx import runtime

    runtime.start()


class device:
    """Context manager that makes ``device`` the current core, like ``torch.cuda.device``."""

    def __init__(self, device: torch.device | int | str | None) -> None:
        # None or a negative index is a no-op, as for torch.cuda.device.
        self.index = -1 if device is None or (isinstance(device, int) and device < 0) else _index(device)
        self.previous = -1

    def __enter__(self) -> None:
        self.previous = _C._current_device()
        if self.index >= 0:
            _C._set_device(self.index)

    def __exit__(self, *exc_info: object) -> None:
        if self.index >= 0:
            _C._set_device(self.previous)


class device_of(device):
    """Context manager that makes the core of ``tensor`` current (no-op for a CPU tensor)."""

    def __init__(self, tensor: torch.Tensor) -> None:
        super().__init__(tensor.device.index if tensor.device.type == "neuron" else None)


def synchronize(device: torch.device | int | str | None = None) -> None:
    """Waits for all work on a core, then raises the earliest pending device fault, if any."""
    torch.accelerator.synchronize(torch.device("neuron", _index(device)))


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """Warn (``"warn"`` or 1) or raise (``"error"`` or 2) at every operation that makes the host wait
    for a NeuronCore, or neither (``"default"`` or 0), as ``torch.cuda.set_sync_debug_mode``.

    The operations are a host read of a neuron tensor (``.item()``, ``bool(t)``, ``.tolist()``,
    ``print``, a blocking ``.cpu()``, and ops whose output size depends on values, such as
    ``nonzero`` and boolean-mask indexing) and ``Stream.synchronize()``; the warning is a
    ``UserWarning`` "called a synchronizing neuron operation: ...", the error a ``RuntimeError``
    with those words. As on CUDA, ``torch.neuron.synchronize()``, ``Event.synchronize()``,
    ``non_blocking=True`` copies and collectives do not count. The mode is process-wide.

    Raises:
        RuntimeError: ``debug_mode`` is none of the above (CUDA's message).
    """
    sync_debug.set_mode(debug_mode)


def get_sync_debug_mode() -> int:
    """The mode :func:`set_sync_debug_mode` set: 0 (default), 1 (warn) or 2 (error)."""
    return sync_debug.mode()


def get_device_name(device: torch.device | int | str | None = None) -> str:
    return f"NeuronCore {_C._physical_core_ids()[_index(device)]} (emulated on XLA:CPU)"


def get_device_capability(device: torch.device | int | str | None = None) -> tuple[int, int]:
    """(2, 0): a NeuronCore-v3 as on Trainium2, for code that branches on capabilities."""
    _index(device)
    return (2, 0)


#: A NeuronCore-v3's SBUF, the on-chip memory its engines read (128 partitions of 192 KiB; the
#: Trainium2 architecture guide for NKI): the nearest thing it has to CUDA's L2 cache.
_SBUF_BYTES = 128 * 192 * 1024


class _DeviceProperties:
    """What ``torch.cuda.get_device_properties`` gives that a NeuronCore has too. Each device is
    one NeuronCore, so ``multi_processor_count`` is 1; ``L2_cache_size`` is its SBUF in bytes;
    ``uuid`` is stable for the core's index on this host."""

    def __init__(self, index: int) -> None:
        self.name = get_device_name(index)
        self.index = index
        self.total_memory = _C._memory_capacity(index)
        self.major, self.minor = get_device_capability(index)
        self.multi_processor_count = 1
        self.L2_cache_size = _SBUF_BYTES
        self.is_integrated = False
        self.is_multi_gpu_board = False
        self.uuid = uuid.uuid5(uuid.NAMESPACE_OID, f"{socket.gethostname()}/neuron:{index}")

    def __repr__(self) -> str:
        return (
            f"_NeuronDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // 2**20}MB, multi_processor_count={self.multi_processor_count}, "
            f"uuid={self.uuid}, L2_cache_size={self.L2_cache_size // 2**20}MB)"
        )


def get_device_properties(device: torch.device | int | str | None = None) -> Any:
    """A core's properties, with CUDA's attribute names: ``name``, ``index``, ``total_memory`` (the
    HBM capacity in bytes), ``major``/``minor`` (the capability), ``multi_processor_count`` (1: a
    device is one NeuronCore), ``L2_cache_size`` (the SBUF, bytes), ``is_integrated``,
    ``is_multi_gpu_board`` and ``uuid`` (a ``uuid.UUID``, stable per host and core).

    Raises:
        RuntimeError: the device index is out of range (CUDA's "Invalid device id").
    """
    return _DeviceProperties(_index(device))
