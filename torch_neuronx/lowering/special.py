"""Special functions: Bessel, gamma-family and error-function ops (``torch.special``), and the
number-level ops angle, frexp, gcd/lcm, complex/polar, logspace and hash_tensor.

The orthogonal polynomials of ``torch.special`` are in :mod:`torch_neuronx.lowering.polynomials`.

Functions JAX provides (``jax.scipy.special``) are used as they are, with PyTorch's special values
(domain edges, NaN, infinities) stated on top. The others follow the formulas of PyTorch's CPU
kernels (``aten/src/ATen/native/Math.h``, Cephes-derived rational and Chebyshev approximations),
evaluated in the computation dtype (float32 for integer and 16-bit inputs), so their rounding
matches the CPU's to a few ulp.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import torch

from torch_neuronx.lowering.exact_division import divided_by
from torch_neuronx.lowering.overflow import raise_if_overflows
from torch_neuronx.lowering.ranges import bfloat16_nans_positive
from torch_neuronx.lowering.registry import DECOMPOSED_DTYPE_RULES, Promotion, lowering
from torch_neuronx.runtime.dtypes import aten_name
from torch_neuronx.runtime.tracing import device_check

aten = torch.ops.aten

NAN = float("nan")
INF = float("inf")


def _register_all(table: dict, promotion: Promotion) -> None:
    for op, fn in table.items():
        lowering(op, promotion=promotion)(fn)


# --- error function, normal distribution, gamma family ------------------------------------------


def _erfcx(x: jax.Array) -> jax.Array:
    """erfc(x) * exp(x**2). Above 5 from the asymptotic series 1/(x sqrt(pi)) sum_k (-1)**k
    (2k-1)!! / (2x**2)**k (12 terms: relative error below 1e-8), where jax's exp(x**2) erfc(x)
    loses precision and erfc underflows (float32, x > 9.19)."""
    large = x > 5.0
    y = jnp.where(large, x, 5.0)
    inverse = 1.0 / (2.0 * y * y)
    series = jnp.zeros_like(y)
    for k in range(11, 0, -1):
        series = -(2 * k - 1) * inverse * (1.0 + series)
    asymptotic = (1.0 + series) * np.float32(1 / np.sqrt(np.pi)) / y
    return jnp.where(large, asymptotic, jsp.erfcx(x))


def _log_ndtr(x: jax.Array) -> jax.Array:
    """log of the standard normal CDF, as PyTorch computes it: from erfcx below -1, else log1p."""
    t = x * np.float32(np.sqrt(0.5)).astype(x.dtype)
    return jnp.where(x < -1.0, jnp.log(_erfcx(-t) / 2) - t * t, jnp.log1p(-jsp.erfc(t) / 2))


def _entr(x: jax.Array) -> jax.Array:
    """torch.special.entr: -x*log(x) for x > 0, 0 at 0, -inf for x < 0, NaN for NaN."""
    safe = jnp.where(x > 0, x, 1)
    return jnp.where(x > 0, -safe * jnp.log(safe), jnp.where(x == 0, 0.0, jnp.where(x < 0, -INF, x)))


def _ndtri(p: jax.Array) -> jax.Array:
    """Inverse of the standard normal CDF: -inf at 0, inf at 1, NaN outside [0, 1]."""
    return jnp.where(p == 0, -INF, jnp.where(p == 1, INF, jsp.ndtri(p)))


_FLOAT_UNARY: dict = {  # PyTorch INT_TO_FLOAT
    aten.special_i0e.default: jsp.i0e,
    aten.special_i1.default: jsp.i1,
    aten.special_i1e.default: jsp.i1e,
    aten.special_ndtri.default: _ndtri,
    aten.special_log_ndtr.default: _log_ndtr,
    aten.special_erfcx.default: _erfcx,
    aten.special_entr.default: _entr,
}
_register_all(_FLOAT_UNARY, Promotion.INT_TO_FLOAT)


@lowering(
    aten.special_xlog1py.default,
    aten.special_xlog1py.other_scalar,
    aten.special_xlog1py.self_scalar,
    promotion=Promotion.INT_TO_FLOAT,
)
def xlog1py(self: jax.Array, other: jax.Array) -> jax.Array:
    """torch.special.xlog1py: self * log1p(other); NaN where other is NaN, else 0 where self is 0."""
    product = self * jnp.log1p(other)
    return jnp.where(jnp.isnan(other), NAN, jnp.where(self == 0, 0.0, product))


def _shifted_q(x: jax.Array, q: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(sum of (q + k)**-x over k < m, q + m), with m the steps that take q to 9 or above, as
    PyTorch's zeta sums its leading terms (in float64) before the Euler-Maclaurin tail. The sum is
    compensated (Neumaier), so terms that cancel (negative q) lose no more than their own rounding;
    jax's zeta alone is wrong for q below about -8."""

    def body(state: tuple) -> tuple:
        total, compensation, q = state
        low = q < 9
        term = jnp.where(low, jnp.power(q, -x), 0.0)
        new_total = total + term
        error = jnp.where(jnp.abs(total) >= jnp.abs(term), (total - new_total) + term, (term - new_total) + total)
        compensation = jnp.where(jnp.isfinite(new_total), compensation + error, compensation)
        return new_total, compensation, jnp.where(low, q + 1, q)

    q = jnp.where(jnp.isneginf(q), 0.0, q)  # a pole: the caller returns inf there
    zeros = jnp.zeros_like(q)
    total, compensation, q = jax.lax.while_loop(lambda state: jnp.any(state[2] < 9), body, (zeros, zeros, q))
    return total + compensation, q


def _zeta_in_float64(x: jax.Array, q: jax.Array) -> jax.Array:
    """zeta(x, q) summed in float64, for where :func:`_zeta`'s float32 sum is below
    :data:`_SUBNORMAL_TERMS`: its terms there are subnormals, which the CPU keeps (to a few bits) and
    XLA flushes to 0 (zeta(2., 1e20) was 0 for 1e-20, zeta(21., 60.) 20% low)."""
    return _zeta(x.astype(jnp.float64), q.astype(jnp.float64))


def _zeta(x: jax.Array, q: jax.Array) -> jax.Array:
    """Hurwitz zeta with PyTorch's edges (Math.h ``zeta``): inf at x == 1, NaN for x < 1; for q <= 0,
    inf at integer q and NaN for non-integer x."""
    x, q = jnp.broadcast_arrays(x, q)
    head, tail_q = _shifted_q(x, q)
    value = head + jsp.zeta(x, tail_q)
    pole = (q <= 0) & (q == jnp.floor(q))
    value = jnp.where((q <= 0) & (x != jnp.floor(x)), NAN, value)
    value = jnp.where(pole, INF, value)
    return jnp.where(x == 1, INF, jnp.where(x < 1, NAN, value))


