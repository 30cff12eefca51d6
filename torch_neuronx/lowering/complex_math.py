"""Complex elementwise math with the CPU's values at branch cuts, zeros, infinities and NaNs.

PyTorch's CPU kernels compute complex functions with the C library (glibc's ``csqrt``, ``clog``,
``casinh``, ... which follow C99's Annex G), divide with c10's scaled (Smith's) formula, and write a
few ops out in c10 (``log1p``, ``expm1``) or in their vectorised kernels (``neg`` as ``0 - z``,
``sgn``, ``sigmoid``). XLA's complex functions agree for ordinary values but not at the edges: they
lose the sign of a zero imaginary part (``sqrt(-4 - 0j)`` came out ``+2j`` where C gives ``-2j``),
divide ``1 / (inf + inf j)`` to 0 where the CPU gives NaN, and take most non-finite inputs to NaN.

Each function here takes and returns complex JAX arrays. For finite inputs the inverse functions use
XLA's value in the closed upper half-plane (or first quadrant) and restore the signs through the
function's symmetries (``f(conj z) = conj f(z)``, and ``f(-z) = -f(z)`` for the odd ones), so the
common path costs a few selects; the non-finite inputs take C99's table. Subnormal parts are flushed
by XLA's CPU runtime before any of this sees them (docs/usage.md), so they count as zeros.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from torch_neuronx.lowering import exponential
from torch_neuronx.lowering.exact_division import divided_by
from torch_neuronx.lowering.fused_multiply_add import float32_fma_in_float64, rounded_to_float32

__all__ = [
    "absolute",
    "add",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "cos",
    "cosh",
    "divide",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log10",
    "log1p",
    "log2",
    "multiply",
    "multiply_c99",
    "neg",
    "power",
    "reciprocal",
    "rsqrt",
    "sgn",
    "sigmoid",
    "sin",
    "sinc",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
]

_PI = math.pi


def _select(cases, default):
    """The first ``(condition, (real, imag))`` of ``cases`` whose condition holds, elementwise, else
    ``default``; returns the complex array."""
    real, imag = default
    for condition, (case_real, case_imag) in reversed(cases):
        real = jnp.where(condition, case_real, real)
        imag = jnp.where(condition, case_imag, imag)
    return jax.lax.complex(real, imag)


def _full(like, value):
    return jnp.full_like(like, value)


def _odd_symmetric(fn, z):
    """``fn(z)`` for an odd function with ``fn(conj z) = conj fn(z)`` whose values in the first
    quadrant have non-negative parts: XLA's value at ``|x| + |y| i``, signs restored from x and y."""
    x, y = z.real, z.imag
    w = fn(jax.lax.complex(jnp.abs(x), jnp.abs(y)))
    return jnp.copysign(jnp.abs(w.real), x), jnp.copysign(jnp.abs(w.imag), y)


# --- products and quotients ---------------------------------------------------------------------


def multiply_c99(a, b, c, d):
    """``(a + bi) * (c + di)`` as C99's Annex G defines it (libgcc's ``__mulsc3``, which C code
    compiled by GCC calls for a complex product): a product the plain formula makes NaN + NaN i
    while an operand is infinite is recomputed with the infinities boxed to +-1 and NaNs to 0, so
    it comes out infinite. Returns the (real, imaginary) parts."""
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    real, imag = ac - bd, ad + bc

    def box(x, where):  # an infinity to +-1, a finite number to +-0
        return jnp.where(where, jnp.copysign(jnp.isinf(x).astype(x.dtype), x), x)

    def zero_nan(x, where):
        return jnp.where(where & jnp.isnan(x), jnp.copysign(jnp.zeros_like(x), x), x)

    first = jnp.isinf(a) | jnp.isinf(b)
    a, b, c, d = box(a, first), box(b, first), zero_nan(c, first), zero_nan(d, first)
    second = jnp.isinf(c) | jnp.isinf(d)
    a, b, c, d = zero_nan(a, second), zero_nan(b, second), box(c, second), box(d, second)
    overflow = ~(first | second) & (jnp.isinf(ac) | jnp.isinf(bd) | jnp.isinf(ad) | jnp.isinf(bc))
    a, b, c, d = (zero_nan(x, overflow) for x in (a, b, c, d))
    recompute = jnp.isnan(real) & jnp.isnan(imag) & (first | second | overflow)
    real = jnp.where(recompute, jnp.inf * (a * c - b * d), real)
    imag = jnp.where(recompute, jnp.inf * (a * d + b * c), imag)
    return real, imag


