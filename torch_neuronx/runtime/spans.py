"""Where a tensor's elements lie in its storage, in bytes: what overlap checks on the host compare
(in-place tensor-list calls, the CPU fallback's shared copies, compiled list updates)."""

from __future__ import annotations

import torch


def byte_span(tensor: torch.Tensor) -> tuple[int, int]:
    """The bytes ``[first, end)`` of its storage that a non-empty tensor's elements reach, from its
    first element to its last (interleaved views' spans overlap). Works on fake tensors too."""
    size = tensor.element_size()
    extent = 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride(), strict=True))
    return tensor.storage_offset() * size, (tensor.storage_offset() + extent) * size
