"""Tensor Engine instructions: ``nisa.nc_matmul`` and ``nisa.nc_transpose``."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from nki import errors
from nki._core import compute, dtypes, scope, tensor_engine
from nki._core.compute import NkiTensor
from nki._core.memory import psum, sbuf
from nki._core.tensor import as_mask, cast
from nki.isa.binding import instruction

__all__ = ["nc_matmul", "nc_transpose"]


@instruction(tensors=("stationary", "moving"))
def nc_matmul(
    dst: NkiTensor | None,
    stationary: Any,
    moving: Any,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: bool | None = None,
    tile_position: Any = (),
    tile_size: Any = (),
    perf_mode: Any = None,
    name: str | None = None,
    mask: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """``dst = stationary.T @ moving`` on the Tensor Engine: ``stationary`` ``[K, M]`` and ``moving``
    ``[K, N]`` in SBUF, contracting the partition dimension K (<= 128); M <= 128; N <= 512 (one PSUM
    bank of float32). ``dst`` is a float32 PSUM tile ``[M, N]`` (returned new without ``dst``).
    ``accumulate``: True adds to ``dst``, False overwrites, None (default) overwrites the first
    time and adds while a matmul accumulation into those elements is open (closed by any other write
    or read of them). ``tile_position``/``tile_size`` (PE tiling) are checked and otherwise do not
    change the result.

    Raises:
        NKI's err_unsupported_memory, err_num_partition_mismatch, err_num_partition_exceed_arch_limit,
        err_size_of_dimension_exceed_arch_limit, err_supported_operand_dtype.
    """
    ctx = scope.require("nc_matmul")
    if perf_mode not in (None, "none") and getattr(perf_mode, "value", perf_mode) != "none":
        errors.not_supported(f"nc_matmul(perf_mode={perf_mode!r}) (FP8 double-row mode)")
    st = compute.as_tile(stationary, "stationary", "nc_matmul", (sbuf,))
    mv = compute.as_tile(moving, "moving", "nc_matmul", (sbuf,))
    tensor_engine.check_matmul("nc_matmul", ("stationary", st.shape), ("moving", mv.shape))
    tensor_engine.check_dtypes("nc_matmul", ("stationary", st.dtype), ("moving", mv.dtype))
    if tile_size:
        rows, columns = (int(s) for s in tile_size)
        if st.shape[0] > rows or int(np.prod(st.shape[1:])) > columns:
            errors.size_of_dimension_exceed_arch_limit(0, "stationary", st.shape, "nc_matmul", rows)
    result = tensor_engine.multiply(compute.read_operand(st), compute.read_operand(mv))
    if dst is None:
        dst = compute.new_tile(result.shape, dtypes.float32, psum)
        accumulate = False
    out = compute.as_tile(dst, "dst", "nc_matmul", (psum,))
    if out.dtype != dtypes.float32 and not (ctx.platform.name == "trn3" and out.dtype == dtypes.bfloat16):
        errors.supported_operand_dtype("dst", "nc_matmul", out.dtype, (dtypes.float32,))
    per_partition = int(np.prod(out.shape[1:]))
    if per_partition * out.dtype.itemsize > ctx.platform.psum_bank_bytes * (ctx.platform.gemm_moving_fmax // 512):
        errors.size_of_dimension_exceed_arch_limit(1, "dst", out.shape, "nc_matmul", ctx.platform.gemm_moving_fmax)
    if out.size != result.size or out.shape[0] != result.shape[0]:
        errors.param_shape_mismatch("nc_matmul", [("dst", out.shape), ("stationary.T @ moving", result.shape)])
    result = result.reshape(out.shape)
    accumulate_into(out, result, accumulate, as_mask(mask, out.shape))
    return out


def accumulate_into(out: NkiTensor, result: jnp.ndarray, accumulate: bool | None, mask: np.ndarray | None) -> None:
    """Writes a matmul result into PSUM: added where ``accumulate`` (or, for None, where an
    accumulation is open), else overwritten; the written elements then accumulate."""
    index = out.flat_indices().reshape(-1)
    flags = out.storage.accumulating
    if accumulate is None:
        adding = flags[index].reshape(out.shape)
    else:
        adding = np.full(out.shape, bool(accumulate))
    if adding.any():
        previous = out.read().astype(jnp.float32)
        result = jnp.where(jnp.asarray(adding), previous + result, result)
    out.write(cast(result, out.dtype), mask)
    flags[index] = True if mask is None else (flags[index] | mask.reshape(-1))


@instruction(tensors=("data",))
def nc_transpose(
    dst: NkiTensor | None,
    data: Any,
    engine: Any = None,
    name: str | None = None,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """Swaps the partition dimension and the (flattened) free dimensions of ``data``: on the Tensor
    Engine (up to 128 x 128, SBUF in, PSUM out; the default) or the Vector Engine (up to 32 x 32,
    SBUF/PSUM in and out). ``dst`` has ``data``'s dtype (returned new without ``dst``).

    Raises:
        NKI's err_size_of_dimension_exceed_arch_limit, err_unsupported_memory, err_src_dst_same_dtype.
    """
    ctx = scope.require("nc_transpose")
    vector = getattr(engine, "name", engine) == "vector"
    tile = compute.as_tile(data, "data", "nc_transpose", (sbuf, psum) if vector else (sbuf,))
    limit = ctx.platform.vector_transpose_max if vector else ctx.platform.partitions
    free = int(np.prod(tile.shape[1:]))
    for dim, size in ((0, tile.shape[0]), (1, free)):
        if size > limit:
            errors.size_of_dimension_exceed_arch_limit(dim, "data", tile.shape, "nc_transpose", limit)
    value = compute.read_operand(tile).reshape(tile.shape[0], free).T
    if dst is None:
        dst = compute.new_tile(value.shape, dtype if dtype is not None else tile.dtype, sbuf if vector else psum)
    out = compute.as_tile(dst, "dst", "nc_transpose", (sbuf, psum) if vector else (psum,))
    if dtype is None and out.dtype != tile.dtype:
        errors.src_dst_same_dtype("nc_transpose", tile.dtype, out.dtype)
    if out.size != value.size:
        errors.param_shape_mismatch("nc_transpose", [("dst", out.shape), ("data.T", value.shape)])
    out.write(cast(value.reshape(out.shape), out.dtype), as_mask(mask, out.shape))
    return out
