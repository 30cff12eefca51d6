"""Allocating tensors: ``nl.ndarray``, ``nl.zeros`` and friends, constants."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from nki import errors
from nki._core import compute, context, dtypes, scope
from nki._core.compute import NkiTensor
from nki._core.memory import MemoryRegion, Storage, as_region, sbuf, shared_hbm
from nki._core.tensor import cast

__all__ = [
    "empty_like",
    "full",
    "full_like",
    "ndarray",
    "ones",
    "ones_like",
    "rand",
    "random_seed",
    "shared_constant",
    "shared_identity_matrix",
    "zeros",
    "zeros_like",
]


def ndarray(
    shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "", address: Any = None, **kwargs: Any
) -> NkiTensor:
    """A new, uninitialised tensor of ``shape`` and ``dtype`` in ``buffer`` (SBUF by default).

    On-chip tensors take their partition dimension first (or where ``nl.par_dim`` marks it) and are
    limited to 128 partitions, a PSUM tile to one 2 KiB bank per partition and 8 banks. A
    ``shared_hbm`` tensor is shared by every program of an SPMD launch grid (the k-th shared
    allocation of each program is the same tensor). Uninitialised memory reads as NaN.

    Raises:
        NKI's err_num_partition_exceed_arch_limit, err_stack_overflow_psum, err_stack_overflow_sbuf.
    """
    ctx = scope.require("ndarray")
    region = as_region(buffer)
    if address is not None:
        errors.not_supported("nl.ndarray(address=...) (explicit allocation)")
    if region is shared_hbm:
        return NkiTensor.whole(_shared(ctx, shape, dtype, name))
    return compute.new_tile(shape, dtype, region, name)


def _shared(ctx: context.TraceContext, shape: Any, dtype: Any, name: str) -> Storage:
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    dtype = dtypes.as_dtype(dtype)
    position = ctx.shared_cursor
    ctx.shared_cursor += 1
    if position < len(ctx.shared):
        storage = ctx.shared[position]
        if storage.shape != shape or storage.dtype != dtype:
            raise ValueError(
                f"program {ctx.program_id} allocates shared_hbm tensor #{position} as {dtype}{list(shape)}, but "
                f"program 0 allocated it as {storage.dtype}{list(storage.shape)}: every program of an SPMD grid "
                "must allocate the same shared tensors in the same order"
            )
        return storage
    storage = Storage(shape, dtype, shared_hbm, name or f"shared_hbm_{position}")
    ctx.shared.append(storage)
    return storage


def full(shape: Any, fill_value: Any, dtype: Any, buffer: Any = sbuf, name: str = "", **kwargs: Any) -> NkiTensor:
    """A new on-chip tensor filled with ``fill_value`` (a memset).

    Raises:
        NKI's err_hbm_tensor_with_init_value_not_supported for an HBM buffer.
    """
    scope.require("full")
    region = as_region(buffer)
    if not region.on_chip:
        errors.hbm_tensor_with_init_value_not_supported()
    tile = compute.new_tile(shape, dtype, region, name)
    tile.write(cast(fill_value, tile.dtype))
    return tile


def zeros(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "", **kwargs: Any) -> NkiTensor:
    """A new on-chip tensor of zeros (see :func:`full`)."""
    return full(shape, 0, dtype, buffer, name)


def ones(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "", **kwargs: Any) -> NkiTensor:
    """A new on-chip tensor of ones (see :func:`full`)."""
    return full(shape, 1, dtype, buffer, name)


def _like(x: NkiTensor, dtype: Any, buffer: Any) -> tuple[tuple[int, ...], Any, MemoryRegion]:
    return x.shape, dtype if dtype is not None else x.dtype, as_region(buffer) if buffer is not None else x.buffer


def empty_like(x: NkiTensor, dtype: Any = None, buffer: Any = None, name: str = "", **kwargs: Any) -> NkiTensor:
    """A new uninitialised tensor shaped like ``x`` (its dtype and buffer unless given)."""
    shape, dtype, region = _like(x, dtype, buffer)
    return ndarray(shape, dtype, region, name)


def zeros_like(x: NkiTensor, dtype: Any = None, buffer: Any = None, name: str = "", **kwargs: Any) -> NkiTensor:
    shape, dtype, region = _like(x, dtype, buffer)
    return zeros(shape, dtype, sbuf if region is None else region, name)


def ones_like(x: NkiTensor, dtype: Any = None, buffer: Any = None, name: str = "", **kwargs: Any) -> NkiTensor:
    shape, dtype, region = _like(x, dtype, buffer)
    return ones(shape, dtype, region, name)


def full_like(x: NkiTensor, fill_value: Any, dtype: Any = None, buffer: Any = None, name: str = "") -> NkiTensor:
    shape, dtype, region = _like(x, dtype, buffer)
    return full(shape, fill_value, dtype, region, name)


def shared_constant(constant: Any, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    """A shared HBM tensor holding ``constant`` (a numpy array, or the path of a ``.npy`` file)."""
    scope.require("shared_constant")
    array = np.load(constant) if isinstance(constant, str) else np.asarray(constant)
    dtype = dtypes.as_dtype(dtype if dtype is not None else array.dtype)
    storage = Storage(array.shape, dtype, shared_hbm, "shared_constant", value=jnp.asarray(array.astype(dtype)))
    storage.written = True
    return NkiTensor.whole(storage)


def shared_identity_matrix(n: int, dtype: Any = dtypes.uint8, dst: NkiTensor | None = None, **kwargs: Any) -> NkiTensor:
    """An ``n`` x ``n`` identity matrix in SBUF (or written into ``dst``)."""
    scope.require("shared_identity_matrix")
    tile = dst if dst is not None else compute.new_tile((n, n), dtype)
    tile.write(cast(jnp.eye(n, dtype=jnp.float32), tile.dtype))
    return tile


def rand(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "", **kwargs: Any) -> NkiTensor:
    errors.not_supported("nl.rand (on-device random numbers)")


def random_seed(seed: Any) -> None:
    errors.not_supported("nl.random_seed (on-device random numbers)")
