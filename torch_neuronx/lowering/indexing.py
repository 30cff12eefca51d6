"""Indexing ops: index_select, gather/scatter, advanced indexing (index, index_put), index_add/copy/fill,
masked_fill/masked_scatter, embedding, take.

Index tensors are never promoted with the values. An index out of range is a device fault
(:func:`~torch_neuronx.runtime.tracing.device_check`), raised at the next synchronisation point
with the message PyTorch's CPU kernel gives; the executable clamps the index only so that it keeps
reading inside the tensor. Each op accepts negative indices exactly where PyTorch's CPU kernel does
(index, index_put, index_fill, take wrap them; index_select, gather, scatter, index_add, index_copy,
embedding reject them). Where PyTorch leaves duplicate indices of a non-accumulating write unspecified, the last
update in row-major order wins, deterministically.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx._compat.aten_checks import check_index_count
from torch_neuronx.lowering.registry import Promotion, lowering, same_dtype
from torch_neuronx.runtime.dtypes import JAX_DTYPE, aten_name
from torch_neuronx.runtime.tracing import device_check

aten = torch.ops.aten

_OUT_OF_BOUNDS = "index {{detail}} is out of bounds for dimension {dim} with size {size}"
_OUT_OF_RANGE = "index out of range in self: index {{detail}} is out of bounds for dimension {dim} with size {size}"


def _take(table: jax.Array, index: jax.Array, axis: int, **options: Any) -> jax.Array:
    """``jnp.take`` along ``axis``, which JAX refuses from an empty axis ("Cannot do a non-empty
    jnp.take() from an empty axis"): there every index is out of range, which the caller's
    :func:`_checked` reports as a device fault, and the values taken are zeros."""
    if table.shape[axis] == 0 and index.size:
        return jnp.zeros(table.shape[:axis] + index.shape + table.shape[axis + 1 :], table.dtype)
    return jnp.take(table, index, axis=axis, **options)


def _checked(
    index: jax.Array,
    size: int,
    message: str,
    error: type[Exception],
    *,
    negative: bool,
    dim: int = 0,
    when: Any = True,
) -> jax.Array:
    """``index`` validated against ``size``: negative indices wrap when ``negative`` (else they are out
    of range); an index out of range records a device fault whose detail is the first bad index
    (only where ``when``, a traced condition, holds)."""
    low = -size if negative else 0
    bad = (index < low) | (index >= size)
    if index.size:
        first_bad = index.reshape(-1)[jnp.argmax(bad.reshape(-1))]
        device_check(jnp.any(bad) & when, first_bad, message.format(dim=dim, size=size), error)
    if negative:
        index = jnp.where(index < 0, index + size, index)
    return jnp.clip(index, 0, max(size - 1, 0))


def _is_mask(index: jax.Array) -> bool:
    return index.dtype in (jnp.bool_, jnp.uint8)


def _at_least_1d(x: jax.Array) -> jax.Array:
    return x.reshape(1) if x.ndim == 0 else x


_SCATTER_REDUCE = {"add": "add", "multiply": "multiply", "sum": "add", "prod": "multiply", "amax": "max", "amin": "min"}


def _reduce_at(target: jax.Array, key: tuple, updates: jax.Array, reduce: str = "add") -> jax.Array:
    """``target.at[key]`` reduced with ``updates`` by ``reduce`` (a key of :data:`_SCATTER_REDUCE`;
    mean accumulates a sum). Booleans add as logical or and multiply as logical and, as PyTorch's
    bool arithmetic does."""
    method = _SCATTER_REDUCE.get(reduce, "add")
    if target.dtype == jnp.bool_:
        method = {"add": "max", "multiply": "min"}.get(method, method)
        updates = updates.astype(jnp.bool_)
    return getattr(target.at[key], method)(updates, mode="promise_in_bounds")


def _set_last(target: jax.Array, key: tuple, updates: jax.Array, may_repeat: bool) -> jax.Array:
    """``target.at[key].set(updates)`` where, among updates to the same element, the last one in
    row-major order wins (XLA leaves the order of duplicate scatter updates unspecified)."""
    if not may_repeat:
        return target.at[key].set(updates, mode="promise_in_bounds")
    order_dtype = jnp.int32 if updates.size < 2**31 else jnp.int64
    order = jnp.arange(updates.size, dtype=order_dtype).reshape(updates.shape)
    winner = jnp.full(target.shape, -1, order_dtype).at[key].max(order, mode="promise_in_bounds")
    taken = updates.reshape(-1)[jnp.maximum(winner, 0)]
    return jnp.where(winner >= 0, taken, target)


# --- index_select, gather, scatter -----------------------------------------------------------------


def _vector_index(arguments: dict[str, Any]) -> None:
    """index_select's own checks (TensorAdvancedIndexing.cpp, Indexing.cu): an index of at most one
    dimension (PyTorch's meta kernel flattens a 2-d index and computed), of one element for a 0-dim
    ``self``.

    Raises:
        IndexError: "index_select(): Index is supposed to be a vector".
        RuntimeError: "index_select(): Index to scalar can have only 1 value, got 2 value(s)".
    """
    index = arguments["index"]
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if arguments["self"].ndim == 0 and index.numel() != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {index.numel()} value(s)")


@lowering(aten.index_select.default, dtype_rule=_vector_index, rule_first=True)
def index_select(self, dim, index):
    """torch.index_select: the slices ``self[..., index[i], ...]`` along ``dim``; indices must lie in
    [0, size) (IndexError otherwise, as on CPU); a 0-dim ``self`` acts as size 1."""
    x = _at_least_1d(self)
    dim = dim % x.ndim
    index = _checked(index.reshape(-1), x.shape[dim], _OUT_OF_RANGE, IndexError, negative=False, dim=dim)
    result = _take(x, index, dim, mode="clip")
    return result.reshape(()) if self.ndim == 0 else result


@lowering(aten.gather.default)
def gather(self, dim, index, *, sparse_grad=False):
    """torch.gather: ``out[i][j] = self[index[i][j]][j]`` (for dim 0); ``index`` may be smaller than
    ``self`` in the other dimensions; indices must lie in [0, size) (RuntimeError otherwise, as on CPU).
    An empty ``index`` gathers nothing, whatever its rank (as on CPU)."""
    if index.size == 0:
        return jnp.zeros(index.shape, self.dtype)
    x, idx = _at_least_1d(self), _at_least_1d(index)
    dim = dim % x.ndim
    x = jax.lax.slice(x, (0,) * x.ndim, tuple(x.shape[d] if d == dim else idx.shape[d] for d in range(x.ndim)))
    idx = _checked(idx, x.shape[dim], _OUT_OF_BOUNDS, RuntimeError, negative=False, dim=dim)
    return jnp.take_along_axis(x, idx, axis=dim, mode="promise_in_bounds").reshape(index.shape)


def _scatter_key(index: jax.Array, dim: int, size: int) -> tuple:
    """The coordinates ``scatter`` writes: ``index`` along ``dim``, the position of each index
    element along the other dimensions."""
    idx = _checked(index, size, _OUT_OF_BOUNDS, RuntimeError, negative=False, dim=dim)
    coords = [jax.lax.broadcasted_iota(idx.dtype, idx.shape, d) for d in range(idx.ndim)]
    coords[dim] = idx
    return tuple(coords)


def _scatter_operands(self, dim, index, src) -> tuple[jax.Array, int, tuple, jax.Array]:
    """``self`` (at least 1-d), the wrapped ``dim``, the write coordinates and the updates (``src``
    cut to ``index``'s shape, or a scalar broadcast to it)."""
    x, idx = _at_least_1d(self), _at_least_1d(index)
    dim = dim % x.ndim
    key = _scatter_key(idx, dim, x.shape[dim])
    # a Python number where a compiled graph holds the scalar as a constant (runtime scalars, as
    # eager passes them, are 0-d arrays already)
    src = jnp.asarray(src, x.dtype) if not isinstance(src, jax.Array) else src
    if src.ndim == 0:
        updates = jnp.broadcast_to(src, idx.shape)
    else:
        updates = jax.lax.slice(_at_least_1d(src), (0,) * idx.ndim, idx.shape)
    return x, dim, key, updates


@lowering(
    aten.scatter.src,
    aten.scatter.value,
    aten.scatter.reduce,
    aten.scatter.value_reduce,
    promotion=Promotion.NO_OPMATH,
    promote=("self",),
    checked=("value",),
)
def scatter(self, dim, index, src, *, reduce=None):
    """torch.scatter: ``self[index[i][j]][j] = src[i][j]`` (for dim 0; ``src`` may be a scalar
    ``value``, cast to self's dtype); ``reduce="add"/"multiply"`` accumulates instead. Duplicate
    indices without ``reduce``: the last write wins. An empty ``index`` writes nothing, whatever its
    rank (as on CPU)."""
    if index.size == 0:
        return self
    x, dim, key, updates = _scatter_operands(self, dim, index, src)
    if reduce is None:
        result = _set_last(x, key, updates, may_repeat=index.ndim > 0 and index.shape[dim] > 1)
    else:
        result = _reduce_at(x, key, updates, reduce)
    return result.reshape(self.shape)


@lowering(aten.scatter_add.default, promotion=Promotion.DEFAULT, promote=("self", "src"))
def scatter_add(self, dim, index, src):
    """torch.scatter_add: ``self[index[i][j]][j] += src[i][j]`` (for dim 0); 16-bit floats accumulate
    in float32. An empty ``index`` adds nothing, whatever its rank (gather's gradient of an empty
    index, as on CPU)."""
    if index.size == 0:
        return self
    x, dim, key, updates = _scatter_operands(self, dim, index, src)
    return _reduce_at(x, key, updates).reshape(self.shape)


def _identity(reduce: str, dtype: np.dtype) -> jax.Array:
    """The value a reduction starts from when ``include_self=False``."""
    if reduce in ("sum", "mean"):
        return jnp.zeros((), dtype)
    if reduce == "prod":
        return jnp.ones((), dtype)
    if dtype == jnp.bool_:
        return jnp.asarray(reduce == "amin")
    if jnp.issubdtype(dtype, jnp.floating):
        return jnp.asarray(-jnp.inf if reduce == "amax" else jnp.inf, dtype)
    info = jnp.iinfo(dtype)
    return jnp.asarray(info.min if reduce == "amax" else info.max, dtype)


@lowering(aten.scatter_reduce.two, promotion=Promotion.DEFAULT, promote=("self", "src"))
def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    """torch.scatter_reduce: reduces ``src`` into ``self`` at ``index`` along ``dim`` with sum, prod,
    mean, amax or amin; ``include_self=False`` leaves the written elements' old values out. NaN
    propagates through amax/amin; an integer mean rounds down (floor), as on CPU. An empty ``index``
    reduces nothing."""
    if index.size == 0:
        return self
    x, dim, key, updates = _scatter_operands(self, dim, index, src)
    base = x if include_self else x.at[key].set(_identity(reduce, x.dtype), mode="promise_in_bounds")
    result = _reduce_at(base, key, updates, reduce)
    if reduce == "mean":
        start = jnp.ones if include_self else jnp.zeros
        count = start(x.shape, x.dtype).at[key].add(jnp.ones((), x.dtype), mode="promise_in_bounds")
        count = jnp.where(count == 0, jnp.ones((), x.dtype), count)
        result = result / count if jnp.issubdtype(x.dtype, jnp.inexact) else jnp.floor_divide(result, count)
    return result.reshape(self.shape)


# --- advanced indexing -----------------------------------------------------------------------------


def _index_key(self, indices: Sequence[jax.Array | None], op: str) -> tuple:
    """The JAX index of PyTorch advanced indexing with integer index tensors (None = a full slice);
    numpy and PyTorch agree on where the broadcast index dimensions go."""
    check_index_count(self.ndim, len(indices))
    key = []
    for dim, index in enumerate(indices):
        if index is None:
            key.append(slice(None))
        elif _is_mask(index):
            raise NotImplementedError(
                f"{op} on neuron: a boolean mask index is supported on the device only as the one index "
                "tensor of index_put (x[mask] = v); other uses have a data-dependent shape: index with "
                "mask.nonzero() instead"
            )
        elif self.shape[dim] == 0 and index.size:
            # ATen's AdvancedIndex checks this before any kernel runs, on CPU and CUDA alike.
            raise IndexError("index is out of bounds for dimension with size 0")
        else:
            key.append(_checked(index, self.shape[dim], _OUT_OF_BOUNDS, IndexError, negative=True, dim=dim))
    return tuple(key)


def _broadcast_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listed = ", ".join(str(list(s)) for s in shapes)
        raise IndexError(
            f"shape mismatch: indexing tensors could not be broadcast together with shapes {listed}"
        ) from None


def _indexed_shape(shape: tuple[int, ...], key: tuple) -> tuple[int, ...]:
    """The shape of ``x[key]`` for a key of full slices and index arrays (numpy's placement rule)."""
    positions = [i for i, k in enumerate(key) if not isinstance(k, slice)]
    broadcast = _broadcast_shape([key[i].shape for i in positions])
    if positions == list(range(positions[0], positions[-1] + 1)):
        return shape[: positions[0]] + broadcast + shape[positions[-1] + 1 :]
    return broadcast + tuple(s for i, s in enumerate(shape) if i not in positions)


def _broadcast_values(values: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    fits = values.ndim <= len(shape) and all(v in (1, s) for v, s in zip(values.shape[::-1], shape[::-1], strict=False))
    if not fits:
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to indexing result "
            f"of shape {list(shape)}"
        )
    return jnp.broadcast_to(values, shape)


@lowering(aten.index.Tensor)
def index(self, indices):
    """Tensor.__getitem__ with index tensors (aten.index): integer index tensors broadcast together;
    their dimensions replace the indexed ones in place when adjacent, else go first (numpy's rule);
    negative indices wrap; an index out of range raises IndexError."""
    key = _index_key(self, indices, "aten::index.Tensor")
    if all(isinstance(k, slice) for k in key):
        return self
    return self.at[key].get(mode="promise_in_bounds")


def _mask_put(self, leading: int, mask: jax.Array, values: jax.Array, accumulate: bool) -> jax.Array:
    """``self[(slice,) * leading + (mask,)] = values`` (or ``+=``): the k-th true element of the mask,
    in row-major order, takes the k-th value along the masked dimension of ``values``, whose length
    must equal the mask's count of true elements (a device fault otherwise) unless it is 1."""
    covered = self.shape[leading : leading + mask.ndim]
    if mask.shape != covered:
        for offset, (m, s) in enumerate(zip(mask.shape, covered + (None,) * mask.ndim, strict=False)):
            if m != s:
                raise IndexError(
                    f"The shape of the mask {list(mask.shape)} at index {offset} does not match the shape of the "
                    f"indexed tensor {list(self.shape)} at index {leading + offset}"
                )
    before, after = self.shape[:leading], self.shape[leading + mask.ndim :]
    rank_of_target = len(before) + 1 + len(after)
    values = values.reshape((1,) * max(rank_of_target - values.ndim, 0) + values.shape)
    given = values.shape[leading] if values.ndim == rank_of_target else 1
    if values.ndim != rank_of_target or not all(
        v in (1, s) for v, s in zip(values.shape, before + (given,) + after, strict=True)
    ):
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to indexing result "
            f"of shape {[*before, 'number of true mask elements', *after]}"
        )
    selected = mask.reshape(-1).astype(jnp.bool_)
    rank = jnp.cumsum(selected, dtype=jnp.int64) - 1
    count = jnp.sum(selected, dtype=jnp.int64)
    if given != 1:
        device_check(
            count != given,
            count,
            f"shape mismatch: value tensor with {given} elements along the masked dimension cannot be broadcast "
            "to indexing result with {detail} elements there",
            RuntimeError,
        )
    flat = self.reshape(before + (mask.size,) + after)
    if given == 0:
        return self
    values = jnp.broadcast_to(values, before + (given,) + after)
    spread = jnp.take(values, jnp.clip(rank, 0, given - 1), axis=leading, mode="clip")
    where = selected.reshape((1,) * len(before) + (mask.size,) + (1,) * len(after))
    if accumulate:
        return (flat + jnp.where(where, spread, jnp.zeros((), flat.dtype))).reshape(self.shape)
    return jnp.where(where, spread, flat).reshape(self.shape)


@lowering(
    aten.index_put.default,
    aten._index_put_impl.default,
    dtype_rule=same_dtype(
        ("self", "values"),
        "Index put requires the source and destination dtypes match, got {0} for the destination "
        "and {1} for the source.",
    ),
)
def index_put(self, indices, values, accumulate=False, unsafe=False):
    """Tensor.index_put / ``self[indices] = values``: ``values`` broadcast to the indexed shape;
    ``accumulate`` sums duplicate indices, otherwise the last duplicate wins. A boolean (or uint8)
    mask, alone among the index tensors, selects its true elements in row-major order."""
    masks = [i for i, index in enumerate(indices) if index is not None and _is_mask(index)]
    if masks and all(index is None for i, index in enumerate(indices) if i != masks[0]):
        return _mask_put(self, masks[0], indices[masks[0]], values, accumulate)
    key = _index_key(self, indices, "aten::index_put")
    if all(isinstance(k, slice) for k in key):
        updates = _broadcast_values(values, self.shape)
        return self + updates if accumulate else updates
    shape = _indexed_shape(self.shape, key)
    updates = _broadcast_values(values, shape)
    if accumulate:
        return _reduce_at(self, key, updates)
    count = math.prod(_broadcast_shape([k.shape for k in key if not isinstance(k, slice)]))
    return _set_last(self, key, updates, may_repeat=count > 1)


# --- index_add, index_copy, index_fill -------------------------------------------------------------


def _along(dim: int, index: jax.Array) -> tuple:
    return (slice(None),) * dim + (index,)


def _index_func_rule(name: str, then: Any = None) -> Any:
    """The ``dtype_rule`` of index_add/index_reduce (``name``): ATen's ``index_func_meta_impl``
    (TensorAdvancedIndexing.cpp, CPU and CUDA alike), in its order, after ``then``'s checks (the
    op's own, which ATen makes first). PyTorch's meta kernels make some of these checks in other
    words (index_add) or none (index_reduce, which then computed a 2-d index or a 0-dim ``self``).

    Raises:
        IndexError: ``index`` has more than one dimension, or ``source`` is 0-dim and ``index`` has
            other than one element (ATen's message then reads ``source.size(dim)`` and fails).
        RuntimeError: the index dtype, the dtypes of ``self`` and ``source``, ``dim`` past
            ``source``'s dimensions, the index count, or ``source``'s shape beside ``dim``.
    """

    def rule(arguments: dict[str, Any]) -> None:
        if then is not None:
            then(arguments)
        self, index, source = arguments["self"], arguments["index"], arguments["source"]
        dim = arguments["dim"] % max(self.ndim, 1)
        if index.ndim > 1:
            raise IndexError(
                f"{name}_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                f"{aten_name(index.dtype)} and size: {list(index.shape)}"
            )
        if index.dtype not in (torch.int32, torch.int64):
            raise RuntimeError(f"{name}_(): Expected dtype int32/int64 for index but got: {aten_name(index.dtype)}")
        if self.dtype != source.dtype:
            raise RuntimeError(
                f"{name}_(): self ({aten_name(self.dtype)}) and source ({aten_name(source.dtype)}) must have the "
                "same scalar type"
            )
        if not (dim == 0 or dim < source.ndim):
            raise RuntimeError(
                f"{name}_(): Indexing dim {dim} is out of bounds of the source tensor with dim {source.ndim}"
            )
        if index.numel() != (source.shape[dim] if source.ndim else 1):
            if not source.ndim:
                raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
            raise RuntimeError(
                f"{name}_(): Number of indices ({index.numel()}) should be equal to source.size(dim): "
                f"({source.shape[dim]}), for dim: {dim}"
            )
        self_shape, source_shape = list(self.shape), list(source.shape)
        if self.ndim and source.ndim:
            del self_shape[dim], source_shape[dim]
        if self_shape != source_shape:
            raise RuntimeError(
                "source tensor shape must match self tensor shape, excluding the specified dimension. "
                f"Got self.shape = {list(self.shape)} source.shape = {list(source.shape)}"
            )

    return rule


@lowering(
    aten.index_add.default,
    promotion=Promotion.DEFAULT,
    promote=("self", "source"),
    dtype_rule=_index_func_rule("index_add"),
    rule_first=True,
    checked=("alpha",),
    metas=True,
)
def index_add(self, dim, index, source, *, alpha=1, metas):
    """torch.index_add: ``self[..., index[i], ...] += alpha * source[..., i, ...]`` along ``dim``;
    duplicates accumulate; indices must lie in [0, size), else the CPU's error (see
    :func:`_check_index_add_indices`).

    16-bit floats round as the CPU's paths do (index_add_cpu_): what it hands to scatter_add
    (:func:`_hands_to_scatter_add`, alpha 1) accumulates in float32 and rounds once; its own loop
    rounds ``source * alpha`` and then each addition to the 16-bit dtype, in index order, as XLA's
    scatter in that dtype does. (Its n-d loop adds ``alpha * source`` in float with one rounding:
    for an ``alpha`` other than 1 the product is rounded first here, within an ulp.)"""
    x = _at_least_1d(self)
    dim = dim % x.ndim
    idx = _check_index_add_indices(index.reshape(-1), x.shape[dim], dim, alpha, metas)
    key, source = _along(dim, idx), _at_least_1d(source)
    updates = source * alpha
    if metas[0].dtype not in (torch.bfloat16, torch.float16):
        return _reduce_at(x, key, updates).reshape(self.shape)
    dtype = JAX_DTYPE[metas[0].dtype]
    each_rounded = (
        x.astype(dtype).at[key].add(source.astype(dtype) * jnp.asarray(alpha).astype(dtype), mode="promise_in_bounds")
    )
    result = each_rounded.astype(x.dtype)
    if _hands_to_scatter_add(metas, dim):
        result = jnp.where(jnp.asarray(alpha) == 1, _reduce_at(x, key, updates), result)
    return result.reshape(self.shape)


def _hands_to_scatter_add(metas: list[Any], dim: int) -> bool:
    """Whether the CPU's index_add (``index_add_cpu_``) hands the call to ``scatter_add_`` when
    ``alpha`` is 1: a ``self`` of two or more dimensions, added into along its first or last one,
    with an int64 index (and not complex32)."""
    self_meta, index_meta, alpha_meta = metas[0], metas[2], metas[4]
    return (
        self_meta.ndim > 1
        and dim in (0, self_meta.ndim - 1)
        and index_meta.dtype == torch.int64
        and self_meta.dtype != torch.complex32
        and not isinstance(alpha_meta, bool)  # c10's Scalar.equal(1.0) is false for a bool
    )


def _check_index_add_indices(index: jax.Array, size: int, dim: int, alpha: Any, metas: list[Any]) -> jax.Array:
    """index_add's indices checked as the CPU's kernel (``index_add_cpu_out``) checks them, its
    index clipped into range. A ``self`` of two or more dimensions, added into along its first or
    last one with an int64 index and ``alpha`` 1 (and not complex32), is handed to ``scatter_add_``,
    whose check raises RuntimeError("index 5 is out of bounds for dimension 1 with size 3"); the
    kernel's own loop raises IndexError("index out of range in self"), detailed here; an empty such
    ``self`` returns before checking. CUDA asserts on the device; its message cannot be caught."""
    if metas[0].ndim > 1 and metas[0].numel() == 0:
        return jnp.clip(index, 0, max(size - 1, 0))
    if not _hands_to_scatter_add(metas, dim):
        return _checked(index, size, _OUT_OF_RANGE, IndexError, negative=False, dim=dim)
    one = jnp.asarray(alpha) == 1
    _checked(index, size, _OUT_OF_BOUNDS, RuntimeError, negative=False, dim=dim, when=one)
    return _checked(index, size, _OUT_OF_RANGE, IndexError, negative=False, dim=dim, when=~one)


def _index_reduce_reduction(arguments: dict) -> None:
    """ATen's index_reduce meta names the reduction before index_func_meta_impl's checks.

    Raises:
        RuntimeError: ATen's words.
    """
    reduce = arguments["reduce"]
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")


@lowering(
    aten.index_reduce.default,
    promotion=Promotion.DEFAULT,
    promote=("self", "source"),
    dtype_rule=_index_func_rule("index_reduce", then=_index_reduce_reduction),
    rule_first=True,
    metas=True,
)
def index_reduce(self, dim, index, source, reduce, *, include_self=True, metas):
    """torch.index_reduce: reduces ``source[..., i, ...]`` into ``self[..., index[i], ...]`` along
    ``dim`` with prod, mean, amax or amin; ``include_self=False`` leaves the indexed elements' old
    values out. NaN propagates through amax/amin; an integer mean rounds down (floor), as on CPU.

    16-bit floats round as the CPU's kernel (``index_reduce_func_impl``) does: each product or sum
    in the 16-bit dtype, in index order (XLA's scatter in that dtype), then a mean's one division."""
    x = _at_least_1d(self)
    dim = dim % x.ndim
    # include_self=False fills the indexed slices first: index_fill_'s check and words on the CPU.
    message = _OUT_OF_RANGE if include_self else _OUT_OF_BOUNDS
    idx = _checked(index.reshape(-1), x.shape[dim], message, IndexError, negative=False, dim=dim)
    key, updates = _along(dim, idx), _at_least_1d(source)
    base = x if include_self else x.at[key].set(_identity(reduce, x.dtype), mode="promise_in_bounds")
    narrow = JAX_DTYPE[metas[0].dtype] if metas[0].dtype in (torch.bfloat16, torch.float16) else None
    if narrow is not None and reduce in ("prod", "mean"):
        scattered = base.astype(narrow).at[key]
        step = scattered.multiply if reduce == "prod" else scattered.add
        result = step(updates.astype(narrow), mode="promise_in_bounds").astype(x.dtype)
    else:
        result = _reduce_at(base, key, updates, reduce)
    if reduce == "mean":
        count = jnp.full(x.shape[dim], 1 if include_self else 0, x.dtype).at[idx].add(1, mode="promise_in_bounds")
        count = jnp.maximum(count, 1).reshape((-1,) + (1,) * (x.ndim - dim - 1))
        result = result / count if jnp.issubdtype(x.dtype, jnp.inexact) else jnp.floor_divide(result, count)
    return result.reshape(self.shape)


def _index_copy_arguments(arguments: dict[str, Any]) -> None:
    """ATen's index_copy meta (TensorAdvancedIndexing.cpp, CPU and CUDA alike), in its order;
    PyTorch's meta kernel makes these checks in other words or exception types.

    Raises:
        IndexError: ``index`` has more than one dimension, does not have one element for a 0-dim
            ``source``, or not one per slice of ``source``; ``source`` and ``self`` (neither 0-dim)
            differ in dimensionality.
        RuntimeError: ``index`` is not int64; ``self`` and ``source`` differ in dtype or in their
            slices' shapes.
    """
    self, index, source = arguments["self"], arguments["index"], arguments["source"]
    dim = arguments["dim"] % max(self.ndim, 1)
    if index.ndim > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim})")
    count = index.numel()
    if source.ndim == 0 and count != 1:
        raise IndexError(f"index_copy_(): When source is scalar, index should have one element (got {count})")
    if source.ndim != self.ndim and source.ndim and self.ndim:
        raise IndexError(
            "index_copy_(): When source and destination are not scalars, their dimensionality must match. Source "
            f"dimensionality ({source.ndim}), destination dimensionality ({self.ndim})"
        )
    if index.dtype != torch.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got {aten_name(index.dtype)}")
    if self.dtype != source.dtype:
        raise RuntimeError(
            "index_copy_(): self and source expected to have the same dtype, but got (self) "
            f"{aten_name(self.dtype)} and (source) {aten_name(source.dtype)}"
        )
    self_slice, source_slice = list(self.shape), list(source.shape)
    if self_slice:
        del self_slice[dim]
    if source_slice:
        del source_slice[dim]
    if self_slice != source_slice:
        shown = " ".join  # how c10 prints a std::vector
        raise RuntimeError(
            "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: "
            f"{shown(map(str, self_slice))} at dimension {dim} and source slice shape: "
            f"{shown(map(str, source_slice))} at dimension 0."
        )
    if source.ndim and count != source.shape[dim]:
        raise IndexError(
            f"index_copy_(): Number of indices ({count}) should be equal to source.size(dim) ({source.shape[dim]})"
        )


