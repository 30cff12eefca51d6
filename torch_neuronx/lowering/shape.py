"""Shape and layout ops: views (inside graphs), concatenation, splitting, padding, flips, repeats.

In eager, view ops never reach a lowering: PyTorch's own view kernels only change metadata and the
executable of the next op reads the view (runtime/layout.py). Inside a traced graph (a
decomposition, a torch.compile graph) they are ordinary functions of their input, lowered here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx.lowering.promotion import runs_of, sum_runs_in_order
from torch_neuronx.lowering.registry import Promotion, lowering
from torch_neuronx.runtime import layout

aten = torch.ops.aten
prims = torch.ops.prims


def _dim(dim: int, rank: int) -> int:
    return dim % rank if rank else 0


@lowering(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view_copy.default)
def view(self, size):
    """Tensor.view / reshape: a new shape with the same elements in row-major order (-1 inferred)."""
    return jnp.reshape(self, tuple(size))


@lowering(aten.expand.default, aten.expand_copy.default)
def expand(self, size, *, implicit=False):
    """Tensor.expand: broadcast to ``size``; -1 keeps a dimension, new dimensions are prepended."""
    lead = len(size) - self.ndim
    shape = tuple(self.shape[i - lead] if s == -1 else s for i, s in enumerate(size))
    return jnp.broadcast_to(self, shape)


@lowering(aten.permute.default, aten.permute_copy.default)
def permute(self, dims):
    return jnp.transpose(self, tuple(_dim(d, self.ndim) for d in dims))


@lowering(aten.transpose.int, aten.transpose_copy.int)
def transpose(self, dim0, dim1):
    """Tensor.transpose; a 0-dim tensor transposes to itself (dims 0 and -1 wrap as for a 1-d one)."""
    if self.ndim == 0:
        return self
    return jnp.swapaxes(self, _dim(dim0, self.ndim), _dim(dim1, self.ndim))


@lowering(aten.t.default, aten.t_copy.default)
def t(self):
    return self.T if self.ndim == 2 else self


@lowering(aten.unsqueeze.default, aten.unsqueeze_copy.default)
def unsqueeze(self, dim):
    return jnp.expand_dims(self, dim % (self.ndim + 1))


@lowering(aten.squeeze.default, aten.squeeze_copy.default)
def squeeze(self):
    return jnp.squeeze(self)


@lowering(aten.squeeze.dim, aten.squeeze_copy.dim)
def squeeze_dim(self, dim):
    dim = _dim(dim, self.ndim)
    return jnp.squeeze(self, dim) if self.ndim and self.shape[dim] == 1 else self


@lowering(aten.squeeze.dims, aten.squeeze_copy.dims)
def squeeze_dims(self, dim):
    axes = tuple(d for d in {_dim(d, self.ndim) for d in dim} if self.ndim and self.shape[d] == 1)
    return jnp.squeeze(self, axes) if axes else self


@lowering(aten.slice.Tensor, aten.slice_copy.Tensor)
def slice_(self, dim=0, start=None, end=None, step=1):
    """Tensor slicing along one dimension, with PyTorch's clamping of start and end."""
    dim = _dim(dim, self.ndim)
    size = self.shape[dim]
    start = 0 if start is None else start
    end = size if end is None else end
    start = min(max(start + size if start < 0 else start, 0), size)
    end = min(max(end + size if end < 0 else end, start), size)
    return jax.lax.slice_in_dim(self, start, end, step, axis=dim)


@lowering(aten.slice_scatter.default)
def slice_scatter(self, src, dim=0, start=None, end=None, step=1):
    """torch.slice_scatter: ``self`` with ``src`` written where ``self[start:end:step]`` along
    ``dim`` looks (PyTorch's clamping of start and end). A lowering of its own, not PyTorch's
    decomposition, which re-views a strided intermediate and fails in compiled graphs where an
    in-place op writes through a slice (funnel's ``positional_attn *= cls_mask``)."""
    dim = _dim(dim, self.ndim)
    size = self.shape[dim]
    start = 0 if start is None else start
    end = size if end is None else end
    start = min(max(start + size if start < 0 else start, 0), size)
    end = min(max(end + size if end < 0 else end, start), size)
    where = [slice(None)] * self.ndim
    where[dim] = slice(start, end, step)
    return self.at[tuple(where)].set(src.astype(self.dtype))


@lowering(aten.select.int, aten.select_copy.int)
def select(self, dim, index):
    dim = _dim(dim, self.ndim)
    return jax.lax.index_in_dim(self, index % self.shape[dim], axis=dim, keepdims=False)


