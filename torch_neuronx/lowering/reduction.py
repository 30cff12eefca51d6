"""Reductions: sum, mean, prod, amax/amin, max/min, argmax/argmin, var/std, norms, logsumexp, any/all,
cumulative ops.

16-bit floats accumulate in float32 and integers and bool in int64 (PyTorch's accumulation types),
then the registry casts the result to the dtype PyTorch's meta kernel reports. NaN propagates through
max/min/amax/amin and argmax/argmin select it; ties select the first occurrence. Errors PyTorch
raises for empty inputs come from its meta kernels, except where the meta kernel is silent (noted).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx.lowering.pointwise import floating_result
from torch_neuronx.lowering.promotion import c10_rounding, opmath_dtype
from torch_neuronx.lowering.registry import Promotion, lowering
from torch_neuronx.runtime.dtypes import aten_name, cpp_name, jax_dtype
from torch_neuronx.runtime.tracing import device_check

aten = torch.ops.aten


def _axes(self, dim) -> tuple[int, ...] | None:
    """PyTorch's dim argument as JAX axes: None or [] reduce over every dimension."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None
    dims = [dim] if isinstance(dim, int) else dim
    rank = max(self.ndim, 1)
    return tuple(sorted({d % rank for d in dims})) if self.ndim else None


def _count(self, axes) -> int:
    """How many elements each output element reduces."""
    if axes is None:
        return math.prod(self.shape)
    return math.prod(self.shape[a] for a in axes)


def _accumulator(dtype) -> jnp.dtype:
    if dtype in (jnp.bfloat16, jnp.float16):
        return jnp.float32
    return dtype


def _float_accumulator(dtype) -> jnp.dtype:
    """The dtype a float-valued reduction computes in: float32 for 16-bit floats and integers."""
    if jnp.issubdtype(dtype, jnp.inexact):
        return _accumulator(dtype)
    return jnp.float32


def _require_nonempty(self, name: str) -> None:
    """PyTorch's check for full reductions without identity (its meta kernels do not raise it)."""
    if self.size == 0:
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument."
        )


def _require_nonempty_dim(self, dim: int, name: str) -> None:
    """ATen's check of a reduction without identity over one dimension (``zero_numel_check_dims``):
    that dimension may not be empty.

    Raises:
        IndexError: "max(): Expected reduction dim 1 to have non-zero size."
    """
    axis = dim % builtins.max(self.ndim, 1)
    if self.ndim and self.shape[axis] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {axis} to have non-zero size.")


def _require_floating(self, name: str) -> None:
    """std/var's dtype check: integer and bool inputs have no variance dtype."""
    if not jnp.issubdtype(self.dtype, jnp.inexact):
        raise RuntimeError(f"{name} only support floating point and complex dtypes")


# --- sums and products -------------------------------------------------------------------------


@lowering(aten.sum.dim_IntList, result_dtype=True)
def sum_dim(self, dim, keepdim=False, *, dtype=None, result_dtype):
    """torch.sum over ``dim``; integers and bool accumulate in int64 unless ``dtype`` says otherwise."""
    return jnp.sum(self.astype(_accumulator(result_dtype)), axis=_axes(self, dim), keepdims=keepdim)


@lowering(aten.sum.default, result_dtype=True)
def sum_all(self, *, dtype=None, result_dtype):
    """torch.sum of every element (integers and bool in int64)."""
    return jnp.sum(self.astype(_accumulator(result_dtype)))


@lowering(aten.nansum.default, result_dtype=True)
def nansum(self, dim=None, keepdim=False, *, dtype=None, result_dtype):
    """torch.nansum: torch.sum with NaN counted as zero."""
    values = self.astype(_accumulator(result_dtype))
    if jnp.issubdtype(values.dtype, jnp.inexact):
        values = jnp.where(jnp.isnan(values), jnp.zeros((), values.dtype), values)
    return jnp.sum(values, axis=_axes(self, dim), keepdims=keepdim)


@lowering(aten.mean.dim, result_dtype=True)
def mean_dim(self, dim, keepdim=False, *, dtype=None, result_dtype):
    """torch.mean over ``dim`` (floating point only, as PyTorch requires); empty gives NaN."""
    return _mean(self.astype(_accumulator(result_dtype)), _axes(self, dim), keepdim)


@lowering(aten.mean.default, result_dtype=True)
def mean_all(self, *, dtype=None, result_dtype):
    """torch.mean of every element."""
    return _mean(self.astype(_accumulator(result_dtype)), None, False)


def _mean(values, axes, keepdim: bool):
    """The sum over ``axes`` divided by the count, as the CPU's kernel divides. The count is behind
    an optimization barrier: XLA's algebraic simplifier turns a division by a constant into a
    product by its rounded reciprocal (mean([1., 2., 4.]) came out 2.3333335, the CPU's 2.3333333)."""
    count = values.size if axes is None else math.prod(values.shape[axis] for axis in axes)
    total = jnp.sum(values, axis=axes, keepdims=keepdim)
    return total / jax.lax.optimization_barrier(jnp.asarray(count, total.dtype))


@lowering(aten.prod.default, result_dtype=True)
def prod_all(self, *, dtype=None, result_dtype):
    """torch.prod of every element; integers and bool multiply in int64 (wrapping as PyTorch does)."""
    return jnp.prod(self.astype(_accumulator(result_dtype)))


@lowering(aten.prod.dim_int, result_dtype=True)
def prod_dim(self, dim, keepdim=False, *, dtype=None, result_dtype):
    """torch.prod over one dimension."""
    return jnp.prod(self.astype(_accumulator(result_dtype)), axis=_axes(self, dim), keepdims=keepdim)


@lowering(aten.count_nonzero.dim_IntList)
def count_nonzero_dims(self, dim):
    """torch.count_nonzero over ``dim`` ([] counts every element); NaN counts as non-zero."""
    return jnp.sum(self != 0, axis=_axes(self, dim), dtype=jnp.int64)


