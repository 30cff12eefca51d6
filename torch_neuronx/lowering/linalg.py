"""Matrix products: mm, bmm, addmm, baddbmm, addbmm, addmv, addr, dot, mv, _int_mm.

16-bit inputs multiply with float32 accumulation (``preferred_element_type``), as PyTorch's CPU and
CUDA kernels accumulate, then round once to the result dtype.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from torch_neuronx.lowering.registry import lowering

aten = torch.ops.aten


def _accumulate(a, b, fn):
    if a.dtype in (jnp.bfloat16, jnp.float16):
        return fn(a, b, preferred_element_type=jnp.float32)
    return fn(a, b, precision=jax.lax.Precision.HIGHEST)


@lowering(aten.mm.default)
def mm(self, mat2):
    """torch.mm: (n, k) @ (k, m)."""
    return _accumulate(self, mat2, jnp.matmul)


@lowering(aten.bmm.default)
def bmm(self, mat2):
    """torch.bmm: (b, n, k) @ (b, k, m)."""
    return _accumulate(self, mat2, jnp.matmul)


@lowering(aten.addmm.default)
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    """torch.addmm: beta * self + alpha * (mat1 @ mat2); beta=0 ignores self (NaN included)."""
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
