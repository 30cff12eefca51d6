"""torch dtypes, their c10 ScalarType codes (what the C++ core and the cache keys use) and JAX dtypes.

complex32 (ComplexHalf), which XLA does not have, is held as its float16 (real, imag) pairs, the
``view_as_real`` layout (4 bytes an element, as on CUDA): a complex32 storage's buffer is float16, a
complex32 tensor's view of it has dtype :data:`COMPLEX32`, and inside an executable its value is
complex64 (:data:`JAX_DTYPE`) whose parts are float16 values; ``runtime/layout.py`` converts at the
buffer (reading widens exactly, writing rounds each part to float16 as CUDA's ``c10::complex<Half>``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import torch

from torch_neuronx import _C
from torch_neuronx._compat.aten_checks import scalar_type_name

#: torch.dtype -> c10::ScalarType code
CODE_OF: dict[torch.dtype, int] = _C._dtype_codes()
#: c10::ScalarType code -> torch.dtype
DTYPE_OF: dict[int, torch.dtype] = {code: dtype for dtype, code in CODE_OF.items()}

#: torch.dtype -> numpy/JAX dtype, for every dtype a neuron tensor can hold (decision 8).
JAX_DTYPE: dict[torch.dtype, np.dtype] = {
    torch.float32: np.dtype(jnp.float32),
    torch.bfloat16: np.dtype(jnp.bfloat16),
    torch.float16: np.dtype(jnp.float16),
    torch.float8_e4m3fn: np.dtype(ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: np.dtype(ml_dtypes.float8_e5m2),
    torch.int8: np.dtype(jnp.int8),
    torch.int16: np.dtype(jnp.int16),
    torch.int32: np.dtype(jnp.int32),
    torch.int64: np.dtype(jnp.int64),
    torch.uint8: np.dtype(jnp.uint8),
    torch.uint16: np.dtype(jnp.uint16),
    torch.uint32: np.dtype(jnp.uint32),
    torch.uint64: np.dtype(jnp.uint64),
    torch.bool: np.dtype(jnp.bool_),
    torch.complex64: np.dtype(jnp.complex64),
    # Held as float16 pairs (COMPLEX32); computed as complex64.
    torch.complex32: np.dtype(jnp.complex64),
    # Not on the device; host-side conversions and CPU fallback results only.
    torch.float64: np.dtype(jnp.float64),
    torch.complex128: np.dtype(jnp.complex128),
}

#: The element of a complex32 tensor in its storage and in host arrays: a (real, imag) pair of
#: float16. A numpy dtype (host copies are numpy arrays of it), never a JAX array's dtype.
COMPLEX32 = np.dtype([("real", np.float16), ("imag", np.float16)])

#: numpy/JAX dtype -> torch.dtype (complex64 is complex64, COMPLEX32 complex32).
TORCH_DTYPE: dict[np.dtype, torch.dtype] = {
    **{value: key for key, value in JAX_DTYPE.items() if key != torch.complex32},
    COMPLEX32: torch.complex32,
}

#: c10 code -> the JAX dtype of the buffer a storage of that code holds (float16 for complex32).
JAX_DTYPE_OF_CODE: dict[int, np.dtype] = {
    CODE_OF[dtype]: np.dtype(jnp.float16) if dtype == torch.complex32 else jax_dtype
    for dtype, jax_dtype in JAX_DTYPE.items()
}


#: torch dtype -> caffe2::TypeMeta's name, which ATen prints where an error streams a tensor's
#: ``dtype()`` ("Expected out tensor to have dtype float, but got c10::Half instead").
TYPE_META_NAMES: dict[torch.dtype, str] = {
    torch.bool: "bool",
    torch.uint8: "unsigned char",
    torch.int8: "signed char",
    torch.int16: "short int",
    torch.int32: "int",
    torch.int64: "long int",
    torch.uint16: "short unsigned int",
    torch.uint32: "unsigned int",
    torch.uint64: "long unsigned int",
    torch.float16: "c10::Half",
    torch.bfloat16: "c10::BFloat16",
    torch.float32: "float",
    torch.float64: "double",
    torch.float8_e4m3fn: "c10::Float8_e4m3fn",
    torch.float8_e5m2: "c10::Float8_e5m2",
    torch.complex32: "c10::complex<c10::Half>",
    torch.complex64: "c10::complex<float>",
    torch.complex128: "c10::complex<double>",
}

#: JAX dtype -> the C++ type ATen's errors print where they name ``typeid`` (matmul's "got: int !=
#: float", convolution's "Input type (float)"): the TypeMeta names of the dtypes JAX arrays hold
#: (complex32 is computed as complex64, so a JAX array is never complex32).
CPP_TYPE_NAMES: dict[np.dtype, str] = {
    JAX_DTYPE[dtype]: name for dtype, name in TYPE_META_NAMES.items() if dtype != torch.complex32
}


def aten_name(dtype: torch.dtype | np.dtype) -> str:
    """ATen's name of a torch or JAX dtype in its kernels' errors: Float, BFloat16, Long, Byte."""
    if not isinstance(dtype, torch.dtype):
        dtype = TORCH_DTYPE[np.dtype(dtype)]
    return scalar_type_name(dtype)


def cpp_name(dtype: np.dtype) -> str:
    """The C++ type of a JAX dtype as ATen's ``typeid``-based errors print it (see CPP_TYPE_NAMES)."""
    return CPP_TYPE_NAMES.get(np.dtype(dtype), str(dtype))


