"""Copies between the host and the cores, and between cores (``Tensor.copy_``, ``.to()``, ``.cpu()``).

``copy_`` reaches ``_copy_from(src, dst)`` for any neuron side. A host-to-device copy never aliases
the host memory; a device-to-host copy is a synchronisation point (it waits for the source's core and
raises any pending device fault); dtype conversions follow ``copy_`` (a plain cast). Float64 sources
are cast on the host, so no FP64 value ever reaches a core.
"""

from __future__ import annotations

import torch

from torch_neuronx.eager import tracking
from torch_neuronx.runtime import buffers
from torch_neuronx.runtime.dtypes import convert, numpy_to_torch

aten = torch.ops.aten


def _copy_from(source: torch.Tensor, destination: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """``destination.copy_(source)`` where at least one side is a neuron tensor."""
    tracking.executed["aten::_copy_from"] += 1
    if destination.numel() == 0:
        return destination
    if source.device.type == "cpu":
        host = source.to(destination.dtype) if source.dtype != destination.dtype else source
        value = buffers.host_to_device(host.expand(destination.shape), destination.device.index)
        buffers.write(destination, value)
    elif destination.device.type == "cpu":
        destination.copy_(numpy_to_torch(buffers.device_to_host(source)).reshape(source.shape))
    else:
        value = buffers.transfer(buffers.read(source), destination.device.index)
        buffers.write(destination, convert(value, buffers.view_of(destination).dtype))
    return destination


def _copy_from_and_resize(source: torch.Tensor, destination: torch.Tensor) -> torch.Tensor:
    if destination.shape != source.shape:
        destination.resize_(source.shape)
    return _copy_from(source, destination)


KERNELS = {
    aten._copy_from.default: _copy_from,
    aten._copy_from_and_resize.default: _copy_from_and_resize,
}
