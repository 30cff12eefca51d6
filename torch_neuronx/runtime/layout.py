"""Tensors over flat storage buffers, inside an executable (decision 4).

Every storage's bytes are one flat 1-D array (its *buffer*), typed as the dtype that last wrote the
whole storage. A tensor is a view of it: (dtype, sizes, strides, storage offset). An executable
reads its inputs with :func:`read` and writes in-place results back with :func:`write`; both run at
trace time, so a view costs nothing beyond the reshapes and slices XLA fuses into the kernel.

A view whose strides nest (each stride a multiple of the next, dimensions not overlapping; slices,
steps, transposes, permutes, narrow, select, diagonal) becomes a reshape of a contiguous region into
a grid, a slice of the grid and a transpose. Any other view becomes a gather with a constant index.

A view's offset is a Python int (a constant of the executable) or a traced integer scalar (a runtime
input, so one executable serves every offset): the view's extent is then cut out of the buffer with
``jax.lax.dynamic_slice`` and read as a view at offset 0 of it (written back with
``dynamic_update_slice``). The caller checks on the host that the view lies inside the storage
(``check_in_bounds`` in csrc/runtime/NeuronCallSignature.cpp), since XLA clamps a start that does not.

A complex32 view (dtype ``COMPLEX32``: XLA has no complex32) is read and written as the float16 view
of its (real, imag) pairs (:func:`pairs_view`, ``view_as_real``'s layout): reading gives complex64,
exactly; writing rounds each part to float16, to nearest even (:func:`complex32_pairs`). This is the
one place where complex32 values meet their storage, so every lowering computes them as complex64.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from torch_neuronx.runtime.dtypes import COMPLEX32, convert
from torch_neuronx.runtime.spans import INTERNAL_OVERLAP_MESSAGE, refers_twice


class View(NamedTuple):
    """A tensor's view of its storage: element dtype, sizes, strides (in elements), offset (an int,
    or a traced integer scalar given at launch)."""

    dtype: np.dtype
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: Any


def extent(view: View) -> int:
    """The elements from a non-empty view's first element to its last, both included."""
    return 1 + sum((size - 1) * stride for size, stride in zip(view.sizes, view.strides, strict=True))


def _static(offset: Any) -> bool:
    return isinstance(offset, (int, np.integer))


def bitcast(flat: jax.Array, dtype: np.dtype) -> jax.Array:
    """Reinterprets the bytes of a 1-D array as ``dtype`` (1-D; the length scales by item size)."""
    dtype = np.dtype(dtype)
    source = np.dtype(flat.dtype)
    if source == dtype:
        return flat
    if source == np.bool_:
        flat, source = flat.astype(jnp.uint8), np.dtype(jnp.uint8)
        if dtype == source:
            return flat
    if dtype == np.bool_:
        return bitcast(flat, np.dtype(jnp.uint8)) != 0
    if source.kind == "c":  # complex64 (the device's only complex dtype): its float32 (real, imag) pairs
        parts = jnp.stack([jnp.real(flat), jnp.imag(flat)], axis=-1).reshape(-1)
        return bitcast(parts, dtype)
    if dtype.kind == "c":
        parts = bitcast(flat, np.dtype(jnp.float32)).reshape(-1, 2)
        return jax.lax.complex(parts[:, 0], parts[:, 1])
    if source.itemsize == dtype.itemsize:
        return jax.lax.bitcast_convert_type(flat, dtype)
    if source.itemsize > dtype.itemsize:
        return jax.lax.bitcast_convert_type(flat, dtype).reshape(-1)
    ratio = dtype.itemsize // source.itemsize
    return jax.lax.bitcast_convert_type(flat.reshape(-1, ratio), dtype)


def pairs_view(view: View) -> View:
    """A complex32 view as the float16 view of its (real, imag) pairs: sizes ``(*sizes, 2)``,
    strides and offset doubled (``torch.view_as_real``'s layout)."""
    strides = (*(2 * stride for stride in view.strides), 1)
    return View(np.dtype(jnp.float16), (*view.sizes, 2), strides, view.offset * 2)


def complex32_pairs(value: jax.Array) -> jax.Array:
    """The float16 (real, imag) pairs (shape ``(*value.shape, 2)``) of a value stored as complex32:
    each part rounded to float16, to nearest even, as CUDA's ``c10::complex<Half>``."""
    wide = convert(value, jnp.complex64)
    return jnp.stack([jnp.real(wide), jnp.imag(wide)], axis=-1).astype(jnp.float16)


