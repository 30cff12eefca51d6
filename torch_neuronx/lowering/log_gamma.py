"""lgamma of real tensors near its zeros (x = 1 and 2) as accurately as the CPU's (glibc's lgammaf).

XLA's Lanczos approximation is off by up to 2e-6 absolutely over [0.5, 3]: ``lgamma(1.)`` and
``lgamma(2.)`` came out 4.8e-7 where they are 0, ``lgamma(3.)`` 7 ulps high. There the Taylor
series of ``lgamma(2 + w)`` in ``w = x - 2``,

    (1 - gamma) w + sum_{k >= 2} (-1)**k (zeta(k) - 1) / k * w**k

(from ``log Gamma(1 + z) = -gamma z + sum_k (-1)**k zeta(k) / k * z**k`` and ``log(1 + w)``),
converges like ``(w / 2)**k``: 26 terms reach float32's precision for ``|w| <= 1``, so
``x in [1.5, 3]`` takes it directly, ``x in [0.5, 1.5)`` as ``lgamma(x + 1) - log1p(x - 1)``,
``x in (0, 0.5)`` as ``lgamma(x + 2) - log(x) - log1p(x)`` and ``x in (3, 10]`` as
``lgamma(x - n) + log((x - 1) ... (x - n))`` (every ``w`` exact). XLA was 24 ulps off below 0.5
and 47 in (3, 10]. Past 10 and below 0 (the reflection formula) XLA's values stay: 4 ulps past 10;
near the negative zeros, absolute errors up to 8e-6.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import mpmath  # torch requires sympy, which requires mpmath

from torch_neuronx.lowering.promotion import in_opmath

__all__ = ["lgamma"]

_TERMS = 26
#: Up to here the series is reached by recurrence; past it XLA's Stirling-based values are within
#: a few ulps.
_UPPER = 10.0
#: The series' coefficients of w**1 .. w**_TERMS (float64 values, rounded to the dtype when traced).
_COEFFICIENTS = [float(1 - mpmath.euler)] + [float((-1) ** k * (mpmath.zeta(k) - 1) / k) for k in range(2, _TERMS + 1)]


def _lgamma_two_plus(w: jax.Array) -> jax.Array:
    """``lgamma(2 + w)`` for ``|w| <= 1`` by the series (Horner's rule)."""
    total = jnp.zeros_like(w)
    for coefficient in reversed(_COEFFICIENTS):
        total = (total + coefficient) * w
    return total


@in_opmath
def lgamma(x: jax.Array) -> jax.Array:
    """``lgamma(x)`` (see the module docstring); 16-bit floats through float32, rounded once."""
    # Each interval's w for the series, exact (Sterbenz; x - j exact for integer j when the result
    # is representable, which it is, having no more bits than x below x's last one).
    tiny, lower, middle = (x > 0) & (x < 0.5), (x >= 0.5) & (x < 1.5), (x >= 1.5) & (x <= 3)
    upper = (x > 3) & (x <= _UPPER)
    steps = jnp.where(upper, jnp.ceil(x - 3), 0)  # lgamma(x) = lgamma(x - steps) + log prod (x - j)
    product = jnp.ones_like(x)
    for j in range(1, int(_UPPER) - 2):
        product = product * jnp.where(j <= steps, x - j, 1)
    w = jnp.where(tiny, x, jnp.where(lower, x - 1, jnp.where(middle, x - 2, x - steps - 2)))
    w = jnp.where(tiny | lower | middle | upper, w, 0)
    series = _lgamma_two_plus(w)
    value = jnp.where(
        tiny,
        series - jnp.log(jnp.where(tiny, x, 1)) - jnp.log1p(w),
        jnp.where(lower, series - jnp.log1p(w), series + jnp.log(product)),
    )
    return jnp.where(tiny | lower | middle | upper, value, jsp.gammaln(x))
