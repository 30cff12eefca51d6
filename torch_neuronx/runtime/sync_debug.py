"""Warn or raise where the host waits for a NeuronCore: ``torch.neuron.set_sync_debug_mode``.

CUDA's rule (``c10::cuda::warn_or_error_on_sync``, called by ``memcpy_and_sync`` and
``stream_synchronize``): in mode 1 a synchronizing operation warns "called a synchronizing CUDA
operation", in mode 2 it raises RuntimeError with those words; mode 0 does nothing. The operations
that check here are the ones where the host waits for the device's values or queue: a host read of a
neuron tensor (``.item()``, ``bool(t)``, ``.tolist()``, a blocking copy to the CPU, and the ops whose
output size depends on values: ``nonzero``, ``masked_select``, boolean-mask indexing, ``unique``,
``one_hot`` without ``num_classes``, ``repeat_interleave`` without ``output_size``) and
``Stream.synchronize()``. As on CUDA, ``torch.neuron.synchronize()``, ``Event.synchronize()``, a
``non_blocking=True`` copy to the CPU and collectives do not check.

Imports nothing of JAX: setting the mode does not start the runtime.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable

#: ``torch.cuda.set_sync_debug_mode``'s names for the three modes.
MODES = {"default": 0, "warn": 1, "error": 2}

_mode = 0

# Frames from these folders are the backend's and PyTorch's own; a warning names the first caller
# outside them, the line of the user's code that synchronised.
_INTERNAL = tuple(
    os.path.dirname(module.__file__) + os.sep for module in (sys.modules["torch"], sys.modules["torch_neuronx"])
)


def set_mode(debug_mode: int | str) -> None:
    """Sets the mode: ``"default"``/0 (nothing), ``"warn"``/1 or ``"error"``/2.

    Raises:
        RuntimeError: ``debug_mode`` is another string or number (CUDA's error and words).
    """
    global _mode
    if isinstance(debug_mode, str):
        if debug_mode not in MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = MODES[debug_mode]
    if isinstance(debug_mode, bool) or not isinstance(debug_mode, int) or debug_mode not in MODES.values():
        raise RuntimeError(f"invalid value of debug_mode, expected one of 0, 1, 2 (got {debug_mode!r})")
    _mode = debug_mode


def mode() -> int:
    """The mode set last: 0, 1 or 2."""
    return _mode


def check(what: Callable[[], str]) -> None:
    """Called where the host is about to wait for the device; ``what()`` names the operation (a
    callable, so that mode 0 formats nothing on the host-read path).

    Raises:
        RuntimeError: in mode 2, "called a synchronizing neuron operation: <what()>".
    """
    if _mode == 0:
        return
    message = f"called a synchronizing neuron operation: {what()}"
    if _mode == 2:
        raise RuntimeError(message)
    warnings.warn(message, UserWarning, stacklevel=_caller_stacklevel())


def _caller_stacklevel() -> int:
    # warnings.warn's stacklevel counts from check()'s caller's caller; skip PyTorch's and ours.
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame, level = frame.f_back, level + 1
    return level