@lowering(
    aten.special_zeta.default,
    aten.special_zeta.other_scalar,
    aten.special_zeta.self_scalar,
    promotion=Promotion.INT_TO_FLOAT,
)
def zeta(self: jax.Array, other: jax.Array) -> jax.Array:
    """torch.special.zeta(x, q): the Hurwitz zeta function sum_k (k + q)**-x (in float64 where the
    float32 sum loses subnormal terms: :func:`_zeta_in_float64`)."""
    value = _zeta(self, other)
    if value.dtype == jnp.float64:
        return value
    small = _zeta_in_float64(*jnp.broadcast_arrays(self, other)).astype(value.dtype)
    return jnp.where(jnp.abs(value) < _SUBNORMAL_TERMS, small, value)


def _trigamma(x: jax.Array) -> jax.Array:
    """PyTorch's trigamma: reflection below 0.5, six recurrence steps, then the asymptotic series."""
    reflect = x < 0.5
    sin_pi_x = jnp.sin(np.float32(np.pi) * x)
    result = jnp.where(reflect, -(np.float32(np.pi) * np.float32(np.pi)) / (sin_pi_x * sin_pi_x), 0.0)
    y = jnp.where(reflect, 1 - x, x)
    for _ in range(6):
        result = result + 1 / (y * y)
        y = y + 1
    ixx = 1 / (y * y)
    result = (
        result
        + (1 + 1 / (2 * y) + ixx * (np.float32(1 / 6) - ixx * (np.float32(1 / 30) - ixx * np.float32(1 / 42)))) / y
    )
    return jnp.where(reflect, -result, result)


_LOG_FLOAT32_MAX = math.log(float(np.finfo(np.float32).max))
#: A float32 zeta sum below this may have lost terms to XLA's flush of subnormals (2**-126) beyond
#: float32's precision (a margin of 2**36 over the terms' 2**-24 relative weight).
_SUBNORMAL_TERMS = 2.0**-90

#: B_2, B_4, ..., B_20: the Bernoulli numbers of the Euler-Maclaurin tail of ``_scaled_hurwitz_zeta``.
_BERNOULLI_EVEN = tuple(
    Fraction(p, q)
    for p, q in ((1, 6), (-1, 30), (1, 42), (-1, 30), (5, 66), (-691, 2730), (7, 6), (-3617, 510), (43867, 798),
                 (-174611, 330))
)  # fmt: skip


def _scaled_hurwitz_zeta(s: int, q: jax.Array) -> jax.Array:
    """q**s * zeta(s, q) = sum_k (q / (q + k))**s for an integer s >= 2 and q >= 1, in q's dtype.

    The scaling keeps it finite and normal (it lies in [1, 1 + q / (s - 1)]) where zeta(s, q)
    itself underflows, as q**-s does for large s and q. Terms are summed directly until q + k
    reaches s + 10 (or they become negligible), then the Euler-Maclaurin formula with ten
    Bernoulli terms gives the rest (as in Cephes' zeta, PyTorch's Math.h, which starts it at 9
    whatever s): from s + 10 on, its j-th term shrinks like ((s + 2j) / (2 pi (q + k)))**(2j).
    Against mpmath, the relative error is below 1e-15 for s <= 41 and 3e-12 for s = 1001, from
    q = 1 to 2**23."""
    start = s + 10
    tail_coefficients, rising = [], Fraction(s)
    for j, bernoulli in enumerate(_BERNOULLI_EVEN, start=1):  # B_2j / (2j)! s (s + 1) ... (s + 2j - 2)
        tail_coefficients.append(float(bernoulli * rising / math.factorial(2 * j)))
        rising *= (s + 2 * j - 1) * (s + 2 * j)

    def active(state: tuple) -> jax.Array:
        return (state[1] < start) & ~state[2]

    def body(state: tuple) -> tuple:
        total, shifted, done = state
        low = active(state)
        term = (q / shifted) ** s
        # The terms left add at most term * (1 + (q + k) / (s - 1)) < 13 term: none for a sum >= 1
        # once term < 2**-60, which for large s comes after a few steps, not s + 10.
        return (
            total + jnp.where(low, term, 0.0),
            jnp.where(low, shifted + 1, shifted),
            done | (low & (term < 2.0**-60)),
        )

    total, shifted, done = jax.lax.while_loop(
        lambda state: jnp.any(active(state)), body, (jnp.zeros_like(q), q, jnp.zeros(q.shape, bool))
    )
    inverse_square = 1 / (shifted * shifted)
    series = jnp.zeros_like(q)
    for c in reversed(tail_coefficients):
        series = series * inverse_square + c
    tail = shifted / (s - 1) + 0.5 + series / shifted
    return total + jnp.where(done, 0.0, (q / shifted) ** s * tail)


@functools.cache
def _cot_derivative_coefficients(n: int) -> tuple[float, ...]:
    """The coefficients (constant term first) of Q_n / n!, where d^n/dy^n cot(y) = (-1)^n Q_n(cot y).

    Q_0(c) = c and Q_{k+1}(c) = (1 + c^2) Q_k'(c) (the chain rule with dc/dy = -(1 + c^2)), in
    exact integers, rounded once: the coefficients are non-negative (Horner's rule adds terms of
    one sign for c >= 0), and Q_n has the parity of n + 1."""
    coefficients = [0, 1]
    for _ in range(n):
        derivative = [k * a for k, a in enumerate(coefficients)][1:]
        coefficients = [0] * (len(derivative) + 2)
        for k, a in enumerate(derivative):
            coefficients[k] += a
            coefficients[k + 2] += a
    factorial = math.factorial(n)
    return tuple(float(Fraction(a, factorial)) for a in coefficients)


#: From this order on, ``_reflected_polygamma`` sums R's terms over the nearest poles.
_POLE_SUM_ORDER = 20


