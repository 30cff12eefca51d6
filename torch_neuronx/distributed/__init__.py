"""The ``neuron`` c10d backend (decision 15): torch.distributed collectives on neuron tensors.

``init_process_group("neuron")`` creates a :class:`NeuronProcessGroup`, whose collectives and
point-to-point operations stage neuron tensors to the host and run them with PyTorch's gloo
(docs/distributed.md). Registered when torch is imported (``registration.register``).
"""

from __future__ import annotations

from torch_neuronx.distributed.registration import BACKEND

__all__ = ["BACKEND", "NeuronProcessGroup"]


def __getattr__(name: str) -> object:
    """``NeuronProcessGroup``, imported at first use (its staging imports JAX; ``import torch`` must not)."""
    if name == "NeuronProcessGroup":
        from torch_neuronx.distributed.process_group import NeuronProcessGroup

        return NeuronProcessGroup
    raise AttributeError(f"module 'torch_neuronx.distributed' has no attribute {name!r}")