def jax_dtype(dtype: torch.dtype) -> np.dtype:
    """The JAX dtype of ``dtype``; TypeError for dtypes neuron cannot hold."""
    try:
        return JAX_DTYPE[dtype]
    except KeyError:
        raise TypeError(f"neuron does not support {dtype}") from None


def view_dtype(dtype: torch.dtype) -> np.dtype:
    """The dtype of a tensor's view of its storage buffer (``runtime/layout.View``): the JAX dtype,
    or :data:`COMPLEX32` for complex32; TypeError for dtypes neuron cannot hold."""
    return COMPLEX32 if dtype == torch.complex32 else jax_dtype(dtype)


#: Torch dtypes numpy has no dtype for: host copies move their bits through a same-width integer view.
_THROUGH_INTEGER_VIEW = frozenset(
    (torch.complex32, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16, torch.uint32, torch.uint64)
)


def torch_to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A numpy copy of a CPU tensor, any dtype JAX knows (bfloat16 and float8 included).

    Always a copy: JAX's CPU client may alias a host buffer it is given, and a neuron tensor must
    never share memory with a user's CPU tensor (REPORT.md, hazard 1).
    """
    tensor = tensor.detach().contiguous()
    target = view_dtype(tensor.dtype)
    if tensor.dtype in _THROUGH_INTEGER_VIEW:
        width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()]
        return tensor.view(width).numpy().copy().view(target)
    return np.array(tensor.numpy(), copy=True)


def numpy_to_torch(array: np.ndarray) -> torch.Tensor:
    """A CPU tensor that owns a copy of ``array`` (any dtype in JAX_DTYPE)."""
    dtype = TORCH_DTYPE[np.dtype(array.dtype)]
    array = np.ascontiguousarray(array)
    if dtype in _THROUGH_INTEGER_VIEW:
        width = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}[array.dtype.itemsize]
        return torch.from_numpy(array.view(width).copy()).view(dtype)
    return torch.from_numpy(array.copy())


_VIA_INT64 = frozenset(np.dtype(t) for t in (np.int64, np.uint8, np.uint32, np.uint64))


def convert(value, dtype):
    """``value`` converted to ``dtype`` as PyTorch's CPU kernels convert (c10::convert / static_cast on x86-64).

    - floating -> int32 / int64: truncation toward zero; NaN, +-inf and out-of-range values give the
      type's minimum (what cvttss2si returns), where XLA saturates and maps NaN to 0;
    - floating -> int8 / int16 / uint16: through int32, then wrapped (300.0 -> int8 44);
    - floating -> uint8 / uint32 / uint64: through int64, then wrapped (-1.0 -> uint8 255);
    - real -> float8_e4m3fn: saturating to +-448 (infinities included), NaN stays NaN;
    - floating -> float8_e5m2: a NaN is 0x7F with the NaN's sign (c10's ``fp8e5m2_from_fp32_value``),
      where XLA gives 0x7E and drops the sign of a 16-bit NaN;
    - anything -> :data:`COMPLEX32`: complex64 with each part rounded to float16 (to nearest even, as
      ``c10::complex<Half>``), the value a complex32 tensor holds;
    - bool -> floating or complex: a select of 1 and 0 (XLA's simplifier would turn ``convert(b) *
      y`` into ``select(b, y, 0)``, 0 where the CPU's ``False * inf`` is NaN);
    - everything else: XLA's conversion (round to nearest even, integer wrap-around), which matches.
    """
    value = jnp.asarray(value)
    source, target = np.dtype(value.dtype), np.dtype(dtype)
    if target == COMPLEX32:
        wide = convert(value, jnp.complex64)
        parts = (jnp.real(wide), jnp.imag(wide))
        return jax.lax.complex(*(part.astype(jnp.float16).astype(jnp.float32) for part in parts))
    if source == target:
        return value
    if source == np.bool_ and jnp.issubdtype(target, jnp.inexact):
        # A select, not XLA's convert: its simplifier turns convert(pred) * y into select(pred, y,
        # 0), 0 where the CPU's False * inf and False * NaN are NaN.
        return jnp.where(value, jnp.ones((), target), jnp.zeros((), target))
    if jnp.issubdtype(source, jnp.floating) and jnp.issubdtype(target, jnp.integer):
        through = jnp.int64 if target in _VIA_INT64 else jnp.int32
        info = jnp.iinfo(through)
        wide = value.astype(jnp.float32) if source.itemsize < 4 else value
        # float(info.max) rounds up to 2**31 / 2**63: the first value out of range.
        in_range = (wide >= float(info.min)) & (wide < -float(info.min))
        integer = jnp.where(in_range, jnp.trunc(wide), 0).astype(through)
        integer = jnp.where(in_range, integer, jnp.asarray(info.min, through))
        return integer.astype(target)
    if target == np.dtype(ml_dtypes.float8_e4m3fn) and (
        jnp.issubdtype(source, jnp.floating) or jnp.issubdtype(source, jnp.integer)
    ):
        limit = float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max)
        wide = value.astype(jnp.float32)
        return jnp.where(jnp.isnan(wide), wide, jnp.clip(wide, -limit, limit)).astype(target)
    if target == np.dtype(ml_dtypes.float8_e5m2) and jnp.issubdtype(source, jnp.floating):
        bits = jax.lax.bitcast_convert_type(value.astype(target), jnp.uint8)
        nan_bits = jnp.where(jnp.signbit(value), jnp.uint8(0xFF), jnp.uint8(0x7F))
        return jax.lax.bitcast_convert_type(jnp.where(jnp.isnan(value), nan_bits, bits), target)
    return value.astype(target)
