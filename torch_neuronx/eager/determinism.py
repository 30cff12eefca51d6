"""Non-determinism alerts that ATen raises on every device, ahead of any device's kernel.

Under ``torch.use_deterministic_algorithms(True)`` an op without a deterministic implementation
raises ``RuntimeError: <op> does not have a deterministic implementation, but you set
'torch.use_deterministic_algorithms(True)'...`` (a warning under ``warn_only=True``). Most of these
alerts are raised by CUDA's kernels for CUDA tensors alone. A few are raised by ATen's
device-independent code, for what the op leaves unspecified rather than for how a kernel computes
it, and so on the CPU and CUDA alike: ``put_`` without ``accumulate`` (duplicate indices write in an
unspecified order; ``put`` and ``put.out`` are ``clone`` and ``put_`` in ATen). Neuron's kernels
replace that code, so each op of :data:`ALERTS` raises its alert before its kernel runs.

PyTorch's Python meta kernels raise two of CUDA's kernel alerts themselves (``histc`` of floats,
``median`` with indices), for any tensor whose device they take for CUDA: a meta tensor's
(``torch._meta_registrations.device_hint``). The eager layer's meta calls describe neuron tensors,
whose kernels for those ops are deterministic, so :data:`describing_neuron_tensors` keeps those
alerts out of them; without it the first call of ``histc`` raised under deterministic algorithms
and later calls, whose executable was cached, did not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_neuronx._compat.torch_internals import OpOverload, alert_not_deterministic, skip_meta_alerts
from torch_neuronx.runtime.thread_flags import ThreadFlag

aten = torch.ops.aten


def _put_without_accumulate(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    # put(self, index, source, accumulate=False): ATen's put_ alerts unless it accumulates. CUDA
    # alerts for accumulate too, for its kernel's atomic adds: a CUDA kernel's alert, which PyTorch's
    # own tests expect on CUDA alone.
    accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
    return None if accumulate else "put_"


#: Overloads whose ATen implementation alerts on every device, each with a function of the call's
#: arguments that names the alert's caller (ATen's words), or None when the call does not alert.
ALERTS: dict[OpOverload, Callable[[tuple[Any, ...], dict[str, Any]], str | None]] = {
    aten.put.default: _put_without_accumulate,
    aten.put.out: _put_without_accumulate,
    aten.put_.default: _put_without_accumulate,
}


def alerting(op: OpOverload, kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel`` for ``op``, raising ATen's non-determinism alert for ``op``'s calls that alert
    while deterministic algorithms are on (a warning under ``warn_only=True``, then the kernel)."""
    caller_of = ALERTS[op]

    def alerting_kernel(*args: Any, **kwargs: Any) -> Any:
        if torch.are_deterministic_algorithms_enabled():
            caller = caller_of(args, kwargs)
            if caller is not None:
                alert_not_deterministic(caller)
        return kernel(*args, **kwargs)

    return alerting_kernel


#: The alerts PyTorch's meta kernels raise for CUDA's kernels (their callers' words).
CUDA_KERNEL_ALERTS = frozenset({"_histc_cuda with floating point input", "median CUDA with indices output"})

#: Raised while meta calls in this thread describe neuron tensors: :data:`CUDA_KERNEL_ALERTS` are not raised.
describing_neuron_tensors = ThreadFlag()


def install() -> None:
    """Keeps :data:`CUDA_KERNEL_ALERTS` out of meta calls inside :data:`describing_neuron_tensors`."""
    skip_meta_alerts(lambda caller: caller in CUDA_KERNEL_ALERTS and bool(describing_neuron_tensors))
