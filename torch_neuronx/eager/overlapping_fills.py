"""Fills of tensors whose elements share memory (``expand``, stride 0).

ATen lets ``fill_`` and ``zero_`` write a tensor whose elements overlap (its TensorIterator is built
with ``check_mem_overlap(false)``, Fill.cpp): every element gets the same value, so the result is
well defined. ``fill_(value: Tensor)`` does so only for a ``value`` on another device (CUDA's case
for a CPU scalar tensor: ``fill_out(self, value.item())``); one on the same device is ``copy_``,
which refuses the overlap, on the CPU and CUDA alike, and here too. Neuron's executables write each
element of a view and refuse a view with a dimension of stride 0 (runtime/layout.py), so a fill
here writes the same memory through the view without those dimensions, which names every location
once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _distinct_locations(tensor: torch.Tensor) -> torch.Tensor | None:
    """``tensor`` with its stride-0 dimensions of size > 1 cut to size 1 (the same memory, each
    location named once), or None when it has none."""
    strides = tensor.stride()
    if 0 not in strides:  # every fill_/zero_ comes here: the common case costs one tuple scan
        return None
    shared = [size > 1 and stride == 0 for size, stride in zip(tensor.shape, strides, strict=True)]
    if not any(shared):
        return None
    sizes = [1 if is_shared else size for size, is_shared in zip(tensor.shape, shared, strict=True)]
    return tensor.as_strided(sizes, strides, tensor.storage_offset())


def filling_shared_memory(kernel: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``aten::fill_``/``aten::zero_`` for the eager ``kernel`` that also fills a tensor whose
    elements share memory, as ATen does; returns ``self``."""

    def fill(self: torch.Tensor, *args: Any) -> torch.Tensor:
        distinct = _distinct_locations(self)
        copies = bool(args) and isinstance(args[0], torch.Tensor) and args[0].device == self.device
        if distinct is None or copies:
            return kernel(self, *args)
        kernel(distinct, *args)
        return self

    return fill