def multiply(left, right):
    """``left * right`` as the CPU's vectorised kernel multiplies complex numbers: the plain
    ``(ac - bd) + (ad + bc) i``, each product rounded, so NaN where an infinity meets a zero. XLA's
    CPU code fuses a product into the sum (an FMA), which gave an underflowing product its own sign:
    ``1e-30j * (-1e-30 + 0j)`` came out ``-0 - 0j`` where the CPU gives ``-0 + 0j``. A part whose
    rounded products cancel is therefore set to the zero that the unfused sum gives. (The CPU's scalar
    loop, taken by strided tensors, is fused like XLA's.)"""
    left, right = jnp.broadcast_arrays(left, right)
    a, b, c, d = left.real, left.imag, right.real, right.imag
    product = left * right
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    zero = jnp.zeros_like(a)
    real_zero = jnp.where((ac == 0) & (bd == 0) & jnp.signbit(ac) & ~jnp.signbit(bd), -zero, zero)
    imag_zero = jnp.where((ad == 0) & (bc == 0) & jnp.signbit(ad) & jnp.signbit(bc), -zero, zero)
    real = jnp.where((ac == bd) & jnp.isfinite(ac), real_zero, product.real)
    imag = jnp.where((ad == -bc) & jnp.isfinite(ad), imag_zero, product.imag)
    return jax.lax.complex(real, imag)


def add(self, other, alpha):
    """``self + alpha * other`` as the CPU's vectorised add kernel computes it (ufunc ``add``:
    ``fmadd(other, alpha, self)``; sub and rsub pass ``-alpha``): the complex product of ``other``
    and ``alpha`` (:func:`multiply`) even for an alpha of 1, so ``0j + infj`` is ``nan + infj``
    (``1 * 0 - 0 * inf``), then the sum part by part. ``alpha`` is an array or a Python number,
    whose parts pass a barrier, else XLA folds the product by ``1 + 0j`` to ``other``."""
    if isinstance(alpha, jax.Array):
        factor = alpha.astype(self.dtype)
    else:
        alpha, dtype = complex(alpha), self.real.dtype
        parts = jax.lax.optimization_barrier((jnp.asarray(alpha.real, dtype), jnp.asarray(alpha.imag, dtype)))
        factor = jax.lax.complex(*parts)
    return self + multiply(other, factor)


def divide(dividend, divisor):
    """``dividend / divisor`` as c10::complex divides (the CPU's scalar and vectorised kernels alike):
    Smith's scaled formula, dividing by the larger part of the divisor first, and a zero divisor
    dividing each part by zero. So ``1 / (inf + inf j)`` is NaN + NaN j, as on the CPU, where XLA's
    division gives 0. Each ``x * ratio + y`` is one fused multiply-add, as the compiler of the CPU's
    c10 code contracts them (1,546 of 4,096 random quotients differed in the last bit with two
    roundings). Both arguments are complex and broadcast together.

    complex64 computes in float64, each step rounded to float32 with gradual underflow
    (:func:`rounded_to_float32`): c10's intermediates (the ratio of the divisor's parts, ``1 /
    denominator``, ``x * ratio + y``) can be subnormal where the quotient is not, and the device's
    float32 arithmetic flushes them (``-1e-30j / (1e-20 - 1e-30j)`` lost its real part 1e-20,
    ``(inf + 1j) / (1e38 + 1j)`` came out NaN). Only a subnormal quotient part is flushed, as every
    result of the device is."""
    dividend, divisor = jnp.broadcast_arrays(dividend, divisor)
    a, b, c, d = dividend.real, dividend.imag, divisor.real, divisor.imag
    zero = (c == 0) & (d == 0)
    if a.dtype == jnp.float32:
        wide = [part.astype(jnp.float64) for part in (a, b, c, d)]
        real, imag = _smith_quotient(*wide, float32_fma_in_float64, rounded_to_float32)
        real, imag = real.astype(a.dtype), imag.astype(a.dtype)
    else:
        real, imag = _smith_quotient(a, b, c, d, lambda x, y, z: x * y + z, lambda x: x)
    return jax.lax.complex(jnp.where(zero, a / jnp.abs(c), real), jnp.where(zero, b / jnp.abs(d), imag))