# lift_fresh has a lowering so that it is not decomposed (PyTorch's nop_decomposition makes it an
# alias): FakeTensorMode turns the real constant of ``torch.tensor(...)`` in a compiled graph into a
# fake one at lift_fresh, and would reject it at alias. _lazy_clone (a copy-on-write clone on the
# CPU and CUDA, whose COW DataPtr neuron's allocations cannot take: "Expected storage != nullptr")
# is a clone: a new storage of equal values, each storage's later writes binding buffers of its own.
@lowering(
    aten.alias.default,
    aten.alias_copy.default,
    aten.clone.default,
    aten._lazy_clone.default,
    aten.lift_fresh.default,
    aten.lift_fresh_copy.default,
    aten.detach.default,
)
def alias(self, *, memory_format=None):
    return self


@lowering(aten.diagonal.default, aten.diagonal_copy.default)
def diagonal(self, offset=0, dim1=0, dim2=1):
    return jnp.diagonal(self, offset, _dim(dim1, self.ndim), _dim(dim2, self.ndim))


def _check_view_fits(self, size, stride, storage_offset) -> None:
    """c10's setStorage bound: the view may not reach past ``self``'s elements (its storage here).

    Raises:
        RuntimeError: the view needs more storage than ``self`` has (CPU's message).
    """
    itemsize = np.dtype(self.dtype).itemsize
    needed = (
        0
        if 0 in size
        else (storage_offset + 1 + sum((n - 1) * k for n, k in zip(size, stride, strict=True))) * itemsize
    )
    if needed > self.size * itemsize:
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {storage_offset}, and itemsize "
            f"{itemsize} requiring a storage size of {needed} are out of bounds for storage of size "
            f"{self.size * itemsize}"
        )


@lowering(aten.as_strided.default, aten.as_strided_copy.default, metas=True)
def as_strided(self, size, stride, storage_offset=None, *, metas):
    """Tensor.as_strided: a view of the input's storage, which the input's own strides and offset
    (``metas[0]``) place its elements in, as in PyTorch; ``storage_offset`` None is the input's own.
    A contiguous input from offset 0 is its storage in row-major order; the elements of any other
    (a transposed or reshaped view of a graph input: Longformer's and LED's chunking) are put back
    where its strides say before the new view reads them.

    Raises:
        RuntimeError: the view reaches past the input's elements, or reads storage elements that the
            input, a view of a larger storage, does not hold.
    """
    base = metas[0]
    offset = base.storage_offset() if storage_offset is None else storage_offset
    view = layout.View(np.dtype(self.dtype), tuple(size), tuple(stride), offset)
    if base.storage_offset() == 0 and base.is_contiguous():
        _check_view_fits(self, size, stride, offset)
        return layout.read(self.reshape(-1), view)
    own = layout.positions(layout.View(view.dtype, tuple(base.shape), tuple(base.stride()), base.storage_offset()))
    wanted = layout.positions(view)
    where = np.full(int(max(own.max(initial=0), wanted.max(initial=0))) + 1, -1, dtype=np.int64)
    where[own.reshape(-1)] = np.arange(own.size, dtype=np.int64)
    index = where[wanted]
    if (index < 0).any():
        raise RuntimeError(
            f"as_strided: sizes {list(size)}, strides {list(stride)} and storage offset {offset} read storage "
            f"elements outside the input tensor (sizes {list(base.shape)}, strides {list(base.stride())}, "
            f"storage offset {base.storage_offset()}), a view of a larger storage that a neuron graph does not "
            "hold; take as_strided of the whole tensor, or .contiguous() the input first"
        )
    return self.reshape(-1)[index]


def _diagonal_positions(length: int, offset: int) -> tuple[jax.Array, jax.Array]:
    """(rows, columns) of the ``length`` elements of the diagonal ``offset`` (above the main one when
    positive)."""
    steps = jnp.arange(length)
    return (steps, steps + offset) if offset >= 0 else (steps - offset, steps)


@lowering(aten.diag_embed.default)
def diag_embed(self, offset=0, dim1=-2, dim2=-1):
    """torch.diag_embed: the last dimension of ``self`` on the diagonal ``offset`` of the planes
    (``dim1``, ``dim2``) of a new tensor with one more dimension; zeros elsewhere."""
    rank = self.ndim + 1
    size = self.shape[-1] + abs(offset)
    rows, columns = _diagonal_positions(self.shape[-1], offset)
    planes = jnp.zeros((*self.shape[:-1], size, size), self.dtype).at[..., rows, columns].set(self)
    return jnp.moveaxis(planes, (-2, -1), (_dim(dim1, rank), _dim(dim2, rank)))


