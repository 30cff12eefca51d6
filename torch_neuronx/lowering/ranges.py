"""The floating values of torch.arange and torch.linspace as the CPU's kernels round them.

ATen's CPU kernels (RangeFactoriesKernel.cpp) compute each element from bounds first converted to
the result dtype (linspace) or to its accumulate type (arange: float for float16/bfloat16, double
for float32 and float64), in that type's arithmetic, one rounding per C++ operation:

- linspace of float16/bfloat16 rounds to the dtype after every operation (``c10::Half``'s operators
  compute in float and return a Half; an index is converted to Half first).
- arange writes 32-byte vector registers (16 half or 8 float lanes, the same in the DEFAULT, AVX2
  and AVX512 builds, measured): each register's first element is ``start + step * idx`` rounded to
  the dtype, the others step from that rounded value; the tail of each thread's chunk is scalar.
- In the AVX2 and AVX512 builds, the compiler contracts ``a + b * c`` into one fused multiply-add
  (float32 and float64 linspace, arange's first elements, the float32/float64 lanes); the baseline
  DEFAULT build does not (``torch.backends.cpu.get_cpu_capability()``).

The bounds are Python numbers, so the values are computed on the host with NumPy, whose operations
round once each and are never contracted, and become the executable's constant: XLA's CPU compiler
contracts ``a * b + c`` into a fused multiply-add and narrows float64 arithmetic between float32
conversions, so the same steps traced would round otherwise. float32 arithmetic is exact as NumPy
does it, float32 fused multiply-adds go through float64 rounded to odd, float64 ones through
error-free transformations (exact except within 2**-106 of a tie).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from torch_neuronx.lowering.fused_multiply_add import cpu_kernels_contract
from torch_neuronx.runtime.host_threads import cpu_thread_count

__all__ = ["arange_values", "bfloat16_nans_positive", "linspace_values", "range_values", "to_scalar_type"]

#: The CPU range kernel's vector register, in bytes.
_VECTOR_BYTES = 32
#: at::internal::GRAIN_SIZE: at::parallel_for splits a range above it among the threads.
_GRAIN_SIZE = 32768
_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
#: Elements computed at a time on the host.
_BLOCK = 1 << 16


def bfloat16_nans_positive(values: np.ndarray) -> np.ndarray:
    """``values`` (any dtype; only bfloat16 is changed) with c10::BFloat16's NaN: its conversion
    from float (``round_to_nearest_even``) writes every NaN as the positive quiet NaN 0x7fc0, where
    ml_dtypes keeps the sign."""
    if values.dtype != _BFLOAT16:
        return values
    return np.where(np.isnan(values), np.array(np.nan, _BFLOAT16), values)


def to_scalar_type(value: float | int, dtype: np.dtype) -> np.generic:
    """A Python number converted as ``Scalar.to<scalar_t>()`` does for a floating ``dtype``: a
    16-bit float through float (a double rounded twice)."""
    if dtype.itemsize < 4:
        return bfloat16_nans_positive(np.float32(value).astype(dtype)[()])[()]
    return dtype.type(value)


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 ``a + b`` and its exact rounding error."""
    total = a + b
    b_part = total - a
    return total, (a - (total - b_part)) + (b - b_part)


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's split of float64 ``x`` into two halves of 26 bits."""
    t = x * 134217729.0  # 2**27 + 1
    high = t - (t - x)
    return high, x - high


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 ``a * b`` and its exact rounding error."""
    product = a * b
    (a_high, a_low), (b_high, b_low) = _split(a), _split(b)
    error = ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low
    return product, error


def _fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 ``a * b + c`` rounded once: the float64 product is exact, the float64 sum is rounded
    to odd, which rounds correctly to float32."""
    product = a.astype(np.float64) * b.astype(np.float64)
    total, error = _two_sum(product, np.float64(c))
    even = (total.view(np.int64) & 1) == 0
    toward = np.nextafter(total, np.where(error > 0, np.inf, -np.inf))
    odd = np.where((error != 0) & even & np.isfinite(total), toward, total)
    return odd.astype(np.float32)


def _fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float64 ``a * b + c`` rounded once (but within 2**-106 of a tie)."""
    product, product_error = _two_product(a, b)
    total, sum_error = _two_sum(product, c)
    fused = total + (sum_error + product_error)
    return np.where(np.isfinite(fused), fused, a * b + c)


def _multiply_add(a: np.ndarray, b: np.ndarray, c: np.ndarray, fused: bool) -> np.ndarray:
    """``c + a * b`` in a's floating type (float32 or float64), fused or rounded twice."""
    if fused:
        return _fma64(a, b, c) if a.dtype == np.float64 else _fma32(a, b, c)
    return c + a * b


def _blockwise(count: int, dtype: np.dtype, values) -> np.ndarray:
    """``values(index)`` for index 0 .. count - 1, computed block by block (a few dozen float64
    temporaries per element stay small enough to reuse their memory)."""
    result = np.empty(count, dtype)
    with np.errstate(all="ignore"):  # overflows and NaNs are the CPU's too
        for low in range(0, count, _BLOCK):
            result[low : low + _BLOCK] = values(np.arange(low, min(count, low + _BLOCK), dtype=np.int64))
    return bfloat16_nans_positive(result)


