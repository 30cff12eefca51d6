"""The orthogonal polynomials of ``torch.special`` (Chebyshev T/U/V/W and their shifted forms,
Hermite H/He, Laguerre L, Legendre P): recurrences in the degree n, as in PyTorch's CPU kernels
(``aten/src/ATen/native/Math.h``), with n truncated to an integer; n < 0, NaN or infinite gives 0.
Each step's product and difference round once, as the compiler contracts them in those kernels
(lowering/fused_multiply_add.py).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import torch

from torch_neuronx.lowering.fused_multiply_add import fused_multiply_add
from torch_neuronx.lowering.registry import Promotion, lowering

aten = torch.ops.aten

NAN = float("nan")
INF = float("inf")


# --- orthogonal polynomials (recurrences in the degree n, as in PyTorch's Math.h) -----------------


def _degree(n: jax.Array) -> jax.Array:
    """The degree as PyTorch's kernels take it, ``static_cast<int64_t>(n)`` on x86: truncated, and
    INT64_MIN (a negative degree: the polynomial is 0) for NaN, infinities and out-of-range values."""
    fits = jnp.isfinite(n) & (jnp.abs(n) < 2.0**63)
    return jnp.where(fits, jnp.where(fits, n, 0).astype(jnp.int64), jnp.iinfo(jnp.int64).min)


def _recurrence(n: jax.Array, p: jax.Array, q: jax.Array, step: Callable) -> jax.Array:
    """Runs ``p, q = q, step(k, p, q)`` for k = 1 .. n - 1 in each element (none where n < 2), stopping
    early where q is NaN as Math.h does; returns q. ``k`` reaches ``step`` as an array of q's dtype."""

    def active(k: jax.Array, q: jax.Array) -> jax.Array:
        return (k < n) & ~jnp.isnan(q)

    def body(state: tuple) -> tuple:
        k, p, q = state
        go = active(k, q)
        r = step(k.astype(q.dtype), p, q)
        return k + 1, jnp.where(go, q, p), jnp.where(go, r, q)

    k = jnp.ones(q.shape, jnp.int64)
    _, _, q = jax.lax.while_loop(lambda state: jnp.any(active(state[0], state[2])), body, (k, p, q))
    return q


def _chebyshev_recurrence(two_x: jax.Array, n: jax.Array, first: jax.Array, closed_form: jax.Array) -> jax.Array:
    """p_{k+1} = 2x p_k - p_{k-1} from p_0 = 1 and p_1 = ``first``, where ``closed_form`` is false."""
    one = jnp.ones_like(two_x)
    return _recurrence(jnp.where(closed_form, 0, n), one, first, lambda k, p, q: fused_multiply_add(two_x, q, -p))


def _select(default: jax.Array, *cases: tuple[jax.Array, jax.Array | float]) -> jax.Array:
    """The value of the first true condition in ``cases`` (pairs of condition and value), else
    ``default``: the if-chain of a Math.h kernel."""
    for condition, value in reversed(cases):
        default = jnp.where(condition, value, default)
    return default


def _chebyshev_t(x: jax.Array, n: jax.Array, shifted: bool) -> jax.Array:
    n = _degree(n)
    y = x + x - 1.0 if shifted else x
    nf = n.astype(x.dtype)
    even = n % 2 == 0
    closed = (n > 6) & (jnp.abs(y) < 1.0)
    rec = _chebyshev_recurrence(y + y, n, y, closed | (n < 2))
    edges = [(x == 1.0, 1.0), (x == 0.0, jnp.where(even, 1.0, -1.0))] if shifted else [
        (jnp.abs(x) == 1.0, jnp.where((x > 0) | even, 1.0, -1.0))]  # fmt: skip
    return _select(rec, (n < 0, 0.0), *edges, (closed, jnp.cos(nf * jnp.arccos(y))), (n == 0, 1.0), (n == 1, y))


def _chebyshev_u(x: jax.Array, n: jax.Array, shifted: bool) -> jax.Array:
    n = _degree(n)
    y = x + x - 1.0 if shifted else x
    n1 = (n + 1).astype(x.dtype)
    even = n % 2 == 0
    closed = (n > (6 if shifted else 8)) & (jnp.abs(y) < 1.0)
    theta = jnp.arccos(y)
    sine = jnp.where(jnp.sin(theta) != 0, jnp.sin(n1 * theta) / jnp.sin(theta), n1 * jnp.cos(n1 * theta) / y)
    rec = _chebyshev_recurrence(y + y, n, y + y, closed | (n < 2))
    edges = [(x == 1.0, n1), (x == 0.0, jnp.where(even, n1, -n1))] if shifted else [
        (jnp.abs(x) == 1.0, jnp.where((x > 0) | even, n1, -n1))]  # fmt: skip
    return _select(rec, (n < 0, 0.0), *edges, (closed, sine), (n == 0, 1.0), (n == 1, y + y))


def _chebyshev_v(x: jax.Array, n: jax.Array, shifted: bool) -> jax.Array:
    n = _degree(n)
    y = x + x - 1.0 if shifted else x
    odd_degree = (n + n + 1).astype(x.dtype)
    alternating = jnp.where(n % 2 == 0, odd_degree, -odd_degree)
    closed = (n > (6 if shifted else 8)) & (jnp.abs(y) < 1.0)
    theta = jnp.arccos(y)
    half = theta / 2.0
    cosine = jnp.where(jnp.sin(half) != 1.0, jnp.cos((n.astype(x.dtype) + 0.5) * theta) / jnp.cos(half), alternating)
    first = y + y - 1.0
    rec = _chebyshev_recurrence(y + y, n, first, closed | (n < 2))
    edges = [(x == 1.0, 1.0), (x == 0.0, alternating)] if shifted else [
        (jnp.abs(x) == 1.0, jnp.where(x > 0, 1.0, alternating))]  # fmt: skip
    return _select(rec, (n < 0, 0.0), *edges, (closed, cosine), (n == 0, 1.0), (n == 1, first))