@lowering(aten.index_copy.default, dtype_rule=_index_copy_arguments, rule_first=True)
def index_copy(self, dim, index, source):
    """torch.index_copy: ``self[..., index[i], ...] = source[..., i, ...]`` along ``dim``; indices
    must be int64 in [0, size); the last of duplicate indices wins."""
    x = _at_least_1d(self)
    dim = dim % x.ndim
    message = "index_copy_(): " + _OUT_OF_BOUNDS
    idx = _checked(index.reshape(-1), x.shape[dim], message, IndexError, negative=False, dim=dim)
    updates = jnp.broadcast_to(_at_least_1d(source), _indexed_shape(x.shape, _along(dim, idx)))
    return _set_last(x, _along(dim, idx), updates, may_repeat=idx.size > 1).reshape(self.shape)


def _torch_name(dtype: np.dtype) -> str:
    """PyTorch's C++ name of an integer dtype (as its error messages print it)."""
    return {np.int32: "Int", np.int16: "Short", np.int8: "Char", np.uint8: "Byte"}.get(np.dtype(dtype).type, str(dtype))


def _index_fill(self, dim, index, value):
    x = _at_least_1d(self)
    dim = dim % x.ndim
    idx = _checked(index.reshape(-1), x.shape[dim], _OUT_OF_BOUNDS, IndexError, negative=True, dim=dim)
    return x.at[_along(dim, idx)].set(jnp.asarray(value, x.dtype), mode="promise_in_bounds").reshape(self.shape)