def _smith_quotient(a, b, c, d, fma, rounded):
    """c10::complex's ``operator/=`` of nonzero divisors, each operation rounded by ``rounded``."""
    by_real = jnp.abs(c) >= jnp.abs(d)
    top, bottom = jnp.where(by_real, d, c), jnp.where(by_real, c, d)
    ratio = rounded(top / bottom)
    scale = rounded(1 / fma(top, ratio, bottom))
    real = jnp.where(by_real, fma(b, ratio, a), fma(a, ratio, b))
    imag = jnp.where(by_real, fma(-a, ratio, b), fma(b, ratio, -a))
    return rounded(real * scale), rounded(imag * scale)


def reciprocal(z):
    """``1 / z`` as the CPU computes torch.reciprocal: c10's complex division (:func:`divide`). The
    one is kept from XLA's simplifier behind a barrier: folded in, ``0 * ratio + 0`` became
    ``ratio``, and ``1 / -1j`` came out ``+0 + 1j`` where the CPU gives ``-0 + 1j``."""
    return divide(jax.lax.optimization_barrier(jnp.ones_like(z)), z)


# --- roots, logarithms, exponentials ----------------------------------------------------------


def absolute(z):
    """|z| as C's ``cabs`` (``hypot``): +inf when either part is infinite, even beside a NaN. The
    CPU's vectorised kernel calls SLEEF's ``hypotf_u05`` (0.5001 ulp); the square root of the sum of
    squares in float64, rounded once to float32, gives its values (all of 400,000 random ones, from
    1e-20 to 1e30), where XLA's complex ``abs`` was one ulp off in some."""
    x, y = z.real.astype(jnp.float64), z.imag.astype(jnp.float64)
    magnitude = jnp.sqrt(x * x + y * y).astype(z.real.dtype)
    return jnp.where(jnp.isinf(z.real) | jnp.isinf(z.imag), jnp.inf, magnitude).astype(z.real.dtype)


def sqrt(z):
    """C99's ``csqrt`` (glibc): the cut along the negative real axis keeps the sign of a zero
    imaginary part (``sqrt(-4 - 0j) = -2j``), ``x + inf i`` gives ``inf + inf i`` for every x, NaN
    included, and an infinite real part gives ``(0, +-inf)`` or ``(inf, +-0)``."""
    x, y = z.real, z.imag
    w = jnp.sqrt(jax.lax.complex(x, jnp.abs(y)))
    inf, nan = _full(x, jnp.inf), _full(x, jnp.nan)
    nan_y = jnp.isnan(y)
    return _select(
        [
            (jnp.isinf(y), (inf, y)),
            (x == -jnp.inf, (jnp.where(nan_y, nan, 0), jnp.copysign(inf, y))),
            (x == jnp.inf, (x, jnp.where(nan_y, nan, jnp.copysign(jnp.zeros_like(y), y)))),
        ],
        (jnp.abs(w.real), jnp.copysign(jnp.abs(w.imag), y)),
    )


def rsqrt(z):
    """``1 / sqrt(z)`` as the CPU's kernels compute torch.rsqrt: c10's division of 1 by ``csqrt``
    (so ``rsqrt(inf j)`` is NaN, as on the CPU)."""
    return reciprocal(sqrt(z))


def log(z):
    """C99's ``clog`` (glibc): ``log|z|`` (+inf when either part is infinite, even beside a NaN;
    -inf at zero) plus ``atan2(y, x)`` i, which keeps the signs of zeros."""
    x, y = z.real, z.imag
    magnitude = jnp.where(jnp.isinf(x) | jnp.isinf(y), jnp.inf, jnp.log(jax.lax.complex(x, jnp.abs(y))).real)
    return jax.lax.complex(magnitude, jnp.arctan2(y, x))


