"""The entry points of simulation: :func:`simulate_kernel` (legacy NKI) and :func:`simulate`."""

from __future__ import annotations

from typing import Any

from nki import framework, simulation
from nki.kernel import Kernel, jit

__all__ = ["simulate", "simulate_kernel"]


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """Runs ``kernel`` (an ``nki.jit`` kernel, possibly with a grid, or a plain function) on the host
    CPU with numpy arrays; returns its outputs as numpy arrays (legacy ``nki.simulate_kernel``).
    New buffers are filled with NaN; inputs the kernel writes are updated in place.

    Raises:
        NKIError: the kernel breaks a rule (raised before it runs).
    """
    kernel = kernel if isinstance(kernel, Kernel) else jit(kernel)
    return simulation.run(kernel, args, kwargs)


def simulate(kernel: Any):
    """``nki.simulate(kernel)(*arrays)``: the callable that runs ``kernel`` on the host CPU; numpy
    arrays in, numpy arrays out (CPU torch tensors in, CPU torch tensors out)."""
    kernel = kernel if isinstance(kernel, Kernel) else jit(kernel)

    def call(*args: Any, **kwargs: Any) -> Any:
        if any(type(v).__module__.startswith("torch") for v in (*args, *kwargs.values())):
            return framework.simulate_torch(kernel, args, kwargs)
        return simulation.run(kernel, args, kwargs)

    return call
