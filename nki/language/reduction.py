"""Reductions over the free dimensions of a tile: ``nl.sum``, ``nl.max``, ... and ``nl.softmax``,
``nl.rms_norm``. The partition dimension cannot be reduced (NKI: the axes must be free dimensions,
the last contiguous ones)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from nki._core import compute, dtypes, scope
from nki._core.tensor import as_mask, cast

__all__ = ["all", "max", "mean", "min", "prod", "rms_norm", "softmax", "sum", "var"]


def free_axes(axis: Any, ndim: int, api: str) -> tuple[int, ...]:
    """The reduced axes: free dimensions only, the last contiguous ones of the tile.

    Raises:
        ValueError: the partition dimension, or axes that are not the trailing dimensions.
    """
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(sorted(int(a) + ndim if int(a) < 0 else int(a) for a in axes))
    if not axes or axes[0] == 0:
        raise ValueError(f"'{api}' reduces free dimensions only (axis 1 and up); got axis={axis!r}")
    if axes != tuple(range(axes[0], ndim)):
        raise ValueError(f"'{api}' reduces the last contiguous free dimensions of a {ndim}-d tile; got axis={axis!r}")
    return axes


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    """The result shape; an on-chip result keeps at least two dimensions (``[P, 1]``)."""
    kept = (
        tuple(1 if d in axes else n for d, n in enumerate(shape))
        if keepdims
        else tuple(n for d, n in enumerate(shape) if d not in axes)
    )
    return kept if len(kept) >= 2 else kept + (1,) * (2 - len(kept))


REDUCERS = {
    "add": jnp.sum,
    "multiply": jnp.prod,
    "maximum": jnp.max,
    "minimum": jnp.min,
    "bitwise_and": lambda v, axis: jax.lax.reduce(v, np.int32(-1), jax.lax.bitwise_and, axis),
    "bitwise_or": lambda v, axis: jax.lax.reduce(v, np.int32(0), jax.lax.bitwise_or, axis),
    "bitwise_xor": lambda v, axis: jax.lax.reduce(v, np.int32(0), jax.lax.bitwise_xor, axis),
}


#: Each reduction operator's identity: what an element that a mask leaves out contributes.
IDENTITIES = {
    "add": 0,
    "multiply": 1,
    "maximum": -np.inf,
    "minimum": np.inf,
    "bitwise_and": -1,
    "bitwise_or": 0,
    "bitwise_xor": 0,
}


def reduce_value(op: str, value: jnp.ndarray, axes: tuple[int, ...], valid: np.ndarray | None = None) -> jnp.ndarray:
    """``op`` over ``axes`` of ``value`` in the engine's math: float32, or int32 bit patterns for
    bitvec operators. ``valid`` (a ``mask=`` over ``value``'s shape) leaves the other elements out:
    NKI's mask bounds an instruction's iteration domain, so they count as ``op``'s identity (they
    read as uninitialised memory, NaN)."""
    work = value.astype(jnp.int32 if op.startswith("bitwise") else jnp.float32)
    if valid is not None:
        work = jnp.where(jnp.asarray(valid), work, jnp.asarray(IDENTITIES[op], work.dtype))
    if op.startswith("bitwise"):
        return REDUCERS[op](work, axes)
    return REDUCERS[op](work, axis=axes)


def reduced_mask(valid: np.ndarray | None, axes: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray | None:
    """The result elements a masked reduction writes, of the result's ``shape``: those that reduce at
    least one element of ``valid`` (the rest stay uninitialised, as a masked instruction leaves
    them); None without a mask."""
    return None if valid is None else np.any(valid, axis=axes).reshape(shape)


def _count(valid: np.ndarray | None, axes: tuple[int, ...], shape: tuple[int, ...], size: int) -> Any:
    """How many elements each result (of the result's ``shape``) of a reduction over ``axes``
    reduces: ``size`` (the reduced axes' elements) without a mask, else the masked ones (at least
    1: a result without any is not written)."""
    if valid is None:
        return size
    return jnp.asarray(np.maximum(np.sum(valid, axis=axes), 1).reshape(shape), jnp.float32)


def _reduce(op: str, api: str, x: Any, axis: Any, dtype: Any, keepdims: bool, mask: Any, negate: bool = False):
    scope.require(api)
    tile = compute.as_tile(x, "x", api)
    axes = free_axes(axis, tile.ndim, api)
    shape = reduced_shape(tile.shape, axes, keepdims)
    valid = as_mask(mask, tile.shape)
    value = reduce_value(op, compute.read_operand(tile, valid), axes, valid)
    if negate:
        value = -value
    out_dtype = dtypes.as_dtype(dtype) if dtype is not None else tile.dtype
    out = compute.new_tile(shape, out_dtype)
    out.write(cast(value.reshape(shape), out_dtype), reduced_mask(valid, axes, shape))
    return out


def sum(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, mask: Any = None, negate: bool = False, **kw):  # noqa: A001
    """The sum of ``x`` over the free ``axis`` (float32 accumulation); a new SBUF tile."""
    return _reduce("add", "sum", x, axis, dtype, keepdims, mask, negate)


def max(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, mask: Any = None, negate: bool = False, **kw):  # noqa: A001
    """The maximum of ``x`` over the free ``axis``; a new SBUF tile."""
    return _reduce("maximum", "max", x, axis, dtype, keepdims, mask, negate)


def min(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, mask: Any = None, negate: bool = False, **kw):  # noqa: A001
    """The minimum of ``x`` over the free ``axis``; a new SBUF tile."""
    return _reduce("minimum", "min", x, axis, dtype, keepdims, mask, negate)


def prod(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, mask: Any = None, **kw):
    """The product of ``x`` over the free ``axis``; a new SBUF tile."""
    return _reduce("multiply", "prod", x, axis, dtype, keepdims, mask)


def mean(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, mask: Any = None, **kw):
    """The mean of ``x`` over the free ``axis`` (float32); with ``mask``, of the masked elements; a
    new SBUF tile."""
    scope.require("mean")
    tile = compute.as_tile(x, "x", "mean")
    axes = free_axes(axis, tile.ndim, "mean")
    shape = reduced_shape(tile.shape, axes, keepdims)
    valid = as_mask(mask, tile.shape)
    total = reduce_value("add", compute.read_operand(tile, valid), axes, valid).reshape(shape)
    value = total / _count(valid, axes, shape, int(np.prod([tile.shape[a] for a in axes])))
    out = compute.new_tile(shape, dtypes.as_dtype(dtype) if dtype is not None else tile.dtype)
    out.write(cast(value, out.dtype), reduced_mask(valid, axes, shape))
    return out


def var(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, mask: Any = None, **kw):
    """The (population) variance of ``x`` over the free ``axis`` (of the masked elements, with
    ``mask``); the reduced axes are kept (NKI)."""
    scope.require("var")
    tile = compute.as_tile(x, "x", "var")
    axes = free_axes(axis, tile.ndim, "var")
    shape = reduced_shape(tile.shape, axes, True)
    valid = as_mask(mask, tile.shape)
    value = compute.read_operand(tile, valid).astype(jnp.float32)
    count = _count(valid, axes, shape, int(np.prod([tile.shape[a] for a in axes])))
    mean = reduce_value("add", value, axes, valid).reshape(shape) / count
    squares = reduce_value("add", jnp.square(value - mean), axes, valid).reshape(shape) / count
    out = compute.new_tile(shape, dtypes.as_dtype(dtype) if dtype is not None else tile.dtype)
    out.write(cast(squares, out.dtype), reduced_mask(valid, axes, shape))
    return out


def all(x: Any, axis: Any, dtype: Any = None, mask: Any = None, **kw):  # noqa: A001
    """1 where every element of ``x`` (every masked one, with ``mask``) over the free ``axis`` is
    nonzero, else 0; a new SBUF tile."""
    scope.require("all")
    tile = compute.as_tile(x, "x", "all")
    axes = free_axes(axis, tile.ndim, "all")
    shape = reduced_shape(tile.shape, axes, False)
    valid = as_mask(mask, tile.shape)
    nonzero = compute.read_operand(tile, valid) != 0
    if valid is not None:
        nonzero = nonzero | ~jnp.asarray(valid)
    value = jnp.all(nonzero, axis=axes)
    out = compute.new_tile(shape, dtypes.as_dtype(dtype) if dtype is not None else tile.dtype)
    out.write(cast(value.reshape(shape), out.dtype), reduced_mask(valid, axes, shape))
    return out


def softmax(x: Any, axis: Any = -1, dtype: Any = None, mask: Any = None, **kw):
    """softmax(x) over the free ``axis`` (float32, max-subtracted); with ``mask``, over the masked
    elements, the others left unwritten; a new SBUF tile."""
    scope.require("softmax")
    tile = compute.as_tile(x, "x", "softmax")
    axes = free_axes(axis, tile.ndim, "softmax")
    valid = as_mask(mask, tile.shape)
    value = compute.read_operand(tile, valid).astype(jnp.float32)
    if valid is not None:
        value = jnp.where(jnp.asarray(valid), value, -jnp.inf)
    out = compute.new_tile(tile.shape, dtypes.as_dtype(dtype) if dtype is not None else tile.dtype)
    out.write(cast(jax.nn.softmax(value, axis=axes), out.dtype), valid)
    return out


def rms_norm(
    x: Any, w: Any, axis: Any, n: int, epsilon: float = 1e-6, dtype: Any = None, compute_dtype: Any = None, **kw
):
    """``x / sqrt(sum(x ** 2, axis) / n + epsilon) * w`` (float32); a new SBUF tile."""
    scope.require("rms_norm")
    tile = compute.as_tile(x, "x", "rms_norm")
    weight = compute.as_tile(w, "w", "rms_norm")
    axes = free_axes(axis, tile.ndim, "rms_norm")
    value = compute.read_operand(tile).astype(jnp.float32)
    rms = jnp.sqrt(jnp.sum(value * value, axis=axes, keepdims=True) / n + epsilon)
    result = value / rms * compute.read_operand(weight).astype(jnp.float32)
    out = compute.new_tile(tile.shape, dtypes.as_dtype(dtype) if dtype is not None else tile.dtype)
    out.write(cast(result, out.dtype))
    return out


for _fn, _op in ((sum, "add"), (max, "maximum"), (min, "minimum"), (prod, "multiply")):
    _fn.nki_op = _op
del _fn, _op