def _reflected_polygamma(n: int, x: jax.Array) -> jax.Array:
    """psi^(n)(x) for n >= 1 and non-integer x < 0 (float64 x), by the reflection formula
    psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi d^n/dx^n cot(pi x) (the n-th derivative of
    psi(1 - x) - psi(x) = pi cot(pi x), DLMF 5.5.4, 5.15.6), written as

        psi^(n)(x) = -n! (zeta(n + 1, 1 - x) + (-1)^n R(r)),
        R(r) = pi^(n+1) / n! Q_n(cot(pi r)) = sum over all integers k of (r - k)^-(n+1),

    with r = x - round(x), exact, and Q_n as in ``_cot_derivative_coefficients``. zeta(n + 1, x)
    itself (the CPU's way) sums terms of both signs for x < 0 that cancel to (2 |x| + 2)^-(n+1) of
    their size; zeta(n + 1, 1 - x) and R(|r|) have terms of one sign, and R(-|r|) =
    (-1)^(n+1) R(|r|). For n < 20, R(|r|) is the polynomial in t = tan(pi |r|) (times t^-(n+1))
    up to |r| = 1/4, beyond in t = cot(pi |r|) = tan(pi (1/2 - |r|)): either t keeps its relative
    precision, near the poles and near the half-integers (where t = 0 exactly). For larger n it
    is the sum over the poles -3..4 (the others' terms are below 3e-20 of the largest one's). The
    two parts are carried as logarithms, so that neither n! (beyond a double from n = 171) nor
    the terms overflow or underflow before the float32 result does; it is +-inf beyond float32."""
    order = n + 1
    log_factorial = math.lgamma(order)
    q = 1 - x  # exact: x is a float32 value
    log_zeta = log_factorial + jnp.log(_scaled_hurwitz_zeta(order, q)) - order * jnp.log(q)
    r = x - jnp.round(x)
    distance = jnp.abs(r)
    if n < _POLE_SUM_ORDER:
        coefficients = _cot_derivative_coefficients(n)
        near = distance <= 0.25
        # tan of the distance to the pole or to the half-integer, never of pi x: it keeps its
        # relative precision at both ends, and cot(pi r) is exactly 0 at the half-integers.
        t = jnp.tan(np.pi * jnp.where(near, distance, 0.5 - distance))
        low_first = high_first = jnp.zeros_like(t)
        for a, b in zip(coefficients, reversed(coefficients), strict=True):
            low_first = low_first * t + a  # sum a_j t^(n+1-j): Q_n(1/t) t^(n+1)
            high_first = high_first * t + b  # sum a_j t^j: Q_n(t)
        log_cot = jnp.where(
            near, order * jnp.log(np.pi / t) + jnp.log(low_first), order * math.log(np.pi) + jnp.log(high_first)
        )
        cot_sign = 1.0
    else:
        # The poles -k and k + 1 are paired, equally far from 1/2: R is then exactly 0 there for even n.
        pairs = [(distance / (distance + k)) ** order + (distance / (distance - 1 - k)) ** order for k in range(4)]
        scaled = pairs[0] + pairs[1] + pairs[2] + pairs[3]
        log_cot = -order * jnp.log(distance) + jnp.log(jnp.abs(scaled))
        cot_sign = jnp.sign(scaled)
    # the sign of (-1)^n R(r) = (-1)^n sign(r)^(n+1) R(|r|)
    cot_sign = cot_sign * (-1.0 if n % 2 else 1.0) * (jnp.where(r < 0, -1.0, 1.0) if order % 2 else 1.0)
    log_cot = log_factorial + log_cot
    # -(e^log_zeta + cot_sign e^log_cot), scaled by the larger term
    largest = jnp.maximum(log_zeta, log_cot)
    mantissa = jnp.exp(log_zeta - largest) + cot_sign * jnp.exp(log_cot - largest)
    return -jnp.sign(mantissa) * jnp.exp(largest + jnp.log(jnp.abs(mantissa)))


@lowering(aten.polygamma.default, aten.special_polygamma.default, promotion=Promotion.INT_TO_FLOAT)
def polygamma(n: int, self: jax.Array) -> jax.Array:
    """torch.polygamma(n, x): digamma for n = 0; for n >= 1, PyTorch's trigamma (n = 1) or
    (-1)**(n+1) * n! * zeta(n + 1, x) (above) except at the negative non-integers, where the
    reflection formula of ``_reflected_polygamma`` gives the float32 rounding of the value (the
    zeta sum cancels there: polygamma(10, -100.5) had a relative error of 1e10, the CPU's 4e7,
    and PyTorch's trigamma, which reflects with sin(pi x) of the unreduced x, was 2e-3 off at
    x = -20 + 1e-3). The CPU's values at the negative integers (+-inf; finite for n = 1) stay."""
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if n == 0:
        return _digamma(self)
    reflected = (self < 0) & (self != jnp.floor(self))  # not -inf, NaN or the poles
    if n == 1:
        value = _trigamma(jnp.where(reflected, 1.0, self))
    else:
        # zeta(n + 1, x) is a pole (inf) at every negative integer, at -inf and at 0 alike; 0 spares
        # the zeta sum its |x| steps up from a very negative x.
        direct = jnp.where(self < 0, 0.0, self)
        # n! overflows float32 from n = 35 on (inf, as the CPU's float kernel); Python's exp raised
        # OverflowError beyond a double's range.
        log_factorial = math.lgamma(n + 1)
        factorial = np.float32(math.exp(log_factorial)) if log_factorial < _LOG_FLOAT32_MAX else np.float32(np.inf)
        sign = 1 if n % 2 else -1
        zeta = _zeta(jnp.full_like(direct, n + 1), direct)
        value = sign * factorial * zeta
        # Where the float32 zeta sum loses subnormal terms (polygamma(20, 60.) was 20% low, (20,
        # 100.) -0.0 for -1.3e-23), or n! overflows float32 (the CPU's inf or NaN where the value is
        # finite), the exact value: zeta and n! in float64, rounded once. The CPU's sum there keeps
        # subnormals of a few bits, 10-50% off for (32, 22.7) or (12, 4400.).
        if n < 171:  # n! within float64's range
            wide_zeta = _zeta_in_float64(jnp.full_like(direct, n + 1), direct)
            exact = (sign * math.exp(log_factorial) * wide_zeta).astype(value.dtype)
            value = jnp.where(np.isinf(factorial) | (jnp.abs(zeta) < _SUBNORMAL_TERMS), exact, value)
    # The others take a half-integer whose 1 - x needs no direct zeta terms (and no loop steps).
    wide = jnp.where(reflected, self, -10.5 - n).astype(jnp.float64)
    return jnp.where(reflected, _reflected_polygamma(n, wide).astype(self.dtype), value)


#: digamma(10), where PyTorch's kernel stops its upward recurrence.
_PSI_10 = 2.25175258906672110764
_DIGAMMA_ASYMPTOTIC = (8.33333333333333333333e-2, -2.10927960927960927961e-2, 7.57575757575757575758e-3,
                       -4.16666666666666666667e-3, 3.96825396825396825397e-3, -8.33333333333333333333e-3,
                       8.33333333333333333333e-2)  # fmt: skip


