"""Pairwise distances: torch.cdist and torch.nn.functional.pdist, forward and backward, with
PyTorch's p-norm rules (``aten/src/ATen/native/Distance.cpp``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from torch_neuronx.lowering.reduction import NORMAL_POWER_SUM, power_norm
from torch_neuronx.lowering.registry import lowering, same_dtype
from torch_neuronx.runtime.dtypes import aten_name

aten = torch.ops.aten


def _minkowski(diff: jax.Array, p: float) -> jax.Array:
    """The p-norm over the last axis as torch.cdist/pdist define it: p = 0 counts nonzeros, p = inf
    takes the largest magnitude."""
    magnitude = jnp.abs(diff)
    if p == 0:
        return jnp.sum(magnitude != 0, axis=-1).astype(diff.dtype)
    if p == float("inf"):
        return jnp.max(magnitude, axis=-1, initial=0)
    if p == 1:
        return jnp.sum(magnitude, axis=-1)
    if p == 2:
        return jnp.sqrt(jnp.sum(magnitude * magnitude, axis=-1))
    return power_norm(magnitude, p, axis=-1)


_same_cdist_dtypes = same_dtype(("x1", "x2"), "expected scalar type {0} but found {1}")


def _cdist_dtypes(arguments: dict) -> None:
    """cdist_impl's checks (Distance.cpp, CPU and CUDA alike), in its order: each operand floating
    point, then one dtype for both, which the kernel checks after dispatching on x1's dtype: a
    16-bit x1 is refused first by that dispatch ("cdist_cuda" not implemented for 'Half',
    eager/dispatched_dtypes.py)."""
    for name in ("x1", "x2"):
        dtype = arguments[name].dtype
        if not dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name.upper()} got: {aten_name(dtype)}")
    if arguments["x1"].dtype in (torch.float32, torch.float64):
        _same_cdist_dtypes(arguments)


@lowering(aten._cdist_forward.default, static=("p",), dtype_rule=_cdist_dtypes)
def cdist_forward(x1, x2, p, compute_mode):
    """torch.cdist (direct form): p-norm distances between the rows of x1 and x2; batch dimensions
    broadcast. The matrix-product form of ``compute_mode`` reaches ``_euclidean_dist`` instead."""
    batch = jnp.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    a = jnp.broadcast_to(x1, (*batch, *x1.shape[-2:]))
    b = jnp.broadcast_to(x2, (*batch, *x2.shape[-2:]))
    return _minkowski(a[..., :, None, :] - b[..., None, :, :], p)


@lowering(aten._pdist_forward.default, static=("p",))
def pdist_forward(self, p=2):
    """torch.pdist: p-norm distances of the row pairs i < j, in row-major order."""
    rows, cols = jnp.triu_indices(self.shape[0], k=1)
    return _minkowski(self[rows] - self[cols], p)


def _minkowski_backward(diff: jax.Array, dist: jax.Array, grad: jax.Array, p: float) -> jax.Array:
    """d dist / d x1 * grad for each difference x1 - x2 (last axis), with PyTorch's rules
    (``aten/src/ATen/native/cpu/DistanceOpsKernel.cpp``): a zero distance has zero gradient, p = inf
    sends it to the largest differences, p = 0 has none."""
    dist, grad = dist[..., None], grad[..., None]
    zero = dist == 0
    safe = jnp.where(zero, 1, dist)
    if p == 0:
        return jnp.zeros_like(diff)
    if p == 1:
        return grad * jnp.sign(diff)
    if p == float("inf"):
        return grad * jnp.sign(diff) * (jnp.abs(diff) == dist)
    if p == 2:
        return jnp.where(zero, 0, grad * diff / safe)
    # Where dist ** (p - 1) leaves float32's range (a large p), the ratio |diff| / dist <= 1 is
    # raised instead: dist ** 199 of 0.6 flushed to 0 and the gradient was NaN; so is a quotient
    # by a dist ** (p - 1) past 2**100, which XLA takes as a product with its (subnormal, flushed)
    # reciprocal (a distance of 6.06 at p = 50 had a zero gradient).
    denominator = safe ** (p - 1)
    if p < 2:
        step = jnp.sign(diff) * jnp.abs(diff) ** (p - 1) * grad / denominator
    else:
        step = diff * jnp.abs(diff) ** (p - 2) * grad / denominator
    # (a non-finite step: |diff| ** (p - 1) overflowing where dist ** (p - 1) does not)
    wide = (denominator < NORMAL_POWER_SUM) | (denominator > 1 / NORMAL_POWER_SUM) | ~jnp.isfinite(step)
    step = jnp.where(wide, jnp.sign(diff) * (jnp.abs(diff) / safe) ** (p - 1) * grad, step)
    return jnp.where(zero | ((diff == 0) & (p < 1)), 0, step)


@lowering(aten._cdist_backward.default, static=("p",))
def cdist_backward(grad, x1, x2, p, cdist):
    """Gradient of torch.cdist with respect to x1: the sum over x2's rows of each pair's gradient, in
    the broadcast batch shape; zeros of x1's own shape when any size is zero, as on the CPU."""
    if grad.size == 0 or x1.size == 0 or x2.size == 0:
        return jnp.zeros_like(x1)
    diff = x1[..., :, None, :] - x2[..., None, :, :]
    return jnp.sum(_minkowski_backward(diff, cdist, grad, p), axis=-2)


@lowering(aten._pdist_backward.default, static=("p",))
def pdist_backward(grad, self, p, pdist):
    """Gradient of torch.pdist: each pair's gradient goes to its first row and, negated, its second."""
    rows, cols = jnp.triu_indices(self.shape[0], k=1)
    pair = _minkowski_backward(self[rows] - self[cols], pdist, grad, p)
    return jnp.zeros_like(self).at[rows].add(pair).at[cols].add(-pair)
