"""c10's overflow check of a Scalar converted to a tensor's dtype (``checked_convert``).

PyTorch's kernels convert fill values, clamp bounds and other Scalar parameters with
c10/util/TypeCast.h ``checked_convert``: a value that does not fit the result's dtype raises "value
cannot be converted to type int8_t without overflow" instead of wrapping. Lowerings list such
arguments as ``checked``; the engine checks them here.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx.lowering.promotion import is_number
from torch_neuronx.runtime.dtypes import COMPLEX32, view_dtype
from torch_neuronx.runtime.tracing import device_check

#: c10's names of the types in "value cannot be converted to type X without overflow".
_C10_NAMES = {
    np.dtype(jnp.int8): "int8_t",
    np.dtype(jnp.uint8): "uint8_t",
    np.dtype(jnp.int16): "int16_t",
    np.dtype(jnp.uint16): "uint16_t",
    np.dtype(jnp.int32): "int",
    np.dtype(jnp.uint32): "uint32_t",
    np.dtype(jnp.int64): "int64_t",
    np.dtype(jnp.uint64): "uint64_t",
    np.dtype(jnp.float16): "c10::Half",
    np.dtype(jnp.bfloat16): "c10::BFloat16",
    np.dtype(jnp.float32): "float",
    np.dtype(jnp.complex64): "c10::complex<float>",
    COMPLEX32: "c10::complex<c10::Half>",
}
#: The type each part of a complex value is checked against (c10's ``overflows`` of a complex).
_COMPLEX_PARTS = {np.dtype(jnp.complex64): np.dtype(jnp.float32), COMPLEX32: np.dtype(jnp.float16)}
#: ``at::opmath_type``: the type CUDA's kernels convert a Scalar to where they compute in opmath.
_OPMATH = {
    np.dtype(jnp.float16): np.dtype(jnp.float32),
    np.dtype(jnp.bfloat16): np.dtype(jnp.float32),
    COMPLEX32: np.dtype(jnp.complex64),
}

__all__ = ["c10_type_name", "check_fits", "checked_dtype", "is_number", "negated", "raise_if_overflows"]


def c10_type_name(dtype: Any) -> str | None:
    """c10's name of a dtype in conversion errors (``int8_t``, ``c10::Half``); None for the others."""
    return _C10_NAMES.get(np.dtype(dtype))


def negated(value: Any) -> Any:
    """``-value`` as c10's ``Scalar`` negates it: an integer Scalar is an int64, whose negation
    wraps (``-(-2**63)`` is ``-2**63``), so int64 ``sub(x, y, alpha=-2**63)`` computes on the CPU."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (-value + 2**63) % 2**64 - 2**63
    return -value


def checked_dtype(result: torch.dtype, in_opmath: bool = False) -> np.dtype:
    """The dtype a kernel converts its Scalar parameters to: the result's (:data:`COMPLEX32` for
    complex32), or with ``in_opmath`` its ``at::opmath_type`` (float for float16 and bfloat16,
    ``c10::complex<float>`` for complex32), where CUDA's kernel calls ``Scalar::to<opmath_t>``."""
    dtype = view_dtype(result)
    return _OPMATH.get(dtype, dtype) if in_opmath else dtype


def check_fits(value: Any, dtype: Any) -> None:
    """c10's overflow check of a Scalar converted to ``dtype``: integer targets reject NaN, infinities
    and values outside [lowest, max] (an integer may go down to -max for an unsigned type); floating
    targets reject finite values beyond their range; a complex value fits a real type only with a
    zero imaginary part (its real part is checked); a complex target (complex64, :data:`COMPLEX32`)
    checks each part against its parts' type.

    A concrete value (a Python number: a static argument, a graph constant) raises now, as on the CPU.
    A traced one (a runtime scalar of the executable) is checked inside it and raised at the next
    synchronisation point; the eager kernel checks its runtime scalars on the host instead
    (:func:`raise_if_overflows`, before each launch), so eager calls raise at the call.

    Raises:
        RuntimeError: c10's "value cannot be converted to type int8_t without overflow".
    """
    dtype = np.dtype(dtype)
    name = _C10_NAMES.get(dtype)
    if is_number(value) or isinstance(value, np.generic):
        raise_if_overflows(value, dtype)
        return
    value = jnp.asarray(value)
    if name is None or value.dtype == jnp.bool_:
        return
    if dtype in _COMPLEX_PARTS:
        limit = float(jnp.finfo(_COMPLEX_PARTS[dtype]).max)
        parts = jnp.stack([jnp.real(value), jnp.imag(value)]).astype(jnp.float64)
        failed = jnp.any(jnp.isfinite(parts) & (jnp.abs(parts) > limit))
        device_check(failed, jnp.int64(0), _overflow_message(name), RuntimeError)
        return
    imaginary = jnp.zeros((), jnp.bool_)
    if jnp.issubdtype(value.dtype, jnp.complexfloating):  # fits only with a zero imaginary part
        imaginary, value = jnp.imag(value) != 0, jnp.real(value)
    wide = value.astype(jnp.float64)
    if jnp.issubdtype(dtype, jnp.integer):
        info = jnp.iinfo(dtype)
        lowest = -float(info.max) if info.min == 0 and jnp.issubdtype(value.dtype, jnp.integer) else float(info.min)
        failed = jnp.isnan(wide) | (wide < lowest) | (wide > float(info.max))
    else:
        failed = jnp.isfinite(wide) & (jnp.abs(wide) > float(jnp.finfo(dtype).max))
    failed = failed | imaginary
    device_check(failed, jnp.int64(0), _overflow_message(name), RuntimeError)


def raise_if_overflows(value: Any, dtype: Any) -> None:
    """:func:`check_fits` for a concrete number, on the host (exact for integers of any size).

    Raises:
        RuntimeError: c10's "value cannot be converted to type int8_t without overflow".
    """
    dtype = np.dtype(dtype)
    name = _C10_NAMES.get(dtype)
    if name is None or isinstance(value, (bool, np.bool_)):
        return
    if dtype in _COMPLEX_PARTS:
        limit = float(jnp.finfo(_COMPLEX_PARTS[dtype]).max)
        number = complex(value)
        if any(math.isfinite(part) and abs(part) > limit for part in (number.real, number.imag)):
            raise RuntimeError(_overflow_message(name))
        return
    if isinstance(value, (complex, np.complexfloating)):
        # c10's overflows(): a complex value fits a real type only with a zero imaginary part.
        if value.imag != 0:
            raise RuntimeError(_overflow_message(name))
        value = value.real
    if np.issubdtype(dtype, np.integer):
        info = jnp.iinfo(dtype)
        integral = isinstance(value, (int, np.integer))
        if not integral and not math.isfinite(float(value)):
            raise RuntimeError(_overflow_message(name))
        lowest = -int(info.max) if info.min == 0 and integral else int(info.min)
        number = int(value) if integral else float(value)
        failed = number < lowest or number > int(info.max)
    else:
        wide = float(value)
        failed = math.isfinite(wide) and abs(wide) > float(jnp.finfo(dtype).max)  # NumPy lacks bfloat16's
    if failed:
        raise RuntimeError(_overflow_message(name))


def _overflow_message(name: str) -> str:
    return f"value cannot be converted to type {name} without overflow"
