"""Work in flight on each NeuronCore, and waiting for it.

PJRT executes asynchronously: an op returns as soon as its executable is enqueued. The runtime keeps
a weak reference to one output of each launch per core (all outputs of an execution become ready
together); waiting for a core waits for every launch whose outputs are still alive, then raises any
pending device fault. An output that was freed needs no waiting: nothing can observe it.

All streams of a core multiplex onto this one queue (decision 10), so ordering and waiting are per
core; the stream layer adds events and priorities on top.
"""

from __future__ import annotations

import weakref

import jax

from torch_neuronx import _config
from torch_neuronx.runtime import faults

_PRUNE_AT = 1024

_launched: dict[int, list[weakref.ref]] = {}


def note_launch(device: int, output: jax.Array) -> None:
    """Records a launch on ``device``; with NEURON_LAUNCH_BLOCKING=1, waits for it and raises its faults."""
    if _config.launch_blocking:
        output.block_until_ready()
        faults.raise_pending(device)
        return
    queue = _launched.get(device)
    if queue is None:
        queue = _launched[device] = []
    queue.append(weakref.ref(output))
    if len(queue) > _PRUNE_AT:
        queue[:] = [ref for ref in queue if (array := ref()) is not None and not array.is_ready()]


def in_flight(device: int) -> list[jax.Array]:
    """Outputs of launches on ``device`` that may still be running."""
    return [array for ref in _launched.get(device, ()) if (array := ref()) is not None]


def is_idle(device: int) -> bool:
    """True when every launch on ``device`` has finished (faults are not raised)."""
    return all(array.is_ready() for array in in_flight(device))


def synchronize(device: int) -> None:
    """Waits for every launch on ``device``, then raises the earliest pending device fault."""
    pending = in_flight(device)
    _launched[device] = []
    if pending:
        jax.block_until_ready(pending)
    faults.raise_pending(device)
