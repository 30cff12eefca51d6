"""``torch.fft`` of float16 tensors, as CUDA computes them (decision 8: dtypes follow CUDA).

Every ``torch.fft`` function is a CompositeImplicitAutograd op whose composite first calls
``promote_type_fft`` (``aten/src/ATen/native/SpectralOps.cpp``): it accepts float16 only on cuda,
meta and xpu tensors and raises "Unsupported dtype Half" on every other device, PrivateUse1
included, above any backend kernel. On CUDA a float16 input is promoted to complex32 (ComplexHalf)
and the result is complex32, or float16 for the transforms with a real result (``irfft``,
``hfft`` and their 2-d and n-d forms).

The kernels here replace those composites on PrivateUse1 and AutogradPrivateUse1 (so autograd
differentiates through the ops they call, as it would through the composite):

- a float16 input of a transform with a real result is computed in float32 (the CPU's and XLA's
  FFT precision) and the result rounded to float16, the dtype CUDA returns;
- a float16 input of a transform with a complex result raises TypeError: that result is complex32,
  which neuron does not hold (XLA has no complex32; docs/usage.md, Dtypes);
- every other input goes to PyTorch's own composite unchanged (``OpOverload.decompose``).

bfloat16 is left to the composite: CUDA refuses it too ("Unsupported dtype BFloat16"). The ``out=``
overloads keep PyTorch's composite, which refuses float16 as on the CPU.
"""

from __future__ import annotations

from typing import Any

import torch

from torch_neuronx._compat.torch_internals import OpOverload

aten = torch.ops.aten

#: Transforms whose result is real (float16 for a float16 input on CUDA).
_REAL_RESULT = ("irfft", "hfft")
#: Transforms whose result is complex (complex32 for a float16 input on CUDA).
_COMPLEX_RESULT = ("fft", "ifft", "rfft", "ihfft")


def _real_result_kernel(op: OpOverload, name: str) -> Any:
    def kernel(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if self.dtype == torch.float16:
            return op.decompose(self.float(), *args, **kwargs).to(torch.float16)
        return op.decompose(self, *args, **kwargs)

    kernel.__name__ = kernel.__qualname__ = f"fft_{name}"
    kernel.__doc__ = (
        f"``torch.fft.{name}``: a float16 input is computed in float32 and the result rounded to float16 "
        "(CUDA's result dtype); other inputs go to PyTorch's composite."
    )
    return kernel


def _complex_result_kernel(op: OpOverload, name: str) -> Any:
    def kernel(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if self.dtype == torch.float16:
            raise TypeError(
                f"torch.fft.{name} on neuron: the result of a float16 input is complex32 (ComplexHalf), as "
                "on CUDA, and neuron does not hold complex32 (XLA has no such type; docs/usage.md, Dtypes). "
                "Convert the input with .float() for a complex64 result"
            )
        return op.decompose(self, *args, **kwargs)

    kernel.__name__ = kernel.__qualname__ = f"fft_{name}"
    kernel.__doc__ = (
        f"``torch.fft.{name}``: TypeError for a float16 input (its result would be complex32); other inputs "
        "go to PyTorch's composite."
    )
    return kernel


def _kernels() -> dict[OpOverload, Any]:
    kernels = {}
    for suffix in ("", "2", "n"):
        for base, make in [(b, _real_result_kernel) for b in _REAL_RESULT] + [
            (b, _complex_result_kernel) for b in _COMPLEX_RESULT
        ]:
            name = base + suffix
            op = getattr(aten, f"fft_{name}").default
            kernels[op] = make(op, name)
    return kernels


#: The default overload of every torch.fft transform -> its kernel, for PrivateUse1 and
#: AutogradPrivateUse1.
KERNELS = _kernels()