def linspace_values(start: float | int, end: float | int, steps: int, dtype: np.dtype) -> np.ndarray:
    """linspace of a float16, bfloat16, float32 or float64 result as the CPU computes it, for
    ``steps`` >= 2: ``start + step * i`` for the first half, ``end - step * (steps - 1 - i)`` for
    the rest, ``step = (end - start) / (steps - 1)``, in the dtype (float for the 16-bit ones)."""
    first, last = to_scalar_type(start, dtype), to_scalar_type(end, dtype)
    with np.errstate(all="ignore"):
        if dtype.itemsize == 2:
            step = (np.float32(last) - np.float32(first)).astype(dtype)
            step = (np.float32(step) / np.float32(to_scalar_type(steps - 1, dtype))).astype(dtype)
        else:
            step = dtype.type(dtype.type(last - first) / dtype.type(steps - 1))
    fused = cpu_kernels_contract()

    def values(index: np.ndarray) -> np.ndarray:
        low = index < steps // 2
        count = np.where(low, index, steps - 1 - index)
        if dtype.itemsize == 2:  # Half * Half(float(count)), then Half +/- that: each rounded to Half
            offset = np.float32(step) * count.astype(np.float32).astype(dtype).astype(np.float32)
            offset = offset.astype(dtype).astype(np.float32)
            return np.where(low, np.float32(first) + offset, np.float32(last) - offset).astype(dtype)
        # The CPU subtracts (or fuses into a negated multiply-add, which leaves a NaN operand's
        # sign alone): negating a NaN step would flip the sign bit of every later element.
        signed_step = np.where(low | np.isnan(step), step, -step).astype(dtype)
        return _multiply_add(signed_step, count.astype(dtype), np.where(low, first, last).astype(dtype), fused)

    return _blockwise(steps, dtype, values)


def arange_values(start: float | int, step: float | int, count: int, dtype: np.dtype) -> np.ndarray:
    """arange of a float16, bfloat16, float32 or float64 result as the CPU computes it: ``count``
    elements from ``start`` and ``step`` converted to the accumulate type, written by vector
    registers of 32 bytes, each stepping from its own rounded first element, and scalar tails of
    each thread's chunk (``torch.get_num_threads()`` threads above 32768 elements)."""
    accumulate = np.dtype(np.float32 if dtype.itemsize == 2 else np.float64)
    first, stride = accumulate.type(start), accumulate.type(step)
    lanes = _VECTOR_BYTES // dtype.itemsize
    chunk = max(count, 1)
    threads = cpu_thread_count()
    if count > _GRAIN_SIZE and threads > 1:
        chunk = math.ceil(count / min(threads, math.ceil(count / _GRAIN_SIZE)))
    fused = cpu_kernels_contract()
    contracted = fused and dtype != _BFLOAT16  # BFloat16 + float is not contracted (measured)

    def values(index: np.ndarray) -> np.ndarray:
        chunk_start = index // chunk * chunk
        offset = index - chunk_start
        chunk_length = np.minimum(count, chunk_start + chunk) - chunk_start
        vectorised = offset < chunk_length // (2 * lanes) * (2 * lanes)  # two registers per loop step
        register = np.where(vectorised, chunk_start + offset // lanes * lanes, index)
        strides = np.full(len(index), stride)
        base = _multiply_add(strides, register.astype(accumulate), first, fused).astype(dtype)
        lane = (index - register).astype(accumulate)
        stepped = _multiply_add(lane, strides, base.astype(accumulate), contracted)
        return np.where(lane == 0, base, stepped.astype(dtype))

    return _blockwise(count, dtype, values)


def range_values(start: float | int, end: float | int, step: float | int, dtype: np.dtype) -> np.ndarray:
    """torch.range (deprecated) of a float16, bfloat16 or float32 result as ATen's CPU kernel
    (``range_out``, RangeFactories.cpp, built without fused multiply-adds) computes it:
    ``start + i * step`` for i = 0 .. ``(end - start) / step`` (end included), each operation rounded
    in the accumulate type (float for the 16-bit dtypes, double for float32) and the sum once to the
    dtype. The bounds' checks are the meta kernel's, which runs the same code first.

    Raises:
        RuntimeError: a 16-bit range of more than 2**24 elements, whose float index the CPU
            increments past exactness (not followed here).
    """
    accumulate = np.dtype(np.float32 if dtype.itemsize == 2 else np.float64)
    first, last, stride = accumulate.type(start), accumulate.type(end), accumulate.type(step)
    with np.errstate(all="ignore"):
        count = int((last - first) / stride + accumulate.type(1))
    if accumulate == np.float32 and count > 2**24:
        raise RuntimeError(
            f"torch.range of {count} elements in {dtype} on neuron: the CPU counts the index in float, "
            "inexactly beyond 2**24 elements; use torch.arange, or a float32 range"
        )
    return _blockwise(count, dtype, lambda index: (first + index.astype(accumulate) * stride).astype(dtype))