def _index_fill_arguments(arguments: dict[str, Any]) -> None:
    """ATen's index_fill_ checks (TensorAdvancedIndexing.cpp), in its order; PyTorch's meta kernel
    words the index's dimensionality otherwise. A complex value never fills a real tensor, even
    with a zero imaginary part (checked before c10's conversion).

    Raises:
        IndexError: ``index`` is not int64.
        RuntimeError: a ``value`` tensor that is not 0-dim (checked first), a complex ``value`` for
            a real ``self``, or an ``index`` of 2 or more dims.
    """
    index, value = arguments["index"], arguments["value"]
    if isinstance(value, torch.Tensor) and value.ndim:
        raise RuntimeError(
            f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with {value.ndim} dimension(s)."
        )
    if index.dtype != torch.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if isinstance(value, complex) and not arguments["self"].dtype.is_complex:
        raise RuntimeError("index_fill_(): Converting complex Scalar to non-complex type is not supported")
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")


@lowering(
    aten.index_fill.int_Scalar,
    promotion=Promotion.NO_OPMATH,
    promote=("self",),
    checked=("value",),
    dtype_rule=_index_fill_arguments,
    rule_first=True,
)
def index_fill_scalar(self, dim, index, value):
    """torch.index_fill: the slices at ``index`` along ``dim`` set to ``value`` (in self's dtype);
    negative indices wrap, as on CPU."""
    return _index_fill(self, dim, index, value)