@lowering(aten.diagonal_scatter.default)
def diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
    """torch.diagonal_scatter: ``self`` with ``src`` written on its diagonal ``offset`` of the planes
    (``dim1``, ``dim2``); ``src`` has the shape of ``self.diagonal(offset, dim1, dim2)``."""
    dims = (_dim(dim1, self.ndim), _dim(dim2, self.ndim))
    planes = jnp.moveaxis(self, dims, (-2, -1))
    rows, columns = _diagonal_positions(src.shape[-1], offset)
    return jnp.moveaxis(planes.at[..., rows, columns].set(src.astype(self.dtype)), (-2, -1), dims)


@lowering(aten.as_strided_scatter.default)
def as_strided_scatter(self, src, size, stride, storage_offset=None):
    """torch.as_strided_scatter: ``self`` with ``src`` written where ``self.as_strided(size, stride,
    storage_offset)`` looks, over ``self``'s elements in row-major order (a graph input is contiguous).
    Positions the view repeats (a stride of 0) raise, as in-place writes through such views do; so does
    a view that reaches past ``self``'s elements."""
    _check_view_fits(self, size, stride, storage_offset or 0)
    view = layout.View(np.dtype(self.dtype), tuple(size), tuple(stride), storage_offset or 0)
    written = layout.write(self.reshape(-1), self.size * self.dtype.itemsize, src, view)
    return written.reshape(self.shape)


@lowering(aten.cat.default)
def cat(tensors, dim=0):
    """torch.cat; 1-D empty tensors are skipped, as PyTorch's legacy rule allows."""
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if not kept:
        return tensors[0]
    dtype = jnp.result_type(*kept)
    return jnp.concatenate([t.astype(dtype) for t in kept], axis=_dim(dim, kept[0].ndim))


@lowering(aten.split_with_sizes.default, aten.split_with_sizes_copy.default)
def split_with_sizes(self, split_sizes, dim=0):
    dim = _dim(dim, self.ndim)
    offsets = np.cumsum([0, *split_sizes])
    return [jax.lax.slice_in_dim(self, int(a), int(b), axis=dim) for a, b in zip(offsets, offsets[1:], strict=False)]


@lowering(aten.split.Tensor, aten.split_copy.Tensor)
def split(self, split_size, dim=0):
    dim = _dim(dim, self.ndim)
    size = self.shape[dim]
    sizes = [min(split_size, size - start) for start in range(0, size, split_size)] or [0]
    return split_with_sizes(self, sizes, dim)


@lowering(aten.unbind.int, aten.unbind_copy.int)
def unbind(self, dim=0):
    dim = _dim(dim, self.ndim)
    return [jax.lax.index_in_dim(self, i, axis=dim, keepdims=False) for i in range(self.shape[dim])]


@lowering(aten.flip.default)
def flip(self, dims):
    return jnp.flip(self, tuple(_dim(d, self.ndim) for d in dims)) if self.ndim else self


def _roll_arguments(arguments: dict) -> None:
    """ATen's checks of ``roll`` (TensorTransformations.cpp, CPU and CUDA), in its words, made
    before PyTorch's reference: it returns an empty tensor unchecked and words them otherwise."""
    shifts, dims = list(arguments["shifts"]), list(arguments.get("dims", ()))
    if not shifts:
        raise RuntimeError("`shifts` required")
    if not (not dims and len(shifts) == 1) and len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")


@lowering(aten.roll.default, dtype_rule=_roll_arguments, rule_first=True)
def roll(self, shifts, dims=()):
    """torch.roll. An empty tensor is returned as it is before its dims are wrapped, as ATen's CPU
    and CUDA kernels do (``roll(empty, 1, 1000)`` computes)."""
    if self.size == 0:
        return self
    if not dims:
        return jnp.roll(self.reshape(-1), shifts[0]).reshape(self.shape)
    return jnp.roll(self, tuple(shifts), tuple(_dim(d, self.ndim) for d in dims))


@lowering(aten.repeat.default)
def repeat(self, repeats):
    """Tensor.repeat: tiles the tensor; extra leading repeats add dimensions."""
    lead = len(repeats) - self.ndim
    return jnp.tile(self.reshape((1,) * lead + self.shape), tuple(repeats))