def log2(z):
    """torch.log2 of a complex tensor as the CPU computes it: each part of :func:`log` divided by
    ``log(2)``."""
    w = log(z)
    return jax.lax.complex(divided_by(w.real, math.log(2)), divided_by(w.imag, math.log(2)))


def log10(z):
    """torch.log10 of a complex tensor as the CPU computes it: each part of :func:`log` divided by
    ``log(10)``."""
    w = log(z)
    return jax.lax.complex(divided_by(w.real, math.log(10)), divided_by(w.imag, math.log(10)))


def log1p(z):
    """torch.log1p of a complex tensor as c10 computes it on the CPU: with ``u = 1 + z``, z itself
    when u is 1, ``log(u)`` when ``u - 1`` is z exactly, else ``log(u) * (z / (u - 1))``. u is
    behind a barrier, else XLA's simplifier folds ``(x + 1) - 1`` to x."""
    u = jax.lax.optimization_barrier(jax.lax.complex(z.real + 1, z.imag))
    log_u = log(u)
    down = jax.lax.complex(u.real - 1, u.imag)
    correction = divide(z, down)
    scaled = jax.lax.complex(
        log_u.real * correction.real - log_u.imag * correction.imag,
        log_u.real * correction.imag + log_u.imag * correction.real,
    )
    exact = (down.real == z.real) & (down.imag == z.imag)
    one = (u.real == 1) & (u.imag == 0)
    return jnp.where(one, z, jnp.where(exact, log_u, scaled))


def exp(z):
    """C99's ``cexp`` as glibc computes it: C99's special values (an infinite real part keeps its
    infinity or zero, with the signs of cos(y) and sin(y), when y is finite) and, for a finite real
    part past the float's exponent range, exp(x) applied in steps of exp(t) so that
    ``exp(100) * sin(1e-30)`` stays finite. XLA's complex exp gives NaN + NaN i for -inf + NaN i
    where C gives 0."""
    x, y = z.real, z.imag
    dtype = x.dtype
    tiny = jnp.abs(y) <= jnp.finfo(dtype).tiny
    sin_y = jnp.where(tiny, y, jnp.sin(y))
    cos_y = jnp.where(tiny, jnp.ones_like(y), jnp.cos(y))
    cos_part, sin_part = _times_exp(x, cos_y, sin_y)
    nan = _full(x, jnp.nan)
    # An infinite real part: +inf or 0 with the signs of cos(y) and sin(y) (y itself when y is 0);
    # with y infinite or NaN, (+inf, NaN) for +inf and (0, +-0) for -inf.
    value = jnp.where(jnp.signbit(x), jnp.zeros_like(x), _full(x, jnp.inf))
    zero_y = y == 0
    infinite = (
        jnp.where(zero_y, value, jnp.copysign(value, jnp.cos(y))),
        jnp.where(zero_y, y, jnp.copysign(value, jnp.sin(y))),
    )
    positive = ~jnp.signbit(x)
    infinite_nonfinite = (
        jnp.where(positive, _full(x, jnp.inf), jnp.zeros_like(x)),
        jnp.where(positive, y - y, jnp.copysign(jnp.zeros_like(y), y)),
    )
    finite_y = jnp.isfinite(y)
    parts = []
    for index, finite in enumerate((cos_part, sin_part)):
        real_finite = jnp.where(finite_y, finite, nan)
        real_infinite = jnp.where(finite_y, infinite[index], infinite_nonfinite[index])
        real_nan = jnp.where(zero_y, y, nan) if index else nan  # (NaN, y) for y = +-0
        parts.append(jnp.where(jnp.isfinite(x), real_finite, jnp.where(jnp.isinf(x), real_infinite, real_nan)))
    return jax.lax.complex(*parts)


