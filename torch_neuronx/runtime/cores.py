"""The emulated NeuronCores: one PJRT device of JAX's CPU client per core.

There is no Trainium here: XLA through PJRT is the device compiler and runtime (DESIGN.md, "The
stack"). Core ``i`` is JAX CPU device ``i``; JAX is configured for as many CPU devices as there are
visible cores, with 64-bit types enabled (int64 is native, decision 8; every lowering names its
dtypes, so this changes no result).
"""

from __future__ import annotations

import functools

import jax

from torch_neuronx import _C


def configure() -> None:
    """Configures JAX for the visible cores. Must run before JAX creates its CPU client.

    Raises:
        ValueError: NEURON_RT_VISIBLE_CORES or NEURON_RT_NUM_CORES is malformed.
        RuntimeError: JAX was already initialised by other code with fewer CPU devices.
    """
    error = _C._core_config_error()
    if error:
        raise ValueError(f"neuron: {error}")
    count = _C._device_count()
    jax.config.update("jax_enable_x64", True)
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:
        pass  # the CPU client exists already; checked below
    available = len(jax.devices("cpu"))
    if available < count:
        raise RuntimeError(
            f"neuron: {count} NeuronCores are visible but JAX's CPU client was created with {available} "
            "device(s) before the neuron device was first used. Use the neuron device before running "
            "other JAX code, or set NEURON_RT_NUM_CORES to at most "
            f"{available}."
        )


@functools.cache
def _devices() -> tuple[jax.Device, ...]:
    return tuple(jax.devices("cpu")[: _C._device_count()])


def core(index: int) -> jax.Device:
    """The PJRT device of ``neuron:index``."""
    return _devices()[index]
