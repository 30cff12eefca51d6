"""Tensors created or filled on the device: fill, zero, full, arange/iota, range, linspace, eye,
scalar_tensor, kaiser_window.

Factory arguments (device, layout, pin_memory) are placement, decided by the kernel; the registry
casts every result to the dtype PyTorch's meta kernel reports.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx.lowering import overflow
from torch_neuronx.lowering.ranges import arange_values, linspace_values, range_values, to_scalar_type
from torch_neuronx.lowering.registry import lowering
from torch_neuronx.runtime.dtypes import jax_dtype

aten = torch.ops.aten
prims = torch.ops.prims


def _filled(value, shape) -> jax.Array:
    """``value`` broadcast to ``shape``, the value behind an optimization barrier: a constant fill
    lets XLA fold ``x + zeros_like(x)`` to ``x``, which keeps the sign of -0.0 where IEEE addition
    gives +0.0 (the CPU's ``1 / (x + zeros_like(x))`` is inf at -0.0)."""
    return jnp.broadcast_to(jax.lax.optimization_barrier(jnp.asarray(value)), tuple(shape))


@lowering(aten.fill.Scalar, checked=("value",))
def fill(self, value):
    """Tensor.fill_: every element set to the Scalar ``value``, which must fit self's dtype."""
    return _filled(value, self.shape)


@lowering(aten.fill.Tensor)
def fill_tensor(self, value):
    """Tensor.fill_ with a 0-dim tensor value (converted like a copy, without the overflow check)."""
    return _filled(value, self.shape)


@lowering(aten.zero.default)
def zero(self):
    return _filled(jnp.zeros((), self.dtype), self.shape)


@lowering(aten.full.default, result_dtype=True, checked=("fill_value",))
def full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, result_dtype):
    """torch.full: ``fill_value`` must fit the result dtype."""
    return _filled(fill_value, size)


@lowering(aten._efficientzerotensor.default, result_dtype=True)
def efficient_zero_tensor(size, *, dtype=None, layout=None, device=None, pin_memory=None, result_dtype):
    """The zero gradients autograd formulas create (``at::_efficientzerotensor``): a zero-filled
    tensor (CUDA's carries the ZeroTensor key to skip arithmetic; the values are the same)."""
    return jnp.zeros(tuple(size), result_dtype)


@lowering(aten.full_like.default, result_dtype=True, checked=("fill_value",))
def full_like(
    self, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, result_dtype
):
    """torch.full_like: ``fill_value`` must fit the result dtype."""
    return _filled(fill_value, self.shape)


@lowering(aten.scalar_tensor.default, checked=("s",))
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    """torch.scalar_tensor: a 0-dim tensor of ``s``, which must fit its dtype (``t[i] = 300`` on a
    uint8 tensor makes one)."""
    return jnp.asarray(s)


# Uninitialised memory inside a graph reads as zeros: any value is allowed, zeros are deterministic.


@lowering(aten.empty.memory_format)
def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return jnp.zeros(tuple(size))


@lowering(aten.empty_strided.default)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(tuple(size))


@lowering(aten.empty_permuted.default)
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(tuple(size))


