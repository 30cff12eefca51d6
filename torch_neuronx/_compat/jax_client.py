"""A PJRT CPU client of the neuron device's own, for a process whose JAX was set up by other code.

JAX creates its default CPU client once, with the device count configured at that moment
(``jax_num_cpu_devices``). Code that touched JAX before the neuron device was first used (PyTorch's
test files probe JAX for TPUs, a user script runs JAX) leaves it with one device. The neuron cores
then run on a client made for them: ``jaxlib.xla_client.make_cpu_client`` is what JAX's own CPU
backend factory calls, and arrays and executables placed on its devices work with ``jax.jit`` and
``jax.device_put`` like those of the default client. It lives here because it is jaxlib's client
API, not JAX's public one.
"""

from __future__ import annotations

import jax

__all__ = ["private_cpu_devices"]


def private_cpu_devices(count: int) -> list[jax.Device]:
    """``count`` CPU devices of a new PJRT client (asynchronous dispatch, like JAX's default).

    Raises:
        RuntimeError: jaxlib cannot create the client (its message says why).
    """
    from jaxlib import xla_client

    client = xla_client.make_cpu_client(asynchronous=True, num_devices=count)
    return list(client.devices())
