"""``torch.jit.load(..., map_location="neuron")`` of a graph holding Python floats.

The tracer records a Python float in a graph as a 0-dim float64 CPU tensor constant (``x * 2.5``:
``Double(device=cpu) = prim::Constant[value={2.5}]``). ``map_location`` moves every tensor of the
archive to the device it names, constants included, and neuron, which has no FP64 (the FP64 policy),
refuses the float64 ones, so the load raised the policy's ``TypeError``; on CUDA the constant moves.
Here a ``map_location`` naming a neuron core loads the archive where it was saved and then moves
the module's parameters and buffers to that core (``ScriptModule.to``): a graph's 0-dim CPU
constants stay on the host, where PyTorch takes them as scalars beside neuron tensors. Any other
``map_location`` loads as PyTorch wrote it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch


def install() -> None:
    """Wraps ``torch.jit.load`` (idempotent)."""
    if getattr(torch.jit.load, "_neuron_keeps_host_constants", False):
        return
    torch.jit.load = _moving_to_neuron(torch.jit.load)


def _neuron_device(map_location: Any) -> torch.device | None:
    if isinstance(map_location, (str, torch.device)):
        device = torch.device(map_location)
        if device.type == "neuron":
            return device
    return None


def _moving_to_neuron(load: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(load)
    def jit_load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        device = _neuron_device(map_location)
        if device is None:
            return load(f, map_location, *args, **kwargs)
        return load(f, None, *args, **kwargs).to(device)

    jit_load._neuron_keeps_host_constants = True  # type: ignore[attr-defined]
    return jit_load
