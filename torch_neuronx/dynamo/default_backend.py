"""``torch.compile(model)`` on neuron: graphs of neuron tensors compile with ``backend="neuron"``.

PyTorch's default backend, inductor, generates Triton or C++ code for the devices it has code
generators for; given a graph of neuron tensors it failed with ``InductorError: KeyError: 'neuron'``.
``torch.compile(model)`` is how most code (Hugging Face's Trainer, TorchTitan, tutorials) asks for
compilation, so a graph that holds a neuron tensor (an input, or one its ops make) is compiled by
neuron's own backend instead, with a warning once per process that says so; inductor's ``mode`` and
``options`` do not apply to it. Graphs of other devices' tensors go to inductor as before.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["compile_default", "holds_neuron_tensors"]

_warned: list[bool] = []


def _on_neuron(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "neuron"


def holds_neuron_tensors(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> bool:
    """Whether Dynamo's ``graph`` reads or makes a neuron tensor: one of ``example_inputs`` (fake
    tensors) or a node's example value is on the neuron device."""
    if any(_on_neuron(value) for value in example_inputs):
        return True
    for node in graph.graph.nodes:
        values = node.meta.get("example_value")
        flat = values if isinstance(values, (list, tuple)) else (values,)
        if any(_on_neuron(value) for value in flat):
            return True
    return False


def compile_default(
    inductor: Callable[[torch.fx.GraphModule, list[Any]], Any],
    graph: torch.fx.GraphModule,
    example_inputs: list[Any],
) -> Any:
    """The default backend's compiled ``graph``: neuron's (:func:`~torch_neuronx.dynamo.neuron_backend`)
    for a graph that holds neuron tensors, else ``inductor``'s.

    Warns (UserWarning, once per process) when it picks neuron's.
    """
    if not holds_neuron_tensors(graph, example_inputs):
        return inductor(graph, example_inputs)
    if not _warned:
        _warned.append(True)
        warnings.warn(
            "torch.compile: inductor, PyTorch's default backend, has no code generator for the neuron "
            "device, so graphs of neuron tensors compile with backend='neuron' (inductor's mode and "
            "options do not apply). Pass backend='neuron' to choose it explicitly.",
            UserWarning,
            stacklevel=1,  # raised inside Dynamo's compilation: no user frame to point at
        )
    from torch_neuronx.dynamo.backend import neuron_backend

    return neuron_backend(graph, example_inputs)
