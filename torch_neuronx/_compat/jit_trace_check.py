"""``torch.jit.trace``'s output check (``check_trace=True``, its default) for neuron tensors.

After tracing, ``torch.jit._trace._check_trace`` traces the function again, reruns both traces and
the Python function, and compares their outputs widened to float64 (``orig.double()``, complex128
for complex outputs). Devices without FP64 cannot hold those: PyTorch compares MPS outputs in
float32 instead (its ``is_mps`` branch there), and neuron, which has no FP64 either (the FP64 policy),
would raise the policy's ``TypeError`` from a check the user did not write. While that check runs on
neuron tensors, their widening to float64 or complex128 is done on the host: the same exact values,
compared on the CPU. Nothing else changes; a check without neuron tensors runs as PyTorch wrote it.

The widening is a torch function mode (a dispatch mode would also see the ops of the TorchScript
graph the check runs, and the graph's interpreter cannot run under one), and the check's second
trace runs with it suspended: the tracer names values by the Python frames above each op, and the
mode's frame would make the two traces differ, failing the check on that alone.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, _pop_mode_temporarily
from torch.utils import _pytree as pytree

_WIDE = (torch.float64, torch.complex128)
#: The entry points ``_check_trace`` traces again through (module attributes of ``torch.jit``).
_RETRACES = ("trace", "trace_module")
_checking = threading.local()


def install() -> None:
    """Wraps ``torch.jit._trace._check_trace`` and the retrace entry points (idempotent)."""
    trace_module = torch.jit._trace
    if getattr(trace_module._check_trace, "_neuron_widens_on_host", False):
        return
    trace_module._check_trace = _widening_on_host(trace_module._check_trace)
    for name in _RETRACES:
        setattr(torch.jit, name, _suspending_widening(getattr(torch.jit, name)))


def _widening_on_host(check: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(check)
    def check_trace(*args: Any, **kwargs: Any) -> Any:
        if not _holds_neuron_tensors(args, kwargs):
            return check(*args, **kwargs)
        with _WideningOnHost(), _checking_in_this_thread():
            return check(*args, **kwargs)

    check_trace._neuron_widens_on_host = True  # type: ignore[attr-defined]
    return check_trace


def _suspending_widening(trace: Callable[..., Any]) -> Callable[..., Any]:
    """``trace`` that, called from a check in this thread, runs without the widening mode."""

    @functools.wraps(trace)
    def retrace(*args: Any, **kwargs: Any) -> Any:
        if not getattr(_checking, "active", False):
            return trace(*args, **kwargs)
        with _pop_mode_temporarily():
            _checking.active = False
            try:
                return trace(*args, **kwargs)
            finally:
                _checking.active = True

    return retrace


@contextlib.contextmanager
def _checking_in_this_thread() -> Iterator[None]:
    _checking.active = True
    try:
        yield
    finally:
        _checking.active = False


def _holds_neuron_tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether the check's inputs, or the state of a module among its arguments, live on neuron."""
    for leaf in pytree.tree_leaves((args, kwargs)):
        module = getattr(leaf, "__self__", leaf)  # a bound method of the traced module
        if isinstance(module, torch.nn.Module):
            if any(t.device.type == "neuron" for t in module.state_dict(keep_vars=True).values()):
                return True
        elif isinstance(leaf, torch.Tensor) and leaf.device.type == "neuron":
            return True
    return False


class _WideningOnHost(TorchFunctionMode):
    """``neuron_tensor.double()`` and ``neuron_tensor.to(torch.float64 / torch.complex128)`` (the
    widenings the check makes) run on a host copy of the tensor; every other call runs as it would."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (
            args
            and isinstance(args[0], torch.Tensor)
            and args[0].device.type == "neuron"
            and _widens(func, args, kwargs)
        ):
            return func(args[0].cpu(), *args[1:], **kwargs)
        return func(*args, **kwargs)


def _widens(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``func(*args, **kwargs)`` is ``Tensor.double()`` or a ``Tensor.to`` of a float64 or
    complex128 dtype alone (no device)."""
    if func is torch.Tensor.double:
        return True
    if func is not torch.Tensor.to or "device" in kwargs:
        return False
    requested = [
        value for value in (*args[1:], kwargs.get("dtype")) if isinstance(value, (torch.dtype, torch.device, str))
    ]
    return len(requested) == 1 and requested[0] in _WIDE
