"""``nn.DataParallel`` over NeuronCores: the copies ``torch.nn.parallel.comm`` makes between devices.

``nn.DataParallel`` (and ``nn.parallel.replicate``, ``scatter``, ``gather``) picks the accelerator
PyTorch reports (``torch._utils._get_available_device_type``: neuron where its cores are present)
and moves tensors between its devices with ``torch._C._broadcast_coalesced``, ``_scatter`` and
``_gather`` (``torch/nn/parallel/comm.py``). PyTorch defines those only in CUDA builds
(``torch/csrc/cuda/python_comm.cpp``), so on a CPU build with neuron installed every
``DataParallel`` call over two cores raised ``AttributeError: module 'torch._C' has no attribute
'_broadcast_coalesced'``. :func:`install` defines each one that is missing, with CUDA's semantics
and copies between devices of the device type that ``DataParallel`` chose: integer device indices
name cores of that type, -1 the CPU. A CUDA build keeps its own functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["install"]


def _device(index: int | None) -> torch.device:
    """The device an index of ``comm``'s functions names: a core of the available accelerator (the
    current one for None), or the CPU for -1."""
    if index is not None and index < 0:
        return torch.device("cpu")
    device_type = torch._utils._get_available_device_type() or "cpu"
    if index is None:
        return torch.device(device_type, torch._utils._get_device_attr(lambda module: module.current_device()))
    return torch.device(device_type, index)


def _copy_to(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` on ``device``: itself where it already lives there (CUDA's ``broadcast`` and
    ``scatter`` return the source device's tensors without a copy)."""
    return tensor if tensor.device == device else tensor.to(device)


def _broadcast(tensor: torch.Tensor, devices: Sequence[int]) -> list[torch.Tensor]:
    """``tensor`` on each of ``devices`` (comm.broadcast)."""
    return [_copy_to(tensor, _device(index)) for index in devices]


def _broadcast_out(tensor: torch.Tensor, out: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """``tensor`` copied into each of ``out`` (comm.broadcast with ``out=``).

    Raises:
        RuntimeError: an ``out`` tensor of another shape (CUDA's check).
    """
    for target in out:
        if target.shape != tensor.shape:
            raise RuntimeError(
                f"Expected all output tensors to have same shape as the source tensor {tuple(tensor.shape)}, but "
                f"output tensor has shape {tuple(target.shape)}"
            )
        target.copy_(tensor)
    return list(out)


def _broadcast_coalesced(
    tensors: Sequence[torch.Tensor], devices: Sequence[int], buffer_size: int
) -> list[list[torch.Tensor]]:
    """Each of ``tensors`` on each of ``devices``: one list per device, the first device's holding
    ``tensors`` themselves where they live there (comm.broadcast_coalesced; ``buffer_size`` is the
    size of CUDA's coalescing buffers, which copies here need not share)."""
    return [[_copy_to(tensor, _device(index)) for tensor in tensors] for index in devices]


def _chunks(tensor: torch.Tensor, count: int, chunk_sizes: Sequence[int] | None, dim: int) -> list[torch.Tensor]:
    if chunk_sizes is None:
        return list(tensor.chunk(count, dim))
    if sum(chunk_sizes) != tensor.shape[dim]:
        raise RuntimeError(
            f"Expected chunk sizes to sum to {tensor.shape[dim]} (the size of dimension {dim}), but they sum to "
            f"{sum(chunk_sizes)}"
        )
    return list(tensor.split(list(chunk_sizes), dim))


def _scatter(
    tensor: torch.Tensor, devices: Sequence[int], chunk_sizes: Sequence[int] | None, dim: int, streams: object
) -> list[torch.Tensor]:
    """``tensor`` split along ``dim`` (into ``chunk_sizes``, or as evenly as ``chunk`` splits it),
    one chunk on each of ``devices`` (comm.scatter; ``streams`` are CUDA streams, unused)."""
    chunks = _chunks(tensor, len(devices), chunk_sizes, dim)
    return [_copy_to(chunk, _device(index)) for chunk, index in zip(chunks, devices, strict=False)]


def _scatter_out(tensor: torch.Tensor, out: Sequence[torch.Tensor], dim: int, streams: object) -> list[torch.Tensor]:
    """``tensor`` split along ``dim`` into ``out``'s sizes and copied into them (comm.scatter with
    ``out=``)."""
    for target, chunk in zip(out, _chunks(tensor, len(out), [t.shape[dim] for t in out], dim), strict=True):
        target.copy_(chunk)
    return list(out)


def _gather(tensors: Sequence[torch.Tensor], dim: int, destination: int | None) -> torch.Tensor:
    """``tensors`` concatenated along ``dim`` on ``destination`` (comm.gather: a core's index, -1
    for the CPU, None for the current core)."""
    target = _device(destination)
    return torch.cat([_copy_to(tensor, target) for tensor in tensors], dim)


def _gather_out(tensors: Sequence[torch.Tensor], out: torch.Tensor, dim: int) -> torch.Tensor:
    """``tensors`` concatenated along ``dim`` into ``out`` (comm.gather with ``out=``)."""
    return torch.cat([_copy_to(tensor, out.device) for tensor in tensors], dim, out=out)


_FUNCTIONS = {
    "_broadcast": _broadcast,
    "_broadcast_out": _broadcast_out,
    "_broadcast_coalesced": _broadcast_coalesced,
    "_scatter": _scatter,
    "_scatter_out": _scatter_out,
    "_gather": _gather,
    "_gather_out": _gather_out,
}


def install() -> list[str]:
    """Defines each of ``comm``'s ``torch._C`` functions that this build of PyTorch lacks (all of them
    in a CPU build, none in a CUDA one); returns the names defined."""
    defined = []
    for name, function in _FUNCTIONS.items():
        if not hasattr(torch._C, name):
            setattr(torch._C, name, function)
            defined.append(name)
    return defined
