"""Reductions: sum, mean, prod, amax/amin, max/min, argmax/argmin, var/std, norms, logsumexp, any/all,
cumulative ops.

16-bit floats accumulate in float32 and integers and bool in int64 (PyTorch's accumulation types),
then the registry casts the result to the dtype PyTorch's meta kernel reports. NaN propagates through
max/min/amax/amin and argmax/argmin select it; ties select the first occurrence. Errors PyTorch
raises for empty inputs come from its meta kernels, except where the meta kernel is silent (noted).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import torch

from torch_neuronx.lowering.registry import lowering
from torch_neuronx.runtime.dtypes import jax_dtype

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
    return jnp.mean(self.astype(_accumulator(result_dtype)), axis=_axes(self, dim), keepdims=keepdim)


@lowering(aten.mean.default, result_dtype=True)
def mean_all(self, *, dtype=None, result_dtype):
    """torch.mean of every element."""
    return jnp.mean(self.astype(_accumulator(result_dtype)))


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
    """torch.max(input, dim): (values, indices); the first maximum (or first NaN) is selected."""
    axes = _axes(self, dim)
    axis = None if axes is None else axes[0]
    return jnp.max(self, axis=axis, keepdims=keepdim), jnp.argmax(self, axis=axis, keepdims=keepdim)


@lowering(aten.min.dim)
def min_dim(self, dim, keepdim=False):
    """torch.min(input, dim): (values, indices); the first minimum (or first NaN) is selected."""
    axes = _axes(self, dim)
    axis = None if axes is None else axes[0]
    return jnp.min(self, axis=axis, keepdims=keepdim), jnp.argmin(self, axis=axis, keepdims=keepdim)


@lowering(aten.argmax.default)
def argmax(self, dim=None, keepdim=False):
    """torch.argmax: index of the first maximum (of the flattened input when ``dim`` is None); a NaN
    counts as the maximum."""
    axes = _axes(self, dim)
    return jnp.argmax(self, axis=None if axes is None else axes[0], keepdims=keepdim)


@lowering(aten.argmin.default)
def argmin(self, dim=None, keepdim=False):
    """torch.argmin: index of the first minimum; a NaN counts as the minimum."""
    axes = _axes(self, dim)
    return jnp.argmin(self, axis=None if axes is None else axes[0], keepdims=keepdim)


@lowering(aten.aminmax.default)
def aminmax(self, *, dim=None, keepdim=False):
    """torch.aminmax: (amin, amax) over one dimension or every element; NaN propagates."""
    axes = _axes(self, dim)
    return jnp.min(self, axis=axes, keepdims=keepdim), jnp.max(self, axis=axes, keepdims=keepdim)


# --- logical -----------------------------------------------------------------------------------


@lowering(aten.any.default, aten.any.dim, aten.any.dims)
def any_(self, dim=None, keepdim=False):
    """torch.any: whether some element is non-zero (NaN is non-zero); uint8 inputs give uint8."""
    return jnp.any(self != 0, axis=_axes(self, dim), keepdims=keepdim)


@lowering(aten.all.default, aten.all.dim, aten.all.dims)
def all_(self, dim=None, keepdim=False):
    """torch.all: whether every element is non-zero; empty reductions give True."""
    return jnp.all(self != 0, axis=_axes(self, dim), keepdims=keepdim)


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


@lowering(aten.var.correction)
def var(self, dim=None, *, correction=None, keepdim=False):
    """torch.var with ``correction`` (1 by default)."""
    return _moments(self, dim, correction, keepdim)[0]


@lowering(aten.std.correction)
def std(self, dim=None, *, correction=None, keepdim=False):
    """torch.std: square root of torch.var."""
    return jnp.sqrt(_moments(self, dim, correction, keepdim)[0])


@lowering(aten.var_mean.correction)
def var_mean(self, dim=None, *, correction=None, keepdim=False):
    """torch.var_mean: (var, mean); with infinite elements the mean follows CPU's Welford update."""
    variance, mean = _moments(self, dim, correction, keepdim)
    return variance, _welford_mean(self, dim, mean)


@lowering(aten.std_mean.correction)
def std_mean(self, dim=None, *, correction=None, keepdim=False):
    """torch.std_mean: (std, mean); with infinite elements the mean follows CPU's Welford update."""
    variance, mean = _moments(self, dim, correction, keepdim)
    return jnp.sqrt(variance), _welford_mean(self, dim, mean)


@lowering(aten.linalg_vector_norm.default, static=("ord",))
def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.vector_norm: ord inf/-inf give max/min of |x|, 0 counts non-zeros, others
    (sum |x|**ord)**(1/ord); ``dtype`` casts the input first; 16-bit floats accumulate in float32."""
    if dtype is not None:
        self = self.astype(jax_dtype(dtype))
    magnitude = jnp.abs(self)
    magnitude = magnitude.astype(_accumulator(magnitude.dtype))
    axes = _axes(self, dim)
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
    order = jnp.asarray(ord, magnitude.dtype)
    return jnp.sum(magnitude**order, axis=axes, keepdims=keepdim) ** (1 / order)


@lowering(aten.renorm.default, static=("p",))
def renorm(self, p, dim, maxnorm):
    """torch.renorm: each slice along ``dim`` whose p-norm exceeds ``maxnorm`` is scaled to
    maxnorm / (norm + 1e-7), as PyTorch computes it; the norm accumulates in float32 for 16-bit floats."""
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
    peak = jnp.max(values, axis=axes, keepdims=True, initial=-jnp.inf)
    peak = jnp.where(jnp.isfinite(peak), peak, jnp.zeros((), values.dtype))
    total = jnp.log(jnp.sum(jnp.exp(values - peak), axis=axes, keepdims=True)) + peak
    return total if keepdim else jnp.squeeze(total, axis=axes)


# --- cumulative ----------------------------------------------------------------------------------


def _scan(self, dim, fn, dtype):
    values = self.astype(dtype)
    if self.ndim == 0:
        return values
    return fn(values, axis=dim % self.ndim)


@lowering(aten.cumsum.default, result_dtype=True)
def cumsum(self, dim, *, dtype=None, result_dtype):
    """torch.cumsum; integers and bool accumulate in int64, 16-bit floats in float32."""
    return _scan(self, dim, jnp.cumsum, _accumulator(result_dtype))


@lowering(aten.cumprod.default, result_dtype=True)
def cumprod(self, dim, *, dtype=None, result_dtype):
    """torch.cumprod; integers and bool accumulate in int64, 16-bit floats in float32."""
    return _scan(self, dim, jnp.cumprod, _accumulator(result_dtype))


@lowering(aten.logcumsumexp.default)
def logcumsumexp(self, dim):
    """torch.logcumsumexp (floating point only, as on CPU); 16-bit floats accumulate in float32."""
    if not jnp.issubdtype(self.dtype, jnp.inexact):
        raise NotImplementedError(f"logcumsumexp on neuron is not implemented for {self.dtype}, as on CPU")
    return _scan(self, dim, jax.lax.cumlogsumexp, _accumulator(self.dtype))