@lowering(aten.index_fill.int_Tensor, dtype_rule=_index_fill_arguments, rule_first=True)
def index_fill_tensor(self, dim, index, value):
    """torch.index_fill with a 0-dim tensor ``value``, converted to self's dtype as PyTorch does."""
    return _index_fill(self, dim, index, value.astype(self.dtype))


# --- masks ------------------------------------------------------------------------------------------


@lowering(aten.masked_fill.Scalar, promotion=Promotion.NO_OPMATH, promote=("self",), checked=("value",))
def masked_fill_scalar(self, mask, value):
    """torch.masked_fill: ``value`` (in self's dtype) where the broadcast ``mask`` is true."""
    return jnp.where(mask, value, self)


@lowering(aten.masked_fill.Tensor)
def masked_fill_tensor(self, mask, value):
    """torch.masked_fill with a 0-dim tensor ``value``, converted to self's dtype as PyTorch does
    (self's values never pass through value's dtype)."""
    return jnp.where(mask, value.astype(self.dtype), self)


@lowering(aten.masked_scatter.default)
def masked_scatter(self, mask, source):
    """torch.masked_scatter: the k-th true element of the broadcast ``mask`` (row-major) takes
    ``source.flatten()[k]``; fewer source elements than true mask elements is a RuntimeError.

    Raises:
        RuntimeError: ``mask`` is not boolean (CPU refuses uint8 masks here; PyTorch's meta kernel
            accepts them).
    """
    if mask.dtype != jnp.bool_:
        raise RuntimeError(
            f"masked_scatter_ only supports boolean masks, but got mask with dtype {_torch_name(mask.dtype)}"
        )
    shape = jnp.broadcast_shapes(self.shape, mask.shape)
    selected = jnp.broadcast_to(mask, shape).reshape(-1)
    rank = jnp.cumsum(selected, dtype=jnp.int64) - 1
    count = rank[-1] + 1 if selected.size else jnp.int64(0)
    device_check(
        count > source.size,
        count,
        f"masked_scatter: Number of elements of source < number of ones in mask ({source.size} < {{detail}})",
        RuntimeError,
    )
    base = jnp.broadcast_to(self, shape)
    if source.size == 0:
        return base
    taken = jnp.take(source.reshape(-1), jnp.clip(rank, 0, source.size - 1), mode="clip")
    return jnp.where(selected, taken, base.reshape(-1)).reshape(shape)


