"""Host staging of the tensors of a collective: one copy to the host before gloo runs, none back.

A collective on neuron tensors runs ``ProcessGroupGloo`` on host copies of them (decision 15). The
copy to the host is a host read of the tensor (``runtime/buffers.device_to_host``): it waits for
every earlier launch on the tensor's core, so the collective sees all earlier work of the current
stream (every stream of a core shares the core's queue, decision 10). The host tensor is contiguous
and owned by this call, since gloo writes into it; the copy back makes that host memory the neuron
tensor's new buffer (no copy, ``buffers.host_to_device_adopting``), or writes it into the tensor's
view of its buffer, which binds a new buffer that every later launch reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from torch_neuronx.runtime import buffers

__all__ = ["check_tensors", "copy_back", "empty_host", "nbytes", "to_host"]


def check_tensors(collective: str, tensors: Sequence[torch.Tensor], device: int | None = None) -> int:
    """Checks that every tensor of ``collective`` is a dense neuron tensor on one core, as NCCL checks
    that its tensors are CUDA and dense, and returns that core's index.

    Raises:
        ValueError: a tensor is on another device or is sparse (NCCL raises ValueError too), or the
            tensors are on different cores.
    """
    for position, tensor in enumerate(tensors):
        if tensor.device.type != "neuron" or tensor.layout != torch.strided:
            raise ValueError(
                f"neuron {collective}: tensor {position} is a {tensor.layout} tensor on {tensor.device}; "
                "tensors must be neuron and dense: move it with tensor.to('neuron') (tensor.to_dense() "
                "for a sparse one), or give CPU tensors to a group created with backend "
                "'cpu:gloo,neuron:neuron'"
            )
        if device is None:
            device = tensor.device.index
        elif tensor.device.index != device:
            raise ValueError(
                f"neuron {collective}: tensor {position} is on neuron:{tensor.device.index} but the others "
                f"are on neuron:{device}; a process's tensors of one collective must be on one NeuronCore"
            )
    return -1 if device is None else device


def to_host(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous CPU tensor holding a copy of ``tensor`` (one device-to-host copy), owned by the
    caller: gloo may write into it, and a core can adopt it afterwards (``copy_back``). Waits for the
    earlier work of ``tensor``'s core."""
    host = empty_host(tensor)
    if tensor.is_conj() or tensor.is_neg():
        host.copy_(tensor)  # the copy applies the lazy conjugate / negative bit
        return host
    value = np.ascontiguousarray(buffers.device_to_host(tensor))
    np.copyto(host.view(-1).view(torch.uint8).numpy(), value.reshape(-1).view(np.uint8))
    return host


def empty_host(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous CPU tensor of ``tensor``'s shape and dtype, for gloo to write a result into, in
    memory a core can adopt without a copy (``buffers.empty_adoptable``)."""
    return buffers.empty_adoptable(tuple(tensor.shape), tensor.dtype)


def copy_back(pairs: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """``destination.copy_(host)`` for each (destination, host) pair, into the destination's own layout
    (non-contiguous views included). Outside autograd, as a c10d kernel's write is: a receive buffer
    may be a leaf that requires grad (pipelining's stage inputs).

    The host tensors are handed over: each must be owned by the collective and never used again. A
    contiguous one of the destination's dtype and shape becomes the device buffer itself (no copy,
    ``buffers.host_to_device_adopting``), so a collective copies each tensor once, to the host.
    """
    with torch.no_grad():
        for destination, host in pairs:
            if (
                host.dtype != destination.dtype
                or host.shape != destination.shape
                or destination.is_conj()
                or destination.is_neg()
            ):
                destination.copy_(host)
                continue
            buffers.write(destination, buffers.host_to_device_adopting(host, destination.device.index))
            torch.autograd.graph.increment_version(destination)  # as copy_ does: autograd sees the write


def nbytes(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes the tensors hold together (what a rank contributes to a collective)."""
    return sum(tensor.numel() * tensor.element_size() for tensor in tensors)
