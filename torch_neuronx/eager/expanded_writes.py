"""In-place writes into tensors whose elements share memory (``expand``, stride 0).

ATen refuses most writes into such a tensor (TensorIterator's "more than one element of the
written-to tensor refers to a single memory location"), and neuron's executables refuse a view with
a dimension of stride 0 (runtime/layout.py). A few ops ATen lets through, on the CPU and CUDA alike:

* ``fill_`` and ``zero_`` (their TensorIterator is built with ``check_mem_overlap(false)``,
  Fill.cpp): every element gets one value, so the result is well defined. ``fill_(value: Tensor)``
  does so only for a ``value`` on another device (CUDA's case for a CPU scalar tensor:
  ``fill_out(self, value.item())``); one on the same device is ``copy_``, which refuses the overlap.
  ``threshold_`` likewise (Activation.cpp: "threshold is idempotent, so overlap is okay"): each
  location's new value depends on its own value alone. Here the op writes the same memory through
  the view without those dimensions. ``threshold.out`` has no overlap check either (it is what
  ``threshold_`` reaches before the device's kernels are registered): each location takes the value
  of its last element in row-major order, as ATen's loop leaves it.
* ``masked_fill_``, ``index_fill_`` and ``index_put_`` warn that the use is deprecated
  (TensorAdvancedIndexing.cpp, cuda/Indexing.cu) and write each element in turn, so a location
  holds what the last element written through it got, and ``index_put_(accumulate=True)`` adds every
  element's contribution into it. Here the op runs on a contiguous copy, and each location takes
  the last written element's value (row-major order) or the sum of the contributions.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

aten = torch.ops.aten

#: The example each op's deprecation warning ends with (ATen's words).
_ADVANCED_INDEXING_EXAMPLE = {
    "masked_fill_": "tensor[mask] = scalar",
    "index_fill_": "tensor[mask] = scalar",
    "index_put_": "tensor[indices] = tensor",
}


def _shared_dims(tensor: torch.Tensor) -> list[int]:
    """The dimensions of ``tensor`` whose elements share memory: size > 1 and stride 0."""
    strides = tensor.stride()
    if 0 not in strides:  # every call comes here: the common case costs one tuple scan
        return []
    return [d for d, (size, stride) in enumerate(zip(tensor.shape, strides, strict=True)) if size > 1 and stride == 0]


def _distinct_locations(tensor: torch.Tensor, shared: list[int]) -> torch.Tensor:
    """``tensor`` with its ``shared`` dimensions cut to size 1: the same memory, each location named once."""
    sizes = [1 if d in shared else size for d, size in enumerate(tensor.shape)]
    return tensor.as_strided(sizes, tensor.stride(), tensor.storage_offset())


def filling_shared_memory(kernel: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``aten::fill_``/``aten::zero_``/``aten::threshold_`` for the eager ``kernel`` that also writes
    a tensor whose elements share memory, as ATen does; returns ``self``."""

    def fill(self: torch.Tensor, *args: Any) -> torch.Tensor:
        shared = _shared_dims(self)
        copies = bool(args) and isinstance(args[0], torch.Tensor) and args[0].device == self.device
        if not shared or copies:
            return kernel(self, *args)
        kernel(_distinct_locations(self, shared), *args)
        return self

    return fill


def _last_written(before: torch.Tensor, after: torch.Tensor, written: torch.Tensor, shared: list[int]) -> torch.Tensor:
    """Per location, ``after`` at the last element (row-major) that ``written`` marks, else ``before``;
    all three of the expanded shape, the result with ``shared`` cut to size 1. Reducing the innermost
    shared dimension first makes the pick lexicographically last over all of them."""
    for d in sorted(shared, reverse=True):
        positions = torch.arange(after.shape[d], device=after.device).view(
            [-1 if k == d else 1 for k in range(after.dim())]
        )
        last = torch.where(written, positions, -1).amax(d, keepdim=True)
        after = after.gather(d, last.clamp(min=0))
        before = before.narrow(d, 0, 1)
        written = last >= 0
    return torch.where(written, after, before)


def _accumulated(before: torch.Tensor, after: torch.Tensor, shared: list[int]) -> torch.Tensor:
    """Per location, its value plus every element's contribution (``after - before``), summed over
    the ``shared`` dimensions; bool adds as logical or, as ``index_put_(accumulate=True)`` does."""
    start = before
    for d in shared:
        start = start.narrow(d, 0, 1)
    if after.dtype == torch.bool:
        return start | after.any(dim=shared, keepdim=True)
    return start + (after - before).sum(dim=shared, keepdim=True, dtype=after.dtype)


def writing_shared_memory(name: str, kernel: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``aten::masked_fill_``, ``aten::index_fill_`` or ``aten::index_put_`` (``name``) for the eager
    ``kernel`` that also writes a tensor whose elements share memory, with ATen's deprecation warning
    (UserWarning: "Use of index_put_ on expanded tensors is deprecated. ..."); returns ``self``.

    Raises:
        The ``kernel``'s own errors (index out of range, a mask that is not bool, ...), which it
        raises for the contiguous copy as it would for ``self``.
    """

    def write(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        shared = _shared_dims(self)
        if not shared:
            return kernel(self, *args, **kwargs)
        before = self.contiguous()
        after = kernel(before.clone(), *args, **kwargs)  # the kernel's checks, on memory it may write
        warnings.warn(
            f"Use of {name} on expanded tensors is deprecated. Please clone() the tensor before performing this "
            f"operation. This also applies to advanced indexing e.g. {_ADVANCED_INDEXING_EXAMPLE[name]}",
            UserWarning,
            stacklevel=2,
        )
        unwritten = torch.zeros(self.shape, dtype=torch.bool, device=self.device)
        if name == "masked_fill_":
            written = unwritten | args[0]
        elif name == "index_fill_":
            written = unwritten.index_fill_(args[0], args[1], True)
        else:
            written = unwritten.index_put_(args[0], torch.ones((), dtype=torch.bool, device=self.device))
        accumulate = name == "index_put_" and (args[2] if len(args) > 2 else kwargs.get("accumulate", False))
        value = _accumulated(before, after, shared) if accumulate else _last_written(before, after, written, shared)
        _distinct_locations(self, shared).copy_(value)
        return self

    return write


def threshold_out_sharing_memory(kernel: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``aten::threshold.out`` for the eager ``kernel`` that also writes an ``out`` whose elements
    share memory, as ATen does (no overlap check): each location holds the result of its last
    element (row-major); returns ``out``."""

    def threshold_out(self: torch.Tensor, threshold: Any, value: Any, *, out: torch.Tensor) -> torch.Tensor:
        shared = _shared_dims(out)
        result = torch.ops.aten.threshold.default(self, threshold, value) if shared else None
        if result is None or result.shape != out.shape:  # the kernel's resize and its errors
            return kernel(self, threshold, value, out=out)
        everywhere = torch.ones(out.shape, dtype=torch.bool, device=out.device)
        _distinct_locations(out, shared).copy_(_last_written(result, result, everywhere, shared))
        return out

    return threshold_out


#: The overloads :func:`writing_shared_memory` wraps, with the name ATen's warning gives.
SHARED_MEMORY_WRITES = {
    aten.masked_fill_.Scalar: "masked_fill_",
    aten.masked_fill_.Tensor: "masked_fill_",
    aten.index_fill_.int_Scalar: "index_fill_",
    aten.index_fill_.int_Tensor: "index_fill_",
    aten.index_put_.default: "index_put_",
    aten._index_put_impl_.default: "index_put_",
}
