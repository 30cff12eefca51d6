"""Tensors of an NKI kernel: views of a storage (HBM, SBUF or PSUM), with NKI's indexing rules.

A view is (sizes, strides, offset) over its storage's flat elements, like ``NkiTensor``'s own
description, read and written with the runtime's strided-view code (runtime/layout.py: slices and
transposes where the strides nest, a constant gather otherwise). Indexing with ``nl.arange``
expressions that leave a dimension becomes a gather view that remembers which elements are out of
bounds; such an access is legal only under a ``mask`` that excludes them (NKI's
err_tensor_access_out_of_bound otherwise, raised when the access happens).

Compute is not defined here: :class:`TensorBase` is extended by ``nki._core.compute.NkiTensor``
with the arithmetic operators.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from nki import errors
from nki._core import dtypes
from nki._core.index import DynamicSlice, IndexExpr, MaskExpr
from nki._core.memory import MemoryRegion, Storage
from nki._core.strides import SlicePlan, contiguous_strides, reshape_strides, slice_plan, storage_dims
from torch_neuronx.runtime import layout


class TensorBase:
    """A view of a storage. ``gather`` (flat element indices, one per element) replaces the strided
    description for views made by indexing with expressions that leave a dimension; ``oob`` then
    records, per tensor dimension, the indices taken and the dimension's size."""

    __slots__ = ("dtype", "gather", "offset", "oob", "shape", "storage", "strides")

    def __init__(
        self,
        storage: Storage,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        offset: int,
        dtype: np.dtype | None = None,
        gather: np.ndarray | None = None,
        oob: list[tuple[int, np.ndarray, int]] | None = None,
    ) -> None:
        self.storage = storage
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.offset = int(offset)
        self.dtype = np.dtype(dtype if dtype is not None else storage.dtype)
        self.gather = gather
        self.oob = oob

    @classmethod
    def whole(cls, storage: Storage) -> TensorBase:
        return cls(storage, storage.shape, contiguous_strides(storage.shape), 0)

    def _derive(self, shape, strides, offset, gather=None, oob=None, dtype=None) -> TensorBase:
        return type(self)(self.storage, shape, strides, offset, dtype or self.dtype, gather, oob)

    # -- what NKI tensors expose -----------------------------------------------------------------------

    @property
    def buffer(self) -> MemoryRegion:
        return self.storage.region

    @property
    def name(self) -> str:
        return self.storage.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def on_chip(self) -> bool:
        return self.storage.region.on_chip

    def is_contiguous(self) -> bool:
        """Whether the view covers its elements in row-major order without gaps (the partition
        dimension of an on-chip tensor is skipped: partitions are independent memories)."""
        if self.gather is not None:
            return False
        dims = range(1 if self.on_chip else 0, self.ndim)
        expected = 1
        for d in reversed(dims):
            if self.shape[d] != 1 and self.strides[d] != expected:
                return False
            expected *= self.shape[d]
        return True

    def get_pattern(self) -> list[list[int]]:
        """The view's access pattern ``[[stride, count], ...]``."""
        return [[s, n] for s, n in zip(self.strides, self.shape, strict=True)]

    def __repr__(self) -> str:
        return (
            f"NkiTensor({self.name or '<tile>'}, {self.dtype}[{', '.join(map(str, self.shape))}], {self.buffer.value})"
        )

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self):
        raise TypeError("NKI tensors are not iterable; index them (t[i]) in a loop over range(t.shape[0])")

    def __bool__(self) -> bool:
        errors.dynamic_control_flow_not_supported()

    # -- partitions ------------------------------------------------------------------------------------

    def partition_view_dim(self) -> int | None:
        """The view dimension that walks the storage's partition dimension (on-chip tensors), None when
        the view fixes one partition or cannot be described per dimension."""
        if self.gather is not None or not self.on_chip:
            return 0 if self.gather is not None else None
        mapping = storage_dims(self.storage.shape, self.offset, self.shape, self.strides)
        if mapping is None:
            return None
        return next((k for k, d in enumerate(mapping) if d == self.storage.par_axis), None)

    # -- indexing --------------------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> TensorBase:
        from nki._core.index import MGrid

        key = tuple(key) if isinstance(key, MGrid) else key
        keys = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, IndexExpr) for k in keys):
            return self._advanced(keys)
        return self._basic(keys)

    def _normalized(self, keys: tuple[Any, ...]) -> list[Any]:
        if any(k is None for k in keys):
            errors.not_supported("indexing an NKI tensor with None (new axes); use expand_dims")
        if sum(k is Ellipsis for k in keys) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if Ellipsis in keys:
            at = keys.index(Ellipsis)
            fill = self.ndim - (len(keys) - 1)
            keys = keys[:at] + (slice(None),) * fill + keys[at + 1 :]
        if len(keys) > self.ndim:
            raise IndexError(f"too many indices for tensor `{self.name}` of {self.ndim} dimension(s): {len(keys)}")
        return list(keys) + [slice(None)] * (self.ndim - len(keys))

    def _basic(self, keys: tuple[Any, ...]) -> TensorBase:
        keys = self._normalized(keys)
        partition = self.partition_view_dim() if self.on_chip else None
        sizes, strides, offset = [], [], self.offset
        picks: list[tuple[int, Any]] = []  # gather views: numpy indexing of the index array
        kept_ints: list[int] = []
        for dim, k in enumerate(keys):
            size, stride = self.shape[dim], self.strides[dim]
            if isinstance(k, DynamicSlice):
                k = k.as_slice()
            if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer, slice)):
                errors.not_supported(f"indexing tensor `{self.name}` with a {type(k).__name__} (runtime indices)")
            if isinstance(k, slice):
                start, stop, step = self._slice_bounds(dim, k)
                count = max(0, -(-(stop - start) // step))
                sizes.append(count)
                strides.append(stride * step)
                offset += start * stride
                picks.append((dim, slice(start, stop, step)))
                continue
            index = int(k) + size if int(k) < 0 else int(k)
            if not 0 <= index < size:
                errors.tensor_access_out_of_bound(self.name, dim, int(k), int(k), size)
            offset += index * stride
            if self.on_chip and dim == partition:
                sizes.append(1)  # NKI: an integer index on the partition dimension keeps it (size 1)
                strides.append(stride)
                picks.append((dim, slice(index, index + 1)))
            else:
                kept_ints.append(len(sizes))
                sizes.append(None)
                strides.append(None)
                picks.append((dim, index))
        if self.on_chip and sum(s is not None for s in sizes) < 2 and kept_ints:
            # NKI: indexing an on-chip tensor always gives a tile of at least 2 dimensions.
            last = kept_ints[-1]
            sizes[last], strides[last] = 1, self.strides[last]
            picks[last] = (last, slice(picks[last][1], picks[last][1] + 1))
        shape = tuple(s for s in sizes if s is not None)
        new_strides = tuple(s for s in strides if s is not None)
        if self.gather is None:
            return self._derive(shape, new_strides, offset)
        index = tuple(p for _, p in picks)
        oob = [(d, values[index], n) for d, values, n in self.oob] if self.oob else None
        return self._derive(shape, new_strides, offset, gather=self.gather[index], oob=oob)

    def _slice_bounds(self, dim: int, k: slice) -> tuple[int, int, int]:
        size = self.shape[dim]
        step = 1 if k.step is None else int(k.step)
        if step <= 0:
            errors.not_supported(f"a slice with step {step} on tensor `{self.name}`")
        start = 0 if k.start is None else int(k.start)
        stop = size if k.stop is None else int(k.stop)
        start = start + size if start < 0 else start
        stop = stop + size if stop < 0 else stop
        if start < 0 or stop > size or start > stop:
            errors.tensor_access_out_of_bound(self.name, dim, start, stop - 1, size)
        return start, stop, step

    def _advanced(self, keys: tuple[Any, ...]) -> TensorBase:
        if any(not isinstance(k, (IndexExpr, int, np.integer)) or isinstance(k, bool) for k in keys):
            errors.unsupported_mixing_basic_advanced_tensor_indexing()
        if len(keys) != self.ndim:
            errors.unsupported_mixing_basic_advanced_tensor_indexing()
        exprs = [k if isinstance(k, IndexExpr) else IndexExpr((), int(k)) for k in keys]
        if any(0 < e.ndim < 2 for e in exprs):
            errors.one_d_arange_not_supported(self.name)
        shape = tuple(np.broadcast_shapes(*(e.shape for e in exprs)))
        ndim = len(shape)
        in_bounds = all(0 <= e.bounds()[0] and e.bounds()[1] < n for e, n in zip(exprs, self.shape, strict=True))
        if self.gather is None and in_bounds and all(e.affine for e in exprs):
            strides = [0] * ndim
            offset = self.offset
            for e, stride in zip(exprs, self.strides, strict=True):
                offset += stride * e.const
                coef = (0,) * (ndim - e.ndim) + e.coef
                eshape = (1,) * (ndim - e.ndim) + e.shape
                for axis in range(ndim):
                    if eshape[axis] > 1:
                        strides[axis] += stride * coef[axis]
            return self._derive(shape, tuple(strides), offset)
        values = [np.broadcast_to(e.values(), shape) for e in exprs]
        oob = [
            (d, v, n)
            for d, (v, n) in enumerate(zip(values, self.shape, strict=True))
            if (v < 0).any() or (v >= n).any()
        ]
        clipped = [np.clip(v, 0, n - 1) for v, n in zip(values, self.shape, strict=True)]
        if self.gather is None:
            flat = self.offset + sum(c * s for c, s in zip(clipped, self.strides, strict=True))
            flat = np.broadcast_to(np.asarray(flat, dtype=np.int64), shape)
        else:
            flat = self.gather[tuple(clipped)]
        return self._derive(shape, contiguous_strides(shape), 0, gather=np.array(flat), oob=oob or None)

    # -- access ----------------------------------------------------------------------------------------

    def flat_indices(self) -> np.ndarray:
        """The storage element of every view element (view dtype units)."""
        if self.gather is not None:
            return self.gather
        index = np.full((), self.offset, dtype=np.int64)
        for size, stride in zip(self.shape, self.strides, strict=True):
            index = index[..., None] + np.arange(size, dtype=np.int64) * stride
        return index

    def _view(self) -> layout.View:
        return layout.View(self.dtype, self.shape, self.strides, self.offset)

    def check_bounds(self, mask: np.ndarray | None) -> None:
        """NKI's err_tensor_access_out_of_bound for elements of a gather view outside the tensor that
        the access does not mask out."""
        if not self.oob:
            return
        for dim, values, size in self.oob:
            bad = (values < 0) | (values >= size)
            if mask is not None:
                bad = bad & mask
            if bad.any():
                taken = values if mask is None else values[mask]
                errors.tensor_access_out_of_bound(self.name, dim, int(taken.min()), int(taken.max()), size)

    def _valid(self, mask: np.ndarray | None) -> np.ndarray | None:
        """The elements an access touches: the mask, less any out-of-bound element."""
        valid = mask
        if self.oob:
            inside = np.ones(self.shape, dtype=bool)
            for _, values, size in self.oob:
                inside &= (values >= 0) & (values < size)
            valid = inside if valid is None else valid & inside
        return valid

    def _slices(self) -> SlicePlan | None:
        """The view as one strided slice of the storage's array, when it is one (the common case:
        basic indexing, affine nl.arange indexing, permutes), else None."""
        if self.gather is not None or self.dtype != self.storage.dtype:
            return None
        return slice_plan(self.storage.shape, self.offset, self.shape, self.strides)

    def read(self, mask: np.ndarray | None = None) -> jnp.ndarray:
        """The view's elements (``mask``: elements left out read as uninitialised memory)."""
        self.check_bounds(mask)
        plan = self._slices()
        if plan is not None:
            value = plan.read(self.storage.value)
        elif self.gather is None:
            value = layout.read(self.storage.flat, self._view())
        else:
            elements = layout.bitcast(self.storage.flat, self.dtype)
            value = jnp.take(elements, jnp.asarray(self.gather.reshape(-1))).reshape(self.shape)
        valid = self._valid(mask)
        if valid is not None and not valid.all():
            value = jnp.where(jnp.asarray(valid), value, jnp.asarray(dtypes.fill_value(self.dtype), self.dtype))
        return value

    def write(self, value: Any, mask: np.ndarray | None = None) -> None:
        """``view[...] = value`` (cast to the view's dtype, broadcast to its shape); ``mask`` limits
        the elements written."""
        self.check_bounds(mask)
        storage = self.storage
        value = jnp.broadcast_to(cast(value, self.dtype), self.shape)
        valid = self._valid(mask)
        if valid is not None and not valid.any():
            return
        plan = self._slices()
        if valid is not None and not valid.all() and self.gather is None:
            value = jnp.where(jnp.asarray(valid), value, self.read())
        if plan is not None and plan.writable:
            storage.value = plan.write(storage.value, value)
        elif self.gather is not None:
            index = self.gather if valid is None else np.where(valid, self.gather, storage.size + 1)
            elements = layout.bitcast(storage.flat, self.dtype)
            updated = elements.at[jnp.asarray(index.reshape(-1))].set(value.reshape(-1), mode="drop")
            storage.flat = layout.bitcast(updated, storage.dtype)
        else:
            nbytes = storage.size * storage.dtype.itemsize
            storage.flat = layout.bitcast(layout.write(storage.flat, nbytes, value, self._view()), storage.dtype)
        storage.written = True
        if storage.accumulating is not None:
            storage.accumulating[self.flat_indices().reshape(-1)] = False

    def end_accumulation(self) -> None:
        """A read of PSUM by an engine other than the Tensor Engine ends the matmul accumulation of
        the elements read (the next matmul into them overwrites)."""
        if self.storage.accumulating is not None:
            self.storage.accumulating[self.flat_indices().reshape(-1)] = False

    # -- views -----------------------------------------------------------------------------------------

    def _require_strided(self, what: str) -> None:
        if self.gather is not None:
            errors.not_supported(f"{what} of a tensor indexed with out-of-bound nl.arange expressions")

    def reshape(self, shape: Any) -> TensorBase:
        """A view with another shape over the same elements (no copy). An on-chip tensor keeps its
        partition dimension.

        Raises:
            ValueError: the element count differs, or the layout cannot be viewed with that shape.
        """
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot reshape tensor `{self.name}` of shape {list(self.shape)} into {list(shape)}")
        if self.on_chip and shape[0] != self.shape[0]:
            raise ValueError(
                f"reshape of on-chip tensor `{self.name}` must keep the partition dimension ({self.shape[0]}), "
                f"got {list(shape)}"
            )
        if self.gather is not None:
            oob = [(d, v.reshape(shape), n) for d, v, n in self.oob] if self.oob else None
            return self._derive(shape, contiguous_strides(shape), 0, gather=self.gather.reshape(shape), oob=oob)
        strides = reshape_strides(self.shape, self.strides, shape)
        if strides is None:
            raise ValueError(
                f"tensor `{self.name}` of shape {list(self.shape)} with strides {list(self.strides)} cannot be "
                f"viewed as {list(shape)} without a copy"
            )
        return self._derive(shape, strides, self.offset)

    def permute(self, dims: Any) -> TensorBase:
        dims = tuple(int(d) for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            raise ValueError(f"permute({list(dims)}) is not a permutation of the {self.ndim} dimensions")
        if self.gather is not None:
            oob = [(d, v.transpose(dims), n) for d, v, n in self.oob] if self.oob else None
            return self._derive(
                tuple(self.shape[d] for d in dims), (), 0, gather=self.gather.transpose(dims), oob=oob
            )._restride()
        return self._derive(tuple(self.shape[d] for d in dims), tuple(self.strides[d] for d in dims), self.offset)

    def _restride(self) -> TensorBase:
        self.strides = contiguous_strides(self.shape)
        return self

    def broadcast(self, dim: int, size: int) -> TensorBase:
        if self.shape[dim] != 1:
            raise ValueError(f"broadcast: dimension {dim} of `{self.name}` has size {self.shape[dim]}, not 1")
        self._require_strided("broadcast")
        shape = list(self.shape)
        strides = list(self.strides)
        shape[dim], strides[dim] = int(size), 0
        return self._derive(tuple(shape), tuple(strides), self.offset)

    def expand_dim(self, dim: int) -> TensorBase:
        self._require_strided("expand_dim")
        dim = dim + self.ndim + 1 if dim < 0 else dim
        return self._derive(
            self.shape[:dim] + (1,) + self.shape[dim:], self.strides[:dim] + (0,) + self.strides[dim:], self.offset
        )

    def squeeze_dim(self, dim: int) -> TensorBase:
        if self.shape[dim] != 1:
            raise ValueError(f"squeeze_dim: dimension {dim} of `{self.name}` has size {self.shape[dim]}, not 1")
        self._require_strided("squeeze_dim")
        return self._derive(
            self.shape[:dim] + self.shape[dim + 1 :], self.strides[:dim] + self.strides[dim + 1 :], self.offset
        )

    def reshape_dim(self, dim: int, shape: Any) -> TensorBase:
        shape = tuple(int(s) for s in shape)
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.shape[dim] // known if s == -1 else s for s in shape)
        return self.reshape(self.shape[:dim] + shape + self.shape[dim + 1 :])

    def flatten_dims(self, start_dim: int, end_dim: int) -> TensorBase:
        merged = math.prod(self.shape[start_dim : end_dim + 1])
        return self.reshape(self.shape[:start_dim] + (merged,) + self.shape[end_dim + 1 :])

    def slice(self, dim: int, start: int, end: int, step: int = 1) -> TensorBase:
        key = [slice(None)] * self.ndim
        key[dim] = slice(start, end, step)
        return self[tuple(key)]

    def select(self, dim: int, index: Any) -> TensorBase:
        if not isinstance(index, (int, np.integer)):
            errors.not_supported("select with a runtime index (a tensor or register)")
        key = [slice(None)] * self.ndim
        key[dim] = int(index)
        return self[tuple(key)]

    def view(self, dtype: Any) -> TensorBase:
        """The same bytes as another dtype of the same size (NKI scales the last dimension for other
        sizes, which the emulation does not support)."""
        dtype = dtypes.as_dtype(dtype)
        if dtype.itemsize != self.dtype.itemsize:
            errors.not_supported(f"viewing a {self.dtype} tensor as {dtype} (a different element size)")
        return self._derive(self.shape, self.strides, self.offset, self.gather, self.oob, dtype=dtype)

    reinterpret_cast = view
    bitcast = view

    def ap(
        self,
        pattern: Any,
        offset: int | None = None,
        scalar_offset: Any = None,
        vector_offset: Any = None,
        indirect_dim: int = 0,
        dtype: Any = None,
    ) -> TensorBase:
        """An explicit access pattern ``[[stride, count], ...]`` over the storage (NKI's ``.ap``)."""
        if scalar_offset is not None or vector_offset is not None:
            errors.not_supported("indirect access patterns (scalar_offset / vector_offset)")
        self._require_strided("ap")
        pairs = [(int(s), int(n)) for s, n in pattern]
        view_dtype = dtypes.as_dtype(dtype) if dtype is not None else self.dtype
        base = self.offset + (int(offset) if offset is not None else 0)
        view = self._derive(tuple(n for _, n in pairs), tuple(s for s, _ in pairs), base, dtype=view_dtype)
        last = base + sum((n - 1) * s for s, n in pairs if s > 0)
        if base < 0 or last >= self.storage.size:
            errors.tensor_access_out_of_bound(self.name, 0, base, last, self.storage.size)
        return view


def cast(value: Any, dtype: np.dtype) -> jnp.ndarray:
    """``value`` as ``dtype``, as the engines cast their float32 results: round to nearest even for
    floats; floats to integers truncate toward zero and saturate (XLA's conversion); to bool: nonzero."""
    value = jnp.asarray(value) if not isinstance(value, (int, float, bool, np.number)) else value
    dtype = np.dtype(dtype)
    if isinstance(value, (int, float, bool, np.number)):
        return jnp.asarray(value, dtype)
    if value.dtype == dtype:
        return value
    if dtype == np.bool_:
        return value != 0
    if dtypes.is_int(dtype) and dtypes.is_float(value.dtype):
        info = np.iinfo(dtype)
        wide = value.astype(jnp.float32)
        wide = jnp.clip(jnp.trunc(jnp.nan_to_num(wide, nan=0.0)), float(info.min), float(info.max))
        return wide.astype(dtype)
    return value.astype(dtype)


def as_mask(mask: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """The boolean array of a ``mask=`` argument over a tile of ``shape`` (None: no mask)."""
    if mask is None:
        return None
    if isinstance(mask, MaskExpr):
        return mask.over(shape)
    if isinstance(mask, (bool, np.bool_)):
        return np.full(shape, bool(mask))
    errors.unsupported_expression_in_mask()
