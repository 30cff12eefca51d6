"""The device runtime: cores, storage buffers, executables in flight, device faults.

Started on the first use of the device (the first op that reaches a neuron kernel), not at
``import torch``: that is when JAX is imported and configured and the eager kernels registered.
"""

from __future__ import annotations

import threading

_started = False
_lock = threading.RLock()


def started() -> bool:
    """Whether the runtime has started (JAX configured, kernels registered)."""
    return _started


def ensure_started() -> None:
    """Starts the runtime once; later calls return at once.

    Raises:
        ValueError: the core environment variables are malformed.
        RuntimeError: JAX was initialised by other code with too few CPU devices.
    """
    global _started
    if _started:
        return
    with _lock:
        if _started:
            return
        from torch_neuronx import _C
        from torch_neuronx.runtime import compile_cache, cores

        _C._note_runtime_started()
        cores.configure()
        compile_cache.configure()
        from torch_neuronx.eager import registration

        registration.register_kernels()
        _started = True