# --- embedding, take --------------------------------------------------------------------------------


@lowering(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """F.embedding forward: rows of ``weight`` at ``indices`` (shape indices.shape + (dim,)); indices
    must lie in [0, num_embeddings) (IndexError otherwise, as on CPU)."""
    idx = _checked(indices, weight.shape[0], _OUT_OF_RANGE, IndexError, negative=False)
    return _take(weight, idx, 0, mode="clip")


@lowering(aten.embedding_dense_backward.default, promotion=Promotion.DEFAULT, promote=("grad_output",), metas=True)
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq, *, metas):
    """The gradient of F.embedding's weight: each row sums the gradients of its lookups, in their
    order; the padding_idx row gets none; ``scale_grad_by_freq`` multiplies each lookup's gradient by
    1 / how often its index occurs.

    16-bit floats round each addition, as the CPU's loop does (``embedding_dense_backward_cpu``:
    ``grad_weight[k].add_(grad[i], scale)``), by XLA's scatter in that dtype, which adds in update
    order; with ``scale_grad_by_freq`` the scaled gradient is rounded before it is added, where the
    CPU adds it in float (within an ulp of each addition)."""
    grad = grad_output.reshape(indices.size, grad_output.shape[-1])  # not -1: the dimension may be 0
    idx = _checked(indices.reshape(-1), num_weights, _OUT_OF_RANGE, IndexError, negative=False)
    if scale_grad_by_freq:
        counts = jnp.zeros(num_weights, grad.dtype).at[idx].add(jnp.ones((), grad.dtype), mode="promise_in_bounds")
        grad = grad * (1 / counts)[idx][:, None]
    grad = jnp.where((indices.reshape(-1) == padding_idx)[:, None], jnp.zeros((), grad.dtype), grad)
    dtype = JAX_DTYPE[metas[0].dtype] if metas[0].dtype in (torch.bfloat16, torch.float16) else grad.dtype
    weight = jnp.zeros((num_weights, grad.shape[-1]), dtype).at[idx].add(grad.astype(dtype), mode="promise_in_bounds")
    return weight.astype(grad.dtype)


