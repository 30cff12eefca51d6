"""``nki.isa`` (``nisa``): the NeuronCore instructions, one per engine operation.

Every instruction takes the destination first (``nisa.tensor_copy(dst, src)``, current NKI) or
returns a new tile (``t = nisa.tensor_copy(src)``, legacy NKI); ``neuronxcc.nki.isa`` is this module.
See docs/nki.md for the supported instructions and their rules.
"""

from __future__ import annotations

import enum

from nki._core import scope
from nki.errors import NKIError as NkiValidationError
from nki.isa.dma import dge_mode, dma_copy, dma_engine, dma_transpose, oob_mode
from nki.isa.tensor_engine import nc_matmul, nc_transpose
from nki.isa.vector import (
    ReduceCmd,
    activation,
    activation_reduce,
    affine_select,
    iota,
    memset,
    reciprocal,
    reduce_cmd,
    tensor_copy,
    tensor_reduce,
    tensor_scalar,
    tensor_tensor,
)


class engine(enum.Enum):  # noqa: N801 - NKI's name
    """The NeuronCore engines (``engine=`` of instructions that can run on several)."""

    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


class matmul_perf_mode(enum.Enum):  # noqa: N801 - NKI's name
    none = "none"
    double_row = "double_row"


class nc_version(enum.Enum):  # noqa: N801 - NKI's name
    gen2 = 2
    gen3 = 3
    gen4 = 4


def get_nc_version() -> nc_version:
    """The NeuronCore generation the kernel is traced for (``platform_target``; trn2 by default)."""
    name = scope.require("get_nc_version").platform.name
    return {"trn1": nc_version.gen2, "inf2": nc_version.gen2, "trn2": nc_version.gen3, "trn3": nc_version.gen4}[name]


__all__ = [
    "NkiValidationError",
    "ReduceCmd",
    "activation",
    "activation_reduce",
    "affine_select",
    "dge_mode",
    "dma_copy",
    "dma_engine",
    "dma_transpose",
    "engine",
    "get_nc_version",
    "gpsimd_engine",
    "iota",
    "matmul_perf_mode",
    "memset",
    "nc_matmul",
    "nc_transpose",
    "nc_version",
    "oob_mode",
    "reciprocal",
    "reduce_cmd",
    "scalar_engine",
    "tensor_copy",
    "tensor_engine",
    "tensor_reduce",
    "tensor_scalar",
    "tensor_tensor",
    "unknown_engine",
    "vector_engine",
]
