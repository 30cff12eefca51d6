"""The Neuron Kernel Interface (NKI) for the emulated NeuronCore.

``@nki.jit`` kernels written with ``nki.language`` (``nl``) and ``nki.isa`` (``nisa``) are traced
once per input signature into a JAX function that runs on the device like any executable; the
hardware's rules (128 partitions, 2 KiB PSUM banks, matmul tile limits, memories, dtypes) are checked
while tracing, with NKI's error names (``nki.errors``). The legacy dialect ``neuronxcc.nki`` is the
same implementation. See docs/nki.md.
"""

from __future__ import annotations

from nki import errors, isa, language, typing
from nki._core.compute import NkiTensor as tensor
from nki.api import simulate, simulate_kernel
from nki.kernel import Kernel, jit

__all__ = [
    "Kernel",
    "baremetal",
    "benchmark",
    "errors",
    "isa",
    "jit",
    "language",
    "simulate",
    "simulate_kernel",
    "tensor",
    "trace",
    "typing",
]

#: ``@nki.trace`` marks a function called from kernels (a sub-kernel): the same as :func:`jit`;
#: called from a kernel it runs inline, in the caller's trace.
trace = jit

__version__ = "0.1.0"


def baremetal(kernel=None, **options):
    """``nki.baremetal``: a kernel that runs on the device for numpy arrays (the default of
    :func:`jit` for numpy calls here); returns numpy arrays."""
    if kernel is None:
        return lambda k: baremetal(k, **options)
    return jit(kernel, mode="baremetal", **options)


def benchmark(kernel=None, **options):
    """``nki.benchmark`` measures latency on hardware profiles; the emulation has none."""
    raise NotImplementedError(
        "nki.benchmark measures hardware latency, which the emulated NeuronCore does not model; time the "
        "kernel with torch.neuron.synchronize() around calls instead (see docs/nki.md)"
    )
