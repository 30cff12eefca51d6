"""``a * b + c`` rounded once, as the CPU kernels that call ``vec::fmadd`` round it.

The device's XLA runs without FMA instructions (``runtime/xla_flags.py``: XLA would otherwise contract
every product-plus-sum in compiled graphs, where eager and inductor round the product). Some of
ATen's CPU kernels fuse on purpose: ``lerp``'s vector path is ``vec::fmadd(coeff, end - start,
base)``, and ``addcmul``'s ``self + value * t1 * t2`` is contracted by the compiler of ATen's AVX2
and AVX-512 kernels. Their lowerings call :func:`fused_multiply_add` to keep the CPU's values.

Float32 operands multiply exactly in float64 (24 + 24 significant bits fit in 53, and float32's
exponent range doubled stays inside float64's). The float64 sum is made round-to-odd (TwoSum gives
its exact error; an inexact sum with an even last bit moves one ulp toward the exact value), and
round-to-odd in a format of at least p + 2 bits followed by round-to-nearest to p bits is one
correct rounding (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums: proved
algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["fused_multiply_add"]


def fused_multiply_add(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """IEEE ``fma(a, b, c)``: ``a * b + c`` with one rounding, in the dtype of ``a * b + c``.

    Args:
        a, b, c: float32 arrays (or Python scalars), broadcast together. 16-bit float operands are
            computed in float32, their opmath type, and the float32 result rounded to their dtype,
            as ATen's kernels round. Other dtypes (integers, complex) get ``a * b + c``.

    Returns:
        the broadcast result in the dtype of ``a * b + c``; inf and NaN as ``a * b + c`` gives them.
    """
    result_dtype = jnp.result_type(a, b, c)
    if not jnp.issubdtype(result_dtype, jnp.floating) or result_dtype == jnp.float64:
        return a * b + c
    narrow = jnp.float32
    wide = jnp.float64
    product = jnp.asarray(a, narrow).astype(wide) * jnp.asarray(b, narrow).astype(wide)  # exact
    addend = jnp.asarray(c, narrow).astype(wide)
    # The barrier keeps XLA's algebraic simplifier from folding (product + addend) - product.
    total = jax.lax.optimization_barrier(product + addend)
    back = total - product
    error = (product - (total - back)) + (addend - back)  # TwoSum: total + error == product + addend
    bits = jax.lax.bitcast_convert_type(total, jnp.int64)
    inexact_even = (error != 0) & ((bits & 1) == 0) & jnp.isfinite(total)
    step = jnp.where((error > 0) == (total > 0), 1, -1).astype(jnp.int64)  # +1 ulp = away from 0
    odd = jax.lax.bitcast_convert_type(jnp.where(inexact_even, bits + step, bits), wide)
    return odd.astype(narrow).astype(result_dtype)