def _digamma(x: jax.Array) -> jax.Array:
    """PyTorch's ``calc_digamma``: copysign(inf, -x) at zero, NaN at the negative integers, the
    reflection psi(1 - x) - pi / tan(pi frac(x)) below zero; above, recurrence up to 10 and the
    asymptotic series (jax's digamma has no reflection: it is wrong for negative x)."""
    y = jnp.where(x < 0, 1 - x, x)
    result = jnp.zeros_like(y)
    for _ in range(10):  # y > 0 reaches 10 within ten steps
        below = y < 10
        result = jnp.where(below, result - 1 / y, result)
        y = jnp.where(below, y + 1, y)
    z = 1 / (y * y)
    series = jnp.where(y < 1e17, z * _polynomial(_DIGAMMA_ASYMPTOTIC, z), 0.0)
    value = jnp.where(y == 10, result + np.float32(_PSI_10), result + jnp.log(y) - 0.5 / y - series)
    # tan(pi x) = tan(pi (x - round(x))): the reduced argument keeps its precision near the poles,
    # where PyTorch computes pi * frac(x) in float64.
    reflected = value - np.float32(np.pi) / jnp.tan(np.float32(np.pi) * (x - jnp.round(x)))
    value = jnp.where(x < 0, jnp.where(x == jnp.trunc(x), NAN, reflected), value)
    return jnp.where(x == 0, jnp.copysign(INF, -x), value)


@lowering(aten.digamma.default, promotion=Promotion.INT_TO_FLOAT)
def digamma(self: jax.Array) -> jax.Array:
    """torch.digamma: the logarithmic derivative of the gamma function (see ``_digamma``)."""
    return _digamma(self)


def _incomplete_gamma_edges(a: jax.Array, x: jax.Array, value: jax.Array, lower: bool) -> jax.Array:
    """PyTorch's (SciPy's) boundary values of the regularized incomplete gamma functions."""
    zero, one = (0.0, 1.0) if lower else (1.0, 0.0)
    value = jnp.where(jnp.isinf(x), one, value)
    value = jnp.where(jnp.isinf(a), jnp.where(jnp.isinf(x), NAN, zero), value)
    value = jnp.where(x == 0, zero, value)
    value = jnp.where(a == 0, jnp.where(x > 0, one, NAN), value)
    return jnp.where((x < 0) | (a < 0), NAN, value)


def _check_incomplete_gamma_accuracy(name: str, a: jax.Array, x: jax.Array) -> None:
    """Raises for arguments in PyTorch's uniform-asymptotic region (a > 20 with x close to a), where
    jax's float32 series lose up to 1e-3 to the cancellation in x**a e**-x / Gamma(a) (PyTorch uses
    Temme's expansion there): an error rather than a wrong value."""
    ratio = jnp.abs(x - a) / a
    region = ((a > 20) & (a < 200) & (ratio < 0.3)) | ((a > 200) & (ratio < 4.5 / jnp.sqrt(a)))
    device_check(
        jnp.any(region & jnp.isfinite(x)),
        0,
        f"{name} on neuron: an element has a > 20 and x within the asymptotic band around a (|x - a| / a "
        f"< 0.3, or < 4.5 / sqrt(a) above a = 200), where neuron's float32 evaluation is not accurate to "
        f"float32 precision; compute it on the CPU, e.g. torch.{name}(a.cpu(), x.cpu()).to(a.device)",
    )


@lowering(aten.igamma.default, promotion=Promotion.INT_TO_FLOAT)
def igamma(self: jax.Array, other: jax.Array) -> jax.Array:
    """torch.igamma(a, x): the regularized lower incomplete gamma function P(a, x)."""
    _check_incomplete_gamma_accuracy("igamma", self, other)
    return _incomplete_gamma_edges(self, other, jsp.gammainc(self, other), lower=True)


@lowering(aten.igammac.default, promotion=Promotion.INT_TO_FLOAT)
def igammac(self: jax.Array, other: jax.Array) -> jax.Array:
    """torch.igammac(a, x): the regularized upper incomplete gamma function Q(a, x)."""
    _check_incomplete_gamma_accuracy("igammac", self, other)
    return _incomplete_gamma_edges(self, other, jsp.gammaincc(self, other), lower=False)


def _mvlgamma_rule(arguments: dict) -> None:
    """``mvlgamma_check`` (UnaryOps.cpp, CPU and CUDA alike): torch.mvlgamma runs as PyTorch's
    decomposition here, which lacks its bool refusal, so a compiled mvlgamma of bools computed.

    Raises:
        RuntimeError: "The input tensor may not be a boolean tensor.", "p has to be greater than or
            equal to 1".
    """
    if arguments["self"].dtype == torch.bool:
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    if arguments["p"] < 1:
        raise RuntimeError("p has to be greater than or equal to 1")


DECOMPOSED_DTYPE_RULES[aten.mvlgamma.default] = _mvlgamma_rule


# --- Bessel and Airy functions (Cephes approximations, as in PyTorch's Math.h) ---------------------


def _polynomial(coefficients: tuple[float, ...], z: jax.Array) -> jax.Array:
    """Horner's rule, highest power first, starting from zero as Math.h does."""
    result = jnp.zeros_like(z)
    for c in coefficients:
        result = result * z + jnp.asarray(c, z.dtype)
    return result


def _chebyshev_series(coefficients: tuple[float, ...], y: jax.Array) -> jax.Array:
    """Cephes ``chbevl``: a Chebyshev series in y (Clenshaw's recurrence)."""
    p = q = jnp.zeros_like(y)
    a = jnp.full_like(y, coefficients[0])
    for c in coefficients[1:]:
        p, q = q, a
        a = y * q - p + jnp.asarray(c, y.dtype)
    return 0.5 * (a - p)


# Asymptotic expansions of J0/Y0 and J1/Y1 for x > 5: P(25/x^2)/Q and R(25/x^2)/S.
_J0_PP = (7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e00,
          5.44725003058768775090e00, 8.74716500199817011941e00, 5.30324038235394892183e00,
          9.99999999999999997821e-01)  # fmt: skip
_J0_PQ = (9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e00,
          5.47097740330417105182e00, 8.76190883237069594232e00, 5.30605288235394617618e00,
          1.00000000000000000218e00)  # fmt: skip
_J0_QP = (-1.13663838898469149931e-02, -1.28252718670509318512e00, -1.95539544257735972385e01,
          -9.32060152123768231369e01, -1.77681167980488050595e02, -1.47077505154951170175e02,
          -5.14105326766599330220e01, -6.05014350600728481186e00)  # fmt: skip
_J0_QQ = (6.43178256118178023184e01, 8.56430025976980587198e02, 3.88240183605401609683e03,
          7.24046774195652478189e03, 5.93072701187316984827e03, 2.06209331660327847417e03,
          2.42005740240291393179e02)  # fmt: skip
_J0_RP = (-4.79443220978201773821e09, 1.95617491946556577543e12, -2.49248344360967716204e14,
          9.70862251047306323952e15)  # fmt: skip
_J0_RQ = (4.99563147152651017219e02, 1.73785401676374683123e05, 4.84409658339962045305e07,
          1.11855537045356834862e10, 2.11277520115489217587e12, 3.10518229857422583814e14,
          3.18121955943204943306e16, 1.71086294081043136091e18)  # fmt: skip
