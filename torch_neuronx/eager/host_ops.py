"""Ops whose result goes to the host or whose output shape depends on device data.

Each one is a synchronisation point: it waits for the values it needs (raising any pending device
fault), then continues with a shape that is known.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_neuronx.eager import tracking
from torch_neuronx.runtime import buffers

aten = torch.ops.aten


def _local_scalar_dense(tensor: torch.Tensor) -> Any:
    """``Tensor.item()``."""
    tracking.executed["aten::_local_scalar_dense"] += 1
    return buffers.device_to_host(tensor).item()


def _nonzero(tensor: torch.Tensor) -> torch.Tensor:
    """``torch.nonzero``: indices of the nonzero elements, shape (count, dim), int64, row-major order."""
    tracking.executed["aten::nonzero"] += 1
    if tensor.numel() == 0:
        return torch.zeros((0, tensor.dim()), dtype=torch.int64, device=tensor.device)
    mask = tensor != 0
    count = int(mask.sum().item())
    if tensor.dim() == 0:
        return torch.zeros((count, 0), dtype=torch.int64, device=tensor.device)
    flat_positions = torch.arange(tensor.numel(), device=tensor.device)
    selected = torch.sort(torch.where(mask.reshape(-1), flat_positions, tensor.numel())).values[:count]
    coordinates = []
    for size in reversed(tensor.shape):
        coordinates.append(torch.remainder(selected, size))
        selected = torch.div(selected, size, rounding_mode="floor")
    return torch.stack(coordinates[::-1], dim=1) if coordinates else selected.reshape(count, 0)


def _masked_select(tensor: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``torch.masked_select``: the elements where the broadcast mask is true, as a 1-D tensor."""
    tracking.executed["aten::masked_select"] += 1
    tensor, mask = torch.broadcast_tensors(tensor, mask)
    return tensor.reshape(-1)[_nonzero(mask.reshape(-1)).reshape(-1)]


def _equal(tensor: torch.Tensor, other: torch.Tensor) -> bool:
    """``torch.equal``: same shape and same values."""
    tracking.executed["aten::equal"] += 1
    if tensor.shape != other.shape:
        return False
    return bool(torch.eq(tensor, other).all().item())


def index_with_masks(kernel: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``aten::index.Tensor`` that accepts boolean masks (``x[mask]``), for the eager ``kernel``.

    A k-dimensional mask selects the positions where it is true, so the result's length depends on
    the data: each mask becomes k int64 index tensors (its ``nonzero`` coordinates, a
    synchronisation point) and the integer indexing runs on the device.
    """

    def index(self: torch.Tensor, indices: list[torch.Tensor | None]) -> torch.Tensor:
        if not any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices):
            return kernel(self, indices)
        converted: list[torch.Tensor | None] = []
        for index_tensor in indices:
            if index_tensor is None or index_tensor.dtype not in (torch.bool, torch.uint8):
                converted.append(index_tensor)
                continue
            start = len(converted)
            for offset, size in enumerate(index_tensor.shape):
                if start + offset >= self.dim() or self.shape[start + offset] != size:
                    raise IndexError(
                        f"The shape of the mask {list(index_tensor.shape)} at index {offset} does not match the "
                        f"shape of the indexed tensor {list(self.shape)} at index {start + offset}"
                    )
            mask = index_tensor.to(self.device)
            converted.extend(_nonzero(mask).unbind(1) if mask.dim() else [mask.reshape(1).nonzero().reshape(-1)])
        return kernel(self, converted)

    return index


KERNELS = {
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.nonzero.default: _nonzero,
    aten.masked_select.default: _masked_select,
    aten.equal.default: _equal,
}