@lowering(aten.take.default)
def take(self, index):
    """torch.take: ``self.flatten()[index]`` (shape of ``index``); negative indices wrap; an index out
    of range raises IndexError."""
    message = "out of range: tried to access index {{detail}} on a tensor of {size} elements."
    idx = _checked(index, self.size, message, IndexError, negative=True)
    if self.size == 0:  # nothing to take from (any index raises above): index's shape, as ATen's
        return jnp.zeros(index.shape, self.dtype)
    return jnp.take(self.reshape(-1), idx, mode="clip")


_put_dtypes = same_dtype(
    ("self", "source"),
    "put_(): self and source expected to have the same dtype, but got self.dtype = {0} and source.dtype = {1}",
)


def _put_arguments(arguments: dict[str, Any]) -> None:
    """put_'s checks (TensorAdvancedIndexing.cpp, CPU and CUDA), made before PyTorch's meta kernel,
    which broadcast a ``source`` of another element count into JAX's error.

    Raises:
        RuntimeError: ``self`` and ``source`` of two dtypes.
        IndexError: "put_(): Expected source and index to have the same number of elements, but got
            source.numel() = 3, index.numel() = 4"; "put_(): Tried to put elements into an empty tensor".
    """
    _put_dtypes(arguments)
    self, index, source = arguments["self"], arguments["index"], arguments["source"]
    if source.numel() != index.numel():
        raise IndexError(
            "put_(): Expected source and index to have the same number of elements, but got source.numel() = "
            f"{source.numel()}, index.numel() = {index.numel()}"
        )
    if self.numel() == 0 and index.numel() != 0:
        raise IndexError("put_(): Tried to put elements into an empty tensor")


@lowering(aten.put.default, dtype_rule=_put_arguments, rule_first=True)
def put(self, index, source, accumulate=False):
    """torch.put: ``self.flatten()[index] = source`` (added when ``accumulate``); negative indices
    wrap; an index out of range raises IndexError; the last of duplicate indices wins."""
    message = "out of range: tried to access index {{detail}} on a tensor of {size} elements."
    idx = _checked(index.reshape(-1), self.size, message, IndexError, negative=True)
    flat, updates = self.reshape(-1), source.reshape(-1).astype(self.dtype)
    if accumulate:
        return _reduce_at(flat, (idx,), updates).reshape(self.shape)
    return _set_last(flat, (idx,), updates, may_repeat=idx.size > 1).reshape(self.shape)


def _nonnegative_size(arguments: dict[str, Any]) -> None:
    """nonzero_static's check of ``size`` (Nonzero.cu, TensorAdvancedIndexing.cpp), before PyTorch's
    meta kernel, which fails making a tensor of negative size."""
    if arguments["size"] < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")


@lowering(aten.nonzero_static.default, static=("size", "fill_value"), dtype_rule=_nonnegative_size, rule_first=True)
def nonzero_static(self, *, size, fill_value=-1):
    """torch.nonzero_static: the first ``size`` indices of nonzero elements in row-major order,
    shape (size, self.dim()), padded with ``fill_value``: a static shape, so no synchronisation."""
    if self.ndim == 0 or self.size == 0:
        return jnp.full((size, self.ndim), fill_value, jnp.int64)
    coordinates = jnp.nonzero(self, size=size, fill_value=fill_value)
    return jnp.stack(coordinates, axis=1).astype(jnp.int64).reshape(size, self.ndim)


# --- embedding_bag, embedding_renorm ------------------------------------------------------------

_BAG_SUM, _BAG_MEAN, _BAG_MAX = 0, 1, 2
_BAG_INDEX = "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be {{detail}}"


def _float_opmath(dtype):
    return jnp.float32 if dtype in (jnp.bfloat16, jnp.float16) else dtype


