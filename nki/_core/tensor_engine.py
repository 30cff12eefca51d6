"""The Tensor Engine: ``stationary.T @ moving`` into PSUM, its tile limits and operand dtypes.

Rules (NKI ISA, ``nisa.nc_matmul``): both operands in SBUF, the result in PSUM as float32; the
contraction runs over the partition dimension of both operands (at most 128, the same for both);
the stationary free size is at most 128 and the moving free size at most 512 (one 2 KiB PSUM bank of
float32; 4096 on NeuronCore-v4); operands are float8/bfloat16/float16/tfloat32/float32, and a
float32 operand needs a float32 partner. Accumulation is float32.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from nki import errors
from nki._core import dtypes, scope

MATMUL_DTYPES = (
    dtypes.float8_e4m3,
    dtypes.float8_e4m3fn,
    dtypes.float8_e5m2,
    dtypes.bfloat16,
    dtypes.float16,
    dtypes.float32,
)


def check_matmul(api: str, stationary: tuple[str, Sequence[int]], moving: tuple[str, Sequence[int]]) -> None:
    """The Tensor Engine's tile limits for ``stationary`` ``[K, M...]`` and ``moving`` ``[K, N...]``
    (name, shape): K <= 128 and equal, M <= 128, N <= the platform's moving limit.

    Raises:
        NKI's err_num_partition_exceed_arch_limit, err_num_partition_mismatch,
        err_size_of_dimension_exceed_arch_limit.
    """
    platform = scope.require(api).platform
    (sname, sshape), (mname, mshape) = stationary, moving
    for shape in (sshape, mshape):
        if shape[0] > platform.partitions:
            errors.num_partition_exceed_arch_limit(shape[0], platform.partitions)
    if sshape[0] != mshape[0]:
        errors.num_partition_mismatch(api, [stationary, moving])
    if math.prod(sshape[1:]) > platform.gemm_stationary_fmax:
        errors.size_of_dimension_exceed_arch_limit(1, sname, sshape, api, platform.gemm_stationary_fmax)
    if math.prod(mshape[1:]) > platform.gemm_moving_fmax:
        errors.size_of_dimension_exceed_arch_limit(1, mname, mshape, api, platform.gemm_moving_fmax)


def check_dtypes(api: str, stationary: tuple[str, np.dtype], moving: tuple[str, np.dtype]) -> None:
    """Operand dtypes of the Tensor Engine; a float32 operand needs a float32 partner.

    Raises:
        NKI's err_supported_operand_dtype.
    """
    for name, dtype in (stationary, moving):
        if dtype not in MATMUL_DTYPES:
            errors.supported_operand_dtype(name, api, dtype, MATMUL_DTYPES)
    wide = [dtype == dtypes.float32 for _, dtype in (stationary, moving)]
    if any(wide) and not all(wide):
        narrow = stationary if not wide[0] else moving
        errors.supported_operand_dtype(narrow[0], api, narrow[1], (dtypes.float32,))


def multiply(stationary: jnp.ndarray, moving: jnp.ndarray) -> jnp.ndarray:
    """``stationary[K, M...]`` and ``moving[K, N...]`` -> ``[M, N]`` (free dimensions flattened),
    float32 products accumulated in float32."""
    k = stationary.shape[0]
    a = stationary.reshape(k, -1).astype(jnp.float32)
    b = moving.reshape(k, -1).astype(jnp.float32)
    return jnp.matmul(a.T, b, precision=jax.lax.Precision.HIGHEST)
