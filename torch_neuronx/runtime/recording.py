"""Launches deferred into a recorded trace (adaptive eager, decision 12), as the runtime sees them.

While a recorder is installed (:data:`state`), every executable launch is handed to it instead of
running (runtime/executable.py): the recorder either records the launch into a trace, giving its
new tensors and the storages it writes a :class:`PendingBuffer` in place of a buffer, or runs it
after flushing what it recorded. A pending buffer stands for a value the trace will compute; the
runtime never hands one to PJRT. Wherever a buffer's value becomes visible outside a trace (a host
read, a copy, a resize, a synchronisation, an event), the runtime calls :func:`flush` first, which
runs the recorded traces and binds the real buffers (runtime/buffers.py, runtime/callbacks.py).

The recorder itself lives above the runtime (torch_neuronx/adaptive/); this module is the
interface: it knows nothing of how traces are fused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class PendingBuffer:
    """A storage's buffer that a recorded trace has yet to compute.

    Bound to a storage's allocation like a real buffer, so that the C++ call signature keys and
    passes it as one. Once its trace ran, ``value`` is the real buffer (a flat ``jax.Array``) and
    every allocation that held this stand-in holds ``value`` instead.
    """

    __slots__ = ("__weakref__", "aval", "device", "source", "value")

    def __init__(self, device: int, aval: Any, source: Any) -> None:
        self.device = device
        #: The buffer's shape and dtype (a ``jax.ShapeDtypeStruct``).
        self.aval = aval
        #: Where the recorder computes it (the recorder's own description).
        self.source = source
        self.value: Any = None


class _State:
    """The installed recorder: ``recorder(executable, inputs, device, slot_tensors, generator,
    values)`` takes every launch while installed; ``flusher(device, reason)`` runs what is recorded
    for a core (None: every core), saying why."""

    __slots__ = ("flusher", "recorder")

    def __init__(self) -> None:
        self.recorder: Callable[..., Any] | None = None
        self.flusher: Callable[[int | None, str], None] | None = None


state = _State()


def install(recorder: Callable[..., Any], flusher: Callable[[int | None, str], None]) -> None:
    """Makes ``recorder`` take every launch, and ``flusher`` run what it recorded."""
    state.flusher = flusher
    state.recorder = recorder


def uninstall() -> None:
    """Launches run directly again (the caller flushed everything first)."""
    state.recorder = None
    state.flusher = None


def flush(device: int | None, reason: str) -> None:
    """Runs every recorded launch of ``device`` (None: of every core), binding the real buffers;
    ``reason`` says what made the values visible (counted by the recorder's metrics)."""
    flusher = state.flusher
    if flusher is not None:
        flusher(device, reason)


def resolved(array: Any, reason: str) -> Any:
    """``array``, or for a pending buffer its real buffer, computed by a flush if need be."""
    if type(array) is PendingBuffer:
        if array.value is None:
            flush(array.device, reason)
        return array.value
    return array


def abstract(value: Any) -> Any:
    """``value``, or a pending buffer's shape and dtype: what tracing or lowering may be given."""
    return value.aval if type(value) is PendingBuffer else value