@lowering(aten.new_empty.default)
def new_empty(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(tuple(size))


@lowering(aten.new_empty_strided.default)
def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(tuple(size))


@lowering(aten.empty_like.default)
def empty_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return jnp.zeros(self.shape)


def _int64_bounds(arguments: dict) -> None:
    """A range factory of an integer result converts its bounds to int64 first (c10's checked
    conversion), before any tracing: a bound only uint64 holds is refused. arange's kernel converts
    a float ``start`` and ``step`` too (an infinite step included), and ``end`` for an int64 result,
    which counts in integers; other integer results count in double.

    Raises:
        RuntimeError: "value cannot be converted to type int64_t without overflow".
    """
    bounds = [arguments.get(name) for name in ("start", "end", "step")]
    dtype = arguments.get("dtype")
    integral = (dtype is None and not any(isinstance(v, (float, complex)) for v in bounds)) or (
        dtype is not None and not (dtype.is_floating_point or dtype.is_complex)
    )
    if integral:
        for name, value in zip(("start", "end", "step"), bounds, strict=True):
            _beyond_int64_as_float(value, jnp.int64)
            converted = name != "end" or dtype in (None, torch.int64)
            if converted and isinstance(value, float) and not -(2.0**63) <= value <= 2.0**63:  # c10's overflows()
                raise RuntimeError("value cannot be converted to type int64_t without overflow")


def _wrapped(value: int) -> int:
    """An integer as int64 arithmetic leaves it (two's complement, as the CPU wraps)."""
    return (value + 2**63) % 2**64 - 2**63


def counts_in_int64(start, end, step, dtype: torch.dtype | None) -> bool:
    """Whether arange's result is int64 (``dtype``, or integer bounds without one), whose kernel
    counts in int64 arithmetic rather than in double."""
    if dtype is None:
        return not any(isinstance(v, (float, complex)) for v in (start, end, step))
    return dtype == torch.int64


def arange_size(start, end, step, dtype: torch.dtype | None) -> float | None:
    """ATen's ``size_d`` of arange (RangeFactories.cpp, CPU and CUDA alike): for an int64 result
    ``(end - start + step - sign(step)) / step`` in int64 arithmetic on the bounds converted to
    int64, each operation wrapping on overflow as the CPU's does, so
    ``arange(-2**63, 2**63 - 1, 2**62)`` has 0 elements and ``arange(0, 2**63 - 1, 2**62)`` a
    negative count; for other results ``ceil((end - start) / step)`` in double. None for real
    bounds of an int64 result whose step converts to 0 (ATen refuses that step)."""
    if counts_in_int64(start, end, step, dtype):
        first, last, stride = int(start), int(end), int(step)  # to<int64_t> truncates a float
        if stride == 0:
            return None
        span = _wrapped(_wrapped(_wrapped(last - first) + stride) - (1 if stride > 0 else -1))
        quotient = abs(span) // abs(stride) * (1 if (span >= 0) == (stride > 0) else -1)  # C++ truncates
        return float(_wrapped(quotient))
    with np.errstate(all="ignore"):
        return float(np.ceil((np.float64(end) - np.float64(start)) / np.float64(step)))


def arange_bounds_rule(arguments: dict) -> None:
    """arange's checks as ATen's ``arange_check_bounds`` (RangeUtils.h, CPU and CUDA alike) makes
    them, in double and in its order, before PyTorch's meta kernel, which called a NaN step "not
    finite" where ATen's says "step must be nonzero"; then :func:`_int64_bounds`, then ATen's size
    check of :func:`arange_size` ("invalid size, possible overflow?"; PyTorch's meta kernel failed
    in ``prims::iota`` for arange(0, 1, 1e-30, dtype=int32)). A complex or bool result is left to
    the dtype check that follows, as ATen's dispatch refuses it first. Last, a count the
    CPU would not make: for an integer start, end and step and a result other than int64, PyTorch's
    meta kernel counts in integers and the CPU's kernel in double, so
    ``arange(2**62, 2**63 + 2**62 + 1, 2**62, dtype=float32)`` has 3 elements for the one and 2 for
    the other; the result's shape is the meta kernel's, so such a call is refused.

    Raises:
        RuntimeError: ATen's messages, or the count that differs from the CPU's.
    """
    start, end, step = (arguments.get(name) for name in ("start", "end", "step"))
    dtype = arguments.get("dtype")
    if dtype is not None and (dtype.is_complex or dtype == torch.bool):
        return  # no dtype of arange's kernels: their AT_DISPATCH refuses it before any check
    if any(isinstance(v, complex) and v.imag != 0 for v in (start, end, step)):
        raise RuntimeError("value cannot be converted to type double without overflow")  # c10's checked_convert
    if not all(isinstance(v, (int, float)) for v in (start, end, step)):
        return  # complex bounds with no imaginary part: PyTorch's meta kernel refuses them
    low, high, stride = float(start), float(end), float(step)
    if not (stride > 0 or stride < 0):
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"unsupported range: {low:g} -> {high:g}")
    if not ((stride > 0 and high >= low) or (stride < 0 and high <= low)):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    _int64_bounds(arguments)
    size = arange_size(start, end, step, dtype)
    if size is not None and not 0 <= size <= 2.0**63:  # ATen compares with double(INT64_MAX), 2**63
        raise RuntimeError("invalid size, possible overflow?")
    if size == 2.0**63:  # passes, and int64_t(2**63) is INT64_MIN on x86, which resize_ refuses
        raise RuntimeError(f"IntArrayRef contains an int that cannot be represented as a SymInt: {-(2**63)}")
    if dtype is None or dtype == torch.int64 or not all(isinstance(v, int) for v in (start, end, step)):
        return
    in_double = math.ceil((high - low) / stride)
    in_integers = aten.arange.start_step(start, end, step, dtype=dtype, device="meta").numel()
    if in_integers != in_double and 0 <= in_double < 2**63:
        raise RuntimeError(
            f"arange({start}, {end}, {step}, dtype={dtype}) on neuron: the CPU counts {in_double} elements "
            f"(in double), PyTorch's meta kernel, which gives the result's shape, {in_integers} (in integers); "
            "pass the bounds as floats for the CPU's count"
        )


