"""Views that reinterpret a tensor's bytes as another dtype (``Tensor.view(dtype)``), under the
device's dtype policy (decision 8).

PyTorch's own ``view.dtype`` kernel (CompositeExplicitAutograd) makes the view without asking the
backend, so a neuron tensor viewed as float64 or complex128 existed, and reading a complex128 view
back returned wrong values in every element. The kernel here refuses a dtype the device cannot hold
with the same ``TypeError`` as creating such a tensor, then lets PyTorch's kernel make the view.
"""

from __future__ import annotations

import torch

from torch_neuronx import _C
from torch_neuronx._compat.torch_internals import call_composite_explicit
from torch_neuronx.runtime.dtypes import CODE_OF

aten = torch.ops.aten


def view_dtype(self: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``Tensor.view(dtype)`` on neuron: the same bytes read as ``dtype``, PyTorch's size and stride
    rules.

    Raises:
        TypeError: ``dtype`` is one the device cannot hold (float64, complex128), with
            the dtype policy's message.
    """
    if dtype != self.dtype:
        _C._check_dtype_supported(CODE_OF[dtype], "aten::view.dtype")
    return call_composite_explicit(aten.view.dtype, self, dtype)


KERNELS = {aten.view.dtype: view_dtype}
