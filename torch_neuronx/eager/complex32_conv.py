"""Convolutions of complex32 (ComplexHalf) tensors, computed in complex64 and rounded once.

``conv1d/2d/3d`` and ``conv_transpose1d/2d/3d`` are CompositeImplicitAutograd ops whose composite
splits a complex convolution into three real ones (``complex_convolution`` in
``aten/src/ATen/native/Convolution.cpp``: Gauss's trick, ``real = a - b``, ``imag = c - a - b``).
For complex32 those are float16 convolutions and float16 sums, so each part is rounded three
times and the cancellation in ``c - a - b`` turns those roundings into errors of many float16 units
(0.25 in a result near 100, measured on the OpInfo samples). The CPU, the reference for values, has
no complex32 convolution; its complex64 one, rounded, is what the kernels here compute: when input,
weight and bias are all complex32 they are widened to complex64 for PyTorch's composite and the
result is rounded to complex32, CUDA's result dtype. Any other call goes to the composite as it
is (``OpOverload.decompose``), mismatched dtypes raising PyTorch's error.

Each kernel is registered for PrivateUse1 and AutogradPrivateUse1, so autograd differentiates
through the ops it calls, as through the composite.
"""

from __future__ import annotations

from typing import Any

import torch

from torch_neuronx._compat.torch_internals import OpOverload

aten = torch.ops.aten

_CONVOLUTIONS = (
    aten.conv1d.default,
    aten.conv1d.padding,
    aten.conv2d.default,
    aten.conv2d.padding,
    aten.conv3d.default,
    aten.conv3d.padding,
    aten.conv_transpose1d.default,
    aten.conv_transpose2d.input,
    aten.conv_transpose3d.input,
)


def _kernel(op: OpOverload) -> Any:
    def kernel(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *args: Any) -> Any:
        tensors = (input, weight) if bias is None else (input, weight, bias)
        if any(tensor.dtype != torch.complex32 for tensor in tensors):
            return op.decompose(input, weight, bias, *args)
        wide = [None if tensor is None else tensor.to(torch.complex64) for tensor in (input, weight, bias)]
        return op.decompose(*wide, *args).to(torch.complex32)

    name = str(op).removeprefix("aten.")
    kernel.__name__ = kernel.__qualname__ = name.replace(".", "_")
    kernel.__doc__ = f"``aten::{name}``: complex32 computed in complex64, rounded once; else PyTorch's composite."
    return kernel


#: Each convolution overload -> its kernel, for PrivateUse1 and AutogradPrivateUse1.
KERNELS = {op: _kernel(op) for op in _CONVOLUTIONS}