def _times_exp(x, *factors):
    """Each factor times ``exp(x)``, with exp applied in steps of ``exp(t)`` (t the largest integer
    whose exp is finite) while x is past t, as glibc's complex exponentials do, so that a product
    whose exp alone overflows stays finite when the factor is small."""
    dtype = x.dtype
    t = int((jnp.finfo(dtype).maxexp - 1) * math.log(2))
    exp_t = jnp.exp(jnp.asarray(t, dtype))
    scaled = x
    factors = list(factors)
    for _ in range(2):
        step = scaled > t
        scaled = jnp.where(step, scaled - t, scaled)
        factors = [jnp.where(step, f * exp_t, f) for f in factors]
    factor = jnp.where(scaled > t, jnp.finfo(dtype).max, jnp.exp(scaled))
    return tuple(factor * f for f in factors)


def exp2(z):
    """torch.exp2 of a complex tensor as the CPU computes it: :func:`exp` of ``log(2) * z``, each
    part scaled."""
    scale = jnp.asarray(math.log(2), z.real.dtype)
    return exp(jax.lax.complex(z.real * scale, z.imag * scale))


def expm1(z):
    """torch.expm1 of a complex tensor as c10 writes it: ``expm1(x) cos(y) - 2 sin(y/2)^2`` plus
    ``exp(x) sin(y)`` i, in real arithmetic."""
    x, y = z.real, z.imag
    half = jnp.sin(y / 2)
    return jax.lax.complex(jnp.expm1(x) * jnp.cos(y) - 2 * half * half, jnp.exp(x) * jnp.sin(y))


def power(base, exponent):
    """``base ** exponent`` for complex arrays as the CPU computes it: ATen's kernel calls
    ``std::pow`` of two complex numbers, which is glibc's ``cpow``, ``cexp(exponent * clog(base))``
    with the product taken as C99 defines it. XLA's complex pow special-cases a zero base (1 for
    0 ** 0, NaN for 0 ** (1 + 1j)) where the CPU gives NaN + NaN i and 0, and gave NaN + NaN i for
    most powers with an infinite or NaN part that C takes to an infinity or zero."""
    base, exponent = jnp.broadcast_arrays(base, exponent)
    logarithm = log(base)
    real, imag = multiply_c99(exponent.real, exponent.imag, logarithm.real, logarithm.imag)
    return exp(jax.lax.complex(real, imag))


# --- hyperbolic and circular functions ----------------------------------------------------------


def _sinh_cosh_parts(x, y, odd: bool):
    """glibc's ``csinh`` (odd) or ``ccosh`` as (real, imag) parts: ``sinh x cos y + cosh x sin y i``
    or ``cosh x cos y + sinh x sin y i``, with exp scaled past the float's range and C99's values
    for infinite and NaN parts."""
    ax = jnp.abs(x)
    negative = jnp.signbit(x)
    sin_y, cos_y = jnp.sin(y), jnp.cos(y)
    t = int((jnp.finfo(x.dtype).maxexp - 1) * math.log(2))
    big = ax > t
    # Past t, sinh and cosh are both exp(|x|) / 2: scaled in steps.
    half_cos, half_sin = _times_exp(jnp.where(big, ax, 0), cos_y / 2, sin_y / 2)
    sinh_x, cosh_x = exponential.sinh(ax), exponential.cosh(ax)
    if odd:
        real = jnp.where(big, half_cos, sinh_x * cos_y)
        imag = jnp.where(big, half_sin, cosh_x * sin_y)
        real = jnp.where(negative, -real, real)
    else:
        real = jnp.where(big, half_cos, cosh_x * cos_y)
        imag = jnp.where(big, half_sin, sinh_x * sin_y)
        imag = jnp.where(negative, -imag, imag)
    inf, nan = _full(x, jnp.inf), _full(x, jnp.nan)
    finite_x, finite_y, inf_x = jnp.isfinite(x), jnp.isfinite(y), jnp.isinf(x)
    zero_x, zero_y = x == 0, y == 0
    sign_x = jnp.where(negative, -1.0, 1.0).astype(x.dtype)
    nan_or_y = jnp.where(zero_y, y, nan)
    if odd:
        cases = [
            (
                finite_x & ~finite_y,
                (jnp.where(zero_x, jnp.copysign(jnp.zeros_like(x), x), nan), jnp.where(zero_x, y - y, nan)),
            ),
            (inf_x & finite_y & ~zero_y, (jnp.copysign(inf, cos_y) * sign_x, jnp.copysign(inf, sin_y))),
            (inf_x & zero_y, (x, y)),
            (inf_x, (inf, y - y)),
            (jnp.isnan(x), (nan, nan_or_y)),
        ]
    else:
        cases = [
            (finite_x & ~finite_y, (y - y, jnp.where(zero_x, jnp.zeros_like(x), nan))),
            (inf_x & finite_y & ~zero_y, (jnp.copysign(inf, cos_y), jnp.copysign(inf, sin_y) * sign_x)),
            (inf_x & zero_y, (inf, y * sign_x)),
            (inf_x, (inf, y - y)),
            (jnp.isnan(x), (nan, nan_or_y)),
        ]
    return _select(cases, (real, imag))


