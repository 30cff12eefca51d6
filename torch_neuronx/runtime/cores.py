"""The emulated NeuronCores: one PJRT device of JAX's CPU client per core.

There is no Trainium here: XLA through PJRT is the device compiler and runtime (DESIGN.md, "The
stack"). Core ``i`` is JAX CPU device ``i``; JAX is configured for as many CPU devices as there are
visible cores, with 64-bit types enabled (int64 is native, decision 8; every lowering names its
dtypes, so this changes no result). Where other code created JAX's CPU client first, with fewer
devices (PyTorch's test files probe JAX for TPUs at import), the cores get a CPU client of their
own instead (``_compat/jax_client.py``): whoever touched JAX first, the device starts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

from torch_neuronx import _C
from torch_neuronx._compat import jax_client
from torch_neuronx.runtime import xla_flags


def device_entry_point(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as an entry point of device work (eager kernels, the CPU fallback, compiled graphs).

    It runs with JAX's 64-bit types on in the calling thread (``jax.enable_x64``), whatever
    the process's setting: :func:`configure` turns them on, but other code in the process may turn
    them off again (JAX's default), and then ``torch.tensor([2**40]).to("neuron")`` held 0 (JAX
    narrowed the int64 to int32) and traces failed on int64 constants. An exception leaves
    without the note JAX adds to errors raised under a trace ("For simplicity, JAX has removed its
    internal frames ..."): a lowering's argument error is the op's, not JAX's."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            with jax.enable_x64(True):
                return fn(*args, **kwargs)
        except Exception as error:
            notes = getattr(error, "__notes__", None)
            if notes:
                notes[:] = [note for note in notes if _JAX_FILTERING_NOTE not in note]
            raise

    return run


#: What JAX's traceback filtering adds to an exception raised under jax.jit (Python 3.11+ notes).
_JAX_FILTERING_NOTE = "JAX has removed its internal frames"


#: The PJRT devices of the cores, index = core; set by :func:`configure`.
_devices: tuple[jax.Device, ...] = ()


def configure() -> None:
    """Configures JAX for the visible cores and picks their PJRT devices: JAX's default CPU client
    when it has enough devices (it is created here when nothing created it before), else a CPU
    client of the cores' own.

    Raises:
        ValueError: NEURON_RT_VISIBLE_CORES or NEURON_RT_NUM_CORES is malformed.
        RuntimeError: jaxlib could not create the cores' own client.
    """
    global _devices
    error = _C._core_config_error()
    if error:
        raise ValueError(f"neuron: {error}")
    count = _C._device_count()
    jax.config.update("jax_enable_x64", True)
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:
        pass  # other code created the CPU client first; its device count is checked below
    default = jax.devices("cpu")
    if len(default) >= count:
        _devices = tuple(default[:count])
    else:
        _devices = _private_devices(count, len(default))
    xla_flags.check_separate_rounding(_devices[0])
    xla_flags.restore_environment()


def _private_devices(count: int, default_count: int) -> tuple[jax.Device, ...]:
    try:
        return tuple(jax_client.private_cpu_devices(count))
    except RuntimeError as err:
        raise RuntimeError(
            f"neuron: {count} NeuronCores are visible, JAX's CPU client was created by other code with "
            f"{default_count} device(s), and a CPU client for the cores could not be made: {err}. Use the "
            f"neuron device before running other JAX code, or set NEURON_RT_NUM_CORES to at most {default_count}."
        ) from err


def core(index: int) -> jax.Device:
    """The PJRT device of ``neuron:index``."""
    return _devices[index]