@lowering(aten.count_nonzero.default)
def count_nonzero(self, dim=None):
    """torch.count_nonzero over one dimension, or every element."""
    return jnp.sum(self != 0, axis=_axes(self, dim), dtype=jnp.int64)


# --- extrema -----------------------------------------------------------------------------------


@lowering(aten.amax.default)
def amax(self, dim=(), keepdim=False):
    """torch.amax over ``dim`` ([] reduces every dimension); NaN propagates."""
    return jnp.max(self, axis=_axes(self, dim), keepdims=keepdim)


@lowering(aten.amin.default)
def amin(self, dim=(), keepdim=False):
    """torch.amin over ``dim``; NaN propagates."""
    return jnp.min(self, axis=_axes(self, dim), keepdims=keepdim)


@lowering(aten.max.default)
def max_all(self):
    """torch.max(input): the largest element; NaN propagates; an empty input raises as on CPU."""
    _require_nonempty(self, "max")
    return jnp.max(self)


@lowering(aten.min.default)
def min_all(self):
    """torch.min(input): the smallest element; NaN propagates; an empty input raises as on CPU."""
    _require_nonempty(self, "min")
    return jnp.min(self)


@lowering(aten.max.dim)
def max_dim(self, dim, keepdim=False):
    """torch.max(input, dim): (values, indices); the first maximum (or first NaN) is selected; an
    empty ``dim`` raises IndexError as on CPU."""
    _require_nonempty_dim(self, dim, "max")
    axes = _axes(self, dim)
    axis = None if axes is None else axes[0]
    return jnp.max(self, axis=axis, keepdims=keepdim), jnp.argmax(self, axis=axis, keepdims=keepdim)


@lowering(aten.min.dim)
def min_dim(self, dim, keepdim=False):
    """torch.min(input, dim): (values, indices); the first minimum (or first NaN) is selected; an
    empty ``dim`` raises IndexError as on CPU."""
    _require_nonempty_dim(self, dim, "min")
    axes = _axes(self, dim)
    axis = None if axes is None else axes[0]
    return jnp.min(self, axis=axis, keepdims=keepdim), jnp.argmin(self, axis=axis, keepdims=keepdim)


def _no_complex_or_bool(name: str):
    """ATen's dtype checks of argmax/argmin (ReduceOps.cpp), which come before the meta kernel's
    empty-input checks: an empty complex or bool input raises them, not an IndexError."""

    def rule(arguments: dict) -> None:
        dtype = arguments["self"].dtype
        if dtype.is_complex:
            raise RuntimeError(f"{name}(): does not support complex input")
        if dtype == torch.bool:
            raise RuntimeError(f"{name}(): does not support bool input")

    return rule


@lowering(aten.argmax.default, dtype_rule=_no_complex_or_bool("argmax"), rule_first=True)
def argmax(self, dim=None, keepdim=False):
    """torch.argmax: index of the first maximum (of the flattened input when ``dim`` is None); a NaN
    counts as the maximum. Bool inputs raise, as on CPU."""
    axes = _axes(self, dim)
    return jnp.argmax(self, axis=None if axes is None else axes[0], keepdims=keepdim)


@lowering(aten.argmin.default, dtype_rule=_no_complex_or_bool("argmin"), rule_first=True)
def argmin(self, dim=None, keepdim=False):
    """torch.argmin: index of the first minimum; a NaN counts as the minimum. Bool inputs raise."""
    axes = _axes(self, dim)
    return jnp.argmin(self, axis=None if axes is None else axes[0], keepdims=keepdim)


@lowering(aten.aminmax.default)
def aminmax(self, *, dim=None, keepdim=False):
    """torch.aminmax: (amin, amax) over one dimension or every element; NaN propagates."""
    axes = _axes(self, dim)
    return jnp.min(self, axis=axes, keepdims=keepdim), jnp.max(self, axis=axes, keepdims=keepdim)


# --- logical -----------------------------------------------------------------------------------


def _logical_axes(self, dim) -> tuple[int, ...] | None:
    """any/all's dim as JAX axes: unlike the other reductions', an empty list reduces nothing
    (``aten::any.dims(x, [])`` is ``x != 0``, as ATen's kernel and meta agree); None reduces all."""
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        return ()
    return _axes(self, dim)


@lowering(aten.any.default, aten.any.dim, aten.any.dims)
def any_(self, dim=None, keepdim=False):
    """torch.any: whether some element is non-zero (NaN is non-zero); uint8 inputs give uint8."""
    return jnp.any(self != 0, axis=_logical_axes(self, dim), keepdims=keepdim)


@lowering(aten.all.default, aten.all.dim, aten.all.dims)
def all_(self, dim=None, keepdim=False):
    """torch.all: whether every element is non-zero; empty reductions give True."""
    return jnp.all(self != 0, axis=_logical_axes(self, dim), keepdims=keepdim)


# --- moments and norms -------------------------------------------------------------------------


def _moments(self, dim, correction, keepdim):
    """(variance, mean) with Bessel's ``correction`` (default 1); the divisor is max(N - correction, 0),
    so no degrees of freedom give inf (or NaN for a zero sum of squares) as PyTorch does."""
    values = self.astype(_float_accumulator(self.dtype))
    axes = _axes(self, dim)
    correction = 1 if correction is None else correction
    mean = jnp.mean(values, axis=axes, keepdims=True)
    deviation = values - mean
    squares = jnp.sum((deviation * jnp.conj(deviation)).real, axis=axes, keepdims=keepdim)
    divisor = jnp.maximum(jnp.asarray(_count(self, axes) - correction, squares.dtype), 0)
    mean = mean if keepdim else jnp.squeeze(mean, axis=axes)
    return squares / divisor, mean