def _grid(view: View) -> tuple[list[int], list[int], list[int]] | None:
    """For a nesting view: (grid shape, view dims in grid order, their sizes); None otherwise.

    Dimensions of size 1 and stride-0 (expanded) dimensions are left out: they are restored by a
    reshape and a broadcast.
    """
    dims = [d for d, (size, stride) in enumerate(zip(view.sizes, view.strides, strict=True)) if size > 1 and stride > 0]
    dims.sort(key=lambda d: -view.strides[d])
    if not dims:
        return [1], [], []
    grid = [view.sizes[dims[0]]]
    for outer, inner in zip(dims, dims[1:], strict=False):
        outer_stride, inner_stride = view.strides[outer], view.strides[inner]
        if outer_stride % inner_stride or outer_stride < inner_stride * view.sizes[inner]:
            return None
        grid.append(outer_stride // inner_stride)
    grid.append(view.strides[dims[-1]])
    return grid, dims, [view.sizes[d] for d in dims]


def _region(elements: jax.Array, offset: int, length: int) -> jax.Array:
    """``elements[offset : offset + length]``, zero-padded past the end (a grid may overhang)."""
    available = elements.shape[0] - offset
    if length <= available:
        return jax.lax.slice(elements, (offset,), (offset + length,))
    return jnp.pad(jax.lax.slice(elements, (offset,), (elements.shape[0],)), (0, length - available))


def positions(view: View) -> np.ndarray:
    """The storage position (in elements) of each element of ``view``: an int64 array of its sizes."""
    index = np.full((), view.offset, dtype=np.int64)
    for size, stride in zip(view.sizes, view.strides, strict=True):
        index = index[..., None] + np.arange(size, dtype=np.int64) * stride
    return index


def read(flat: jax.Array | None, view: View) -> jax.Array:
    """The value of ``view`` over the buffer ``flat`` (None: a never-written storage, zeros); a
    complex32 view's value is complex64."""
    if view.dtype == COMPLEX32:
        pairs = read(flat, pairs_view(view)).astype(jnp.float32)
        return jax.lax.complex(pairs[..., 0], pairs[..., 1])
    shape = tuple(view.sizes)
    if flat is None or math.prod(shape) == 0:
        return jnp.zeros(shape, view.dtype)
    elements = bitcast(flat, view.dtype)
    if not _static(view.offset):
        elements = jax.lax.dynamic_slice(elements, (view.offset,), (extent(view),))
        view = view._replace(offset=0)
    layout = _grid(view)
    if layout is None:
        return elements[positions(view)]
    grid, dims, sizes = layout
    block = _region(elements, view.offset, math.prod(grid)).reshape(grid)
    block = block[tuple(slice(0, size) for size in sizes) + (0,)]
    # grid order -> the view's dimension order, with size-1 and expanded dimensions restored
    block = jnp.transpose(block, np.argsort(dims)) if dims else block.reshape(())
    kept = sorted(dims)
    restored = [view.sizes[d] if d in kept else 1 for d in range(len(shape))]
    return jnp.broadcast_to(block.reshape(restored), shape)


def covers_storage(view: View, storage_elements: int) -> bool:
    """True when ``view`` is the whole storage, contiguous from offset 0."""
    if not _static(view.offset) or view.offset != 0 or math.prod(view.sizes) != storage_elements:
        return False
    expected = 1
    for size, stride in reversed(list(zip(view.sizes, view.strides, strict=True))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def write(flat: jax.Array | None, nbytes: int, value: jax.Array, view: View) -> jax.Array:
    """The new buffer after ``view[...] = value`` (value cast and broadcast to the view).

    The result is typed ``view.dtype`` (float16 for a complex32 view: its pairs); the caller records
    the view's dtype as the buffer's new dtype.
    """
    if view.dtype == COMPLEX32:
        return write(flat, nbytes, complex32_pairs(value), pairs_view(view))
    shape = tuple(view.sizes)
    value = jnp.broadcast_to(convert(value, view.dtype), shape)
    count, remainder = divmod(nbytes, view.dtype.itemsize)
    if remainder:
        raise RuntimeError(f"neuron: a storage of {nbytes} bytes cannot be written as {view.dtype}")
    if math.prod(shape) == 0:
        return bitcast(flat, view.dtype) if flat is not None else jnp.zeros((count,), view.dtype)
    if refers_twice(view.sizes, view.strides):
        raise RuntimeError(INTERNAL_OVERLAP_MESSAGE)
    if covers_storage(view, count):  # never for an offset given at launch
        return value.reshape(-1)
    elements = bitcast(flat, view.dtype) if flat is not None else jnp.zeros((count,), view.dtype)
    if not _static(view.offset):
        length = extent(view)
        region = jax.lax.dynamic_slice(elements, (view.offset,), (length,))
        region = write(region, length * view.dtype.itemsize, value, view._replace(offset=0))
        return jax.lax.dynamic_update_slice(elements, region, (view.offset,))
    layout = _grid(view)
    if layout is None:
        return elements.at[positions(view)].set(value)
    grid, dims, sizes = layout
    length = math.prod(grid)
    kept_length = min(length, count - view.offset)
    block = _region(elements, view.offset, length).reshape(grid)
    placed = jnp.transpose(value.reshape([view.sizes[d] for d in sorted(dims)]), np.argsort(np.argsort(dims)))
    placed = placed.reshape(sizes) if dims else placed.reshape(())
    block = block.at[tuple(slice(0, size) for size in sizes) + (0,)].set(placed)
    region = jax.lax.slice(block.reshape(-1), (0,), (kept_length,))
    return jax.lax.dynamic_update_slice(elements, region, (view.offset,))


def dense_order(sizes: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...] | None:
    """The dimensions of a dense, non-overlapping layout from outermost to innermost (a permutation
    of the dimensions), or None for any other layout (gaps, overlaps, no elements)."""
    if math.prod(sizes) == 0:
        return None
    order = sorted(range(len(sizes)), key=lambda d: (-strides[d], d))
    expected = 1
    for d in reversed(order):
        if sizes[d] != 1 and strides[d] != expected:
            return None
        expected *= sizes[d]
    return tuple(order)


def contiguous_strides(sizes: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))
