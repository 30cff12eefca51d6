"""Storage buffers: binding them to tensors, moving them between host and cores, view programs.

The C++ core keeps each storage's buffer in its DataPtr context (decision 4); this module is the
Python side of that binding and of the transfers that are not ATen ops: host to device, device to
host, core to core, and the small cached executables that read or write one view of a storage.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx import _C
from torch_neuronx.runtime import cores, faults, launch_records, layout, queue, recording, storage_writes, sync_debug
from torch_neuronx.runtime.dtypes import CODE_OF, COMPLEX32, JAX_DTYPE_OF_CODE, torch_to_numpy, view_dtype
from torch_neuronx.runtime.executable import jit_on_core


def view_of(tensor: torch.Tensor, offset: int | None = None) -> layout.View:
    """The view ``tensor`` takes of its buffer (``offset``: its element offset in that buffer)."""
    start = tensor.storage_offset() if offset is None else offset
    return layout.View(view_dtype(tensor.dtype), tuple(tensor.shape), tuple(tensor.stride()), start)


def _keyed(view: layout.View, nbytes: int) -> tuple[layout.View, tuple[int, ...]]:
    """(the view a view program is keyed by, the program's offset arguments). A non-empty view
    shorter than its storage of ``nbytes`` could sit at other offsets of it: its program takes the
    offset at launch (the key's offset is None), so a loop over rows or a KV cache's growing position
    compiles one program; any other view's offset is a constant of its program (as is the offset
    of a view reaching past its storage's end, which XLA's ``dynamic_slice`` would clamp)."""
    count = nbytes // view.dtype.itemsize
    if math.prod(view.sizes) and layout.extent(view) < count and view.offset + layout.extent(view) <= count:
        return view._replace(offset=None), (view.offset,)
    return view, ()


def _placed(view: layout.View, offset: tuple[Any, ...]) -> layout.View:
    """A keyed view at the launch's offset (``offset``: the program's offset arguments)."""
    return view._replace(offset=offset[0]) if view.offset is None else view


# Bounded: each is an executable (see runtime/executable_cache.py); views of changing shapes are many.
@functools.lru_cache(maxsize=512)
def _read_program(buffer_dtype: np.dtype | None, nbytes: int, view: layout.View, device: int):
    """The program reading ``view`` (keyed by :func:`_keyed`): ``program(flat, *offset)``, or
    ``program(*offset)`` for a storage without a buffer."""
    del nbytes  # part of the cache key only: the buffer length is fixed by it
    if buffer_dtype is None:
        return jit_on_core(lambda *offset: layout.read(None, _placed(view, offset)), device)
    return jit_on_core(lambda flat, *offset: layout.read(flat, _placed(view, offset)), device)


@functools.lru_cache(maxsize=512)
def _write_program(buffer_dtype: np.dtype | None, nbytes: int, view: layout.View, device: int):
    """The program writing ``view`` (keyed by :func:`_keyed`): ``program(flat, value, *offset)``, or
    ``program(value, *offset)`` for a storage without a buffer; returns the new buffer."""
    if buffer_dtype is None:
        return jit_on_core(lambda value, *offset: layout.write(None, nbytes, value, _placed(view, offset)), device)
    return jit_on_core(lambda flat, value, *offset: layout.write(flat, nbytes, value, _placed(view, offset)), device)


def _storage_buffer(tensor: torch.Tensor) -> tuple[jax.Array | None, int, int, int]:
    """(buffer or None, its dtype code, the tensor's element offset in it, the buffer's bytes),
    with a pending buffer's recorded trace run first (runtime/recording.py), and the writes another
    thread announced into the tensor's bytes landed (runtime/storage_writes.py)."""
    if storage_writes.active:
        storage_writes.wait_for_writes_into([tensor])
    array, code, offset, nbytes = _C._storage_buffer(tensor)
    if type(array) is recording.PendingBuffer:
        recording.flush(array.device, "buffer access")
        array, code, offset, nbytes = _C._storage_buffer(tensor)
    return array, code, offset, nbytes