_Y0_YP = (1.55924367855235737965e04, -1.46639295903971606143e07, 5.43526477051876500413e09,
          -9.82136065717911466409e11, 8.75906394395366999549e13, -3.46628303384729719441e15,
          4.42733268572569800351e16, -1.84950800436986690637e16)  # fmt: skip
_Y0_YQ = (1.04128353664259848412e03, 6.26107330137134956842e05, 2.68919633393814121987e08,
          8.64002487103935000337e10, 2.02979612750105546709e13, 3.17157752842975028269e15,
          2.50596256172653059228e17)  # fmt: skip
_J1_PP = (7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e00,
          5.11207951146807644818e00, 8.42404590141772420927e00, 5.21451598682361504063e00,
          1.00000000000000000254e00)  # fmt: skip
_J1_PQ = (5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e00,
          5.07386386128601488557e00, 8.39985554327604159757e00, 5.20982848682361821619e00,
          9.99999999999999997461e-01)  # fmt: skip
_J1_QP = (5.10862594750176621635e-02, 4.98213872951233449420e00, 7.58238284132545283818e01,
          3.66779609360150777800e02, 7.10856304998926107277e02, 5.97489612400613639965e02,
          2.11688757100572135698e02, 2.52070205858023719784e01)  # fmt: skip
_J1_QQ = (7.42373277035675149943e01, 1.05644886038262816351e03, 4.98641058337653607651e03,
          9.56231892404756170795e03, 7.99704160447350683650e03, 2.82619278517639096600e03,
          3.36093607810698293419e02)  # fmt: skip
_J1_RP = (-8.99971225705559398224e08, 4.52228297998194034323e11, -7.27494245221818276015e13,
          3.68295732863852883286e15)  # fmt: skip
_J1_RQ = (6.20836478118054335476e02, 2.56987256757748830383e05, 8.35146791431949253037e07,
          2.21511595479792499675e10, 4.74914122079991414898e12, 7.84369607876235854894e14,
          8.95222336184627338078e16, 5.32278620332680085395e18)  # fmt: skip
_Y1_YP = (1.26320474790178026440e09, -6.47355876379160291031e11, 1.14509511541823727583e14,
          -8.12770255501325109621e15, 2.02439475713594898196e17, -7.78877196265950026825e17)  # fmt: skip
_Y1_YQ = (5.94301592346128195359e02, 2.35564092943068577943e05, 7.34811944459721705660e07,
          1.87601316108706159478e10, 3.88231277496238566008e12, 6.20557727146953693363e14,
          6.87141087355300489866e16, 3.97270608116560655612e18)  # fmt: skip
_SQRT_2_OVER_PI = 0.797884560802865355879892119868763737
_TWO_OVER_PI = 0.636619772367581343075535053490057448


def _hankel(x: jax.Array, w: jax.Array, tables: tuple, phase: float, cosine_first: bool) -> jax.Array:
    """The x > 5 expansion sqrt(2/(pi x)) (P cos(x - phase) - 5/x Q sin(x - phase)) of J (and with
    sin/cos swapped and a plus sign, of Y), in Math.h's order of operations."""
    pp, pq, qp, qq = (_polynomial(table, w) for table in tables)
    xn = x - jnp.asarray(phase, x.dtype)
    if cosine_first:
        value = pp / pq * jnp.cos(xn) - 5.0 / x * (qp / qq) * jnp.sin(xn)
    else:
        value = pp / pq * jnp.sin(xn) + 5.0 / x * (qp / qq) * jnp.cos(xn)
    return value * jnp.asarray(_SQRT_2_OVER_PI, x.dtype) / jnp.sqrt(x)


def _bessel_j0(x: jax.Array) -> jax.Array:
    x = jnp.abs(x)
    xx = x * x
    rational = (xx - np.float32(5.78318596294678452118)) * (xx - np.float32(30.4712623436620863991))
    rational = rational * _polynomial(_J0_RP, xx) / _polynomial(_J0_RQ, xx)
    small = jnp.where(x < 1e-5, 1.0 - xx / 4.0, rational)
    large = _hankel(x, 25.0 / xx, (_J0_PP, _J0_PQ, _J0_QP, _J0_QQ), np.pi / 4, cosine_first=True)
    return jnp.where(x <= 5.0, small, large)


def _bessel_j1(x: jax.Array) -> jax.Array:
    a = jnp.abs(x)
    xx = a * a
    small = _polynomial(_J1_RP, xx) / _polynomial(_J1_RQ, xx) * a
    small = small * (xx - np.float32(14.6819706421238932572)) * (xx - np.float32(49.2184563216946036703))
    w = 5.0 / a * (5.0 / a)
    large = _hankel(a, w, (_J1_PP, _J1_PQ, _J1_QP, _J1_QQ), 3 * np.pi / 4, cosine_first=True)
    value = jnp.where(a <= 5.0, small, large)
    return jnp.where(x < 0, -value, value)


def _bessel_y0(x: jax.Array) -> jax.Array:
    xx = x * x
    small = _polynomial(_Y0_YP, xx) / _polynomial(_Y0_YQ, xx)
    small = small + jnp.asarray(_TWO_OVER_PI, x.dtype) * jnp.log(x) * _bessel_j0(x)
    small = jnp.where(x == 0, -INF, jnp.where(x < 0, NAN, small))
    large = _hankel(x, 25.0 / xx, (_J0_PP, _J0_PQ, _J0_QP, _J0_QQ), np.pi / 4, cosine_first=False)
    return jnp.where(x <= 5.0, small, large)


def _bessel_y1(x: jax.Array) -> jax.Array:
    xx = x * x
    small = x * (_polynomial(_Y1_YP, xx) / _polynomial(_Y1_YQ, xx))
    small = small + jnp.asarray(_TWO_OVER_PI, x.dtype) * (_bessel_j1(x) * jnp.log(x) - 1.0 / x)
    small = jnp.where(x == 0, -INF, jnp.where(x < 0, NAN, small))
    w = 5.0 / x * (5.0 / x)
    large = _hankel(x, w, (_J1_PP, _J1_PQ, _J1_QP, _J1_QQ), 3 * np.pi / 4, cosine_first=False)
    return jnp.where(x <= 5.0, small, large)


# Chebyshev coefficients of K0 and K1 on (0, 2] and (2, inf).
_K0_A = (1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
         1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
         1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
         -5.35327393233902768720e-01)  # fmt: skip
_K0_B = (5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17,
         -1.67823109680541210385e-16, 5.51205597852431940784e-16, -1.84859337734377901440e-15,
         6.34007647740507060557e-15, -2.22751332699166985548e-14, 8.03289077536357521100e-14,
         -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
         1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10,
         -1.69753450938905987466e-09, 8.57403401741422608519e-09, -4.66048989768794782956e-08,
         2.76681363944501510342e-07, -1.83175552271911948767e-06, 1.39498137188764993662e-05,
         -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
         2.44030308206595545468e00)  # fmt: skip
