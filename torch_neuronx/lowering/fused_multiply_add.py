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
import torch

__all__ = [
    "contracted_in_float64",
    "contracted_multiply_add",
    "cpu_kernels_contract",
    "flushed_fused_multiply_add",
    "fused_multiply_add",
    "float32_fma_in_float64",
    "rounded_to_float32",
]


def cpu_kernels_contract() -> bool:
    """Whether the host's ATen CPU kernels (its vectorised AVX2 and AVX-512 builds) contract ``a * b
    + c`` into a fused multiply-add: ``torch.backends.cpu.get_cpu_capability()`` other than
    DEFAULT, whose build has no FMA instructions."""
    return torch.backends.cpu.get_cpu_capability() != "DEFAULT"


def contracted_multiply_add(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """``a * b + c`` as a vectorised CPU kernel's compiler leaves it: :func:`fused_multiply_add`
    where :func:`cpu_kernels_contract`, else the product rounded before the sum."""
    return fused_multiply_add(a, b, c) if cpu_kernels_contract() else a * b + c


def contracted_in_float64(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """``a * b + c`` of float32 operands as a vectorised CPU kernel's compiler leaves it
    (:func:`cpu_kernels_contract`), the fused form computed through float64, where the product is
    exact: the sum's float64 rounding, then float32's. That differs from one rounding only where
    the float64 sum lands exactly halfway between two float32 values without being exact, about
    2 ** -29 of inexact sums; for whole tensors, where :func:`fused_multiply_add`'s round-to-odd
    emulation cost ten times as much (layer norm's statistics and gradients)."""
    if not cpu_kernels_contract():
        return a * b + c
    wide = jnp.float64
    return (jnp.asarray(a, wide) * jnp.asarray(b, wide) + jnp.asarray(c, wide)).astype(jnp.float32)


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
    return (
        _sum_rounded_to_odd(jnp.asarray(a, narrow), jnp.asarray(b, narrow), jnp.asarray(c, narrow))
        .astype(narrow)
        .astype(result_dtype)
    )


def flushed_fused_multiply_add(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """:func:`fused_multiply_add` of float32 arrays, bit for bit where the float64 -> float32
    conversion flushes subnormal results to zero, as the device's compiled graphs do (results below
    ``2 ** -126`` that round to a float32 subnormal are 0 in both), in fewer operations. Not where
    the conversion keeps subnormals (XLA's constant folding of constant operands), where only the
    round-to-odd form rounds them correctly: for operands that vary at run time, as a loop's rows.

    The float64 sum ``s`` of the exact product and ``c`` rounds to the float32 nearest ``a * b +
    c`` except where ``s`` lies exactly halfway between two float32 neighbours (its low 29
    significand bits are ``1 << 28``) and the float64 sum was inexact: ties-to-even may then pick
    the wrong neighbour, so ``s`` moves one float64 ulp toward ``a * b + c`` (TwoSum's error sign),
    as round-to-odd moves it. Off a midpoint a one-ulp move cannot cross one, so the float32 value
    is the round-to-odd sum's; NaN and infinite sums have low bits 0 and stay as they are. In the
    channels-last batch norm loops (``normalization._thread_buffers``) it took 60% of the time the
    round-to-odd form did."""
    wide = jnp.float64
    product = jnp.asarray(a, jnp.float32).astype(wide) * jnp.asarray(b, jnp.float32).astype(wide)  # exact
    addend = jnp.asarray(c, jnp.float32).astype(wide)
    # The barrier keeps XLA's algebraic simplifier from folding (product + addend) - product.
    total = jax.lax.optimization_barrier(product + addend)
    back = total - product
    error = (product - (total - back)) + (addend - back)  # TwoSum: total + error == product + addend
    bits = jax.lax.bitcast_convert_type(total, jnp.int64)
    halfway = (bits & (2**29 - 1)) == 2**28  # float64 has 29 more significand bits than float32
    step = jnp.where((error > 0) == (total > 0), 1, -1).astype(jnp.int64)  # +1 ulp = away from 0
    moved = jnp.where(halfway & (error != 0), bits + step, bits)
    return jax.lax.bitcast_convert_type(moved, wide).astype(jnp.float32)


def float32_fma_in_float64(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """``fma(a, b, c)`` of float32 values held in float64 arrays, rounded as the CPU's float32 FMA
    rounds it, subnormal results included (which the device's float32 arithmetic flushes to zero),
    and returned in float64."""
    return rounded_to_float32(_sum_rounded_to_odd(a, b, c))


def rounded_to_float32(x: jax.Array) -> jax.Array:
    """A float64 array rounded to nearest (ties to even) float32 values with gradual underflow, held
    in float64: below 2 ** -126 to a multiple of 2 ** -149, where the device's float32 conversion
    flushes to zero; above float32's range to infinity. One correct rounding of each float64 result
    of +, -, *, / or sqrt of float32 values is that operation's float32 result (53 >= 2 * 24 + 2)."""
    subnormal = jnp.abs(x) < 2.0**-126
    return jnp.where(subnormal, jnp.round(x * 2.0**149) * 2.0**-149, x.astype(jnp.float32).astype(jnp.float64))


def _sum_rounded_to_odd(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """``a * b + c`` of float32 values (in float32 or float64 arrays) in float64, rounded to odd."""
    wide = jnp.float64
    product = jnp.asarray(a).astype(wide) * jnp.asarray(b).astype(wide)  # exact
    addend = jnp.asarray(c).astype(wide)
    # The barrier keeps XLA's algebraic simplifier from folding (product + addend) - product.
    total = jax.lax.optimization_barrier(product + addend)
    back = total - product
    error = (product - (total - back)) + (addend - back)  # TwoSum: total + error == product + addend
    bits = jax.lax.bitcast_convert_type(total, jnp.int64)
    inexact_even = (error != 0) & ((bits & 1) == 0) & jnp.isfinite(total)
    step = jnp.where((error > 0) == (total > 0), 1, -1).astype(jnp.int64)  # +1 ulp = away from 0
    return jax.lax.bitcast_convert_type(jnp.where(inexact_even, bits + step, bits), wide)
