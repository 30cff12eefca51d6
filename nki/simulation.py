"""Running a kernel on the host CPU (``nki.simulate_kernel(kernel, *arrays)``,
``nki.simulate(kernel)(*arrays)``, ``nki.jit(mode="simulation")``), for unit tests of kernels.

The kernel is traced exactly as for the device (same rules, same JAX function) and run by JAX on the
CPU. New buffers are filled with NaN, so an output element nothing wrote reads as NaN. Inputs the
kernel writes are updated in place (numpy arrays must be writeable).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

__all__ = ["rebuild", "run"]


def _start() -> None:
    # JAX must be configured the way the device configures it (64-bit types, one CPU device per
    # NeuronCore) before anything creates its CPU client.
    from torch_neuronx import runtime

    runtime.start()


def rebuild(structure: Any, outputs: list[Any], inputs: list[Any]) -> Any:
    """A kernel's return value from its traced structure, new outputs and (written) inputs."""
    if isinstance(structure, tuple) and len(structure) == 2 and structure[0] in ("output", "input", "constant"):
        kind, value = structure
        if kind == "output":
            return outputs[value]
        if kind == "input":
            return inputs[value]
        return value
    return type(structure)(rebuild(s, outputs, inputs) for s in structure)


def run(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Runs ``kernel`` (an :class:`nki.Kernel`) on the host CPU for numpy arguments; returns numpy
    arrays, and updates the arrays the kernel writes."""
    return run_reporting_writes(kernel, args, kwargs)[0]


def run_reporting_writes(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, list[str]]:
    """:func:`run`, also returning the names of the array arguments the kernel wrote."""
    _start()
    arguments = kernel.bind(args, kwargs)
    signature = kernel.numpy_signature(arguments)
    traced = kernel.trace(signature)
    arrays = [np.asarray(arguments[name]) for name in signature.tensor_names]
    cpu = jax.devices("cpu")[0]
    results = [np.asarray(r) for r in traced.function(*[jax.device_put(a, cpu) for a in arrays])]
    outputs, updates = results[: len(traced.outputs)], results[len(traced.outputs) :]
    for position, value in zip(traced.written, updates, strict=True):
        np.copyto(arrays[position], value)
    written = [signature.tensor_names[position] for position in traced.written]
    return rebuild(traced.returns, outputs, [arguments[n] for n in signature.tensor_names]), written
