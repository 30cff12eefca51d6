"""Matrix products: mm, bmm, addmm, baddbmm, dot, mv.

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