def _run_view_program(name: str, program: Any, device: int, *args: Any) -> jax.Array:
    """``program(*args)``, recorded as a launch named ``name`` while a profiling session runs."""
    dispatched = launch_records.now() if launch_records.active else 0
    value = program(*args)
    if dispatched:
        launch_records.launched(
            launch_records.program_id(program), name, "view", device, program, list(args), dispatched, value
        )
    return value


def read(tensor: torch.Tensor) -> jax.Array:
    """The value of a neuron tensor as a JAX array of its shape (asynchronous); complex64 for a
    complex32 tensor (runtime/layout.py)."""
    return _read_view(tensor, lambda view: view)


def read_stored(tensor: torch.Tensor) -> jax.Array:
    """A neuron tensor's elements as its storage holds them: its value (:func:`read`), or for a
    complex32 tensor its float16 (real, imag) pairs, shape ``(*tensor.shape, 2)``, bit for bit."""
    return _read_view(tensor, lambda view: layout.pairs_view(view) if view.dtype == COMPLEX32 else view)


def _read_view(tensor: torch.Tensor, viewed: Any) -> jax.Array:
    """The value of ``viewed(view)`` over ``tensor``'s buffer, where ``view`` is the tensor's own."""
    array, code, offset, nbytes = _storage_buffer(tensor)
    if faults.poisoned:
        faults.check_inputs(tensor.device.index, [array])
    view = viewed(view_of(tensor, offset))
    device = tensor.device.index
    keyed, offset = _keyed(view, nbytes)
    if array is None:
        return _run_view_program("neuron::read_view", _read_program(None, nbytes, keyed, device), device, *offset)
    if JAX_DTYPE_OF_CODE[code] == view.dtype and layout.covers_storage(view, array.shape[0]):
        value = array.reshape(view.sizes)
    else:
        program = _read_program(JAX_DTYPE_OF_CODE[code], nbytes, keyed, device)
        value = _run_view_program("neuron::read_view", program, device, array, *offset)
    if faults.open_checks:  # a value read from a buffer that may hold a fault's undefined result
        faults.note_written([array], [value])
    return value


def write(tensor: torch.Tensor, value: jax.Array) -> None:
    """``tensor[...] = value`` for a JAX value on ``tensor``'s core, cast and broadcast as needed.

    For a complex32 tensor, a float16 ``value`` of shape ``(*tensor.shape, 2)`` (no value of the
    tensor's own shape has it) is its (real, imag) pairs, as :func:`read_stored` and
    :func:`host_to_device` give them, and is written bit for bit.
    """
    storage_writes.wait_for_writes_into([tensor])  # before the lock, which their landing takes
    with storage_writes.locked():  # from reading the buffer to binding its successor: runtime/storage_writes.py
        _write(tensor, value)


def _write(tensor: torch.Tensor, value: jax.Array) -> None:
    array, code, offset, nbytes = _storage_buffer(tensor)
    if nbytes == 0:
        return
    view = view_of(tensor, offset)
    if view.dtype == COMPLEX32 and value.dtype == jnp.float16 and tuple(value.shape) == (*view.sizes, 2):
        view = layout.pairs_view(view)
    device = tensor.device.index
    count = nbytes // view.dtype.itemsize
    keyed, offset = _keyed(view, nbytes)
    whole = layout.covers_storage(view, count) and value.dtype == view.dtype and tuple(value.shape) == view.sizes
    if faults.poisoned:  # an undefined buffer may be overwritten whole, not in part
        faults.check_inputs(device, [value] if whole else [array, value])
    if whole:
        flat = value.reshape(-1)
    elif array is None:
        program = _write_program(None, nbytes, keyed, device)
        flat = _run_view_program("neuron::write_view", program, device, value, *offset)
    else:
        program = _write_program(JAX_DTYPE_OF_CODE[code], nbytes, keyed, device)
        flat = _run_view_program("neuron::write_view", program, device, array, value, *offset)
    _C._bind_buffer(tensor, flat, CODE_OF[tensor.dtype])
    if faults.open_checks:
        faults.note_written([value] if whole else [array, value], [flat])
    queue.note_launch(device, flat)