@lowering(aten.constant_pad_nd.default, checked=("value",))
def constant_pad_nd(self, pad, value=0):
    """F.pad(mode="constant"): ``pad`` lists (before, after) pairs from the last dimension; negative
    padding crops."""
    config = [(0, 0, 0)] * self.ndim
    for i in range(len(pad) // 2):
        config[self.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1], 0)
    return jax.lax.pad(self, jnp.asarray(value, self.dtype), config)


@lowering(
    aten.replication_pad1d_backward.default,
    aten.replication_pad2d_backward.default,
    aten.replication_pad3d_backward.default,
    promotion=Promotion.DEFAULT,
    promote=("grad_output",),
)
def replication_pad_backward(grad_output, self, padding):
    """The gradient of F.pad(mode="replicate") (padding: (before, after) pairs from the last dimension;
    negative values crop): output position ``o`` of a padded dimension copies input position
    ``clip(o - before, 0, size - 1)``, so each input position sums the gradients of its copies
    (:func:`_pad_backward`)."""
    return _pad_backward(grad_output, self, padding, lambda o, size: np.clip(o, 0, size - 1))


@lowering(
    aten.reflection_pad1d_backward.default,
    aten.reflection_pad2d_backward.default,
    aten.reflection_pad3d_backward.default,
    promotion=Promotion.DEFAULT,
    promote=("grad_output",),
)
def reflection_pad_backward(grad_output, self, padding):
    """The gradient of F.pad(mode="reflect"): output position ``o`` copies input position ``|o -
    before|`` reflected again at the far edge (``2 * (size - 1) - i`` past it), as ATen's
    ``ReflectionPad`` index maps it; each input position sums the gradients of its copies
    (:func:`_pad_backward`). It ran as PyTorch's decomposition, which differed from the CPU's 16-bit
    kernel in 7% of the elements."""

    def reflected(o, size):
        o = np.abs(o)
        return np.where(o >= size, 2 * (size - 1) - o, o)

    return _pad_backward(grad_output, self, padding, reflected)


def _pad_backward(grad_output, self, padding, source_of):
    """The gradient of a padding whose output position ``o`` (shifted by the padding before it) of
    each padded dimension copies input position ``source_of(o - before, size)``. A 16-bit gradient
    sums in its dtype, output by output, as the CPU's ``cpu_padding_backward`` does (float32 once
    differed by up to 23 times bfloat16 tolerance at the edges); others sum in float32 for 16-bit,
    their dtype otherwise."""
    dims = [self.ndim - 1 - i for i in range(len(padding) // 2)]
    sources = {
        dim: source_of(np.arange(grad_output.shape[dim]) - padding[2 * i], self.shape[dim])
        for i, dim in enumerate(dims)
    }
    if self.dtype in (jnp.bfloat16, jnp.float16) and self.size and grad_output.size:
        runs = [runs_of(sources[dim][None, :] == np.arange(self.shape[dim])[:, None]) for dim in sorted(dims)]
        return sum_runs_in_order(grad_output.astype(self.dtype), runs)
    grad = grad_output
    for dim in dims:
        moved = jnp.moveaxis(grad, dim, 0)
        summed = jnp.zeros((self.shape[dim], *moved.shape[1:]), grad.dtype)
        summed = summed.at[jnp.asarray(sources[dim])].add(moved, mode="promise_in_bounds")
        grad = jnp.moveaxis(summed, 0, dim)
    return grad


@lowering(aten.stack.default)
def stack(tensors, dim=0):
    dtype = jnp.result_type(*tensors)
    return jnp.stack([t.astype(dtype) for t in tensors], axis=dim % (tensors[0].ndim + 1))


@lowering(prims.convert_element_type.default)
def convert_element_type(a, dtype):
    """Dtype conversion inside a graph; the registry casts to the result dtype."""
    return a


@lowering(aten._to_copy.default)
def to_copy(self, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    """Tensor.to(dtype) inside a graph; the registry casts to the result dtype."""
    return self


@lowering(aten.copy.default)
def copy(self, src, non_blocking=False):
    """Functional copy_: ``src`` broadcast to ``self``'s shape (and cast to its dtype by the registry)."""
    return jnp.broadcast_to(src, self.shape)


@lowering(aten.tril.default)
def tril(self, diagonal=0):
    return jnp.tril(self, diagonal)


@lowering(aten.triu.default)
def triu(self, diagonal=0):
    return jnp.triu(self, diagonal)


@lowering(prims.broadcast_in_dim.default)
def broadcast_in_dim(a, shape, broadcast_dimensions):
    return jax.lax.broadcast_in_dim(a, tuple(shape), tuple(broadcast_dimensions))
