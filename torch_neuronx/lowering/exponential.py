"""exp2, sinh, cosh and erfc of real tensors within a few ulps of the CPU's float kernels (Sleef's).

XLA computes ``exp2(x)`` as ``exp(x * log 2)``: the product's rounding grows with ``|x|``, up to 67
ulps in float32 (``exp2(100.)`` must be exactly 2**100). Its ``sinh`` and ``cosh`` are
``exp(|x| + log(1/2))`` and its reciprocal, whose sum rounds the same way (24 ulps at ``|x| = 60``),
and overflow from 88.7, where ``cosh(89.)`` is 2.2e38 on the CPU. Here:

- ``exp2``: ``x = n + f`` with ``n`` an integer and ``|f| <= 1/2`` (exact), ``exp2(f)`` (an ulp),
  then scaled by ``2**n`` in two exact power-of-two factors, so that only the last multiplication
  rounds (into the subnormals or to infinity, as the CPU's does).
- ``cosh``/``sinh`` past ``|x| = 1``: ``(e +- 1/e) / 2`` with ``e = exp(|x|)``; past 88 (where
  ``e`` overflows before ``e / 2`` does) ``h * (h / 2)`` with ``h = exp(|x| / 2)``.
- ``sinh`` below 1: its Taylor series to ``x**13`` (truncation under 2e-10 of the value), which has
  no cancellation, where ``(e - 1/e) / 2`` loses bits near 0.
- ``erfc`` past 1, where XLA takes ``exp(-x * x)`` times a rational function of ``x``: the
  rounding error ``r`` of ``x * x`` (exact, by Dekker's split) put back as ``exp(-r)``; it cost up
  to 64 ulps at ``x = 8.5``, 4 now. Below 1 XLA's ``1 - erf(x)`` stays (9 ulps near 0.9).

16-bit floats compute in float32 and round once, as the CPU's kernels do.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp

from torch_neuronx.lowering.promotion import in_opmath

__all__ = ["cosh", "erfc", "exp2", "sinh"]

#: 1 / (2k + 1)! for k = 1..6: sinh's series after x.
_SINH_SERIES = (1 / 6, 1 / 120, 1 / 5040, 1 / 362880, 1 / 39916800, 1 / 6227020800)


def _power_of_two(exponent: jax.Array, dtype) -> jax.Array:
    """``2.0 ** exponent`` exactly, for integer exponents of normal powers of ``dtype``."""
    info = jnp.finfo(dtype)
    bits = jnp.int32 if dtype == jnp.float32 else jnp.int64
    biased = (exponent.astype(bits) + (info.maxexp - 1)) << (info.nmant)
    return jax.lax.bitcast_convert_type(biased, dtype)


@in_opmath
def exp2(x: jax.Array) -> jax.Array:
    """``2 ** x`` (see the module docstring); infinities and NaN as ``jnp.exp2``."""
    info = jnp.finfo(x.dtype)
    finite = jnp.isfinite(x)
    # Past these every result is 0 or inf; within them both factors below are normal powers of two.
    clamped = jnp.clip(jnp.where(finite, x, 0), -(info.maxexp + info.nmant + 2), info.maxexp)
    whole = jnp.round(clamped)
    fraction = clamped - whole  # exact: |fraction| <= 1/2
    first = jnp.floor(whole / 2)
    scaled = jnp.exp2(fraction) * _power_of_two(first, x.dtype)
    value = scaled * _power_of_two(whole - first, x.dtype)
    return jnp.where(finite, value, jnp.exp2(x))


def _half_exp(magnitude: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(exp(a) / 2, exp(-a) / 2)`` for ``a >= 0``, the first finite until ``exp(a) / 2``
    overflows. The barriers keep XLA from rewriting ``h * h`` to ``exp(a)`` and ``1 / e`` to
    ``exp(-a)`` with another rounding."""
    e = jax.lax.optimization_barrier(jnp.exp(magnitude))
    h = jax.lax.optimization_barrier(jnp.exp(magnitude / 2))
    large = magnitude > 88.0 if magnitude.dtype == jnp.float32 else magnitude > 709.0
    half_e = jnp.where(large, h * (h * 0.5), e * 0.5)
    return half_e, 0.5 / e


@in_opmath
def cosh(x: jax.Array) -> jax.Array:
    """``cosh(x)`` (see the module docstring)."""
    magnitude = jnp.abs(x)
    half_e, half_inverse = _half_exp(magnitude)
    return jnp.where(magnitude < 1, jnp.cosh(x), half_e + half_inverse)


@in_opmath
def sinh(x: jax.Array) -> jax.Array:
    """``sinh(x)`` (see the module docstring); signed zeros kept."""
    magnitude = jnp.abs(x)
    half_e, half_inverse = _half_exp(magnitude)
    square = x * x
    series = jnp.zeros_like(x)
    for coefficient in reversed(_SINH_SERIES):
        series = (series + coefficient) * square
    small = x + x * series
    return jnp.where(magnitude < 1, small, jnp.copysign(half_e - half_inverse, x))


@in_opmath
def erfc(x: jax.Array) -> jax.Array:
    """``erfc(x)`` (see the module docstring)."""
    # Past 32 erfc is 0 in float32 and float64 alike: clamped, the split below cannot overflow.
    tail = jnp.clip(x, 0, 32)
    square = tail * tail
    # Dekker's split: tail = high + low with high's half of the mantissa, so high * high,
    # high * low and low * low are exact and their sum less tail * tail is the square's rounding.
    scaled = jax.lax.optimization_barrier(tail * (2.0 ** ((jnp.finfo(x.dtype).nmant + 2) // 2) + 1))
    high = scaled - (scaled - tail)
    low = tail - high
    rounding = ((high * high - square) + 2 * high * low) + low * low
    value = jsp.erfc(x)
    return jnp.where(x > 1, value * jnp.exp(-rounding), value)