_K1_A = (-7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
         -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
         -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
         -3.53155960776544875667e-01, 1.52530022733894777053e00)  # fmt: skip
_K1_B = (-5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17,
         1.83809354436663880070e-16, -6.05704724837331885336e-16, 2.03870316562433424052e-15,
         -7.01983709041831346144e-15, 2.47715442448130437068e-14, -8.97670518232499435011e-14,
         3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
         -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10,
         2.01504975519703286596e-09, -1.03457624656780970260e-08, 5.74108412545004946722e-08,
         -3.50196060308781257119e-07, 2.40648494783721712015e-06, -1.93619797416608296024e-05,
         1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
         2.72062619048444266945e00)  # fmt: skip


def _modified_bessel_i0(x: jax.Array) -> jax.Array:
    return jnp.exp(jnp.abs(x)) * jsp.i0e(x)


def _modified_bessel_i1(x: jax.Array) -> jax.Array:
    return jnp.exp(jnp.abs(x)) * jsp.i1e(x)


def _modified_bessel_k(x: jax.Array, order: int, scaled: bool) -> jax.Array:
    """K0 or K1 (times exp(x) when ``scaled``): inf at 0, NaN for x < 0, a Chebyshev series plus
    the log(x/2) I term on (0, 2], exp(-x) times a series in 8/x - 2 above."""
    a_table, b_table, i_n = (_K0_A, _K0_B, _modified_bessel_i0) if order == 0 else (_K1_A, _K1_B, _modified_bessel_i1)
    near = _chebyshev_series(a_table, x * x - 2.0)
    log_half_x = jnp.log(0.5 * x)
    near = near - log_half_x * i_n(x) if order == 0 else log_half_x * i_n(x) + near / x
    far = _chebyshev_series(b_table, 8.0 / x - 2.0)
    if scaled:
        near, far = near * jnp.exp(x), far / jnp.sqrt(x)
    else:
        far = jnp.exp(-x) * far / jnp.sqrt(x)
    value = jnp.where(x <= 2.0, near, far)
    return jnp.where(x == 0, INF, jnp.where(x < 0, NAN, value))


def _spherical_bessel_j0(x: jax.Array) -> jax.Array:
    """sin(x)/x; a Taylor polynomial below |x| = 0.5 and 0 at +-inf, as PyTorch computes it."""
    xx = x * x
    series = jnp.zeros_like(x)
    for k in range(6, 0, -1):
        sign = -1.0 if k % 2 else 1.0
        series = xx * (np.float32(sign / math.factorial(2 * k + 1)) + series)
    series = 1.0 + series
    value = jnp.where(jnp.abs(x) < 0.5, series, jnp.sin(x) / x)
    return jnp.where(jnp.isinf(x), 0.0, value)


_AIRY_AN = (3.46538101525629032477e-01, 1.20075952739645805542e01, 7.62796053615234516538e01,
            1.68089224934630576269e02, 1.59756391350164413639e02, 7.05360906840444183113e01,
            1.40264691163389668864e01, 9.99999999999999995305e-01)  # fmt: skip
_AIRY_AD = (5.67594532638770212846e-01, 1.47562562584847203173e01, 8.45138970141474626562e01,
            1.77318088145400459522e02, 1.64234692871529701831e02, 7.14778400825575695274e01,
            1.40959135607834029598e01, 1.00000000000000000470e00)  # fmt: skip
_AIRY_AFN = (-1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
             -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
             -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08)  # fmt: skip
_AIRY_AFD = (1.33560420706553243746e01, 3.26825032795224613948e01, 2.67367040941499554804e01,
             9.18707402907259625840e00, 1.47529146771666414581e00, 1.15687173795188044134e-01,
             4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07)  # fmt: skip
_AIRY_AGN = (1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e00,
             9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
             5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
             8.11789239554389293311e-08, 3.41551784765923618484e-10)  # fmt: skip
_AIRY_AGD = (9.30892908077441974853e00, 1.98352928718312140417e01, 1.55646628932864612953e01,
             5.47686069422975497931e00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
             4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
             4.91834570062930015649e-09)  # fmt: skip
_INV_SQRT_PI = 5.64189583547756286948e-01


def _airy_power_series(x: jax.Array) -> jax.Array:
    """Ai(x) = c1 f(x) - c2 g(x) from the Maclaurin series of f and g, summed (per element) until
    the last term of f falls below float epsilon relative to f, as Math.h does."""
    eps = jnp.finfo(x.dtype).eps
    z = x * x * x

    def active(state):
        return state[-1] > eps

    def body(state):
        f, g, k, m, n, t = state
        go = t > eps
        m1 = m * z
        k1 = k + 1
        m1 = m1 / k1
        n1 = n * z
        k2 = k1 + 1
        n1 = n1 / k2
        m1 = m1 / k2
        f1 = f + m1
        k3 = k2 + 1
        n1 = n1 / k3
        g1 = g + n1
        t1 = jnp.abs(m1 / f1)
        pick = lambda new, old: jnp.where(go, new, old)  # noqa: E731
        return tuple(map(pick, (f1, g1, k3, m1, n1, t1), (f, g, k, m, n, t)))

    one = jnp.ones_like(x)
    state = (one, x, one, one, x, one)
    f, g, *_ = jax.lax.while_loop(lambda s: jnp.any(active(s)), body, state)
    return np.float32(0.355028053887817239260) * f - np.float32(0.258819403792806798405) * g


def _airy_ai(x: jax.Array) -> jax.Array:
    """Airy Ai: asymptotic expansions below -2.09 and above 2.09 (alone above 8.32), the power
    series between; NaN at +-inf and 0 above 103.892, as PyTorch computes it."""
    neg = jnp.where(x < -2.09, x, -4.0)
    root = jnp.sqrt(-neg)
    zeta_neg = divided_by(-2.0 * neg * root, 3.0)
    z = 1.0 / zeta_neg
    zz = z * z
    theta = zeta_neg + np.float32(0.25 * np.pi)
    oscillating = np.float32(_INV_SQRT_PI) / jnp.sqrt(root)
    oscillating = oscillating * (
        jnp.sin(theta) * (1.0 + zz * _polynomial(_AIRY_AFN, zz) / _polynomial(_AIRY_AFD, zz))
        - jnp.cos(theta) * (z * _polynomial(_AIRY_AGN, zz) / _polynomial(_AIRY_AGD, zz))
    )
    pos = jnp.where(x >= 2.09, x, 4.0)
    zeta_pos = divided_by(2.0 * pos * jnp.sqrt(pos), 3.0)
    ratio = _polynomial(_AIRY_AN, 1.0 / zeta_pos) / _polynomial(_AIRY_AD, 1.0 / zeta_pos)
    decaying = np.float32(_INV_SQRT_PI) * ratio / (2.0 * jnp.sqrt(jnp.sqrt(pos)) * jnp.exp(zeta_pos))
    series = _airy_power_series(jnp.where((x >= -2.09) & (x < 2.09), x, 0.0))
    value = jnp.where(x < -2.09, oscillating, jnp.where(x >= 2.09, decaying, series))
    value = jnp.where(x > 103.892, 0.0, value)
    return jnp.where(jnp.isinf(x) | jnp.isnan(x), NAN, value)