def _chebyshev_w(x: jax.Array, n: jax.Array, shifted: bool) -> jax.Array:
    n = _degree(n)
    y = x + x - 1.0 if shifted else x
    odd_degree = (n + n + 1).astype(x.dtype)
    sign = jnp.where(n % 2 == 0, 1.0, -1.0)
    closed = (n > (4 if shifted else 8)) & (jnp.abs(y) < 1.0)
    theta = jnp.arccos(y)
    half = theta / 2.0
    at_one = sign if shifted else jnp.where(x > 0, odd_degree, sign)
    sine = jnp.where(jnp.cos(half) != 1.0, jnp.sin((n.astype(x.dtype) + 0.5) * theta) / jnp.sin(half), at_one)
    first = y + y + 1.0
    rec = _chebyshev_recurrence(y + y, n, first, closed | (n < 2))
    edges = [(x == 1.0, odd_degree), (x == 0.0, sign)] if shifted else [
        (jnp.abs(x) == 1.0, jnp.where(x > 0, odd_degree, sign))]  # fmt: skip
    return _select(rec, (n < 0, 0.0), *edges, (closed, sine), (n == 0, 1.0), (n == 1, first))


#: Above this degree PyTorch's float32 Hermite polynomials are NaN (``getHermitianLimit``).
_HERMITE_LIMIT = 128


def _hermite_h(x: jax.Array, n: jax.Array) -> jax.Array:
    n = _degree(n)
    recurrent = (n >= 2) & (n <= _HERMITE_LIMIT)
    two_x = x + x
    rec = _recurrence(
        jnp.where(recurrent, n, 0),
        jnp.ones_like(x),
        two_x,
        lambda k, p, q: fused_multiply_add(two_x, q, -((k + k) * p)),
    )
    return _select(rec, (n < 0, 0.0), (n == 0, 1.0), (n == 1, two_x), (n > _HERMITE_LIMIT, NAN))


def _hermite_he(x: jax.Array, n: jax.Array) -> jax.Array:
    n = _degree(n)
    recurrent = (n >= 2) & (n <= _HERMITE_LIMIT)
    rec = _recurrence(
        jnp.where(recurrent, n, 0), jnp.ones_like(x), x, lambda k, p, q: fused_multiply_add(x, q, -(k * p))
    )
    return _select(rec, (n < 0, 0.0), (n == 0, 1.0), (n == 1, x), (n > _HERMITE_LIMIT, NAN))


def _laguerre_l(x: jax.Array, n: jax.Array) -> jax.Array:
    n = _degree(n)
    one_minus_x = 1.0 - x
    trivial = (n < 2) | (x == 0)
    rec = _recurrence(
        jnp.where(trivial, 0, n),
        jnp.ones_like(x),
        one_minus_x,
        lambda k, p, q: fused_multiply_add(k + k + one_minus_x, q, -(k * p)) / (k + 1.0),
    )
    return _select(rec, (n < 0, 0.0), (x == 0, 1.0), (n == 0, 1.0), (n == 1, one_minus_x))


def _legendre_p(x: jax.Array, n: jax.Array) -> jax.Array:
    n = _degree(n)
    trivial = (n < 2) | (jnp.abs(x) == 1.0)
    rec = _recurrence(
        jnp.where(trivial, 0, n),
        jnp.ones_like(x),
        x,
        lambda k, p, q: fused_multiply_add((k + k + 1.0) * x, q, -(k * p)) / (k + 1.0),
    )
    edge = jnp.where((x > 0) | (n % 2 == 0), 1.0, -1.0)
    return _select(rec, (n < 0, 0.0), (jnp.abs(x) == 1.0, edge), (n == 0, 1.0), (n == 1, x))


def _polynomial_lowering(name: str, fn: Callable[[jax.Array, jax.Array], jax.Array]) -> None:
    packet = getattr(aten, f"special_{name}")

    @lowering(packet.default, packet.x_scalar, packet.n_scalar, promotion=Promotion.INT_TO_FLOAT)
    def polynomial(x: jax.Array, n: jax.Array) -> jax.Array:
        x, n = jnp.broadcast_arrays(x, n)
        return fn(x, n)

    polynomial.__name__ = polynomial.__qualname__ = name
    polynomial.__doc__ = (
        f"torch.special.{name}(x, n): the degree is n truncated to an integer (0 for n < 0), as PyTorch computes it."
    )


for _name, _fn in {
    "chebyshev_polynomial_t": lambda x, n: _chebyshev_t(x, n, shifted=False),
    "chebyshev_polynomial_u": lambda x, n: _chebyshev_u(x, n, shifted=False),
    "chebyshev_polynomial_v": lambda x, n: _chebyshev_v(x, n, shifted=False),
    "chebyshev_polynomial_w": lambda x, n: _chebyshev_w(x, n, shifted=False),
    "shifted_chebyshev_polynomial_t": lambda x, n: _chebyshev_t(x, n, shifted=True),
    "shifted_chebyshev_polynomial_u": lambda x, n: _chebyshev_u(x, n, shifted=True),
    "shifted_chebyshev_polynomial_v": lambda x, n: _chebyshev_v(x, n, shifted=True),
    "shifted_chebyshev_polynomial_w": lambda x, n: _chebyshev_w(x, n, shifted=True),
    "hermite_polynomial_h": _hermite_h,
    "hermite_polynomial_he": _hermite_he,
    "laguerre_polynomial_l": _laguerre_l,
    "legendre_polynomial_p": _legendre_p,
}.items():
    _polynomial_lowering(_name, _fn)