def _offset2bag(offsets: jax.Array, count: int, end: jax.Array | None = None) -> jax.Array:
    """The bag of each of ``count`` indices (``make_offset2bag``): how many bag starts lie at or
    before it, less one. With ``end`` (``include_last_offset``: the offsets are CSR row pointers),
    indices at or after it belong to no bag and get -1."""
    starts = jnp.zeros(count + 1, jnp.int64).at[offsets].add(1, mode="drop")
    bag = jnp.cumsum(starts[:count]) - 1
    if end is not None:
        bag = jnp.where(jnp.arange(count) < end, bag, -1)
    return bag


def _bag_segments(indices, offsets, include_last_offset: bool):
    """(offset2bag, number of bags) with PyTorch's checks of the offsets (``check_arguments``)."""
    count = indices.shape[0]
    offsets = offsets.astype(jnp.int64)
    bags = offsets.shape[0] - int(include_last_offset)
    if offsets.shape[0]:
        device_check(
            offsets[0] != 0,
            offsets[0],
            "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
            "However, got {detail}",
            RuntimeError,
        )
        device_check(
            offsets[-1] > count,
            offsets[-1],
            f"offsets[-1] can not be greater than input's length {count} but got offsets[-1] of {{detail}}",
            RuntimeError,
        )
    end = offsets[-1] if include_last_offset else None
    return _offset2bag(offsets[:bags], count, end), bags


def _check_bag_indices(name: str, indices, offsets) -> None:
    if indices.ndim != 1 or offsets.ndim != 1:
        raise NotImplementedError(
            f"aten::{name} on neuron: indices of shape {tuple(indices.shape)} with offsets of shape "
            f"{tuple(offsets.shape)}; pass 1-D indices and offsets, as F.embedding_bag does (it flattens 2-D input)"
        )


def _bag_max(rows, indices, kept, bag, bags: int):
    """Per bag and feature, the maximum of the kept rows as PyTorch's CPU kernel finds it: the first
    kept row starts the running maximum and only a strictly greater value replaces it, so a NaN first
    row stays NaN, later NaNs are skipped, and ties keep the earliest row. Returns the values and the
    winning rows' indices; an empty bag gives 0 and index 0 (the CPU kernel zeroes both)."""
    count = rows.shape[0]
    if count == 0:
        return jnp.zeros((bags, rows.shape[1]), rows.dtype), jnp.zeros((bags, rows.shape[1]), jnp.int64)
    positions = jnp.arange(count)
    first = jax.ops.segment_min(jnp.where(kept, positions, count), bag, bags)
    nan = jnp.isnan(rows) if jnp.issubdtype(rows.dtype, jnp.floating) else jnp.zeros(rows.shape, bool)
    candidates = jnp.where(kept[:, None] & ~nan, rows, -jnp.inf)
    maximum = jax.ops.segment_max(candidates, bag, bags)
    hit = kept[:, None] & ~nan & (rows == maximum[jnp.clip(bag, 0, max(bags - 1, 0))])
    earliest = jax.ops.segment_min(jnp.where(hit, positions[:, None], count), bag, bags)
    safe_first = jnp.clip(first, 0, count - 1)
    first_nan = nan[safe_first] & (first < count)[:, None]
    winner = jnp.clip(jnp.where(first_nan, safe_first[:, None], earliest), 0, count - 1)
    empty = (first >= count)[:, None]
    values = jnp.take_along_axis(rows, winner, axis=0)
    winners = indices[winner]
    return jnp.where(empty, jnp.zeros((), rows.dtype), values), jnp.where(empty, 0, winners)


@lowering(
    aten._embedding_bag.default,
    aten._embedding_bag_forward_only.default,
    # CUDA's kernel reads per_sample_weights as the weight's element type (the CPU's checkSameType).
    dtype_rule=same_dtype(("weight", "per_sample_weights"), "expected scalar type {0} but found {1}"),
)
def _embedding_bag(
    weight,
    indices,
    offsets,
    scale_grad_by_freq=False,
    mode=_BAG_SUM,
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=-1,
):
    """F.embedding_bag: bag k reduces the rows ``weight[indices[offsets[k]:offsets[k + 1]]]`` (the last
    bag runs to the end of ``indices``, or to ``offsets[-1]`` with ``include_last_offset``, whose
    offsets are CSR row pointers), skipping ``padding_idx``. "sum" (scaled by ``per_sample_weights``)
    and "mean" accumulate 16-bit rows in float32; "mean" rounds the sum to the weight's dtype and
    divides it by the bag's unpadded size, as the CPU kernel does; "max" is :func:`_bag_max`. An empty
    bag gives zeros.

    Returns (output, offset2bag, bag_size, max_indices) with the shapes of PyTorch's meta kernel (its
    CUDA layout): offset2bag holds each index's bag (-1 past ``offsets[-1]`` with
    ``include_last_offset``), bag_size each bag's number of unpadded indices (one entry per offset),
    max_indices the winning rows in "max" mode and is empty otherwise. Indices outside
    [0, num_embeddings) and offsets that do not start at 0 or run past the indices raise PyTorch's
    RuntimeError at the next synchronisation."""
    _check_bag_indices("_embedding_bag", indices, offsets)
    bag, bags = _bag_segments(indices, offsets, include_last_offset)
    index = _checked(indices.astype(jnp.int64), weight.shape[0], _BAG_INDEX, RuntimeError, negative=False)
    kept = (indices != padding_idx) & (bag >= 0)
    bag_size = jax.ops.segment_sum(kept.astype(jnp.int64), bag, offsets.shape[0])
    rows = _take(weight, index, 0)
    if mode == _BAG_MAX:
        output, max_indices = _bag_max(rows, index, kept, bag, bags)
        return output, bag, bag_size, max_indices
    accumulate = _float_opmath(weight.dtype)
    rows = rows.astype(accumulate)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.astype(accumulate)[:, None]
    output = jax.ops.segment_sum(jnp.where(kept[:, None], rows, 0), bag, bags).astype(weight.dtype)
    if mode == _BAG_MEAN:
        # divided elementwise: XLA turns a division by a broadcast into a multiplication by the
        # rounded reciprocal, an ulp away from the CPU's quotient
        sizes = jnp.broadcast_to(jnp.maximum(bag_size[:bags], 1).astype(weight.dtype)[:, None], output.shape)
        output = output / jax.lax.optimization_barrier(sizes)
    elif mode != _BAG_SUM:
        raise ValueError(f"aten::_embedding_bag on neuron: mode must be 0 (sum), 1 (mean) or 2 (max), got {mode}")
    return output, bag, bag_size, jnp.zeros((0,), jnp.int64)


def _bag_of_each_index(indices, offsets, offset2bag):
    """offset2bag, or, when the caller passed an empty one, the bags the offsets give (as the CPU
    backward kernels rebuild it)."""
    if indices.shape[0] and offset2bag.shape[0] == 0:
        return _offset2bag(offsets.astype(jnp.int64), indices.shape[0])
    return offset2bag.astype(jnp.int64)