@lowering(
    aten.arange.start_step,
    static=("start", "end", "step"),
    result_dtype=True,
    dtype_rule=arange_bounds_rule,
    rule_first=True,
)
def arange(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None, result_dtype):
    """torch.arange: start, start + step, ... below ``end``; the count is PyTorch's ceil((end - start) / step).
    An integer result truncates ``start`` and ``step`` to integers first, as the CPU kernel does
    (it accumulates in the dtype's acc_type, int64): arange(-0.9, 2.1, 2.0, dtype=int8) is [0, 2].
    A floating result is rounded as the CPU's kernel rounds it (:func:`ranges.arange_values`)."""
    start, end, step = (_beyond_int64_as_float(value, result_dtype) for value in (start, end, step))
    count = max(int(np.ceil((end - start) / step)), 0)
    if jnp.issubdtype(result_dtype, jnp.integer):
        start, end, step = int(start), int(end), int(step)
        if result_dtype == jnp.int64:
            # the int64 kernel counts in integers: (end - start + step - sign(step)) / step, truncated
            span = end - start + step - (1 if step > 0 else -1)
            count = max((abs(span) // abs(step)) * (1 if (span >= 0) == (step > 0) else -1), 0)
        return start + step * jnp.arange(count, dtype=jnp.int64)
    return jnp.asarray(arange_values(start, step, count, np.dtype(result_dtype)))


def range_bounds_rule(arguments: dict) -> None:
    """torch.range's first check as ATen's ``range_out`` makes it for an integer result, before the
    meta kernel: the step converted to int64 is nonzero. The meta kernel (torch 2.13) divides by that
    step first and stops the interpreter with SIGFPE for ``torch.range(0, 1, 0.1, dtype=torch.int32)``,
    on the CPU too. Its other checks are the meta kernel's.

    Raises:
        RuntimeError: "step must be nonzero", ATen's words.
    """
    dtype = arguments.get("dtype") or torch.get_default_dtype()
    step = arguments.get("step", 1)
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool or isinstance(step, complex):
        return  # a floating count divides in floats; the others are refused by the dispatch first
    if (not isinstance(step, float) or math.isfinite(step)) and int(step) == 0:
        raise RuntimeError("step must be nonzero")


@lowering(
    aten.range.step, static=("start", "end", "step"), result_dtype=True, dtype_rule=range_bounds_rule, rule_first=True
)
def range_(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None, result_dtype):
    """torch.range (deprecated; ``end`` included): ``start + i * step`` as ATen's ``range_out``
    computes it. An integer result converts the bounds to int64 first (truncating a float step:
    range(0, 5, 1.5, dtype=int32) is [0, 1, 2, 3, 4, 5]) and counts ``(end - start) / step + 1`` in
    int64; a floating one is rounded as the CPU rounds it (:func:`ranges.range_values`). The checks
    (a zero step, infinite bounds, a step of the wrong sign) are the meta kernel's."""
    if jnp.issubdtype(result_dtype, jnp.integer):
        first, last, stride = int(start), int(end), int(step)
        span = last - first
        count = abs(span) // abs(stride) * (1 if (span >= 0) == (stride > 0) else -1) + 1  # C++'s truncation
        return first + stride * jnp.arange(count, dtype=jnp.int64)
    return jnp.asarray(range_values(start, end, step, np.dtype(result_dtype)))


def _beyond_int64_as_float(value, result_dtype):
    """A bound as a range factory's kernel reads it: an int that only uint64 holds (a Scalar may
    carry one) is converted to double for a floating result (the CPU computes in double), and
    refused for an integer one by c10's checked conversion to int64.

    Raises:
        RuntimeError: "value cannot be converted to type int64_t without overflow".
    """
    if not isinstance(value, int) or isinstance(value, bool) or -(2**63) <= value < 2**63:
        return value
    if jnp.issubdtype(result_dtype, jnp.integer):
        raise RuntimeError("value cannot be converted to type int64_t without overflow")
    return float(value)


@lowering(prims.iota.default, static=("length", "start", "step"))
def iota(length, *, start, step, dtype, device, requires_grad):
    return start + step * jnp.arange(length, dtype=jax_dtype(dtype))


def _linspace_conversions(arguments: dict) -> None:
    """c10's overflow check of the endpoints CUDA's linspace_cuda_out converts to the result's dtype
    (RangeFactories.cu): no step converts neither, one step fills with the start alone, more convert
    both. Checked on the host before the call, as a ``dtype_rule``, so it raises at the call. A
    complex endpoint is left to at::linspace's own check, which comes first ("inferred dtype
    c10::complex<float> can't be safely cast to passed dtype Float")."""
    start, end, steps, dtype = (arguments[name] for name in ("start", "end", "steps", "dtype"))
    if isinstance(start, complex) or isinstance(end, complex):
        return
    for converted in (start, end)[: min(steps, 2)]:
        overflow.check_fits(converted, jax_dtype(dtype or torch.get_default_dtype()))


@lowering(aten.linspace.default, static=("start", "end", "steps"), result_dtype=True, dtype_rule=_linspace_conversions)
def linspace(start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=None, result_dtype):
    """torch.linspace, computed as PyTorch's kernel does: from the start for the first half and from
    the end for the second, so both endpoints are exact. The endpoints are converted to the result's
    dtype first with c10's overflow check (linspace(0, 255, 7, dtype=int8) raises) where CUDA's
    kernel converts them (:func:`_linspace_conversions`: linspace(0, 1e6, 1, dtype=float16) is
    [0.]). So an
    integer result starts from the converted values (a negative start of an unsigned result wraps:
    linspace(-10, 255, 7, dtype=uint8) runs from 246) and steps in float64, as the CPU kernel does.
    A floating result is rounded as the CPU's kernel rounds it (:func:`ranges.linspace_values`)."""
    if steps == 0:
        return jnp.zeros((0,), result_dtype)
    start, end = (_beyond_int64_as_float(value, result_dtype) for value in (start, end))
    if jnp.issubdtype(result_dtype, jnp.integer) and not isinstance(start, complex):
        start, end = (int(np.asarray(int(value), np.int64).astype(result_dtype)) for value in (start, end))
    floating = np.dtype(result_dtype).kind == "f" or result_dtype == jnp.bfloat16
    if steps == 1:
        if floating:
            return jnp.asarray([to_scalar_type(start, np.dtype(result_dtype))])
        return jnp.asarray([start], jnp.complex128 if isinstance(start, complex) else jnp.float64)
    if floating:
        return jnp.asarray(linspace_values(start, end, steps, np.dtype(result_dtype)))
    step = (end - start) / (steps - 1)
    index = jnp.arange(steps, dtype=jnp.float64)
    half = steps // 2
    return jnp.where(index < half, start + step * index, end - step * (steps - 1 - index))


@lowering(aten.kaiser_window.beta, static=("window_length", "periodic", "beta"))
def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None, pin_memory=None):
    """torch.kaiser_window: ``I0(beta * sqrt(|1 - ((n - a) / a) ** 2|)) / I0(beta)`` for n = 0 .. N - 1,
    ``a = (N - 1) / 2``, computed in float64 and rounded once (the CPU computes in the dtype's opmath
    type), where N is ``window_length`` + 1 for a periodic window, whose last element is dropped; a
    window of length 1 is ``[1]``. ATen's composite kernel ends in a DispatchStub that has no neuron
    kernel, so this replaces it; its checks (floating dtypes, non-negative length) are the meta
    kernel's."""
    if window_length <= 1:
        return jnp.ones((window_length,), jnp.float64)
    count = window_length + 1 if periodic else window_length
    alpha = (count - 1) / 2.0
    n = jnp.arange(count, dtype=jnp.float64)
    window = jnp.i0(beta * jnp.sqrt(jnp.abs(1 - ((n - alpha) / alpha) ** 2))) / jnp.i0(jnp.float64(beta))
    return window[:window_length]


@lowering(aten.kaiser_window.default, aten.kaiser_window.periodic, static=("window_length", "periodic"))
def kaiser_window_default_beta(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=None):
    """torch.kaiser_window without ``beta``: ATen's default of 12.0."""
    return kaiser_window(window_length, periodic, 12.0)


@lowering(aten.eye.default, aten.eye.m, static=("n", "m"))
def eye(n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.eye(n, n if m is None else m)