def sinh(z):
    """C99's ``csinh`` (glibc), signs of zeros and non-finite parts included."""
    return _sinh_cosh_parts(z.real, z.imag, odd=True)


def cosh(z):
    """C99's ``ccosh`` (glibc), signs of zeros and non-finite parts included."""
    return _sinh_cosh_parts(z.real, z.imag, odd=False)


def tanh(z):
    """C99's ``ctanh`` as glibc computes it: ``(sinh x cosh x + sin y cos y i) / (sinh^2 x + cos^2 y)``,
    and for |x| past half the exponent range (+-1, 4 sin y cos y / exp(2|x|)); an infinite x gives
    ``+-1 +- 0i``, a NaN part NaN (but ``x + 0i`` stays itself)."""
    x, y = z.real, z.imag
    dtype = x.dtype
    t = int((jnp.finfo(dtype).maxexp - 1) * math.log(2) / 2)
    sin_y, cos_y = jnp.sin(y), jnp.cos(y)
    ax = jnp.abs(x)
    sinh_x, cosh_x = jnp.sinh(x), jnp.cosh(x)
    den = jnp.where(
        jnp.abs(sinh_x) > jnp.abs(cos_y) * jnp.finfo(dtype).eps, sinh_x * sinh_x + cos_y * cos_y, cos_y * cos_y
    )
    real = sinh_x * cosh_x / den
    imag = sin_y * cos_y / den
    exp_2t = jnp.exp(jnp.asarray(2 * t, dtype))
    rest = ax - t
    big_imag = 4 * sin_y * cos_y / exp_2t
    big_imag = jnp.where(rest > t, big_imag / exp_2t, big_imag / jnp.exp(2 * jnp.where(rest > t, 0, rest)))
    one = jnp.copysign(jnp.ones_like(x), x)
    big = ax > t
    real, imag = jnp.where(big, one, real), jnp.where(big, big_imag, imag)
    nan = _full(x, jnp.nan)
    zero = jnp.zeros_like(x)
    inf_x = jnp.isinf(x)
    sign_product = jnp.where(
        jnp.isfinite(y) & (jnp.abs(y) > 1), jnp.copysign(zero, sin_y * cos_y), jnp.copysign(zero, y)
    )
    nonfinite = ~jnp.isfinite(x) | ~jnp.isfinite(y)
    return _select(
        [
            (inf_x, (one, sign_product)),
            (nonfinite & (y == 0), (x, y)),
            (nonfinite, (jnp.where(x == 0, x, nan), nan)),
        ],
        (real, imag),
    )


def _times_minus_i(fn, z):
    """``-i fn(i z)``: sin from sinh, tan from tanh (C99 defines them so)."""
    w = fn(jax.lax.complex(-z.imag, z.real))
    return jax.lax.complex(w.imag, -w.real)


def sin(z):
    """C99's ``csin``: ``-i csinh(i z)``, but for an infinite or NaN x beside an infinite y, where
    glibc's csin gives ``NaN + inf i`` whatever the signs."""
    x, y = z.real, z.imag
    w = _times_minus_i(sinh, z)
    return _select([(jnp.isinf(y) & ~jnp.isfinite(x), (x - x, _full(y, jnp.inf)))], (w.real, w.imag))


def cos(z):
    """C99's ``ccos``: ``ccosh(i z)``."""
    return cosh(jax.lax.complex(-z.imag, z.real))


def tan(z):
    """C99's ``ctan``: ``-i ctanh(i z)``."""
    return _times_minus_i(tanh, z)


