"""Moving data: ``nl.load``/``nl.store`` between HBM and SBUF, and the tile-shaping functions
(``nl.transpose``, ``nl.broadcast_to``, ``nl.expand_dims``, ``nl.where``), and ``nl.matmul``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from nki import errors
from nki._core import compute, dtypes, scope, tensor_engine
from nki._core.compute import NkiTensor
from nki._core.memory import MemoryRegion, psum, sbuf
from nki._core.tensor import as_mask, cast

__all__ = [
    "broadcast_to",
    "device_print",
    "expand_dims",
    "gather_flattened",
    "is_hbm",
    "is_on_chip",
    "is_psum",
    "is_sbuf",
    "load",
    "load_transpose2d",
    "matmul",
    "store",
    "transpose",
    "where",
]


def _hbm(x: Any, name: str, api: str) -> NkiTensor:
    if not isinstance(x, NkiTensor):
        raise TypeError(f"'{name}' of '{api}' must be an NKI tensor, got {type(x).__name__}")
    if x.on_chip:
        errors.unsupported_memory(name, api, "hbm", x.buffer.address_space)
    return x


def load(src: Any, dtype: Any = None, mask: Any = None, **kwargs: Any) -> NkiTensor:
    """Copies an HBM tensor (or a view of one) into a new SBUF tile of the same shape; its first
    dimension becomes the tile's partition dimension (at most 128). ``mask`` limits the elements
    loaded (the rest stay uninitialised); masked-out elements may lie outside the tensor.

    Raises:
        NKI's err_unsupported_memory (``src`` not in HBM), err_num_partition_exceed_arch_limit,
        err_tensor_access_out_of_bound.
    """
    ctx = scope.require("load")
    src = _hbm(src, "src", "load")
    shape = src.shape if src.ndim >= 2 else (src.shape + (1,))
    if shape[0] > ctx.platform.partitions:
        errors.num_partition_exceed_arch_limit(shape[0], ctx.platform.partitions)
    masked = as_mask(mask, src.shape)
    out = compute.new_tile(shape, dtype if dtype is not None else src.dtype)
    out.write(cast(src.read(masked).reshape(shape), out.dtype), None if masked is None else masked.reshape(shape))
    return out


def store(dst: Any, value: Any, mask: Any = None, **kwargs: Any) -> None:
    """Copies an on-chip tile (or a number) into an HBM tensor view, cast to its dtype and broadcast
    to its shape. ``mask`` limits the elements stored.

    Raises:
        NKI's err_unsupported_memory (``dst`` not in HBM, ``value`` in HBM),
        err_store_dst_shape_smaller_than_other_shape, err_tensor_access_out_of_bound.
    """
    scope.require("store")
    dst = _hbm(dst, "dst", "store")
    masked = as_mask(mask, dst.shape)
    if isinstance(value, NkiTensor):
        tile = compute.as_tile(value, "value", "store")
        data = compute.read_operand(tile, masked if masked is not None and tile.shape == dst.shape else None)
        if data.shape != dst.shape:
            if _broadcasts(tile.shape, dst.shape):
                data = jnp.broadcast_to(data, dst.shape)
            elif tile.size == dst.size:
                data = data.reshape(dst.shape)
            else:
                errors.store_dst_shape_smaller_than_other_shape(
                    "store", dst.name or "dst", dst.shape, errors.operand("value", tile.shape)
                )
    elif isinstance(value, (int, float, bool, np.number)):
        data = value
    else:
        raise TypeError(f"'value' of 'store' must be an SBUF/PSUM tile or a number, got {type(value).__name__}")
    dst.write(cast(data, dst.dtype), masked)


def _broadcasts(source: tuple[int, ...], target: tuple[int, ...]) -> bool:
    try:
        return tuple(np.broadcast_shapes(source, target)) == tuple(target)
    except ValueError:
        return False


def load_transpose2d(src: Any, dtype: Any = None, mask: Any = None, **kwargs: Any) -> NkiTensor:
    """Loads a 2-D HBM tensor ``[F, P]`` transposed into a new SBUF tile ``[P, F]``."""
    ctx = scope.require("load_transpose2d")
    src = _hbm(src, "src", "load_transpose2d")
    if src.ndim != 2:
        errors.exceed_max_supported_dimension("src", src.shape, "load_transpose2d", 2)
    if src.shape[1] > ctx.platform.partitions:
        errors.num_partition_exceed_arch_limit(src.shape[1], ctx.platform.partitions)
    out = compute.new_tile((src.shape[1], src.shape[0]), dtype if dtype is not None else src.dtype)
    out.write(cast(src.read(as_mask(mask, src.shape)).T, out.dtype))
    return out


def transpose(x: Any, dtype: Any = None, mask: Any = None, **kwargs: Any) -> NkiTensor:
    """Swaps the partition and the free dimension of a 2-D tile of at most 128 x 128 on the Tensor
    Engine; the result is a new PSUM tile.

    Raises:
        NKI's err_exceed_max_supported_dimension (not 2-D), err_size_of_dimension_exceed_arch_limit.
    """
    ctx = scope.require("transpose")
    tile = compute.as_tile(x, "x", "transpose")
    if tile.ndim != 2:
        errors.exceed_max_supported_dimension("x", tile.shape, "transpose", 2)
    for dim in (0, 1):
        if tile.shape[dim] > ctx.platform.partitions:
            errors.size_of_dimension_exceed_arch_limit(dim, "x", tile.shape, "transpose", ctx.platform.partitions)
    out = compute.new_tile((tile.shape[1], tile.shape[0]), dtype if dtype is not None else tile.dtype, psum)
    out.write(cast(compute.read_operand(tile).T, out.dtype))
    return out


def matmul(x: Any, y: Any, transpose_x: bool = False, mask: Any = None, **kwargs: Any) -> NkiTensor:
    """``x @ y`` on the Tensor Engine (``x.T @ y`` with ``transpose_x``): x is ``[K, M]`` when
    transposed (``[M, K]`` otherwise, transposed on the Tensor Engine first), y is ``[K, N]``;
    K, M <= 128 and N <= 512. The float32 result is a new PSUM tile ``[M, N]``.

    Raises:
        NKI's err_unsupported_memory, err_size_of_dimension_exceed_arch_limit,
        err_param_shape_incompatible_with_matmul.
    """
    scope.require("matmul")
    xt = compute.as_tile(x, "x", "matmul", (sbuf,))
    yt = compute.as_tile(y, "y", "matmul", (sbuf,))
    if not transpose_x:
        if xt.ndim != 2:
            errors.exceed_max_supported_dimension("x", xt.shape, "matmul", 2)
        stationary_value = compute.read_operand(xt).T
        stationary_shape = (xt.shape[1], xt.shape[0])
        tensor_engine.check_matmul("matmul", ("x", stationary_shape), ("y", yt.shape))
        tensor_engine.check_dtypes("matmul", ("x", xt.dtype), ("y", yt.dtype))
        result = tensor_engine.multiply(stationary_value, compute.read_operand(yt))
    else:
        tensor_engine.check_matmul("matmul", ("x", xt.shape), ("y", yt.shape))
        tensor_engine.check_dtypes("matmul", ("x", xt.dtype), ("y", yt.dtype))
        result = tensor_engine.multiply(compute.read_operand(xt), compute.read_operand(yt))
    out = compute.new_tile(result.shape, dtypes.float32, psum)
    out.write(result, as_mask(mask, result.shape))
    return out


def broadcast_to(x: Any, shape: Any, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    """A new SBUF tile of ``shape`` holding ``x`` broadcast by NumPy's rules (partition dimension
    included)."""
    return compute.broadcast_tile(x, tuple(shape), "broadcast_to", dtype)


def expand_dims(x: Any, axis: int) -> NkiTensor:
    """A view of ``x`` with a new dimension of size 1 at ``axis``."""
    return x.expand_dim(axis)


def where(condition: Any, x: Any, y: Any, dtype: Any = None, mask: Any = None, **kwargs: Any) -> NkiTensor:
    """``x`` where ``condition`` is nonzero, else ``y`` (tiles or numbers, broadcast); a new SBUF tile."""
    scope.require("where")
    operands = [condition, x, y]
    for name, operand in zip(("condition", "x", "y"), operands, strict=True):
        if isinstance(operand, NkiTensor):
            compute.as_tile(operand, name, "where")
    shape = compute.broadcast_shapes("where", operands)
    out_dtype = compute.result_dtype([x, y], dtype)
    values = [compute.read_operand(o) if isinstance(o, NkiTensor) else o for o in operands]
    result = jnp.where(
        jnp.asarray(values[0]) != 0, jnp.asarray(values[1], jnp.float32), jnp.asarray(values[2], jnp.float32)
    )
    out = compute.new_tile(shape, out_dtype)
    out.write(cast(jnp.broadcast_to(result, shape), out_dtype), as_mask(mask, shape))
    return out


def gather_flattened(data: Any, indices: Any, axis: int = 0, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    errors.not_supported("nl.gather_flattened")


def device_print(prefix: str, tensor: Any, **kwargs: Any) -> None:
    """Prints ``prefix`` and the tensor's value when the kernel runs (jax.debug.print)."""
    scope.require("device_print")
    jax.debug.print(str(prefix) + " {}", tensor.read())


def is_hbm(buffer: Any) -> bool:
    return isinstance(buffer, MemoryRegion) and not buffer.on_chip


def is_on_chip(buffer: Any) -> bool:
    return isinstance(buffer, MemoryRegion) and buffer.on_chip


def is_psum(buffer: Any) -> bool:
    return buffer is psum


def is_sbuf(buffer: Any) -> bool:
    return buffer is sbuf
