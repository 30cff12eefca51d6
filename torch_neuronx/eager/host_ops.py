"""Ops whose result goes to the host or whose output shape depends on device data.

Each one is a synchronisation point: it waits for the values it needs (raising any pending device
fault), then continues with a shape that is known.
"""

from __future__ import annotations

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


KERNELS = {
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.nonzero.default: _nonzero,
    aten.masked_select.default: _masked_select,
    aten.equal.default: _equal,
}