def sinc(z):
    """torch.sinc of a complex tensor as the CPU's kernel computes it: 1 at 0, else
    ``csin(pi z) / (pi z)`` with pi z a complex product and c10's division."""
    pi_z = multiply(jax.lax.complex(jnp.full_like(z.real, math.pi), jnp.zeros_like(z.real)), z)
    value = divide(sin(pi_z), pi_z)
    return jnp.where(z == 0, jnp.ones_like(z), value)


# --- inverse functions --------------------------------------------------------------------------


def asinh(z):
    """C99's ``casinh`` (glibc): XLA's value in the first quadrant, signs from x and y (asinh is odd
    and conjugate-symmetric); infinite parts give ``+-inf`` with ``+-pi/2``, ``+-pi/4`` or ``+-0`` i,
    ``NaN + 0i`` stays, other NaNs give NaN."""
    return _asinh_table(z, _odd_symmetric(jnp.arcsinh, z))


def _asinh_table(z, finite):
    """casinh's values for non-finite parts, ``finite`` (real, imag) elsewhere."""
    x, y = z.real, z.imag
    inf, nan = _full(x, jnp.inf), _full(x, jnp.nan)
    nan_x, inf_x = jnp.isnan(x), jnp.isinf(x)
    angle = jnp.where(jnp.isfinite(x), _PI / 2, _PI / 4).astype(x.dtype)
    return _select(
        [
            (jnp.isinf(y), (jnp.copysign(inf, x), jnp.where(nan_x, nan, jnp.copysign(angle, y)))),
            (
                inf_x | nan_x,
                (x, jnp.where((inf_x & ~jnp.isnan(y)) | (nan_x & (y == 0)), jnp.copysign(jnp.zeros_like(y), y), nan)),
            ),
            (jnp.isnan(y), (nan, nan)),
        ],
        finite,
    )


def asin(z):
    """C99's ``casin`` (glibc): ``-i casinh(i z)``, except for NaN parts: ``0 + NaN i`` stays, a
    NaN beside an infinity gives ``NaN +- inf i``, other NaNs NaN."""
    return _asin(z, asinh)


def _asin(z, inner):
    """casin from ``inner`` (casinh, or only its values for non-finite parts and zeros)."""
    x, y = z.real, z.imag
    w = _times_minus_i(inner, z)
    nan = _full(x, jnp.nan)
    has_nan = jnp.isnan(x) | jnp.isnan(y)
    return _select(
        [
            (has_nan & (x == 0), (x, y)),
            (has_nan & (jnp.isinf(x) | jnp.isinf(y)), (nan, jnp.copysign(_full(x, jnp.inf), y))),
            (has_nan, (nan, nan)),
        ],
        (w.real, w.imag),
    )


def acos(z):
    """C99's ``cacos`` (glibc): XLA's value above the real axis with the imaginary part's sign from
    y (acos is conjugate-symmetric); for infinite or NaN parts, and zero, ``pi/2 - casin(z)``."""
    x, y = z.real, z.imag
    w = jnp.arccos(jax.lax.complex(x, jnp.abs(y)))
    regular = (w.real, jnp.copysign(jnp.abs(w.imag), -y))
    # Where these apply, casin is casinh's table or, for zeros, z itself: no need for XLA's asinh.
    special = _asin(z, lambda t: _asinh_table(t, (t.real, t.imag)))
    real = _PI / 2 - special.real
    real = jnp.where(real == 0, jnp.zeros_like(real), real)
    edge = ~jnp.isfinite(x) | ~jnp.isfinite(y) | ((x == 0) & (y == 0))
    return _select([(edge, (real, -special.imag))], regular)


