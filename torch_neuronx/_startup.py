"""Starts the device at its first use: the runtime, then the eager kernels (decision 1).

``import torch`` only registers the device (``_registration.py``); the PrivateUse1 fallback it
registers is :func:`boxed_fallback`. The first op that reaches it starts the device, here: the
runtime (JAX configured for the cores) and then every eager kernel, after which the op is dispatched
again and reaches its kernel. Later, only ops the device cannot compute reach the fallback, which
runs them on the CPU (eager/fallback.py).
"""

from __future__ import annotations

import threading
from typing import Any

_ready = False
_lock = threading.RLock()

#: Ops whose ATen composite kernel calls a device's DispatchStub itself (``kaiser_window``, in
#: TensorFactories.cpp): before the device starts, the dispatcher runs that composite rather than the
#: fallback that would start it, and the stub has no neuron kernel ("DispatchStub: missing kernel for
#: neuron", an INTERNAL ASSERT). :func:`register_starters` gives them a kernel at ``import torch``
#: that starts the device and dispatches again; the device's own kernels replace it when it starts.
STARTED_BEFORE_COMPOSITE = ("kaiser_window", "kaiser_window.periodic", "kaiser_window.beta")

_starters: list[Any] = []  # the torch.library.Library holding those kernels until the device starts


def ready() -> bool:
    """Whether the device has started: the runtime and the eager kernels."""
    return _ready


def ensure_started() -> None:
    """Starts the runtime and registers the eager kernels, once; later calls return at once.

    Raises:
        ValueError: the core environment variables (or another setting read at start) are malformed.
        RuntimeError: JAX was initialised by other code with too few CPU devices.
    """
    global _ready
    if _ready:
        return
    with _lock:
        if _ready:
            return
        from torch_neuronx import _config, runtime
        from torch_neuronx.eager import registration

        runtime.start()
        for starters in _starters:  # before the device's kernels for the same ops replace them
            starters._destroy()
        _starters.clear()
        registration.register_kernels()
        if _config.nki_sdpa():
            from nki.kernels import sdpa

            sdpa.route_sdpa()
        _ready = True
        if _config.adaptive_eager():
            from torch_neuronx.adaptive import trace

            trace.record_by_default()


def register_starters() -> None:
    """Registers a PrivateUse1 kernel for each op of :data:`STARTED_BEFORE_COMPOSITE` that starts the
    device and dispatches the call again (to the device's kernel, registered by then)."""
    import torch

    library = torch.library.Library("aten", "IMPL")
    for name in STARTED_BEFORE_COMPOSITE:
        packet, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, packet), overload or "default")
        library.impl(name, _start_then_dispatch(op), "PrivateUse1")
    _starters.append(library)


def _start_then_dispatch(op: Any) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        ensure_started()
        return op(*args, **kwargs)

    return kernel


def boxed_fallback(op: Any, *args: Any, **kwargs: Any) -> Any:
    """The PrivateUse1 fallback (``Library("_", "IMPL").fallback``): starts the device at the first
    op, then hands ops without a neuron kernel to the CPU fallback."""
    if not _ready:
        ensure_started()
        return op(*args, **kwargs)
    from torch_neuronx.eager import fallback
    from torch_neuronx.runtime.cores import device_entry_point

    return device_entry_point(fallback.run_on_cpu)(op, args, kwargs)