_BESSEL: dict = {  # PyTorch INT_TO_FLOAT
    aten.special_airy_ai.default: _airy_ai,
    aten.special_bessel_j0.default: _bessel_j0,
    aten.special_bessel_j1.default: _bessel_j1,
    aten.special_bessel_y0.default: _bessel_y0,
    aten.special_bessel_y1.default: _bessel_y1,
    aten.special_modified_bessel_i0.default: _modified_bessel_i0,
    aten.special_modified_bessel_i1.default: _modified_bessel_i1,
    aten.special_modified_bessel_k0.default: lambda x: _modified_bessel_k(x, 0, scaled=False),
    aten.special_modified_bessel_k1.default: lambda x: _modified_bessel_k(x, 1, scaled=False),
    aten.special_scaled_modified_bessel_k0.default: lambda x: _modified_bessel_k(x, 0, scaled=True),
    aten.special_scaled_modified_bessel_k1.default: lambda x: _modified_bessel_k(x, 1, scaled=True),
    aten.special_spherical_bessel_j0.default: _spherical_bessel_j0,
}
_register_all(_BESSEL, Promotion.INT_TO_FLOAT)


# --- angle, frexp, gcd/lcm, complex numbers, logspace, hash_tensor ---------------------------------


@lowering(aten.angle.default, promotion=Promotion.INT_TO_FLOAT)
def angle(self: jax.Array) -> jax.Array:
    """torch.angle: atan2(imag, real) for complex inputs; pi for negative reals, 0 otherwise (-0.0
    included), NaN for NaN. Complex inputs give a real result."""
    if jnp.issubdtype(self.dtype, jnp.complexfloating):
        return jnp.angle(self)
    return jnp.where(jnp.isnan(self), self, jnp.where(self < 0, np.pi, 0.0))


def _float32_fields(x: jax.Array) -> tuple[jax.Array, ...]:
    """(sign bit, unbiased exponent E, 23-bit fraction f, zero, non-finite) with x = +-1.f * 2**E for
    finite nonzero float32 x, subnormals normalized. Everything is read from the bits: XLA's CPU
    comparisons treat subnormals as zero (x == 0 is true for them)."""
    bits = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
    sign = bits >> 31
    biased = ((bits >> 23) & 0xFF).astype(jnp.int32)
    fraction = bits & 0x7FFFFF
    zero = (biased == 0) & (fraction == 0)
    special = biased == 0xFF
    shift = jax.lax.clz(fraction).astype(jnp.int32) - 8
    subnormal = biased == 0
    fraction = jnp.where(subnormal, (fraction << jnp.maximum(shift, 0).astype(jnp.uint32)) & 0x7FFFFF, fraction)
    exponent = jnp.where(subnormal, -126 - shift, biased - 127)
    return sign, exponent, fraction, zero, special


@lowering(aten.frexp.Tensor)
def frexp(self: jax.Array) -> tuple[jax.Array, jax.Array]:
    """torch.frexp: mantissa in [0.5, 1) with self's sign and dtype, and an int32 exponent;
    (self, 0) for zeros, infinities and NaN. Subnormals are exact (jnp.frexp flushes them)."""
    sign, exponent, fraction, zero, special = _float32_fields(self)
    special = zero | special
    bits = (sign << 31) | (jnp.uint32(126) << 23) | fraction
    mantissa = jax.lax.bitcast_convert_type(bits, jnp.float32).astype(self.dtype)
    return jnp.where(special, self, mantissa), jnp.where(special, 0, exponent + 1).astype(jnp.int32)


def _gcd(a: jax.Array, b: jax.Array) -> jax.Array:
    """Euclid's algorithm on |a| and |b| with C's remainder, as PyTorch's ``calc_gcd``."""
    a, b = jnp.broadcast_arrays(jnp.abs(a), jnp.abs(b))

    def body(state: tuple) -> tuple:
        a, b = state
        active = a != 0
        return jnp.where(active, jax.lax.rem(b, jnp.where(active, a, 1)), a), jnp.where(active, a, b)

    return jax.lax.while_loop(lambda state: jnp.any(state[0] != 0), body, (a, b))[1]


@lowering(aten.gcd.default, promotion=Promotion.DEFAULT)
def gcd(self: jax.Array, other: jax.Array) -> jax.Array:
    """torch.gcd: non-negative, gcd(0, 0) = 0 (the lowest value of a signed type stays negative, as
    its absolute value does in PyTorch)."""
    return _gcd(self, other)


@lowering(aten.lcm.default, promotion=Promotion.DEFAULT)
def lcm(self: jax.Array, other: jax.Array) -> jax.Array:
    """torch.lcm: |self / gcd * other|, 0 when the gcd is 0. Like PyTorch's C++ kernel, 8- and
    16-bit operands are multiplied as int32 and the absolute value wraps into the dtype after."""
    g = _gcd(self, other)
    wide = jnp.promote_types(self.dtype, jnp.int32)
    product = jax.lax.div(self.astype(wide), jnp.where(g == 0, 1, g).astype(wide)) * other.astype(wide)
    return jnp.where(g == 0, 0, jnp.abs(product)).astype(self.dtype)


def _complex_parts_rule(first_name: str, second_name: str):
    """ATen's complex_check_dtype (torch.complex, torch.polar; TensorFactories.cpp) as a
    ``dtype_rule``: both parts Half, Float or Double, then of one dtype (there is no promotion),
    checked before the kernel's dispatch, which refuses float16 for polar on CUDA."""

    def rule(arguments: dict) -> None:
        first, second = arguments[first_name], arguments[second_name]
        names = [aten_name(part.dtype) for part in (first, second)]
        if not all(part.dtype in (torch.float16, torch.float32, torch.float64) for part in (first, second)):
            raise RuntimeError(
                f"Expected both inputs to be Half, Float or Double tensors but got {names[0]} and {names[1]}"
            )
        if first.dtype != second.dtype:
            raise RuntimeError(
                f"Expected object of scalar type {names[0]} but got scalar type {names[1]} for second argument"
            )

    return rule


