"""Where a tensor's elements lie in its storage: what overlap checks on the host compare (in-place
tensor-list calls, the CPU fallback's shared copies and written arguments, compiled list updates,
async collectives' announced writes, NKI kernels' written arguments).
No JAX here: the CPU fallback imports it while ``import torch`` registers the device."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
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


#: The most bytes a strided span's exact overlap check lists (per span); past it, a span counts
#: as its whole range, first byte to last.
_EXACT_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class Span:
    """Bytes of the storage at device address ``storage``: ``[start, stop)``, all of them, or with
    ``strided`` (element offset, sizes, strides, element bytes) only those a strided view's elements
    cover (a column ``x[:, 0]`` leaves ``x[:, 1]``'s bytes out)."""

    storage: int
    start: int
    stop: int
    strided: tuple[int, tuple[int, ...], tuple[int, ...], int] | None = None

    def overlaps(self, other: Span) -> bool:
        """Whether the two share a byte: exact for ranges, and for strided spans of at most
        :data:`_EXACT_BYTES` bytes; a larger strided span counts as its whole range."""
        if self.storage != other.storage or self.stop <= other.start or other.stop <= self.start:
            return False
        if self.strided is None and other.strided is None:
            return True
        return _intervals_meet(self._intervals(), other._intervals())

    def _intervals(self) -> tuple[np.ndarray, int]:
        """The sorted starts of the byte intervals the span covers and their one length: the range
        itself, or each element's bytes (a strided span of at most :data:`_EXACT_BYTES` bytes)."""
        if self.strided is not None:
            offset, sizes, strides, itemsize = self.strided
            if math.prod(sizes) * itemsize <= _EXACT_BYTES:
                elements = np.full((), offset, np.int64)
                for size, stride in zip(sizes, strides, strict=True):
                    elements = np.add.outer(elements, np.arange(size, dtype=np.int64) * stride)
                return np.sort(elements.reshape(-1)) * itemsize, itemsize
        return np.array([self.start], np.int64), self.stop - self.start


def _intervals_meet(mine: tuple[np.ndarray, int], theirs: tuple[np.ndarray, int]) -> bool:
    """Whether an interval of ``mine`` meets one of ``theirs`` (sorted starts, one length each): of
    my intervals, the last starting at or before each of theirs ends furthest (one length), and the
    first starting after it starts soonest, so those two are the only ones to test."""
    (starts, length), (their_starts, their_length) = mine, theirs
    before = np.searchsorted(starts, their_starts, side="right") - 1
    reaches_in = (before >= 0) & (starts[np.maximum(before, 0)] + length > their_starts)
    after = np.minimum(before + 1, starts.size - 1)
    starts_in = (before + 1 < starts.size) & (starts[after] < their_starts + their_length)
    return bool(np.any(reaches_in | starts_in))


def span_of(tensor: torch.Tensor) -> Span | None:
    """The bytes of its storage that ``tensor``'s elements reach (None for an empty tensor)."""
    if tensor.numel() == 0:
        return None
    start, stop = byte_span(tensor)
    itemsize = tensor.element_size()
    strided = None
    if tensor.numel() * itemsize != stop - start:  # gaps between its elements
        strided = (tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()), itemsize)
    return Span(tensor.untyped_storage().data_ptr(), start, stop, strided)
