"""Matrix products: mm, bmm, addmm, baddbmm, addbmm, addmv, addr, dot, mv, _int_mm.

16-bit inputs multiply with float32 accumulation (``preferred_element_type``), as PyTorch's CPU and
CUDA kernels accumulate, then round once to the result dtype.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx.lowering.registry import lowering

aten = torch.ops.aten


def _accumulate(a, b, fn):
    if a.dtype in (jnp.bfloat16, jnp.float16):
        return fn(a, b, preferred_element_type=jnp.float32)
    return fn(a, b, precision=jax.lax.Precision.HIGHEST)


#: (C++ type, ATen name) of each dtype, as the CPU's matmul dtype errors print them.
_NAMES = {
    np.dtype(jnp.bool_): ("bool", "Bool"),
    np.dtype(jnp.int8): ("signed char", "Char"),
    np.dtype(jnp.uint8): ("unsigned char", "Byte"),
    np.dtype(jnp.int16): ("short int", "Short"),
    np.dtype(jnp.int32): ("int", "Int"),
    np.dtype(jnp.int64): ("long int", "Long"),
    np.dtype(jnp.float16): ("c10::Half", "Half"),
    np.dtype(jnp.bfloat16): ("c10::BFloat16", "BFloat16"),
    np.dtype(jnp.float32): ("float", "Float"),
    np.dtype(jnp.complex64): ("c10::complex<float>", "ComplexFloat"),
}


def _check_same_dtype(a, b, aten_message: bool = False) -> None:
    """The CPU's matmul kernels refuse operands of two dtypes (no promotion: an int32 @ float32
    product would otherwise be computed and truncated to int32).

    Raises:
        RuntimeError: the CPU's message, "expected m1 and m2 to have the same dtype, but got: int !=
            float" (mm), or "self and mat2 must have the same dtype, but got Int and Float" (addmm).
    """
    if a.dtype == b.dtype:
        return
    first, second = (
        _NAMES.get(np.dtype(a.dtype), (str(a.dtype),) * 2),
        _NAMES.get(np.dtype(b.dtype), (str(b.dtype),) * 2),
    )
    if aten_message:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {first[1]} and {second[1]}")
    raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {first[0]} != {second[0]}")


@lowering(aten.mm.default)
def mm(self, mat2):
    """torch.mm: (n, k) @ (k, m), both of one dtype."""
    _check_same_dtype(self, mat2)
    return _accumulate(self, mat2, jnp.matmul)


@lowering(aten.bmm.default)
def bmm(self, mat2):
    """torch.bmm: (b, n, k) @ (b, k, m)."""
    return _accumulate(self, mat2, jnp.matmul)


@lowering(aten.addmm.default)
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    """torch.addmm: beta * self + alpha * (mat1 @ mat2); beta=0 ignores self (NaN included); all
    three of one dtype."""
    _check_same_dtype(mat1, mat2, aten_message=True)
    _check_same_dtype(self, mat2, aten_message=True)
    product = _accumulate(mat1, mat2, jnp.matmul)
    return _scaled_sum(self, product, beta, alpha)


@lowering(aten.baddbmm.default)
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
    return _accumulate(self, vec, jnp.matmul)


@lowering(aten.addmv.default)
def addmv(self, mat, vec, *, beta=1, alpha=1):
    """torch.addmv: beta * self + alpha * (mat @ vec); beta=0 ignores self (NaN included)."""
    return _scaled_sum(self, _accumulate(mat, vec, jnp.matmul), beta, alpha)


@lowering(aten.addbmm.default)
def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    """torch.addbmm: beta * self + alpha * sum_b(batch1[b] @ batch2[b]), reduced in the accumulation dtype."""
    product = jnp.sum(_accumulate(batch1, batch2, jnp.matmul), axis=0)
    return _scaled_sum(self, product, beta, alpha)


@lowering(aten.addr.default)
def addr(self, vec1, vec2, *, beta=1, alpha=1):
    """torch.addr: beta * self + alpha * outer(vec1, vec2); bool inputs use logical and/or as PyTorch does."""
    if vec1.dtype == jnp.bool_:
        outer = jnp.logical_and(vec1[:, None], vec2[None, :])
        return jnp.logical_or(jnp.logical_and(self, beta), jnp.logical_and(outer, alpha))
    return _scaled_sum(self, jnp.outer(vec1, vec2), beta, alpha)


@lowering(aten._int_mm.default)
def int_mm(self, mat2):
    """torch._int_mm: int8 (n, k) @ int8 (k, m) accumulated and returned in int32."""
    return jnp.matmul(self, mat2, preferred_element_type=jnp.int32)
