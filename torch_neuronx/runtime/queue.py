"""Work in flight on each NeuronCore, and waiting for it.

PJRT executes asynchronously: an op returns as soon as its executable is enqueued. The runtime keeps
one output of each launch per core (all outputs of an execution become ready together) until it is
ready, so waiting for a core waits for every launch, even one whose outputs the program already
dropped: ``synchronize()`` means the work is done, which is what timing code relies on. An output
is released as soon as it is ready; holding it costs nothing extra, since an execution in flight
holds its buffers anyway.

All streams of a core multiplex onto this one queue (decision 10), so ordering and waiting are per
core; the stream layer adds events and priorities on top.
"""

from __future__ import annotations

import threading
from collections import deque

import jax

from torch_neuronx import _config
from torch_neuronx.runtime import faults, launch_records, recording

_launched: dict[int, deque[jax.Array]] = {}
#: Guards ``_launched``: several Python threads launch and wait (serving threads, the autograd
#: engine's, gloo's copies back); a thread switch between a ready check and its release popped an
#: empty deque.
_lock = threading.Lock()
_BLOCKING = _config.launch_blocking()  # read when the runtime starts: this module loads then


def note_launch(device: int, output: jax.Array) -> None:
    """Records a launch on ``device``; with NEURON_LAUNCH_BLOCKING=1, waits for it and raises its faults."""
    if _BLOCKING:
        output.block_until_ready()
        faults.raise_pending(device)
        return
    with _lock:
        queue = _launched.get(device)
        if queue is None:
            queue = _launched[device] = deque()
        queue.append(output)
        # Release what has finished: launches complete roughly in order, so looking at the oldest
        # two keeps the queue as short as the work actually in flight, at O(1) per launch.
        for _ in range(2):
            if queue and queue[0].is_ready():
                queue.popleft()


def in_flight(device: int) -> list[jax.Array]:
    """One output of each launch on ``device`` that may still be running (recorded launches are
    launched first: runtime/recording.py)."""
    recording.flush(device, "event")
    with _lock:
        return list(_launched.get(device, ()))


def is_idle(device: int) -> bool:
    """True when every launch on ``device`` has finished (faults are not raised)."""
    recording.flush(device, "stream query")
    with _lock:
        launched = list(_launched.get(device, ()))
    return all(array.is_ready() for array in launched)


def synchronize(device: int, reason: str = "neuronDeviceSynchronize") -> None:
    """Waits for every launch on ``device``, recorded ones included, then raises the earliest
    pending device fault.

    ``reason`` names the wait in a profile (``neuronDeviceSynchronize``, ``neuronStreamSynchronize``,
    a host read)."""
    recording.flush(device, "synchronize")
    started = launch_records.now() if launch_records.active else 0
    with _lock:
        pending = _launched.pop(device, None)
    if pending:
        jax.block_until_ready(list(pending))
    if started:
        waited = len(pending) if pending else 0
        launch_records.synchronized(device, started, reason, f"{waited} launches in flight on neuron:{device}")
    faults.raise_pending(device)
