"""Strided views of an allocation: which storage dimension each view dimension walks, a view as one
strided slice of the storage's array (read with ``lax.slice``, written with
``dynamic_update_slice``: one operation each), and the strides of a reshape without a copy."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from torch_neuronx.runtime import layout


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    return layout.contiguous_strides(tuple(shape))


def storage_dims(storage_shape: tuple[int, ...], offset: int, sizes: tuple[int, ...], strides: tuple[int, ...]):
    """For each view dimension, the storage dimension it walks (None for size-1 and broadcast
    dimensions), or None when the view is not a product of per-dimension strided slices."""
    sstrides = contiguous_strides(storage_shape)
    coords, rest = [], offset
    for st in sstrides:
        coords.append(rest // st if st else 0)
        rest = rest % st if st else rest
    mapping: list[int | None] = [None] * len(sizes)
    used: set[int] = set()
    for k, (n, s) in enumerate(zip(sizes, strides, strict=True)):
        if n == 1 or s == 0:
            continue
        for d, st in enumerate(sstrides):
            if d in used or s <= 0 or s % st:
                continue
            step = s // st
            if coords[d] + step * (n - 1) < storage_shape[d]:
                mapping[k] = d
                used.add(d)
                break
        else:
            return None
    return mapping


class SlicePlan:
    """A view that is one strided slice of its storage's array: per storage dimension, the start, and
    the view dimension (with its step) that walks it, if any."""

    __slots__ = ("counts", "dims", "shape", "starts", "steps", "view_shape")

    def __init__(self, storage_shape, starts, dims, steps, counts, view_shape) -> None:
        self.shape = storage_shape
        self.starts = starts  # per storage dim
        self.dims = dims  # per storage dim: the view dim walking it, or None
        self.steps = steps  # per storage dim
        self.counts = counts  # per storage dim: elements taken (1 when no view dim walks it)
        self.view_shape = view_shape

    @property
    def writable(self) -> bool:
        """No view dimension repeats elements (a broadcast view cannot be written)."""
        walked = {d for d in self.dims if d is not None}
        return all(n == 1 or k in walked for k, n in enumerate(self.view_shape))

    def _walked(self) -> list[int]:
        return [d for d in range(len(self.shape)) if self.dims[d] is not None]

    @property
    def whole(self) -> bool:
        """The view is the whole storage in row-major order (possibly with other size-1 dimensions)."""
        if any(self.starts) or tuple(self.counts) != self.shape or any(st != 1 for st in self.steps):
            return False
        walked = [self.dims[d] for d in self._walked()]
        return walked == sorted(walked) and self.writable

    def read(self, value: jnp.ndarray) -> jnp.ndarray:
        if self.whole:
            return value.reshape(self.view_shape)
        limits = [s + (n - 1) * st + 1 for s, n, st in zip(self.starts, self.counts, self.steps, strict=True)]
        block = jax.lax.slice(value, self.starts, limits, self.steps)
        walked = self._walked()
        block = block.reshape([self.counts[d] for d in walked])
        order = sorted(range(len(walked)), key=lambda i: self.dims[walked[i]])
        block = jnp.transpose(block, order) if order != list(range(len(walked))) else block
        present = {self.dims[d] for d in walked}
        restored = [n if k in present else 1 for k, n in enumerate(self.view_shape)]
        return jnp.broadcast_to(block.reshape(restored), self.view_shape)

    def write(self, value: jnp.ndarray, data: jnp.ndarray) -> jnp.ndarray:
        if self.whole:
            return data.reshape(self.shape).astype(value.dtype)
        walked = self._walked()
        by_view = sorted(walked, key=lambda d: self.dims[d])
        data = data.reshape([self.view_shape[self.dims[d]] for d in by_view])
        position = {d: i for i, d in enumerate(by_view)}
        data = jnp.transpose(data, [position[d] for d in walked]) if by_view != walked else data
        data = data.reshape(self.counts).astype(value.dtype)
        if all(st == 1 for st in self.steps):
            return jax.lax.dynamic_update_slice(value, data, self.starts)
        index = tuple(
            slice(s, s + (n - 1) * st + 1, st) for s, n, st in zip(self.starts, self.counts, self.steps, strict=True)
        )
        return value.at[index].set(data)


def slice_plan(storage_shape, offset, sizes, strides) -> SlicePlan | None:
    """The :class:`SlicePlan` of a strided view, or None when it is not one strided slice."""
    if math.prod(sizes) == 0:
        return None
    mapping = storage_dims(storage_shape, offset, sizes, strides)
    if mapping is None:
        return None
    sstrides = contiguous_strides(storage_shape)
    starts, rest = [], offset
    for st in sstrides:
        starts.append(rest // st)
        rest %= st
    dims: list[int | None] = [None] * len(storage_shape)
    steps = [1] * len(storage_shape)
    counts = [1] * len(storage_shape)
    for k, d in enumerate(mapping):
        if d is not None:
            dims[d] = k
            steps[d] = strides[k] // sstrides[d]
            counts[d] = sizes[k]
    return SlicePlan(tuple(storage_shape), starts, dims, steps, counts, tuple(sizes))


def reshape_strides(old_shape, old_strides, new_shape) -> tuple[int, ...] | None:
    """Strides viewing a tensor of ``old_shape``/``old_strides`` as ``new_shape`` without a copy, or
    None (PyTorch's computeStride algorithm, ATen/TensorUtils.cpp)."""
    if math.prod(old_shape) == 0:
        return contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_strides[-1] if old_strides else 1
    tensor_numel, view_numel = 1, 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (
            old_shape[tensor_d - 1] != 1 and old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel, view_numel = 1, 1
    if view_d != -1:
        return None
    return tuple(new_strides)
