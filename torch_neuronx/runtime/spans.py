"""Where a tensor's elements lie in its storage: what overlap checks on the host compare (in-place
tensor-list calls, the CPU fallback's shared copies and written arguments, compiled list updates).
No JAX here: the CPU fallback imports it while ``import torch`` registers the device."""

from __future__ import annotations

import torch


def byte_span(tensor: torch.Tensor) -> tuple[int, int]:
    """The bytes ``[first, end)`` of its storage that a non-empty tensor's elements reach, from its
    first element to its last (interleaved views' spans overlap). Works on fake tensors too."""
    size = tensor.element_size()
    extent = 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride(), strict=True))
    return tensor.storage_offset() * size, (tensor.storage_offset() + extent) * size


#: ATen's ``assert_no_internal_overlap`` (MemoryOverlap.cpp): a written view whose elements share
#: memory (a dimension of size > 1 and stride 0, as ``expand`` makes).
INTERNAL_OVERLAP_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)


def refers_twice(sizes, strides) -> bool:
    """Whether two elements of a view share memory as ATen's ``has_internal_overlap`` sees it: a
    dimension of size > 1 and stride 0 (as ``expand`` makes) in a non-empty view (ATen takes an
    empty one for contiguous); other overlaps are "too hard" for ATen and allowed."""
    if 0 in tuple(sizes):
        return False
    return any(size > 1 and stride == 0 for size, stride in zip(sizes, strides, strict=True))