def _welford_mean(self, dim, mean):
    """The mean PyTorch's var_mean/std_mean report, from ``mean`` (the plain mean, of the shape the
    reduction gives). CPU accumulates it with Welford's update m += (x - m) / n, in which an infinite
    mean turns into NaN at the next element (and a second infinity of either sign gives NaN): with
    non-finite elements the mean is +-inf only when the only one is an infinity that comes last in
    the reduction order, and NaN otherwise."""
    if not jnp.issubdtype(mean.dtype, jnp.floating) or self.size == 0:
        return mean
    axes = _axes(self, dim)
    reduced = tuple(range(self.ndim)) if axes is None else axes
    kept = [d for d in range(self.ndim) if d not in reduced]
    values = jnp.transpose(self, (*kept, *reduced)).reshape(*[self.shape[d] for d in kept], -1).astype(mean.dtype)
    nonfinite = jnp.sum(~jnp.isfinite(values), axis=-1)
    last = values[..., -1]
    welford = jnp.where((nonfinite == 1) & jnp.isinf(last), last, jnp.nan)
    return jnp.where(nonfinite == 0, mean.reshape(last.shape), welford).reshape(mean.shape)


def _degrees_of_freedom_warning(name: str) -> Callable[[dict[str, Any]], str | None]:
    """ATen's ``warn_invalid_degrees_of_freedom`` (ReduceOps.cpp, CPU and CUDA alike) for ``name``:
    warned at every call where the elements each result reduces, less ``correction`` (1 by
    default), are not positive."""

    def warning(arguments: dict[str, Any]) -> str | None:
        self, dim, correction = arguments["self"], arguments.get("dim"), arguments.get("correction")
        correction = 1 if correction is None else correction
        reduced = range(self.dim()) if not dim else [d % max(self.dim(), 1) for d in dim]
        outputs = math.prod(n for d, n in enumerate(self.shape) if d not in reduced)
        per_output = self.numel() // outputs if outputs else 0
        if per_output - correction > 0:
            return None
        return (
            f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the reduction "
            "factor (input numel divided by output numel)."
        )

    return warning


@lowering(aten.var.correction, call_warning=_degrees_of_freedom_warning("var"))
def var(self, dim=None, *, correction=None, keepdim=False):
    """torch.var with ``correction`` (1 by default); floating or complex inputs only, as on CPU."""
    _require_floating(self, "std and var")
    return _moments(self, dim, correction, keepdim)[0]


@lowering(aten.std.correction, call_warning=_degrees_of_freedom_warning("std"))
def std(self, dim=None, *, correction=None, keepdim=False):
    """torch.std: square root of torch.var."""
    _require_floating(self, "std and var")
    return jnp.sqrt(_moments(self, dim, correction, keepdim)[0])


@lowering(aten.var_mean.correction, call_warning=_degrees_of_freedom_warning("var_mean"))
def var_mean(self, dim=None, *, correction=None, keepdim=False):
    """torch.var_mean: (var, mean); with infinite elements the mean follows CPU's Welford update."""
    _require_floating(self, "var_mean")
    variance, mean = _moments(self, dim, correction, keepdim)
    return variance, _welford_mean(self, dim, mean)


@lowering(aten.std_mean.correction, call_warning=_degrees_of_freedom_warning("std_mean"))
def std_mean(self, dim=None, *, correction=None, keepdim=False):
    """torch.std_mean: (std, mean); with infinite elements the mean follows CPU's Welford update."""
    _require_floating(self, "std_mean")
    variance, mean = _moments(self, dim, correction, keepdim)
    return jnp.sqrt(variance), _welford_mean(self, dim, mean)


