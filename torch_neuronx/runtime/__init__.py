"""The device runtime: cores, storage buffers, executables and their launches, device faults.

Started on the first use of the device (``torch_neuronx._startup``), not at ``import torch``: that
is when JAX is imported and configured for the cores. The runtime knows nothing of the layers above
it (lowering, eager, dynamo): they build on it.
"""

from __future__ import annotations

import threading

_started = False
_lock = threading.Lock()


def started() -> bool:
    """Whether the runtime has started (JAX configured for the cores)."""
    return _started


def start() -> None:
    """Starts the runtime once (JAX configured for the visible cores, the persistent executable
    cache opened, glibc's mmap threshold pinned where asked: runtime/host_memory.py); later calls
    return at once.

    Raises:
        ValueError: the core environment variables (or TORCH_NEURONX_PIN_MMAP_THRESHOLD) are malformed.
        RuntimeError: JAX was initialised by other code with too few CPU devices.
    """
    global _started
    if _started:
        return
    with _lock:
        if _started:
            return
        from torch_neuronx import _C
        from torch_neuronx.runtime import compile_cache, cores, host_memory, launch_records

        host_memory.pin_mmap_threshold()  # before XLA allocates its first buffer
        _C._note_runtime_started()
        cores.configure()
        compile_cache.configure()
        launch_records.install()
        _started = True