@lowering(aten._embedding_bag_dense_backward.default, static=("num_weights",))
def _embedding_bag_dense_backward(
    grad,
    indices,
    offset2bag,
    bag_size,
    maximum_indices,
    num_weights,
    scale_grad_by_freq,
    mode,
    per_sample_weights,
    padding_idx=-1,
):
    """The weight gradient of :func:`_embedding_bag` (16-bit gradients accumulate in float32).
    "sum"/"mean": each unpadded index's row gets its bag's gradient times its per-sample weight,
    divided by the bag's size ("mean") and, with ``scale_grad_by_freq``, by how often the index occurs
    among all indices (the documented rule, which CUDA follows; PyTorch's CPU kernel divides by the
    count of another index when counts differ, pytorch/pytorch#190063). "max": each feature's
    gradient goes to the row that won it, for every non-empty bag."""
    accumulate = _float_opmath(grad.dtype)
    grad = grad.astype(accumulate)
    bags, features = grad.shape
    if mode == _BAG_MAX:
        nonempty = bag_size[:bags] != 0
        rows = _checked(maximum_indices.astype(jnp.int64), num_weights, _BAG_INDEX, RuntimeError, negative=False)
        updates = jnp.where(nonempty[:, None], grad, 0)
        columns = jnp.broadcast_to(jnp.arange(features), rows.shape)
        return jnp.zeros((num_weights, features), accumulate).at[rows, columns].add(updates, mode="promise_in_bounds")
    bag = offset2bag.astype(jnp.int64)
    in_bag = (bag >= 0) & (bag < bags)
    safe_bag = jnp.clip(bag, 0, max(bags - 1, 0))
    index = _checked(indices.astype(jnp.int64), num_weights, _BAG_INDEX, RuntimeError, negative=False)
    scale = jnp.ones(index.shape, accumulate)
    if per_sample_weights is not None:
        scale = scale * per_sample_weights.astype(accumulate)
    if scale_grad_by_freq:
        counts = jnp.zeros(num_weights, jnp.int64).at[index].add(1, mode="promise_in_bounds")
        scale = scale / counts[index].astype(accumulate)
    if mode == _BAG_MEAN:
        sizes = bag_size.astype(accumulate)[safe_bag]
        scale = jnp.where(sizes != 0, scale / jnp.where(sizes != 0, sizes, 1), scale)
    kept = in_bag & (indices != padding_idx)
    updates = jnp.where(kept[:, None], grad[safe_bag] * scale[:, None], 0) if bags else jnp.zeros((0, features))
    return jnp.zeros((num_weights, features), accumulate).at[index].add(updates, mode="promise_in_bounds")


@lowering(aten._embedding_bag_backward.default, static=("num_weights",))
def _embedding_bag_backward(
    grad,
    indices,
    offsets,
    offset2bag,
    bag_size,
    maximum_indices,
    num_weights,
    scale_grad_by_freq,
    mode,
    sparse,
    per_sample_weights,
    padding_idx=-1,
):
    """The weight gradient of :func:`_embedding_bag`: :func:`_embedding_bag_dense_backward`, with
    offset2bag rebuilt from the offsets when it is empty. Sparse gradients are not supported."""
    if sparse:
        raise NotImplementedError(
            "aten::_embedding_bag_backward on neuron: sparse=True gives a sparse gradient, which neuron does not "
            "support; use sparse=False (a dense gradient)"
        )
    bag = _bag_of_each_index(indices, offsets, offset2bag)
    return _embedding_bag_dense_backward(
        grad,
        indices,
        bag,
        bag_size,
        maximum_indices,
        num_weights,
        scale_grad_by_freq,
        mode,
        per_sample_weights,
        padding_idx,
    )


@lowering(aten._embedding_bag_per_sample_weights_backward.default)
def _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1):
    """The gradient of F.embedding_bag's ``per_sample_weights`` ("sum" mode only): each index's
    bag gradient dotted with its row, 0 for padding and for indices in no bag (16-bit inputs
    accumulate in float32)."""
    if mode != _BAG_SUM:
        raise RuntimeError("embedding_bag_backward: per_sample_weights only supported for mode='sum'")
    accumulate = _float_opmath(grad.dtype)
    bag = _bag_of_each_index(indices, offsets, offset2bag)
    bags = grad.shape[0]
    index = _checked(indices.astype(jnp.int64), weight.shape[0], _BAG_INDEX, RuntimeError, negative=False)
    rows = _take(weight, index, 0).astype(accumulate)
    grads = jnp.take(grad, jnp.clip(bag, 0, max(bags - 1, 0)), axis=0).astype(accumulate)
    kept = (bag >= 0) & (bag < bags) & (indices != padding_idx)
    return jnp.where(kept, jnp.sum(rows * grads, axis=1), 0) if bags else jnp.zeros(index.shape, accumulate)


@lowering(aten.embedding_renorm.default, static=("max_norm", "norm_type"))
def embedding_renorm(self, indices, max_norm, norm_type):
    """``torch.embedding_renorm_`` (F.embedding's and F.embedding_bag's ``max_norm``): each row named
    in ``indices`` whose ``norm_type``-norm exceeds ``max_norm`` is scaled by
    ``max_norm / (norm + 1e-7)``, once however often it is named. As in the CPU kernel
    (``row.norm(norm_type).item()``, then ``row *= scale``), the norm and the scale are rounded to
    the row's dtype and the product is formed in float32; negative indices wrap and out-of-range
    ones raise IndexError, as ``self[index]`` does."""
    if self.ndim != 2:
        raise RuntimeError(f"embedding_renorm_: Expected 2-dimensional tensor, but got {self.ndim}-dimensional tensor")
    rows = _checked(indices.reshape(-1).astype(jnp.int64), self.shape[0], _OUT_OF_BOUNDS, IndexError, negative=True)
    named = jnp.zeros(self.shape[0], jnp.bool_).at[rows].set(True, mode="promise_in_bounds")
    magnitude = jnp.abs(self.astype(_float_opmath(self.dtype)))
    if norm_type == math.inf:
        norm = jnp.max(magnitude, axis=1)
    elif norm_type == -math.inf:
        norm = jnp.min(magnitude, axis=1)
    elif norm_type == 0:
        norm = jnp.sum(magnitude != 0, axis=1).astype(magnitude.dtype)
    else:
        norm = jnp.sum(magnitude**norm_type, axis=1) ** (1 / norm_type)
    norm = norm.astype(self.dtype).astype(jnp.float32)
    scale = (max_norm / (norm + 1e-7)).astype(self.dtype).astype(jnp.float32)
    scaled = (self.astype(jnp.float32) * scale[:, None]).astype(self.dtype)
    return jnp.where((named & (norm > max_norm))[:, None], scaled, self)