@lowering(aten.linalg_vector_norm.default, static=("ord",))
def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.vector_norm: ord inf/-inf give max/min of |x|, 0 counts non-zeros, others
    (sum |x|**ord)**(1/ord); ``dtype`` casts the input first; 16-bit floats accumulate in float32.
    A reduction over dimensions of size 1 only is |x| (x != 0 for ord 0), as ATen's
    ``linalg_vector_norm_out`` (CPU and CUDA) takes it: |x|**1000 would overflow to inf."""
    if dtype is not None:
        self = self.astype(jax_dtype(dtype))
    magnitude = jnp.abs(self)
    magnitude = magnitude.astype(_accumulator(magnitude.dtype))
    axes = _axes(self, dim)
    reduced = tuple(range(self.ndim)) if axes is None else axes
    if all(self.shape[axis] == 1 for axis in reduced):
        value = (magnitude != 0).astype(magnitude.dtype) if ord == 0 else magnitude
        return value if keepdim else jnp.squeeze(value, axis=reduced)
    if ord == math.inf:
        return jnp.max(magnitude, axis=axes, keepdims=keepdim)
    if ord == -math.inf:
        return jnp.min(magnitude, axis=axes, keepdims=keepdim)
    if ord == 0:
        return jnp.sum(magnitude != 0, axis=axes, keepdims=keepdim).astype(magnitude.dtype)
    if ord == 1:
        return jnp.sum(magnitude, axis=axes, keepdims=keepdim)
    if ord == 2:
        return jnp.sqrt(jnp.sum(magnitude * magnitude, axis=axes, keepdims=keepdim))
    return power_norm(magnitude, ord, axes, keepdim)


#: A p-th power sum below this may have lost subnormal terms to XLA's flush (2**-126) beyond
#: float32's precision (:func:`power_norm`).
NORMAL_POWER_SUM = 2.0**-100


def power_norm(magnitude: jax.Array, p: float, axis, keepdims: bool = False) -> jax.Array:
    """(sum |x| ** p) ** (1 / p) of ``magnitude`` (|x|) over ``axis``, as the CPU computes it. Where
    the power sum leaves float32's range, the largest magnitude (the smallest, for a negative p) is
    factored out first: |x| ** p of ordinary values does at a large p (0.6 ** 200 is a subnormal, which XLA
    flushes and the CPU keeps: vector_norm and cdist gave 0 for 0.6; 2 ** 200 overflows, to the
    CPU's inf where the norm is 2)."""
    order = jnp.asarray(p, magnitude.dtype)
    power_sum = jnp.sum(magnitude**order, axis=axis, keepdims=keepdims)
    plain = power_sum ** (1 / order)
    if p == 0 or math.isnan(p):
        return plain
    # The term that dominates the sum: the largest magnitude for a positive p, the smallest for a
    # negative one (1e20 ** -2 is a subnormal: vector_norm([1e20, 2e20], -2) was inf).
    extreme = (jnp.max if p > 0 else jnp.min)(magnitude, axis=axis, keepdims=True, initial=0 if p > 0 else jnp.inf)
    divisor = jnp.where((extreme == 0) | jnp.isinf(extreme), jnp.ones((), extreme.dtype), extreme)
    extreme = extreme if keepdims else jnp.squeeze(extreme, axis=axis)
    scaled = extreme * jnp.sum((magnitude / divisor) ** order, axis=axis, keepdims=keepdims) ** (1 / order)
    out_of_range = (power_sum < NORMAL_POWER_SUM) | jnp.isinf(power_sum)
    return jnp.where(out_of_range & (extreme > 0) & jnp.isfinite(extreme), scaled, plain)


@lowering(aten.renorm.default, static=("p", "maxnorm"))
def renorm(self, p, dim, maxnorm):
    """torch.renorm: each slice along ``dim`` whose p-norm exceeds ``maxnorm`` is scaled to
    maxnorm / (norm + 1e-7), as PyTorch computes it; the norm accumulates in float32 for 16-bit floats.
    ``maxnorm`` is part of the executable's key so that each value passes ATen's check (a negative
    one, after an executable was built for a valid one, was applied: renorm_ returned -x)."""
    others = tuple(d for d in range(self.ndim) if d != dim % max(self.ndim, 1))
    norm = linalg_vector_norm(self, p, others, keepdim=True)
    maxnorm = jnp.asarray(maxnorm, norm.dtype)
    factor = jnp.where(norm > maxnorm, maxnorm / (norm + 1e-7), jnp.ones((), norm.dtype))
    return self * factor.astype(self.dtype)


@lowering(aten.logsumexp.default)
def logsumexp(self, dim, keepdim=False):
    """torch.logsumexp: log(sum(exp(x))) computed stably around the maximum; integers compute in the
    default float dtype; all -inf gives -inf, a +inf gives +inf, an empty reduction gives -inf."""
    values = self.astype(_float_accumulator(self.dtype))
    axes = _axes(self, dim)
    # complex inputs shift by the largest real part, as PyTorch's kernel does, so the imaginary part
    # of the result is log's principal value
    real = jnp.real(values) if jnp.iscomplexobj(values) else values
    peak = jnp.max(real, axis=axes, keepdims=True, initial=-jnp.inf)
    peak = jnp.where(jnp.isfinite(peak), peak, jnp.zeros((), real.dtype)).astype(values.dtype)
    total = jnp.log(jnp.sum(jnp.exp(values - peak), axis=axes, keepdims=True)) + peak
    return total if keepdim else jnp.squeeze(total, axis=axes)


# --- cumulative ----------------------------------------------------------------------------------


def _scan(self, dim, fn, dtype):
    values = self.astype(dtype)
    if self.ndim == 0:
        return values
    return fn(values, axis=dim % self.ndim)


#: The CPU's cumulative kernels accumulate in ``at::acc_type<scalar_t, /*is_cuda=*/false>``
#: (ReduceOpsKernel.cpp): double for float, complex<double> for complex<float>, float for 16-bit.
#: In float32 XLA's parallel prefix rounded otherwise than the CPU's running sum (3,321 of 4,096
#: float32 cumsum elements differed in the last bits); in float64 both round to the same float32.
_CUMULATIVE_ACCUMULATORS = {
    np.dtype(jnp.float32): jnp.float64,
    np.dtype(jnp.complex64): jnp.complex128,
    np.dtype(jnp.float16): jnp.float32,
    np.dtype(jnp.bfloat16): jnp.float32,
}


def _cumulative_accumulator(dtype) -> jnp.dtype:
    return _CUMULATIVE_ACCUMULATORS.get(np.dtype(dtype), dtype)


@lowering(aten.cumsum.default, result_dtype=True)
def cumsum(self, dim, *, dtype=None, result_dtype):
    """torch.cumsum, accumulated as the CPU does: integers and bool in int64, 16-bit floats in
    float32, float32 in float64 and complex64 in complex128 (each result rounded once)."""
    return _scan(self, dim, jnp.cumsum, _cumulative_accumulator(result_dtype))


@lowering(aten.cumprod.default, result_dtype=True)
def cumprod(self, dim, *, dtype=None, result_dtype):
    """torch.cumprod, accumulated as :func:`cumsum` is."""
    return _scan(self, dim, jnp.cumprod, _cumulative_accumulator(result_dtype))


@lowering(aten.logcumsumexp.default)
def logcumsumexp(self, dim):
    """torch.logcumsumexp (floating point and complex only, as CUDA's kernel, which
    eager/dispatched_dtypes.py checks; the dtypes it does not verify are refused here in its words),
    accumulated as :func:`cumsum` is (float32 in float64: 1,847 of 4,096 float32 results were a
    bit off the CPU's in float32)."""
    if not jnp.issubdtype(self.dtype, jnp.inexact):
        raise NotImplementedError(f"\"logcumsumexp_cuda\" not implemented for '{aten_name(self.dtype)}'")
    accumulator = _cumulative_accumulator(self.dtype)
    if jnp.issubdtype(self.dtype, jnp.complexfloating):
        return _scan(self, dim, _complex_logcumsumexp, accumulator)
    return _scan(self, dim, jax.lax.cumlogsumexp, accumulator)


@lowering(aten.logaddexp.default, promotion=Promotion.DEFAULT, dtype_rule=floating_result("logaddexp_cuda"))
def logaddexp(self, other):
    """torch.logaddexp; complex inputs as the CPU kernel combines them (see
    :func:`_complex_log_add_exp`), real ones with JAX's stable formula."""
    if jnp.iscomplexobj(self):
        return _complex_log_add_exp(*jnp.broadcast_arrays(self, other))
    return jnp.logaddexp(self, other)


def _complex_log_add_exp(x, y):
    """log(exp(x) + exp(y)) for complex numbers as PyTorch's CPU kernel computes it
    (``_log_add_exp_helper``, ReduceOpsKernel.cpp): log1p(exp(min - max)) + max, ordered by real
    part, so the imaginary part follows the inputs' instead of being wrapped into (-pi, pi]."""
    y_smaller = jnp.isnan(y) | (jnp.real(y) < jnp.real(x))
    low, high = jnp.where(y_smaller, y, x), jnp.where(y_smaller, x, y)
    nan = jnp.asarray(complex(jnp.nan, jnp.nan), x.dtype)
    both_infinite = ~jnp.isfinite(jnp.real(low)) & (jnp.real(low) == jnp.real(high))
    infinite = jnp.where(jnp.real(low) < 0, low, jnp.log(jnp.exp(low) + jnp.exp(high)))
    finite = jnp.log1p(jnp.exp(low - high)) + high
    return jnp.where(jnp.isnan(low), nan, jnp.where(both_infinite, infinite, finite))


def _complex_logcumsumexp(values, axis):
    """Complex logcumsumexp, accumulated in order along ``axis`` as on CPU: from ``-inf + 0j``, which
    the first element is combined with too (``[-inf + 1j]`` gives ``-inf + 0j``, ``[1 + nan j]`` NaN)."""
    moved = jnp.moveaxis(values, axis, 0)

    def step(total, value):
        total = _complex_log_add_exp(total, value)
        return total, total

    start = jnp.full(moved.shape[1:], complex(-jnp.inf, 0), moved.dtype)
    _, totals = jax.lax.scan(step, start, moved)
    return jnp.moveaxis(totals, 0, axis)


# --- histograms ----------------------------------------------------------------------------------


#: (exponent bits, mantissa bits) of the 16-bit floats, whose CPU arithmetic rounds after each operation.
def _require_float(self, name: str) -> None:
    if not jnp.issubdtype(self.dtype, jnp.floating):
        raise NotImplementedError(f'"{name}" on neuron is not implemented for {self.dtype} inputs, as on CPU')


def _linear_quotient(values, left, right, bins, rounded):
    """PyTorch's linear interpolation of each value among ``bins`` equal bins of [left, right],
    (value - left) * bins / (right - left), each step rounded as the CPU kernel computes it in the
    input dtype; its bin is the quotient truncated. The division is a division (XLA's reciprocal of
    a broadcast divisor binned 18 of linspace(-5, 5, 1001)'s values in histc(x, 100, -5, 5) a bin
    low, and a divisor past 2 ** 126 has a subnormal reciprocal, flushed to 0)."""
    scaled = rounded(rounded(values - left) * jnp.asarray(bins, values.dtype))
    divisor = jax.lax.optimization_barrier(jnp.broadcast_to(rounded(right - left), scaled.shape))
    return rounded(scaled / divisor)


def _linear_bins(values, left, right, bins, rounded):
    """The bin of each value among ``bins`` equal bins of [left, right] by PyTorch's linear
    interpolation (:func:`_linear_quotient`, truncated)."""
    return jnp.trunc(_linear_quotient(values, left, right, bins, rounded)).astype(jnp.int64)


def _linspace_edges(left, right, bins, dtype):
    """torch.linspace(left, right, bins + 1) in ``dtype`` as the CPU kernel computes it: a step in
    the dtype, the first half counted from ``left`` and the second from ``right``."""
    rounded = c10_rounding(dtype)
    index = jnp.arange(bins + 1, dtype=jnp.float32)
    step = rounded((right - left) / max(bins, 1))
    edges = jnp.where(
        index < (bins + 1) // 2, rounded(left + rounded(step * index)), rounded(right - rounded(step * (bins - index)))
    )
    return edges.astype(dtype)


@lowering(aten.histc.default, static=("bins", "min", "max"), checked=("min", "max"), checked_in_opmath=True)
def histc(self, bins=100, min=0, max=0):
    """torch.histc: counts in ``bins`` equal bins of [min, max]; elements outside (and NaN) are
    ignored, the last bin includes ``max``. ``min == max`` takes the data's range (NaN or infinite
    data raise), and a degenerate range widens to [min - 1, max + 1]. Bins are chosen as PyTorch's
    CPU kernel does, by linear interpolation in the input dtype; counts are exact (CPU accumulates
    16-bit counts in the input dtype, which saturates past 256 for bfloat16). Integer inputs, which
    the CPU refuses, are counted as CUDA counts them (see :func:`_integer_histc`)."""
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if jnp.issubdtype(self.dtype, jnp.integer):
        return _integer_histc(self, bins, min, max)
    _require_float(self, "histogram_cpu")
    values = self.reshape(-1).astype(jnp.float32)
    left, right = jnp.asarray(float(min), jnp.float32), jnp.asarray(float(max), jnp.float32)
    if min == max and values.size:
        left, right = jnp.min(values), jnp.max(values)
        shown = [jax.lax.bitcast_convert_type(edge, jnp.uint32).astype(jnp.int64) for edge in (left, right)]
        # CUDA reads the data's range back (SummaryOps.cu), so the error comes at the call.
        device_check(
            ~(jnp.isfinite(left) & jnp.isfinite(right)),
            (shown[0] << 32) | shown[1],
            "range of [{high_float}, {low_float}] is not finite",
            synchronous=True,
        )
    elif not (math.isfinite(min) and math.isfinite(max)):
        raise RuntimeError(f"torch.histc: range of [{min}, {max}] is not finite")
    elif min > max:
        raise RuntimeError("torch.histc: max must be larger than min")
    degenerate = left == right
    left, right = jnp.where(degenerate, left - 1, left), jnp.where(degenerate, right + 1, right)
    rounded = c10_rounding(self.dtype)
    left, right = rounded(left), rounded(right)
    # The CPU counts between the first and last of linspace(min, max, bins + 1)'s edges in the input
    # dtype, min + step * 0 and max - step * 0: NaN, so that nothing is counted, when the step
    # (max - min) / bins overflows (min=-3e38, max=3e38 in float32; the data's range alike).
    step = rounded(rounded(right - left) / bins)
    inside = jnp.isfinite(step) & (values >= left) & (values <= right)
    # (value - min) * bins may overflow where max - min does not: the CPU casts the infinite
    # quotient to int64 (INT64_MIN on x86), whose offset wraps to the first bin's address.
    quotient = _linear_quotient(values, left, right, bins, rounded)
    position = jnp.where(jnp.isfinite(quotient), jnp.clip(jnp.trunc(quotient), 0, bins - 1), 0).astype(jnp.int64)
    return jnp.zeros(bins, jnp.float32).at[position].add(inside.astype(jnp.float32))


def _integer_histc(self, bins, min, max):
    """torch.histc of an integer tensor as CUDA computes it (``_histc_cuda_template``, which MoE
    routing in transformers relies on): ``min`` and ``max`` are converted to the input dtype
    (truncated), ``min == max`` takes the data's range, a degenerate range widens by one on each
    side, and an element ``v`` of [min, max] falls in bin ``(v - min) * bins // (max - min)`` in
    int64 arithmetic (the last bin includes ``max``). Counts are in the input dtype."""
    values = self.reshape(-1).astype(jnp.int64)
    low, high = int(min), int(max)
    if low == high and values.size:
        left, right = jnp.min(values), jnp.max(values)
    else:  # PyTorch's meta kernel has refused max < min
        left, right = jnp.asarray(low, jnp.int64), jnp.asarray(high, jnp.int64)
    degenerate = left == right
    left, right = jnp.where(degenerate, left - 1, left), jnp.where(degenerate, right + 1, right)
    inside = (values >= left) & (values <= right)
    position = jnp.minimum((values - left) * bins // (right - left), bins - 1)
    position = jnp.where(inside, position, 0)
    return jnp.zeros(bins, jnp.int64).at[position].add(inside.astype(jnp.int64)).astype(self.dtype)


# --- segment reductions --------------------------------------------------------------------------


def _segments(data, lengths, offsets, unsafe=True):
    """(data as (outer, L, inner), segment starts and ends as (outer, S)) for PyTorch's segment
    reductions, which reduce along axis ``lengths.dim() - 1`` with one row of lengths (or of S + 1
    offsets) per outer index; without ``unsafe`` the lengths are checked as on CPU."""
    bounds = lengths if lengths is not None else offsets
    axis = bounds.ndim - 1
    outer = math.prod(data.shape[:axis])
    # Explicit sizes: reshape's -1 divides by the other sizes' product, zero for empty data.
    values = data.reshape(outer, data.shape[axis], math.prod(data.shape[axis + 1 :]))
    bounds = bounds.reshape(outer, bounds.shape[-1]).astype(jnp.int64)
    if lengths is not None:
        ends = jnp.cumsum(bounds, axis=-1)
        starts = ends - bounds
        if not unsafe and bounds.size == 0:  # ATen takes lengths.min() for its check
            raise RuntimeError(
                "min(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
                "dim with the 'dim' argument."
            )
        if not unsafe:
            device_check(jnp.any(bounds < 0), jnp.zeros((), jnp.int64), "lengths contains negative value!")
            device_check(
                jnp.any(ends[:, -1:] != data.shape[axis]) if bounds.shape[-1] else data.shape[axis] != 0,
                jnp.zeros((), jnp.int64),
                "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) "
                "when !unsafe.",
            )
    else:
        starts, ends = bounds[:, :-1], bounds[:, 1:]
    return values, starts, ends, axis


def _segment_initial(reduce, initial, dtype):
    if initial is not None:
        return jnp.asarray(initial).astype(dtype)
    identity = {"max": -jnp.inf, "min": jnp.inf, "prod": 1.0}.get(reduce, 0.0)
    return jnp.asarray(identity, dtype)


#: ATen's get_reduction_enum (ReductionType.h) takes "amax" and "amin" for max and min.
_SEGMENT_REDUCTION_ALIASES = {"amax": "max", "amin": "min"}


@lowering(aten.segment_reduce.default, static=("reduce", "axis", "unsafe"))
def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """torch._segment_reduce: 'sum', 'mean', 'max', 'min' or 'prod' of consecutive segments along
    axis ``lengths.dim() - 1``, given by ``lengths`` or ``offsets``. As PyTorch's CPU kernel, each
    segment folds its elements in order onto ``initial`` (or the reduction's identity), rounding in
    the input dtype at each step; max/min propagate NaN; a mean divides by the length, and an empty
    segment's mean is NaN without ``initial``."""
    reduce = _SEGMENT_REDUCTION_ALIASES.get(reduce, reduce)
    values, starts, ends, axis = _segments(data, lengths, offsets, unsafe)
    rounded = c10_rounding(data.dtype)
    work = opmath_dtype(data.dtype)
    folds = {
        "max": lambda acc, x: jnp.where(jnp.isnan(x), x, jnp.where(acc < x, x, acc)),
        "min": lambda acc, x: jnp.where(jnp.isnan(x), x, jnp.where(x < acc, x, acc)),
        "sum": lambda acc, x: rounded(acc + x),
        "mean": lambda acc, x: rounded(acc + x),
        "prod": lambda acc, x: rounded(acc * x),
    }
    fold = folds[reduce]  # the argument checks (aten_checks) refuse another name
    first = jnp.broadcast_to(
        _segment_initial(reduce, initial, data.dtype).astype(work), (*starts.shape, values.shape[-1])
    )

    def step(acc, position):
        element = jax.lax.dynamic_index_in_dim(values, position, axis=1).astype(work)  # (outer, 1, inner)
        member = ((starts <= position) & (position < ends))[..., None]
        return jnp.where(member, fold(acc, element), acc), None

    result = jax.lax.scan(step, first, jnp.arange(values.shape[1]))[0] if values.shape[1] else first
    if reduce == "mean":
        length = (ends - starts)[..., None]
        divided = rounded(result / jnp.maximum(length, 1).astype(work))
        result = jnp.where((length > 0) & ~jnp.isnan(result), divided, result)
        if initial is None:
            result = jnp.where(length == 0, jnp.nan, result)
    return result.reshape(*data.shape[:axis], starts.shape[-1], *data.shape[axis + 1 :])


@lowering(aten._segment_reduce_backward.default, static=("reduce", "axis"))
def segment_reduce_backward(grad, output, data, reduce, *, lengths=None, offsets=None, axis=0, initial=None):
    """The gradient of torch._segment_reduce, with PyTorch's CPU rules: sum copies the segment's
    gradient, mean divides it by the length; max/min give it to every element equal to the result
    (or NaN), dividing the positive ones by their count when there are several; prod gives
    grad * output / element, or grad times the product of the other elements (and ``initial``)
    for a zero or NaN element."""
    reduce = _SEGMENT_REDUCTION_ALIASES.get(reduce, reduce)
    values, starts, ends, axis = _segments(data, lengths, offsets)
    if starts.shape[-1] == 0:  # no segments: no element reaches the output (argmax needs one)
        return jnp.zeros(data.shape, data.dtype)
    shape = (values.shape[0], starts.shape[-1], values.shape[-1])
    grad, output = grad.reshape(shape), output.reshape(shape)
    positions = jnp.arange(values.shape[1])
    member = (starts[:, :, None] <= positions) & (positions < ends[:, :, None])  # (outer, S, L)
    segment = jnp.argmax(member, axis=1)  # (outer, L): the segment of each element
    inside = jnp.any(member, axis=1)[..., None]

    def per_element(table):
        return jnp.take_along_axis(table, segment[..., None], axis=1)

    g, out = per_element(grad), per_element(output)
    length = per_element((ends - starts)[..., None]).astype(values.dtype)
    if reduce == "sum":
        result = g
    elif reduce == "mean":
        result = g / length
    elif reduce in ("max", "min"):
        chosen = jnp.isnan(values) | (values == out)
        count = jnp.einsum("osl,oli->osi", member.astype(values.dtype), chosen.astype(values.dtype))
        count = per_element(count)
        result = jnp.where(chosen, g, 0)
        result = jnp.where((count >= 2) & (result > 0), result / count, result)
    elif reduce == "prod":
        one = jnp.ones((), values.dtype)
        factors = jnp.where(member[..., None], values[:, None], one)  # (outer, S, L, inner)
        ones = jnp.ones_like(factors[:, :, :1])
        before = jnp.cumprod(jnp.concatenate([ones, factors[:, :, :-1]], axis=2), axis=2)
        after = jnp.flip(jnp.cumprod(jnp.concatenate([ones, jnp.flip(factors, 2)[:, :, :-1]], axis=2), axis=2), 2)
        exclusive = jnp.take_along_axis(before * after, segment[:, None, :, None], axis=1)[:, 0]
        start = one if initial is None else jnp.asarray(initial).astype(values.dtype)
        special = jnp.isnan(values) | (values == 0)
        result = jnp.where(special, g * exclusive * start, g * out / values)
    else:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    return jnp.where(inside, result, 0).reshape(data.shape)


def _outer_edges(values, range, name="torch.histogramdd"):
    """The leftmost and rightmost edges of each of the N dimensions of ``values`` (M, N): from
    ``range`` or the data (non-finite data raise), an empty range widened by 0.5 on each side, as
    PyTorch's ``select_outer_bin_edges``."""
    n = values.shape[1]
    if range is not None:
        if len(range) != 2 * n:
            raise RuntimeError(
                f"{name}: for a {n}-dimensional histogram range should have {2 * n} elements, but got {len(range)}"
            )
        for dim in builtins.range(n):
            low, high = range[2 * dim], range[2 * dim + 1]
            if not (math.isfinite(low) and math.isfinite(high)):
                raise RuntimeError(f"{name}: dimension {dim}'s range [{low}, {high}] is not finite")
            if low > high:
                raise RuntimeError(
                    f"{name}: min should not exceed max, but got min {low} max {high} for dimension {dim}"
                )
        left = jnp.asarray(range[0::2], jnp.float32)
        right = jnp.asarray(range[1::2], jnp.float32)
    elif values.shape[0]:
        left, right = jnp.min(values, axis=0), jnp.max(values, axis=0)
        # The CPU reads the data's range first, so the error comes at the call, in its words.
        for dim in builtins.range(n):
            shown = [jax.lax.bitcast_convert_type(edge[dim], jnp.uint32).astype(jnp.int64) for edge in (left, right)]
            device_check(
                ~(jnp.isfinite(left[dim]) & jnp.isfinite(right[dim])),
                (shown[0] << 32) | shown[1],
                f"{name}: dimension {dim}'s range [{{high_float}}, {{low_float}}] is not finite",
                synchronous=True,
            )
    else:
        left, right = jnp.zeros(n, jnp.float32), jnp.ones(n, jnp.float32)
    empty = left == right
    return jnp.where(empty, left - 0.5, left), jnp.where(empty, right + 0.5, right)


def _histogramdd(values, edges, weight, density, linear):
    """The N-dimensional histogram of ``values`` (M, N) over the bin ``edges`` (one increasing 1-d
    array per dimension), as PyTorch's CPU kernel selects bins: linear interpolation corrected by
    the neighbouring edges (``linear``, for linspace edges) or a binary search; elements outside
    the edges (or NaN) are skipped and the last bin includes its right edge."""
    # Points without coordinates (N = 0) fill nothing: the CPU kernel counts elements, not points.
    inside = jnp.full(values.shape[0], values.size > 0)
    flat = jnp.zeros(values.shape[0], jnp.int64)
    for dim, edge in enumerate(edges):
        count = edge.shape[0]
        x = values[:, dim]
        inside &= (x >= edge[0]) & (x <= edge[-1])
        if linear:
            guess = _linear_bins(x, edge[0], edge[-1], count - 1, lambda v: v)
            low, high = jnp.maximum(guess - 1, 0), jnp.minimum(guess + 2, count)
            candidates = guess[:, None] + jnp.arange(-1, 2)
            within = (candidates >= low[:, None]) & (candidates < high[:, None])
            below = edge[jnp.clip(candidates, 0, count - 1)] <= x[:, None]
            position = low + jnp.sum(within & below, axis=1) - 1
        else:
            position = jnp.searchsorted(edge, x, side="right") - 1
        position = jnp.clip(jnp.where(position == count - 1, position - 1, position), 0, max(count - 2, 0))
        flat = flat * max(count - 1, 1) + position
    shape = tuple(edge.shape[0] - 1 for edge in edges)
    weights = jnp.ones(values.shape[0], values.dtype) if weight is None else weight.reshape(-1)
    hist = jnp.zeros(math.prod(shape), values.dtype).at[flat].add(jnp.where(inside, weights, 0)).reshape(shape)
    if density:
        hist = hist / jnp.sum(hist)
        for dim, edge in enumerate(edges):
            hist = hist / jnp.diff(edge).reshape([-1 if d == dim else 1 for d in builtins.range(len(edges))])
    return hist


def _require_float32(self, name: str) -> None:
    if self.dtype != jnp.float32:
        raise NotImplementedError(
            f"{name} on neuron supports float32 inputs (CPU also supports float64, which neuron does not have); "
            f"got {self.dtype}"
        )


def _histogramdd_rule(arguments: dict) -> None:
    """``histogramdd_check_inputs``'s dtype checks (Histogram.cpp, the CPU's: CUDA has no histogram):
    bin edges and weights of the input's dtype (without them mixed dtypes were computed), and the
    weight's shape (a mismatch failed in a JAX broadcast).

    Raises:
        RuntimeError: "torch.histogramdd: input tensor and bins tensors should have the same dtype,
            but got input with dtype float and bins for dimension 0 with dtype c10::BFloat16", or the
            weight's.
    """
    data, bins, weight = arguments["self"], arguments.get("bins"), arguments.get("weight")
    name = cpp_name(jax_dtype(data.dtype))
    edges = [bins] if isinstance(bins, torch.Tensor) else list(bins) if isinstance(bins, (list, tuple)) else []
    edges = [edge for edge in edges if isinstance(edge, torch.Tensor)]  # bin counts are ints
    for dim, edge in enumerate(edges):
        if edge.dtype != data.dtype:
            raise RuntimeError(
                "torch.histogramdd: input tensor and bins tensors should have the same dtype, but got input with "
                f"dtype {name} and bins for dimension {dim} with dtype {cpp_name(jax_dtype(edge.dtype))}"
            )
    if isinstance(weight, torch.Tensor) and weight.dtype != data.dtype:
        raise RuntimeError(
            "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor should have the same "
            f"dtype, but got input({name}), and weight({cpp_name(jax_dtype(weight.dtype))})"
        )
    if isinstance(weight, torch.Tensor):
        # torch.histogram checks its input and weight flattened, as (numel, 1) points and numel weights.
        flat = not isinstance(bins, (list, tuple))
        shape = [data.numel(), 1] if flat else list(data.shape)
        weight_shape = [weight.numel()] if flat else list(weight.shape)
        if shape[:-1] != (weight_shape or [1]):
            raise RuntimeError(
                "torch.histogramdd: if weight tensor is provided it should have the same shape as the input tensor "
                f"excluding its innermost dimension, but got input with shape {shape} and weight with shape "
                f"{weight_shape}"
            )


def _points(self):
    """histogramdd's input as (points, coordinates): its last dimension holds each point's
    coordinates (explicit sizes: reshape's -1 divides by a zero coordinate count)."""
    return self.reshape(math.prod(self.shape[:-1]), self.shape[-1])


def _bin_ct_edges(values, bins, range):
    left, right = _outer_edges(values, range)
    return [_linspace_edges(left[dim], right[dim], count, jnp.float32) for dim, count in enumerate(bins)]


@lowering(aten.histogram.bin_ct, static=("bins", "range", "density"), dtype_rule=_histogramdd_rule)
def histogram(self, bins=100, *, range=None, weight=None, density=False):
    """torch.histogram with a bin count: (hist, bin_edges) over ``bins`` equal bins of ``range`` (or
    of the data's range), with optional ``weight`` and ``density``."""
    _require_float32(self, "torch.histogram")
    values = self.reshape(-1, 1)
    edges = _bin_ct_edges(values, [bins], range)
    return _histogramdd(values, edges, weight, density, linear=True), edges[0]


@lowering(aten.histogram.bins_tensor, static=("density",), dtype_rule=_histogramdd_rule)
def histogram_bins_tensor(self, bins, *, weight=None, density=False):
    """torch.histogram with the bin edges given (increasing): (hist, a copy of the edges)."""
    _require_float32(self, "torch.histogram")
    return _histogramdd(self.reshape(-1, 1), [bins], weight, density, linear=False), bins


@lowering(aten._histogramdd_bin_edges.default, static=("bins", "range", "density"), dtype_rule=_histogramdd_rule)
def histogramdd_bin_edges(self, bins, *, range=None, weight=None, density=False):
    """The bin edges of torch.histogramdd with bin counts: linspace over each dimension's range."""
    _require_float32(self, "torch.histogramdd")
    return _bin_ct_edges(_points(self), bins, range)


@lowering(aten._histogramdd_from_bin_cts.default, static=("bins", "range", "density"), dtype_rule=_histogramdd_rule)
def histogramdd_from_bin_cts(self, bins, *, range=None, weight=None, density=False):
    """The histogram of torch.histogramdd with bin counts (the last dimension of ``self`` holds the
    coordinates)."""
    _require_float32(self, "torch.histogramdd")
    values = _points(self)
    return _histogramdd(values, _bin_ct_edges(values, bins, range), weight, density, linear=True)


@lowering(aten._histogramdd_from_bin_tensors.default, static=("density",), dtype_rule=_histogramdd_rule)
def histogramdd_from_bin_tensors(self, bins, *, weight=None, density=False):
    """The histogram of torch.histogramdd with the bin edges of each dimension given."""
    _require_float32(self, "torch.histogramdd")
    return _histogramdd(_points(self), list(bins), weight, density, linear=False)
