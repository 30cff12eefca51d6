"""PyTorch's lazy conjugate and negative bits on neuron tensors.

``x.conj()`` and ``x.conj().imag`` are views that set a bit instead of computing: their storage holds
the conjugate (negation) of their values. PyTorch's Conjugate and Negative dispatch keys resolve the
bit for most ops before they reach a backend, by cloning the input. Two cases reach the backend with
the bit still set, and raw storage values would be wrong there:

- ``_copy_from``, which ``clone`` itself ends in: resolving its input would clone again, forever (a
  stack overflow that killed the process). It is a fallthrough at both keys here, and copy.py
  applies the bits.
- The ops PyTorch lets through because CPU and CUDA kernels read the bits themselves (``addmm``,
  ``dot``, ``vdot``, ``baddbmm``, ``conj_physical``, ...). Their neuron kernels are wrapped by
  :func:`resolving`, which resolves the bits of neuron arguments first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_neuronx._compat.torch_internals import OpOverload, is_fallthrough, schema_of

_KEYS = ("Conjugate", "Negative")

_registered: list[torch.library.Library] = []


def register_copy_fallthroughs() -> None:
    """Lets ``_copy_from`` and ``_copy_from_and_resize`` reach neuron's copy kernels with their bits
    set (only copies involving a non-CPU/CUDA device call them)."""
    if _registered:
        return
    for key in _KEYS:
        library = torch.library.Library("aten", "IMPL", key)
        for name in ("_copy_from", "_copy_from_and_resize"):
            library.impl(name, torch.library.fallthrough_kernel)
        _registered.append(library)


def reaches_backend_with_bits(op: OpOverload) -> bool:
    """Whether PyTorch passes ``op`` through its Conjugate or Negative key without resolving the bits."""
    return any(is_fallthrough(op, key) for key in _KEYS)


def _has_bit(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "neuron" and (value.is_conj() or value.is_neg())


def resolving(op: OpOverload, kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel`` for arguments whose bits are resolved: each neuron tensor with a bit is replaced by
    a resolved copy, and a written argument (in-place ``self``, ``out=``) gets the result copied back
    into it (``copy_`` stores it in the argument's own representation)."""
    arguments = schema_of(op).arguments
    written = frozenset(a.name for a in arguments if a.alias_info is not None and a.alias_info.is_write)
    positional = [a.name for a in arguments if not a.kwarg_only]

    def call(*args: Any, **kwargs: Any) -> Any:
        if not any(_has_bit(v) for v in (*args, *kwargs.values())):
            return kernel(*args, **kwargs)
        named = {**dict(zip(positional, args, strict=False)), **kwargs}
        write_back = []
        for name, value in named.items():
            if _has_bit(value):
                named[name] = value.resolve_conj().resolve_neg()
                if name in written:
                    write_back.append((value, named[name]))
        result = kernel(*[named[n] for n in positional[: len(args)]], **{n: named[n] for n in kwargs})
        for original, resolved in write_back:
            original.copy_(resolved)
            result = original if result is resolved else result
        return result

    return call


def resolve_math_bits(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` with its conjugate and negative bits resolved (computed into a new tensor), or
    ``tensor`` itself when neither is set."""
    if tensor.is_conj():
        tensor = tensor.resolve_conj()
    return tensor.resolve_neg() if tensor.is_neg() else tensor
