"""Copies between the host and the cores, and between cores (``Tensor.copy_``, ``.to()``, ``.cpu()``).

``copy_`` reaches ``_copy_from(src, dst)`` for any neuron side. A host-to-device copy never aliases
the host memory; a device-to-host copy is a synchronisation point (it waits for the source's core and
raises any pending device fault); dtype conversions follow ``copy_`` (a plain cast). Float64 sources
are cast on the host, so no FP64 value ever reaches a core.

Either side may carry PyTorch's lazy conjugate or negative bit (``x.conj()``, ``x.conj().imag``):
its storage then holds the conjugate (negation) of its values. ``_copy_from`` is called for every
copy involving a neuron tensor, below the Conjugate and Negative keys (math_bits.py registers it as
a fallthrough there), so it applies the bits itself: a copy moves values, and the destination's
storage receives them in its own representation.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from torch_neuronx.eager import rules, tracking
from torch_neuronx.runtime import buffers
from torch_neuronx.runtime.dtypes import convert, numpy_to_torch

aten = torch.ops.aten


def _copy_from(source: torch.Tensor, destination: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """``destination.copy_(source)`` where at least one side is a neuron tensor."""
    tracking.executed["aten::_copy_from"] += 1
    if not isinstance(source, torch.Tensor):
        # ``x.copy_(nan)``: the number came as a wrapped 0-d CPU tensor, which the dispatcher hands
        # a Python kernel back as the number; copied as that 0-d CPU tensor, as the CPU does.
        source = torch.tensor(source)
    if source.shape != destination.shape:
        # copy_'s TensorIterator: the destination is an operand too, so sizes are checked against it.
        rules.check_broadcast([destination.shape, source.shape], [destination.shape])
    if destination.numel() == 0:
        return destination
    rules.check_no_partial_overlap(destination, source)
    if source.device.type == "cpu":
        host = source.to(destination.dtype) if source.dtype != destination.dtype else source
        host = host.resolve_conj().resolve_neg()
        if destination.is_conj():
            host = host.conj_physical()
        if destination.is_neg():
            host = host.neg()
        value = buffers.host_to_device(host.expand(destination.shape), destination.device.index)
        buffers.write(destination, value)
    elif destination.device.type == "cpu":
        host = numpy_to_torch(buffers.device_to_host(source, synchronizing=not non_blocking)).reshape(source.shape)
        if source.is_conj():
            host = host.conj_physical()
        if source.is_neg():
            host = host.neg()
        destination.copy_(host)  # the CPU copy applies the destination's own bits
    elif (
        source.is_conj() == destination.is_conj()
        and source.is_neg() == destination.is_neg()
        and buffers.share_whole(source, destination)
    ):
        pass  # a whole-buffer copy on one core: the destination now holds the source's (immutable) buffer
    elif (
        source.dtype == destination.dtype
        and source.is_conj() == destination.is_conj()
        and source.is_neg() == destination.is_neg()
    ):  # the same representation: the elements as stored (a complex32 tensor's pairs, bit for bit)
        buffers.write(destination, buffers.transfer(buffers.read_stored(source), destination.device.index))
    else:
        read = value = buffers.transfer(buffers.read(source), destination.device.index)
        if source.is_conj() != destination.is_conj():
            value = jnp.conj(value)
        if source.is_neg() != destination.is_neg():
            value = -value
        buffers.write(destination, buffers.derived([read], convert(value, buffers.view_of(destination).dtype)))
    return destination


def _copy_from_and_resize(source: torch.Tensor, destination: torch.Tensor) -> torch.Tensor:
    if destination.shape != source.shape:
        destination.resize_(source.shape)
    return _copy_from(source, destination)


KERNELS = {
    aten._copy_from.default: _copy_from,
    aten._copy_from_and_resize.default: _copy_from_and_resize,
}
