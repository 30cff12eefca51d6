"""Reductions: sum, mean, prod, amax/amin, argmax/argmin, var/std, norms, logsumexp, cumulative ops.

16-bit floats accumulate in float32 and integers in int64 (PyTorch's accumulation types), then the
result takes the dtype PyTorch's meta kernel reports.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from torch_neuronx.lowering.registry import lowering

aten = torch.ops.aten


def _axes(self, dim) -> tuple[int, ...] | None:
    """PyTorch's dim argument as JAX axes: None or [] reduce over every dimension."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None
    dims = [dim] if isinstance(dim, int) else dim
    rank = max(self.ndim, 1)
    return tuple(sorted({d % rank for d in dims})) if self.ndim else None


def _accumulator(dtype) -> jnp.dtype:
    if dtype in (jnp.bfloat16, jnp.float16):
        return jnp.float32
    return dtype


@lowering(aten.sum.dim_IntList, result_dtype=True)
def sum_dim(self, dim, keepdim=False, *, dtype=None, result_dtype):
    """torch.sum over ``dim``; integers and bool accumulate in int64 unless ``dtype`` says otherwise."""
    return jnp.sum(self.astype(_accumulator(result_dtype)), axis=_axes(self, dim), keepdims=keepdim)


@lowering(aten.sum.default, result_dtype=True)
def sum_all(self, *, dtype=None, result_dtype):
    return jnp.sum(self.astype(_accumulator(result_dtype)))


@lowering(aten.mean.dim, result_dtype=True)
def mean_dim(self, dim, keepdim=False, *, dtype=None, result_dtype):
    """torch.mean over ``dim`` (floating point only, as PyTorch requires)."""
    return jnp.mean(self.astype(_accumulator(result_dtype)), axis=_axes(self, dim), keepdims=keepdim)


@lowering(aten.mean.default, result_dtype=True)
def mean_all(self, *, dtype=None, result_dtype):
    return jnp.mean(self.astype(_accumulator(result_dtype)))
