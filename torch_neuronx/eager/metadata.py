"""Queries of tensor metadata that ATen answers with a kernel per device (CPU, CUDA, MPS) and no
data access: neuron's answer them from the same TensorImpl and StorageImpl fields.

Without a kernel of its own such an op reached the CPU fallback, which asked its question of host
copies: ``t1.is_set_to(t2)`` was False for two tensors sharing one storage (``t2.set_(t1)``), since
the copies each have their own.
"""

from __future__ import annotations

import torch

from torch_neuronx._compat.torch_internals import storage_identity

aten = torch.ops.aten


def is_set_to(self: torch.Tensor, tensor: torch.Tensor) -> bool:
    """``Tensor.is_set_to``: whether both tensors view the same storage with the same storage offset,
    sizes and strides (ATen's rule; two tensors that each own an empty storage are not)."""
    return (
        storage_identity(self) == storage_identity(tensor)
        and self.storage_offset() == tensor.storage_offset()
        and self.shape == tensor.shape
        and self.stride() == tensor.stride()
    )


KERNELS = {aten.is_set_to.default: is_set_to}
