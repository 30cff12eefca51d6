"""Host staging of the tensors of a collective: one copy to the host before gloo runs, none back.

A collective on neuron tensors runs ``ProcessGroupGloo`` on host copies of them (decision 15). The
copy to the host is a host read of the tensor (``runtime/buffers.device_to_host``): it waits for
every earlier launch on the tensor's core, so the collective sees all earlier work of the current
stream (every stream of a core shares the core's queue, decision 10). The host tensor is contiguous
and owned by this call, since gloo writes into it; the copy back makes that host memory the neuron
tensor's new buffer (no copy, ``buffers.host_to_device_adopting``), or writes it into the tensor's
view of its buffer, which binds a new buffer that every later launch reads.

The dtypes are NCCL's (``getNcclDataType`` in ProcessGroupNCCL.cpp), which CUDA code is written
for: others raise its ``TypeError``, float8 travels as its bytes (gloo has no float8; NCCL sends it
as uint8) and is refused in reductions with NCCL's words. Complex tensors reach the group as their
``view_as_real`` pairs, as they reach NCCL, except in the collectives of :data:`NO_COMPLEX`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from torch_neuronx import runtime
from torch_neuronx._compat.aten_checks import scalar_type_name
from torch_neuronx._compat.torch_internals import version_counter_kept
from torch_neuronx.runtime import buffers, storage_writes

__all__ = ["NO_COMPLEX", "check_tensors", "copy_back", "empty_host", "nbytes", "to_host", "wire_dtype"]

_FLOAT8 = frozenset({torch.float8_e5m2, torch.float8_e4m3fn, torch.float8_e5m2fnuz, torch.float8_e4m3fnuz})
#: NCCL's dtypes (ProcessGroupNCCL.cpp, ``ncclDataType``), and the complex ones it takes as real pairs.
_NCCL_DTYPES = frozenset(
    {
        torch.int8,
        torch.uint8,
        torch.float32,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.bool,
        torch.bfloat16,
        torch.complex64,
        torch.complex32,
        *_FLOAT8,
    }
)

#: The collectives whose complex tensors neither c10d (distributed_c10d.py) nor ProcessGroupNCCL
#: views as real pairs (its reduce does, see ``NeuronProcessGroup.reduce``): they reach
#: ``getNcclDataType``, which raises its TypeError, and gloo a bare "Invalid scalar type".
NO_COMPLEX = frozenset({"gather", "reduce_scatter", "reduce_scatter_tensor"})


def check_tensors(
    collective: str,
    tensors: Sequence[torch.Tensor],
    device: int | None = None,
    reduces: bool = False,
    outputs_from: int | None = None,
) -> int:
    """Checks that every tensor of ``collective`` is a dense neuron tensor on one core, of a dtype
    NCCL carries (and reduces, for a collective that ``reduces``), as NCCL checks its tensors, and
    returns that core's index. ``outputs_from``: where the outputs start in ``tensors`` (inputs
    first), so that errors name "input i" or "output j".

    Raises:
        ValueError: a tensor is on another device or is sparse (NCCL raises ValueError too), or the
            tensors are on different cores.
        TypeError: a dtype NCCL has not: "Input tensor data type is not supported for NCCL process
            group: Short" (a complex one too, in the collectives of :data:`NO_COMPLEX`).
        RuntimeError: a float8 tensor in a reduction (NCCL's "Float8 dtypes are not currenlty
            supported for NCCL reductions", its spelling).
    """

    def label(position: int) -> str:
        if outputs_from is None:
            return f"tensor {position}"
        return f"input {position}" if position < outputs_from else f"output {position - outputs_from}"

    for position, tensor in enumerate(tensors):
        if tensor.device.type != "neuron" or tensor.layout != torch.strided:
            dense = " (tensor.to_dense() for a sparse one)" if tensor.layout != torch.strided else ""
            if tensor.device.type != "neuron" and any(other.device.type == "neuron" for other in tensors):
                advice = (
                    "the others are neuron tensors, and one call's tensors must all be on neuron: move it with "
                    f"tensor.to('neuron'){dense}"
                )
            else:
                advice = (
                    f"tensors must be neuron and dense: move it with tensor.to('neuron'){dense}, or give CPU "
                    "tensors to a group created with backend 'cpu:gloo,neuron:neuron'"
                )
            raise ValueError(
                f"neuron {collective}: {label(position)} is a {tensor.layout} tensor on {tensor.device}; {advice}"
            )
        if device is None:
            device = tensor.device.index
        elif tensor.device.index != device:
            raise ValueError(
                f"neuron {collective}: tensor {position} is on neuron:{tensor.device.index} but the others "
                f"are on neuron:{device}; a process's tensors of one collective must be on one NeuronCore"
            )
    for tensor in tensors:
        if tensor.dtype not in _NCCL_DTYPES or (tensor.is_complex() and collective in NO_COMPLEX):
            raise TypeError(
                f"Input tensor data type is not supported for NCCL process group: {scalar_type_name(tensor.dtype)}"
            )
        if reduces and tensor.dtype in _FLOAT8:
            raise RuntimeError("Float8 dtypes are not currenlty supported for NCCL reductions")
    # The copy back may be the process's first device write: tensors made with torch.empty alone
    # have not started the runtime (cores.core would find no core).
    runtime.start()
    # Earlier async writes into these tensors land, or raise their failure, before the ranks agree
    # on this call: raised when staging, after the agreement, the others waited for this rank until
    # the timeout and the group stayed broken (helper-80).
    storage_writes.wait_for_writes_into(tensors)
    return -1 if device is None else device


def wire_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype gloo carries a tensor of ``dtype`` in: float8 as its bytes."""
    return torch.uint8 if dtype in _FLOAT8 else dtype


def to_host(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous CPU tensor holding a copy of ``tensor`` (one device-to-host copy), owned by the
    caller: gloo may write into it, and a core can adopt it afterwards (``copy_back``). Waits for the
    earlier work of ``tensor``'s core."""
    host = empty_host(tensor)
    if tensor.is_conj() or tensor.is_neg():
        # The copy applies the lazy conjugate / negative bit; not a sync debug point (collectives are not).
        host.view(tensor.dtype).copy_(tensor, non_blocking=True)
        return host
    value = np.ascontiguousarray(buffers.device_to_host(tensor, synchronizing=False))
    np.copyto(host.view(-1).view(torch.uint8).numpy(), value.reshape(-1).view(np.uint8))
    return host


def empty_host(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous CPU tensor of ``tensor``'s shape and dtype (float8's bytes: uint8), for gloo to
    write a result into, in memory a core can adopt without a copy (``buffers.empty_adoptable``)."""
    return buffers.empty_adoptable(tuple(tensor.shape), wire_dtype(tensor.dtype))


def copy_back(pairs: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """``destination.copy_(host)`` for each (destination, host) pair, into the destination's own layout
    (non-contiguous views included). Outside autograd, as a c10d kernel's write is: a receive buffer
    may be a leaf that requires grad (pipelining's stage inputs), and the tensor's version counter is
    left as it was, as NCCL's writes leave it (and gloo's but for its all_gather_into_tensor and
    reduce_scatter_tensor, helper-82): a then() callback runs at an async
    collective's call and autograd may save the output for backward before the result lands
    (``a * future.value()[0]``, then ``backward()``; the bump raised "modified by an inplace
    operation", helper-80).

    The host tensors are handed over: each must be owned by the collective and never used again. A
    contiguous one of the destination's dtype and shape becomes the device buffer itself (no copy,
    ``buffers.host_to_device_adopting``), so a collective copies each tensor once, to the host.
    """
    with torch.no_grad():
        for destination, host in pairs:
            if host.dtype != destination.dtype and host.dtype == wire_dtype(destination.dtype):
                host = host.view(destination.dtype)  # float8 came as its bytes
            if (
                host.dtype != destination.dtype
                or host.shape != destination.shape
                or destination.is_conj()
                or destination.is_neg()
            ):
                with version_counter_kept(destination):
                    destination.copy_(host)
                continue
            buffers.write(destination, buffers.host_to_device_adopting(host, destination.device.index))


def nbytes(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes the tensors hold together (what a rank contributes to a collective)."""
    return sum(tensor.numel() * tensor.element_size() for tensor in tensors)
