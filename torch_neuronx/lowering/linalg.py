"""Matrix products: mm, bmm, addmm, baddbmm, addbmm, addmv, addr, dot, mv, _int_mm.

16-bit inputs multiply with float32 accumulation (``preferred_element_type``), as PyTorch's CPU and
CUDA kernels accumulate, then round once to the result dtype; addbmm rounds after each batch and
addr after each operator, as ATen's CPU kernels do.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from torch_neuronx._compat.aten_checks import MAT1_MAT2_DTYPES, SELF_MAT2_DTYPES
from torch_neuronx.lowering.fused_multiply_add import cpu_kernels_contract
from torch_neuronx.lowering.promotion import c10_rounding, opmath_dtype
from torch_neuronx.lowering.registry import Promotion, lowering, same_dtype
from torch_neuronx.runtime.dtypes import aten_name, cpp_name

aten = torch.ops.aten


def _accumulate(a, b, fn):
    if a.dtype in (jnp.bfloat16, jnp.float16):
        return fn(a, b, preferred_element_type=jnp.float32)
    return fn(a, b, precision=jax.lax.Precision.HIGHEST)


#: CUDA's mm dtype error (cuda/Blas.cpp), formatted with the operands' C++ types (``cpp``) or ATen
#: names (``aten``). The CPU's mm says "m1 and m2".
_MM_DTYPES = "expected mat1 and mat2 to have the same dtype, but got: {cpp[0]} != {cpp[1]}"


def _check_same_dtype(a, b, message: str) -> None:
    """The CPU's matmul kernels refuse operands of two dtypes (no promotion: an int32 @ float32
    product would otherwise be computed and truncated to int32).

    Raises:
        RuntimeError: ``message`` (one of the ``_*_DTYPES`` wordings) with the two dtypes' names.
    """
    if a.dtype != b.dtype:
        dtypes = (a.dtype, b.dtype)
        raise RuntimeError(message.format(cpp=[cpp_name(d) for d in dtypes], aten=[aten_name(d) for d in dtypes]))


def _check_addmv_dtypes(result_dtype, mat, vec) -> None:
    """addmv's (and mv's) dtype check in ATen's Blas.cpp: the result, matrix and vector share a dtype.
    ``mv`` allocates its result with the vector's dtype, so it names that one first.

    Raises:
        RuntimeError: "addmv input tensors must have the same dtype, but got Int, Float, and Int".
    """
    if not result_dtype == mat.dtype == vec.dtype:
        names = ", ".join(aten_name(d) for d in (result_dtype, mat.dtype))
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {names}, and {aten_name(vec.dtype)}")


def _addmm_dtypes(mat1: str, mat2: str):
    """A ``dtype_rule``: addmm's (and addbmm's) checks in ATen's order, self against ``mat2`` first,
    then ``mat1`` against ``mat2``. As a rule it runs before an in-place or ``out=`` result's dtype
    is checked: ``half.addmm_(bf16, bf16)`` said "Expected out tensor to have dtype float"."""
    self_rule = same_dtype(("self", mat2), SELF_MAT2_DTYPES)
    mats_rule = same_dtype((mat1, mat2), MAT1_MAT2_DTYPES)

    def rule(arguments: dict) -> None:
        self_rule(arguments)
        mats_rule(arguments)

    return rule


@lowering(aten.mm.default)
def mm(self, mat2):
    """torch.mm: (n, k) @ (k, m), both of one dtype."""
    _check_same_dtype(self, mat2, _MM_DTYPES)
    return _accumulate(self, mat2, jnp.matmul)


@lowering(aten.bmm.default)
def bmm(self, mat2):
    """torch.bmm: (b, n, k) @ (b, k, m)."""
    return _accumulate(self, mat2, jnp.matmul)


@lowering(
    aten.addmm.default, dtype_rule=_addmm_dtypes("mat1", "mat2"), checked=("beta", "alpha"), checked_in_opmath=True
)
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    """torch.addmm: beta * self + alpha * (mat1 @ mat2); beta=0 ignores self (NaN included); all
    three of one dtype (:func:`_addmm_dtypes`)."""
    product = _accumulate(mat1, mat2, jnp.matmul)
    return _scaled_sum(self, product, beta, alpha)


@lowering(aten.baddbmm.default, checked=("beta", "alpha"), checked_in_opmath=True)
def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    """torch.baddbmm: beta * self + alpha * (batch1 @ batch2)."""
    product = _accumulate(batch1, batch2, jnp.matmul)
    return _scaled_sum(self, product, beta, alpha)


def _scaled_sum(self, product, beta, alpha):
    scaled = product * jnp.asarray(alpha, product.dtype)
    beta = jnp.asarray(beta, product.dtype)
    return jnp.where(beta == 0, scaled, scaled + beta * self.astype(product.dtype))


@lowering(aten.dot.default)
def dot(self, tensor):
    return _accumulate(self, tensor, jnp.dot)


@lowering(aten.mv.default)
def mv(self, vec):
    """torch.mv: (n, k) @ (k,), both of one dtype."""
    _check_addmv_dtypes(vec.dtype, self, vec)
    return _accumulate(self, vec, jnp.matmul)


@lowering(aten.addmv.default, checked=("beta", "alpha"), checked_in_opmath=True)
def addmv(self, mat, vec, *, beta=1, alpha=1):
    """torch.addmv: beta * self + alpha * (mat @ vec); beta=0 ignores self (NaN included); all three
    of one dtype."""
    _check_addmv_dtypes(self.dtype, mat, vec)
    return _scaled_sum(self, _accumulate(mat, vec, jnp.matmul), beta, alpha)


@lowering(
    aten.addbmm.default,
    dtype_rule=_addmm_dtypes("batch1", "batch2"),
    checked=("beta", "alpha"),
    checked_in_opmath=True,
)
def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    """torch.addbmm: beta * self + alpha * sum_b(batch1[b] @ batch2[b]); all three of one dtype
    (ATen computes it with addmm, and words its errors so). As ATen's ``addbmm_impl_``, one addmm
    per batch in order, beta applied by the first: a 16-bit result is rounded after each batch
    (summing the batches in float32 and rounding once differed in half of the float16 elements, by
    up to 61 times assert_close's tolerance)."""
    products = _accumulate(batch1, batch2, jnp.matmul)
    if products.shape[0] == 0 or products.dtype == batch1.dtype:
        return _scaled_sum(self, jnp.sum(products, axis=0), beta, alpha)
    rounded = c10_rounding(batch1.dtype)
    first = rounded(_scaled_sum(self, products[0], beta, alpha))
    total, _ = jax.lax.scan(
        lambda total, product: (rounded(_scaled_sum(total, product, 1, alpha)), None), first, products[1:]
    )
    return total


@lowering(aten.addr.default, promotion=Promotion.NO_OPMATH, promote=("self", "vec1", "vec2"), checked=("beta", "alpha"))
def addr(self, vec1, vec2, *, beta=1, alpha=1):
    """torch.addr: ``beta * self + alpha * vec1 * vec2`` elementwise over the outer grid, in the
    order and rounding of ATen's CPU and CUDA kernels (``addr_kernel``): alpha and beta converted to
    the dtype, each operator's result rounded to it (16-bit floats compute each step in float);
    beta=0 ignores self (NaN included). Bool inputs use logical and/or as PyTorch does."""
    if vec1.dtype == jnp.bool_:
        outer = jnp.logical_and(vec1[:, None], vec2[None, :])
        return jnp.logical_or(jnp.logical_and(self, beta), jnp.logical_and(outer, alpha))
    dtype, compute, rounded = vec1.dtype, opmath_dtype(vec1.dtype), c10_rounding(vec1.dtype)
    alpha, beta = (jnp.asarray(v, dtype).astype(compute) for v in (alpha, beta))
    scaled = rounded(rounded(alpha * vec1.astype(compute)[:, None]) * vec2.astype(compute)[None, :])
    summed = rounded(rounded(beta * self.astype(compute)) + scaled)
    return jnp.where(beta == 0, scaled, summed).astype(dtype)


@lowering(aten._trilinear.default, static=("expand1", "expand2", "expand3", "sumdim", "unroll_dim"))
def _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """``aten::_trilinear`` (F.bilinear's kernel): i1, i2 and i3, each unsqueezed at its ``expand``
    dimensions to one rank, multiplied and summed over ``sumdim``, in ATen's two contractions
    (Linear.cpp): ``i1 * i2`` summed over the sum dimensions i3 lacks, rounded to the dtype, then
    times ``i3`` summed over the rest, rounded; a sum dimension that is ``unroll_dim`` is added up
    slice by slice into the result, each addition rounded. Each contraction accumulates in float32
    for 16-bit inputs, as the CPU's bmm does (one float32 einsum rounded once differed in 60% of
    float16 elements of F.bilinear, by up to 6.5 times tolerance)."""
    rank = i1.ndim + len(expand1)
    letters = "abcdefghijklmnopqrstuvwxyz"[:rank]
    expanded = [{d % rank for d in dims} for dims in (expand1, expand2, expand3, sumdim)]
    expand1, expand2, expand3, summed = expanded
    unroll_dim %= rank

    def spelled(dims):
        return "".join(letters[d] for d in sorted(dims))

    everything = set(range(rank))
    first = (everything - expand1) | (everything - expand2)
    first -= {d for d in summed & expand3 if d != unroll_dim}
    second = (first | (everything - expand3)) - {d for d in summed - expand3 if d != unroll_dim}
    rounded, compute = c10_rounding(i1.dtype), opmath_dtype(i1.dtype)
    precision = {} if jnp.issubdtype(compute, jnp.integer) else {"precision": jax.lax.Precision.HIGHEST}
    a, b, c = (x.astype(compute) for x in (i1, i2, i3))
    operands1, operands2, operands3 = (spelled(everything - e) for e in (expand1, expand2, expand3))
    pair = rounded(jnp.einsum(f"{operands1},{operands2}->{spelled(first)}", a, b, **precision))
    product = rounded(jnp.einsum(f"{spelled(first)},{operands3}->{spelled(second)}", pair, c, **precision))
    if unroll_dim in summed and unroll_dim in second:
        axis = sorted(second).index(unroll_dim)
        slices = jnp.moveaxis(product, axis, 0)
        product, _ = jax.lax.scan(lambda total, part: (rounded(total + part), None), jnp.zeros_like(slices[0]), slices)
        second = second - {unroll_dim}
    return jnp.einsum(f"{spelled(second)}->{spelled(everything - summed)}", product)


@lowering(aten._int_mm.default)
def int_mm(self, mat2):
    """torch._int_mm: int8 (n, k) @ int8 (k, m) accumulated and returned in int32."""
    return jnp.matmul(self, mat2, preferred_element_type=jnp.int32)


@lowering(
    aten.linalg_cross.default,
    static=("dim",),
    dtype_rule=same_dtype(("self", "other"), "expected scalar type {0} but found {1}"),  # ATen does not promote
)
def linalg_cross(self, other, *, dim=-1):
    """torch.linalg.cross: ``a[i+1] * b[i+2] - a[i+2] * b[i+1]`` along ``dim`` (of size 3, checked by
    the meta kernel), broadcast. As ATen's CPU kernel (CrossKernel.cpp) computes in ``scalar_t``, a
    16-bit result rounds each product and the difference (PyTorch's decomposition computes in
    float32 and rounds once: 36% of float16 elements differed, by up to 2.6 times tolerance). A
    float32 result is ``fma(a[i+1], b[i+2], -(a[i+2] * b[i+1]))``, as the CPU's vectorised builds
    contract it (``torch.backends.cpu.get_cpu_capability()`` other than DEFAULT; 24% of elements
    differed in the last bit): the first product is exact in float64."""
    rounded = c10_rounding(self.dtype)
    self, other = jnp.broadcast_arrays(self, other)
    axis = dim % self.ndim
    compute = opmath_dtype(self.dtype)
    a, b = self.astype(compute), other.astype(compute)
    next_, after = jnp.array([1, 2, 0]), jnp.array([2, 0, 1])

    def take(x, index):
        return jnp.take(x, index, axis=axis)

    subtrahend = rounded(take(a, after) * take(b, next_))
    if self.dtype == jnp.float32 and cpu_kernels_contract():
        exact = take(a, next_).astype(jnp.float64) * take(b, after).astype(jnp.float64)
        return (exact - subtrahend.astype(jnp.float64)).astype(jnp.float32)
    return rounded(rounded(take(a, next_) * take(b, after)) - subtrahend)
