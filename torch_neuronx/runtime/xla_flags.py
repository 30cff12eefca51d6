"""The XLA flag that keeps ``a * b + c`` two roundings, as eager and inductor compute it.

XLA's CPU code generator lets LLVM fuse any float multiply feeding an add into one fused
multiply-add (``FPOpFusion::Fast``, set unconditionally) wherever the host has FMA instructions, and
it drops optimization barriers before fusion, so no lowering can keep the product rounded. Eager
PyTorch rounds the product, and inductor compiles its CPU kernels with ``-ffp-contract=off``
(``torch._inductor.config.cpp.enable_floating_point_contract_flag``) to match eager. Contracted,
23% of randn float32 elements of ``a * b + c`` were one ulp off and ``x * p + x * q`` gave ``-inf``
where ``x * p`` overflows (eager: ``inf + -inf``, NaN).

The one switch XLA has is ``--xla_cpu_max_isa=AVX``: its CPU feature filter drops the FMA and AVX2
features for that ISA (``ShouldEnableX86CpuFeature`` in XLA's ``cpu_features.cc``), so LLVM has no
fused instruction to contract into. XLA reads ``XLA_FLAGS`` once per process, when the first client
is made, so :func:`request_separate_rounding` runs at ``import torch`` (before PyTorch's test files
or a user's script create JAX's client) and :func:`check_separate_rounding` probes the device at
start and warns where the flag came too late. A user's own ``--xla_cpu_max_isa`` is left as set.
Cost on the compiled Llama decoder (bench/llama_decoder.py): docs/compile.md.
"""

from __future__ import annotations

import os
import platform
import warnings
from typing import Any

import numpy as np

_FLAG_NAME = "--xla_cpu_max_isa"
#: The newest x86 ISA without FMA: 256-bit float vectors, separate multiply and add.
_SEPARATE_ROUNDING_FLAG = f"{_FLAG_NAME}=AVX"

#: XLA_FLAGS before :func:`request_separate_rounding` changed it (None: unchanged or unset).
_original_flags: str | None = None
_changed = False


def request_separate_rounding() -> None:
    """Adds ``--xla_cpu_max_isa=AVX`` to ``XLA_FLAGS`` on x86 hosts unless the variable already
    names an ISA; cheap and idempotent (no JAX import). :func:`restore_environment` takes it back
    out once the device's client exists, so child processes see the user's own value."""
    global _original_flags, _changed
    if _changed or platform.machine().lower() not in ("x86_64", "amd64"):
        return
    current = os.environ.get("XLA_FLAGS")
    if current is not None and _FLAG_NAME in current:
        return
    _original_flags = current
    os.environ["XLA_FLAGS"] = f"{current} {_SEPARATE_ROUNDING_FLAG}" if current else _SEPARATE_ROUNDING_FLAG
    _changed = True


def restore_environment() -> None:
    """Puts ``XLA_FLAGS`` back as the user set it; XLA parsed it when the first client was made."""
    global _changed
    if not _changed:
        return
    if _original_flags is None:
        os.environ.pop("XLA_FLAGS", None)
    else:
        os.environ["XLA_FLAGS"] = _original_flags
    _changed = False


def contracts_multiply_add(device: Any) -> bool:
    """Whether executables on ``device`` (a JAX device) fuse ``a * b + c`` into one rounding.

    ``(1 + 2**-12) ** 2`` is ``1 + 2**-11 + 2**-24``, half an ulp above ``1 + 2**-11`` in float32: a
    rounded product ties to even (``1 + 2**-11``) and the sum with ``-(1 + 2**-11)`` is 0; a fused
    multiply-add keeps the ``2**-24``.
    """
    import jax

    factor = jax.device_put(np.full(8, 1 + 2.0**-12, np.float32), device)
    addend = jax.device_put(np.full(8, -(1 + 2.0**-11), np.float32), device)
    result = jax.jit(lambda a, b, c: a * b + c)(factor, factor, addend)
    return bool(np.any(np.asarray(result) != 0))


def check_separate_rounding(device: Any) -> None:
    """Warns once when executables on ``device`` contract multiply-adds although the flag was
    requested here: the process's JAX client was made before ``import torch`` (XLA had read
    ``XLA_FLAGS`` already) or the host is not x86. A user's own ``--xla_cpu_max_isa`` is not
    warned about."""
    user_choice = not _changed and _FLAG_NAME in (os.environ.get("XLA_FLAGS") or "")
    if user_choice or not contracts_multiply_add(device):
        return
    warnings.warn(
        "neuron: XLA contracts a * b + c into fused multiply-adds in this process, so compiled graphs "
        "and adaptive traces may differ from eager and the CPU in the last bit (and give -inf where "
        "eager gives NaN for inf - inf). The device turns this off with XLA_FLAGS=--xla_cpu_max_isa=AVX "
        "at `import torch`; here JAX's CPU client was created before that or the host is not x86. "
        "Import torch before running JAX code, or set XLA_FLAGS=--xla_cpu_max_isa=AVX yourself.",
        stacklevel=1,
    )