def acosh(z):
    """C99's ``cacosh`` (glibc): XLA's value above the real axis, the imaginary part's sign from y;
    infinite parts give ``+inf`` with ``+-pi/4``, ``+-3pi/4``, ``+-pi/2``, ``+-pi`` or ``+-0`` i,
    ``+-0 + NaN i`` gives ``NaN + pi/2 i``, other NaNs NaN."""
    x, y = z.real, z.imag
    w = jnp.arccosh(jax.lax.complex(x, jnp.abs(y)))
    inf, nan = _full(x, jnp.inf), _full(x, jnp.nan)
    dtype = x.dtype
    inf_x, nan_x = jnp.isinf(x), jnp.isnan(x)
    corner = jnp.where(x < 0, _PI - _PI / 4, _PI / 4).astype(dtype)
    edge = jnp.where(inf_x, corner, jnp.asarray(_PI / 2, dtype))
    axis = jnp.where(jnp.signbit(x), jnp.asarray(_PI, dtype), jnp.zeros_like(x))
    return _select(
        [
            (jnp.isinf(y), (inf, jnp.where(nan_x, nan, jnp.copysign(edge, y)))),
            (inf_x, (inf, jnp.where(jnp.isnan(y), nan, jnp.copysign(axis, y)))),
            (nan_x | jnp.isnan(y), (nan, jnp.where(x == 0, jnp.asarray(_PI / 2, dtype), nan))),
            ((x == 0) & (y == 0), (jnp.zeros_like(x), jnp.copysign(jnp.asarray(_PI / 2, dtype), y))),
        ],
        (jnp.abs(w.real), jnp.copysign(jnp.abs(w.imag), y)),
    )


def atanh(z):
    """C99's ``catanh`` (glibc): XLA's value in the first quadrant, signs from x and y (atanh is odd
    and conjugate-symmetric); an infinite part gives ``+-0 +- pi/2 i``, a zero or infinite x beside
    a NaN ``+-0 + NaN i``, other NaNs NaN."""
    x, y = z.real, z.imag
    real, imag = _odd_symmetric(jnp.arctanh, z)
    # Next to the poles +-1 glibc takes the real part from log|y| (XLA's overflows to inf).
    near_pole = (jnp.abs(x) == 1) & (jnp.abs(y) < jnp.finfo(x.dtype).eps ** 2)
    real = jnp.where(near_pole, jnp.copysign(0.5 * (math.log(2) - jnp.log(jnp.abs(y))), x), real)
    nan = _full(x, jnp.nan)
    zero = jnp.copysign(jnp.zeros_like(x), x)
    half_pi = jnp.copysign(jnp.asarray(_PI / 2, x.dtype), y)
    nonfinite = ~jnp.isfinite(x) | ~jnp.isfinite(y)
    return _select(
        [
            (jnp.isinf(y), (zero, half_pi)),
            (nonfinite & (jnp.isinf(x) | (x == 0)), (zero, jnp.where(jnp.isnan(y), nan, half_pi))),
            (nonfinite, (nan, nan)),
        ],
        (real, imag),
    )


def atan(z):
    """C99's ``catan``, which C99 (G.6) defines as ``-i catanh(iz)``: the real part of atan(x + iy)
    is the imaginary part of :func:`atanh` (-y + ix), its imaginary part minus that real part."""
    mirrored = atanh(jax.lax.complex(-z.imag, z.real))
    return jax.lax.complex(mirrored.imag, -mirrored.real)


# --- ops written out by the CPU's kernels -----------------------------------------------------


def neg(z):
    """torch.neg of a complex tensor as the CPU's vectorised kernel computes it, ``0 - z`` part by
    part: ``-(0 + 1j)`` is ``0 - 1j`` (its scalar loop, for strided tensors, gives ``-0 - 1j``)."""
    return jax.lax.complex(0 - z.real, 0 - z.imag)


def sgn(z):
    """torch.sgn of a complex tensor as the CPU's vectorised kernel computes it: each part divided
    by ``hypot(x, y)``, and ``0`` (positive zeros) where that is 0."""
    magnitude = absolute(z)
    zero = magnitude == 0
    return jax.lax.complex(
        jnp.where(zero, 0, z.real / magnitude).astype(magnitude.dtype),
        jnp.where(zero, 0, z.imag / magnitude).astype(magnitude.dtype),
    )


def sigmoid(z):
    """torch.sigmoid of a complex tensor as the CPU's vectorised kernel computes it:
    ``1 / (1 + exp(0 - z))``, the sum part by part and the quotient c10's (:func:`divide`)."""
    e = exp(neg(z))
    return reciprocal(jax.lax.complex(1 + e.real, 0 + e.imag))