def _float32_parts(first: jax.Array, second: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The parts, float16 ones widened to float32 (``lax.complex`` has no complex32; the engine
    rounds the complex64 result to the complex32 that PyTorch's meta kernel gives)."""
    return first.astype(jnp.float32), second.astype(jnp.float32)


@lowering(aten.complex.default, dtype_rule=_complex_parts_rule("real", "imag"))
def complex_(real: jax.Array, imag: jax.Array) -> jax.Array:
    """torch.complex(real, imag), broadcast; both of one float dtype (RuntimeError otherwise, as on
    CPU); float16 parts give complex32."""
    return jax.lax.complex(*jnp.broadcast_arrays(*_float32_parts(real, imag)))


@lowering(aten.polar.default, dtype_rule=_complex_parts_rule("abs", "angle"))
def polar(abs: jax.Array, angle: jax.Array) -> jax.Array:
    """torch.polar: abs * cos(angle) + i abs * sin(angle); both of one float dtype (float16: computed
    in float32, the complex32 result rounded once)."""
    abs, angle = _float32_parts(abs, angle)
    return jax.lax.complex(*jnp.broadcast_arrays(abs * jnp.cos(angle), abs * jnp.sin(angle)))


def _host_value(value: complex | float | int, dtype: np.dtype) -> np.generic:
    """A Scalar converted to the kernel's scalar_t (PyTorch's ``Scalar.to<scalar_t>()``): c10's
    overflow check, then C++'s conversion: an integer wraps (-1 into uint8 is 255; c10 lets a
    negative integer down to -max into an unsigned type), a float truncates toward zero.

    Raises:
        RuntimeError: c10's "value cannot be converted to type uint8_t without overflow".
    """
    if np.issubdtype(dtype, np.complexfloating):
        return dtype.type(value)
    if np.issubdtype(dtype, np.integer):
        raise_if_overflows(value, dtype)
        bits = 8 * dtype.itemsize
        wrapped = int(value) % (1 << bits)
        if np.issubdtype(dtype, np.signedinteger) and wrapped >= 1 << (bits - 1):
            wrapped -= 1 << bits
        return dtype.type(wrapped)
    return dtype.type(np.float32(value)) if dtype.itemsize < 4 else dtype.type(value)


def _stored(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float64 results assigned to scalar_t as C++ does: through float for 16-bit floats, truncated
    toward zero for integers (wrapping as x86's conversion through int32/int64 does)."""
    if np.issubdtype(dtype, np.integer):
        wide = np.int64 if dtype == np.int64 else np.int32
        limit = 2.0 ** (np.iinfo(wide).bits - 1)
        truncated = np.where(np.abs(values) < limit, np.trunc(values), -limit)
        return truncated.astype(wide).astype(dtype)
    if dtype.itemsize == 2 and not np.issubdtype(dtype, np.integer):  # float16, bfloat16
        return bfloat16_nans_positive(values.astype(np.float32).astype(dtype))
    return values.astype(dtype)


@lowering(aten.logspace.default, static=("start", "end", "steps", "base"), result_dtype=True)
def logspace(start, end, steps, base=10.0, *, dtype=None, layout=None, device=None, pin_memory=None, result_dtype):
    """torch.logspace: base ** linspace(start, end, steps). The arguments are Python numbers, so the
    values are computed once on the host, in float64 (complex64 for complex results) from start and
    end converted to the result dtype, as PyTorch's CPU kernel does, and become a constant. numpy's
    warnings for the infinities, zeros and wrapped integers it then gives (``0.0 ** -1``) are the
    CPU's values, so they are silenced: they leaked, and raised under ``-W error``."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore", under="ignore"):
        return jnp.asarray(_host_logspace(start, end, steps, base, np.dtype(result_dtype)))


def _host_logspace(start, end, steps, base, dtype: np.dtype) -> np.ndarray:
    """:func:`logspace`'s values, a numpy array of ``dtype``."""
    index = np.arange(steps)
    if steps == 1:
        first = complex(start) if np.issubdtype(dtype, np.complexfloating) else float(start)
        values = np.asarray([np.power(np.float64(base), first)])
        if np.issubdtype(dtype, np.integer):
            return np.asarray([_host_value(values[0], dtype)], dtype)
        return _stored(values, dtype)
    if np.issubdtype(dtype, np.complexfloating):
        first, last = _host_value(start, dtype), _host_value(end, dtype)
        step = (last - first) / dtype.type(max(steps - 1, 1))
        low = np.power(dtype.type(base), first + step * index.astype(dtype))
        high = np.power(dtype.type(base), last - step * (steps - index - 1).astype(dtype))
        return np.where(index < steps // 2, low, high).astype(dtype)
    first, last = _host_value(start, dtype), _host_value(end, dtype)
    difference = (last.astype(np.int64) - first.astype(np.int64)) if dtype.kind in "iu" else last - first
    step = np.float64(difference) / max(steps - 1, 1)
    # The product first: of two NaN operands x86 returns the first, and the CPU's NaN start plus a
    # NaN step of the other sign gives the step's (measured).
    low = np.power(np.float64(base), step * index + np.float64(first))
    high = np.power(np.float64(base), np.float64(last) - step * (steps - index - 1))
    return np.asarray(_stored(np.where(index < steps // 2, low, high), dtype))


def _float64_bits(x: jax.Array) -> jax.Array:
    """The uint64 bits of ``double(x)`` for a 16- or 32-bit float x, built from x's own bits."""
    sign, exponent, fraction, zero, special = _float32_fields(x)
    finite = (sign.astype(jnp.uint64) << 63) | ((exponent + 1023).astype(jnp.uint64) << 52)
    finite = finite | (fraction.astype(jnp.uint64) << 29)
    non_finite = (sign.astype(jnp.uint64) << 63) | (jnp.uint64(0x7FF) << 52) | (fraction.astype(jnp.uint64) << 29)
    return jnp.where(zero, sign.astype(jnp.uint64) << 63, jnp.where(special, non_finite, finite))


@lowering(aten.hash_tensor.default, static=("dim", "keepdim", "mode"))
def hash_tensor(self: jax.Array, dim=(), *, keepdim=False, mode=0) -> jax.Array:
    """torch.hash_tensor (mode 0, xor_sum): the XOR over ``dim`` (every dim when empty) of each
    element as uint64: floats by the bits of their float64 value, integers sign-extended."""
    if mode != 0:
        raise RuntimeError(f"hash_tensor: mode {mode} is not supported; only mode=0 (xor_sum) exists")
    if jnp.issubdtype(self.dtype, jnp.floating):
        words = _float64_bits(self)
    else:
        words = self.astype(jnp.int64).astype(jnp.uint64)
    dim = (dim,) if isinstance(dim, int) else tuple(dim)
    if self.ndim == 0:  # dims 0 and -1 of a 0-dim tensor name the tensor itself
        axes = ()
    else:
        axes = tuple(d % self.ndim for d in dim) if dim else tuple(range(self.ndim))
    result = jax.lax.reduce(words, np.uint64(0), jax.lax.bitwise_xor, axes)
    return jnp.expand_dims(result, axes) if keepdim else result
