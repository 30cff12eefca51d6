"""DMA instructions: ``nisa.dma_copy`` and ``nisa.dma_transpose`` (HBM and SBUF; DMA cannot reach
PSUM)."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from nki import errors
from nki._core import compute, scope
from nki._core.compute import NkiTensor
from nki._core.memory import MemoryRegion, private_hbm, sbuf, shared_hbm
from nki._core.tensor import as_mask, cast
from nki.isa.binding import instruction

__all__ = ["dge_mode", "dma_copy", "dma_engine", "dma_transpose", "oob_mode"]


class oob_mode(enum.Enum):  # noqa: N801 - NKI's name
    error = 0
    skip = 1


class dge_mode(enum.Enum):  # noqa: N801 - NKI's name
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class dma_engine(enum.Enum):  # noqa: N801 - NKI's name
    dma = 1
    gpsimd_dma = 2


_DMA_REGIONS: tuple[MemoryRegion, ...] = (sbuf, private_hbm, shared_hbm)


def _dma_operand(x: Any, name: str, api: str) -> NkiTensor:
    if not isinstance(x, NkiTensor):
        raise TypeError(f"'{name}' of '{api}' must be an NKI tensor, got {type(x).__name__}")
    if x.buffer not in _DMA_REGIONS:
        errors.unsupported_memory(name, api, "hbm|sbuf", x.buffer.address_space)
    if x.on_chip:
        compute.as_tile(x, name, api, (sbuf,))
    return x


@instruction(tensors=("src",))
def dma_copy(
    dst: NkiTensor | None,
    src: Any,
    mask: Any = None,
    dst_rmw_op: Any = None,
    oob_mode: Any = oob_mode.error,
    dge_mode: Any = dge_mode.unknown,
    engine: Any = None,
    priority: Any = None,
    name: str | None = None,
    dtype: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """``dst = src`` by DMA between HBM and SBUF tensors with the same number of elements (shapes may
    differ); a dtype change goes through float32.

    Raises:
        NKI's err_unsupported_memory (PSUM), err_param_shape_mismatch (element counts differ).
    """
    scope.require("dma_copy")
    if dst is None:
        errors.operand_cannot_be_none("dst", "dma_copy")
    if dst_rmw_op is not None:
        errors.not_supported("dma_copy(dst_rmw_op=...) (DMA read-modify-write)")
    source = _dma_operand(src, "src", "dma_copy")
    target = _dma_operand(dst, "dst", "dma_copy")
    if source.size != target.size:
        errors.param_shape_mismatch("dma_copy", [("dst", target.shape), ("src", source.shape)])
    masked = as_mask(mask, target.shape)
    value = compute.read_operand(source, masked if masked is not None and source.shape == target.shape else None)
    target.write(
        cast(value.astype(np.float32) if source.dtype != target.dtype else value, target.dtype).reshape(target.shape),
        masked,
    )
    return target


_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


@instruction(tensors=("src",))
def dma_transpose(
    dst: NkiTensor | None,
    src: Any,
    axes: Any = None,
    priority: Any = None,
    dge_mode: Any = dge_mode.unknown,
    oob_mode: Any = oob_mode.error,
    name: str | None = None,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """Transposes ``src`` (HBM or SBUF) into an SBUF tile by DMA: 2-D ``(1, 0)``, 3-D ``(2, 1, 0)``,
    4-D ``(3, 1, 2, 0)`` (the only permutations NKI supports). ``dst`` has ``src``'s dtype.

    Raises:
        NKI's err_src_dst_same_dtype, err_exceed_max_supported_dimension; ValueError for other axes.
    """
    scope.require("dma_transpose")
    source = _dma_operand(src, "src", "dma_transpose")
    if source.ndim not in _TRANSPOSE_AXES:
        errors.exceed_max_supported_dimension("src", source.shape, "dma_transpose", 4)
    permutation = _TRANSPOSE_AXES[source.ndim]
    if axes is not None and tuple(axes) != permutation:
        raise ValueError(f"dma_transpose supports axes={permutation} for a {source.ndim}-d src, got {tuple(axes)}")
    value = compute.read_operand(source).transpose(permutation)
    if dst is None:
        dst = compute.new_tile(tuple(value.shape), source.dtype)
    target = compute.as_tile(dst, "dst", "dma_transpose", (sbuf,))
    if target.dtype != source.dtype:
        errors.src_dst_same_dtype("dma_transpose", source.dtype, target.dtype)
    if target.size != value.size:
        errors.param_shape_mismatch("dma_transpose", [("dst", target.shape), ("src transposed", tuple(value.shape))])
    target.write(value.reshape(target.shape), as_mask(mask, target.shape))
    return target