def share_whole(source: torch.Tensor, destination: torch.Tensor) -> bool:
    """``destination.copy_(source)`` without running anything, where that is a plain copy of a whole
    buffer: both tensors are contiguous views of their whole storage, of one dtype and shape, on one
    core. ``destination``'s storage then holds ``source``'s buffer. Buffers are immutable (every write
    binds a new one), so the two storages stay independent. Returns False, doing nothing, otherwise.
    """
    if source.dtype != destination.dtype or source.shape != destination.shape or source.device != destination.device:
        return False
    storage_writes.wait_for_writes_into([source, destination])  # before the lock, which their landing takes
    with storage_writes.locked():  # a bind racing another thread's partial write: runtime/storage_writes.py
        return _share_whole(source, destination)


def _share_whole(source: torch.Tensor, destination: torch.Tensor) -> bool:
    array, code, offset, nbytes = _storage_buffer(source)
    source_view = view_of(source, offset)
    if (
        array is None
        or JAX_DTYPE_OF_CODE[code] != JAX_DTYPE_OF_CODE[CODE_OF[source.dtype]]
        or not layout.covers_storage(source_view, nbytes // source_view.dtype.itemsize)
    ):
        return False
    _, _, destination_offset, nbytes = _storage_buffer(destination)
    destination_view = view_of(destination, destination_offset)
    if not layout.covers_storage(destination_view, nbytes // destination_view.dtype.itemsize):
        return False
    _C._bind_buffer(destination, array, code)
    return True


def host_to_device(source: torch.Tensor, device: int) -> jax.Array:
    """A copy of a CPU tensor on ``neuron:device`` (never aliasing the host memory); a complex32
    tensor's copy is its float16 (real, imag) pairs, shape ``(*source.shape, 2)`` (see :func:`write`)."""
    dispatched = launch_records.now() if launch_records.active else 0
    if source.dim() > 64:  # NumPy's and JAX's limit; the words of the CPU's and CUDA's reductions
        raise RuntimeError(
            f"neuron: only tensors with up to 64 dims are supported; a tensor of {source.dim()} cannot be copied "
            "to the device (reshape it to fewer dimensions first)"
        )
    host = torch_to_numpy(source)
    if host.dtype == COMPLEX32:
        host = host[..., None].view(np.float16)
    value = jax.device_put(host, cores.core(device))
    if dispatched:
        launch_records.copied("Memcpy HtoD", device, dispatched, value, source.nbytes)
    return value


class _OnCore:
    """A CPU tensor that presents itself to DLPack as memory of core ``core``: on the emulated device
    a core's memory is host memory, so JAX can wrap the tensor's memory as that core's buffer."""

    def __init__(self, tensor: torch.Tensor, core: int) -> None:
        self._tensor = tensor
        self._core = core

    def __dlpack__(self, stream: object = None, **_: object) -> object:
        return self._tensor.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, self._core)  # DLPack's kDLCPU, the core's PJRT device


#: dtypes whose CPU tensors both torch's and JAX's DLPack take.
_ADOPTABLE = frozenset(
    {torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8}
)


#: Host memory XLA's CPU client wraps without a copy is aligned to this many bytes (it copies, on a
#: slow path, anything less aligned).
ADOPTABLE_ALIGNMENT = 64


def empty_adoptable(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised contiguous CPU tensor that :func:`host_to_device_adopting` can turn into a
    device buffer without a copy: ``ADOPTABLE_ALIGNMENT``-aligned. numpy allocates it, since numpy
    asks the kernel for transparent huge pages on large arrays: writing 64 MiB into fresh memory then
    costs about half of what it costs in memory from torch's CPU allocator (measured here)."""
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + ADOPTABLE_ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ADOPTABLE_ALIGNMENT
    return torch.from_numpy(raw[start : start + nbytes]).view(dtype).reshape(shape)


def host_to_device_adopting(source: torch.Tensor, device: int) -> jax.Array:
    """``source``'s memory as a buffer of ``neuron:device``, without a copy where DLPack allows it
    (a contiguous, ``ADOPTABLE_ALIGNMENT``-aligned tensor of a common dtype, as
    :func:`empty_adoptable` makes), else a copy (:func:`host_to_device`).

    The caller hands ``source`` over: it must be a tensor nobody else holds and that is never written
    again, since the device buffer, which is immutable, is its memory. Host-staged collectives use it
    for the results gloo wrote into host copies that they own.
    """
    if (
        source.dtype not in _ADOPTABLE
        or not source.is_contiguous()
        or source.data_ptr() % ADOPTABLE_ALIGNMENT
        or source.is_conj()
        or source.is_neg()
    ):
        return host_to_device(source, device)
    dispatched = launch_records.now() if launch_records.active else 0
    target = cores.core(device)
    value = jax.dlpack.from_dlpack(_OnCore(source.detach(), target.local_hardware_id))
    if value.devices() != {target}:
        value = jax.device_put(value, target)
    if dispatched:
        launch_records.copied("Memcpy HtoD", device, dispatched, value, source.nbytes)
    return value


def device_to_host(tensor: torch.Tensor, *, synchronizing: bool = True) -> np.ndarray:
    """The value of a neuron tensor on the host (a complex32 tensor's as a numpy array of
    ``COMPLEX32``, its bytes exactly). A synchronisation point: waits for the tensor's core and raises
    any pending device fault first, and the fault of another core's op its value was copied from.

    ``synchronizing=False`` for reads that do not wait on the hardware (a ``non_blocking`` copy, a
    collective's staging): they do not count for ``torch.neuron.set_sync_debug_mode``.

    Raises:
        RuntimeError: a pending device fault; or, in sync debug mode "error", the synchronisation.
    """
    device = tensor.device.index
    if synchronizing:
        sync_debug.check(
            lambda: f"a host read of a {tensor.dtype} tensor of shape {tuple(tensor.shape)} on neuron:{device}"
        )
    recording.flush(device, "host read")
    value = read_stored(tensor)
    queue.synchronize(device, "neuronHostReadSynchronize")
    if faults.open_checks:  # a value copied from another core's op: that core's fault, if it faulted
        faults.raise_depended_on(value)
    dispatched = launch_records.now() if launch_records.active else 0
    host = np.asarray(value)
    if tensor.dtype == torch.complex32:
        host = host.view(COMPLEX32)[..., 0]
    if dispatched:
        launch_records.copied("Memcpy DtoH", device, dispatched, None, host.nbytes)
    return host


def derived(sources: list[jax.Array], value: jax.Array) -> jax.Array:
    """``value``, computed from ``sources`` outside a launch (a copy's cast): noted as depending on
    the pending device checks they depend on, so a fault poisons it too (runtime/faults.py)."""
    if faults.open_checks:
        faults.note_written(sources, [value])
    return value


def transfer(array: jax.Array, device: int) -> jax.Array:
    """``array`` on ``neuron:device`` (the same array when it is there already)."""
    array = recording.resolved(array, "transfer between cores")
    target = cores.core(device)
    if array.devices() == {target}:
        return array
    dispatched = launch_records.now() if launch_records.active else 0
    moved = jax.device_put(array, target)
    if dispatched:
        launch_records.copied("Memcpy DtoD", device, dispatched, moved, moved.nbytes)
    if faults.open_checks:  # the copy carries what the source's value depends on
        faults.note_written([array], [moved])
    return moved


def resize(array: jax.Array, dtype_code: int, nbytes: int) -> jax.Array:
    """The buffer of a storage resized to ``nbytes``: truncated, or zero-extended."""
    array = recording.resolved(array, "resize")
    itemsize = JAX_DTYPE_OF_CODE[dtype_code].itemsize
    count, remainder = divmod(nbytes, itemsize)
    if remainder:
        raise RuntimeError(
            f"neuron: cannot resize a storage holding {JAX_DTYPE_OF_CODE[dtype_code]} elements to {nbytes} bytes"
        )
    if count <= array.shape[0]:
        return array[:count]
    return jnp.concatenate([array, jnp.zeros((count - array.shape[0],), array.dtype)])
