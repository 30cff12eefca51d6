"""Events: points in a core's work that the host can query, wait for and time (decision 10).

All streams of a core multiplex onto one queue (runtime/queue.py), so an event recorded on any
stream of a core completes when every launch made on that core before it has finished. Recording
snapshots that in-flight work. For a timing event, a watcher thread waits for the snapshot and
stamps the time the work finished, so ``elapsed_time`` measures device work, not when the host
happened to record or ask; an event recorded on an idle core completes at once.
"""

from __future__ import annotations

import dataclasses
import queue as queue_module
import threading
import time
from typing import Any

import jax

from torch_neuronx.runtime import faults, launch_records, queue


@dataclasses.dataclass
class EventRecord:
    device: int
    pending: list[Any]
    timed: bool
    completed_at: float | None = None
    finished: threading.Event = dataclasses.field(default_factory=threading.Event)

    def complete(self) -> None:
        if self.completed_at is None:
            self.completed_at = time.perf_counter()
        self.pending = []
        self.finished.set()


_records: dict[int, EventRecord] = {}
_timing: queue_module.SimpleQueue[EventRecord] = queue_module.SimpleQueue()
_watcher: list[threading.Thread] = []


def _watch() -> None:
    while True:
        record = _timing.get()
        jax.block_until_ready(record.pending)
        record.complete()


def record(event_id: int, device: int, timing: bool) -> None:
    """Records ``event_id`` on ``device`` at the current end of its work."""
    started = launch_records.now() if launch_records.active else 0
    entry = EventRecord(device, queue.in_flight(device), timing)
    _records[event_id] = entry
    if not entry.pending:
        entry.complete()
    elif timing:
        if not _watcher:
            thread = threading.Thread(target=_watch, name="neuron-event-timer", daemon=True)
            thread.start()
            _watcher.append(thread)
        _timing.put(entry)
    if started:
        detail = f"event {event_id} after {len(entry.pending)} launches in flight" + (", timed" if timing else "")
        launch_records.runtime_event("neuronEventRecord", device, started, 0, detail)


def query(event_id: int) -> bool:
    """Whether the work before the event has finished (an event never recorded counts as done)."""
    entry = _records.get(event_id)
    if entry is None or entry.finished.is_set():
        return True
    return all(array.is_ready() for array in entry.pending)


def synchronize(event_id: int) -> None:
    """Waits for the event, then raises the earliest pending device fault of its core."""
    entry = _records.get(event_id)
    if entry is None:
        return
    started = launch_records.now() if launch_records.active else 0
    if entry.timed:
        entry.finished.wait()  # the watcher stamps the completion time
    elif not entry.finished.is_set():
        jax.block_until_ready(entry.pending)
        entry.complete()
    if started:
        launch_records.runtime_event("neuronEventSynchronize", entry.device, started, 0, f"event {event_id}")
    faults.raise_pending(entry.device)


def elapsed_ms(start_id: int, end_id: int) -> float:
    """Milliseconds between the completion of two recorded events (both are waited for)."""
    for event_id in (start_id, end_id):
        if event_id not in _records:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        synchronize(event_id)
    return (_records[end_id].completed_at - _records[start_id].completed_at) * 1000.0


def wait(event_id: int, device: int) -> None:
    """Makes later work on ``device`` wait for the event. On the event's own core the shared queue
    already orders it; another core's work waits on the host until the event completes."""
    entry = _records.get(event_id)
    started = launch_records.now() if launch_records.active else 0
    if entry is not None and entry.device != device:
        synchronize(event_id)
    if started:
        where = "same core: ordered by its queue" if entry is None or entry.device == device else "waited on the host"
        launch_records.runtime_event("neuronStreamWaitEvent", device, started, 0, f"event {event_id} ({where})")


def destroy(event_id: int) -> None:
    _records.pop(event_id, None)
