"""``torch.fft`` of float16 and complex32 tensors, as CUDA computes them (decision 8: dtypes follow CUDA).

Every ``torch.fft`` function is a CompositeImplicitAutograd op whose composite first calls
``promote_type_fft`` (``aten/src/ATen/native/SpectralOps.cpp``): it accepts float16 and complex32
(ComplexHalf) only on cuda, meta and xpu tensors and raises "Unsupported dtype Half" on every other
device, PrivateUse1 included, above any backend kernel. On CUDA a float16 input is promoted to
complex32 and the result is complex32, or float16 for the transforms with a real result (``irfft``,
``hfft`` and their 2-d and n-d forms).

The kernels here replace those composites on PrivateUse1 and AutogradPrivateUse1 (so autograd
differentiates through the ops they call, as it would through the composite): a float16 or
complex32 input is computed in float32/complex64 (the CPU's and XLA's FFT precision) by PyTorch's
composite, and the result rounded to float16 or complex32, CUDA's result dtype; every other input
goes to the composite unchanged (``OpOverload.decompose``). Unlike cuFFT, which computes half
precision only for sizes that are powers of two ("cuFFT only supports dimensions whose sizes are
powers of two when computing in half precision"), any size computes: the values are the CPU's in
float32 rounded, where CUDA's would be a half-precision transform.

bfloat16 is left to the composite: CUDA refuses it too ("Unsupported dtype BFloat16"). The ``out=``
overloads keep PyTorch's composite, which refuses float16 as on the CPU.
"""

from __future__ import annotations

from typing import Any

import torch

from torch_neuronx._compat.torch_internals import OpOverload

aten = torch.ops.aten

#: The transforms (each with its 2-d and n-d forms).
_TRANSFORMS = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
#: The 16-bit input dtypes CUDA transforms -> the dtype the transform computes in here.
_WIDER = {torch.float16: torch.float32, torch.complex32: torch.complex64}
#: The wide result's dtype -> CUDA's result dtype.
_NARROWER = {torch.float32: torch.float16, torch.complex64: torch.complex32}


def _kernel(op: OpOverload, name: str) -> Any:
    def kernel(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        wide = _WIDER.get(self.dtype)
        if wide is None:
            return op.decompose(self, *args, **kwargs)
        result = op.decompose(self.to(wide), *args, **kwargs)
        return result.to(_NARROWER[result.dtype])

    kernel.__name__ = kernel.__qualname__ = f"fft_{name}"
    kernel.__doc__ = (
        f"``torch.fft.{name}``: a float16 or complex32 input is computed in float32/complex64 and the result "
        "rounded to float16 or complex32 (CUDA's result dtype); other inputs go to PyTorch's composite."
    )
    return kernel


def _kernels() -> dict[OpOverload, Any]:
    kernels = {}
    for suffix in ("", "2", "n"):
        for base in _TRANSFORMS:
            name = base + suffix
            op = getattr(aten, f"fft_{name}").default
            kernels[op] = _kernel(op, name)
    return kernels


#: The default overload of every torch.fft transform -> its kernel, for PrivateUse1 and
#: AutogradPrivateUse1.
KERNELS = _kernels()
