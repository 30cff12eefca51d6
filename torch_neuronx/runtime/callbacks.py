"""What the C++ core calls in Python (csrc/runtime/NeuronPython.h, ``call_runtime``).

Registered when the package is imported, before JAX is: each method imports the runtime only when
there is device work to act on, so ``import torch`` stays cheap (decision 1).
"""

from __future__ import annotations

import time
from typing import Any


def _runtime_started() -> bool:
    from torch_neuronx import runtime

    return runtime.started()


class RuntimeCallbacks:
    """Stream, event, synchronisation and storage services for the C++ core."""

    def __init__(self) -> None:
        # event id -> (device, outputs in flight when it was recorded, completion time or None)
        self._events: dict[int, list[Any]] = {}

    def device_synchronize(self, device: int) -> None:
        if _runtime_started():
            from torch_neuronx.runtime import queue

            queue.synchronize(device)

    def stream_synchronize(self, device: int, stream_id: int) -> None:
        # Streams multiplex onto one queue per core (decision 10).
        self.device_synchronize(device)

    def stream_query(self, device: int, stream_id: int) -> bool:
        if not _runtime_started():
            return True
        from torch_neuronx.runtime import queue

        return queue.is_idle(device)

    def event_record(self, event_id: int, device: int, stream_id: int, timing: bool) -> None:
        pending = []
        if _runtime_started():
            from torch_neuronx.runtime import queue

            pending = queue.in_flight(device)
        self._events[event_id] = [device, pending, None]

    def event_block(self, event_id: int, device: int, stream_id: int) -> None:
        # One queue per core keeps launch order; across cores, buffers carry their own readiness.
        return None

    def event_query(self, event_id: int) -> bool:
        record = self._events.get(event_id)
        return record is None or all(array.is_ready() for array in record[1])

    def event_synchronize(self, event_id: int) -> None:
        record = self._events.get(event_id)
        if record is None:
            return
        device, pending, _ = record
        for array in pending:
            array.block_until_ready()
        if record[2] is None:
            record[2] = time.perf_counter()
        record[1] = []
        from torch_neuronx.runtime import faults

        faults.raise_pending(device)

    def event_elapsed_ms(self, start_id: int, end_id: int) -> float:
        for event_id in (start_id, end_id):
            self.event_synchronize(event_id)
        start, end = self._events.get(start_id), self._events.get(end_id)
        if start is None or end is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end[2] - start[2]) * 1000.0

    def event_destroy(self, event_id: int) -> None:
        self._events.pop(event_id, None)

    def resize_buffer(self, array: Any, dtype_code: int, nbytes: int) -> Any:
        from torch_neuronx.runtime import buffers

        return buffers.resize(array, dtype_code, nbytes)

    def transfer_buffer(self, array: Any, device: int) -> Any:
        from torch_neuronx.runtime import buffers

        return buffers.transfer(array, device)
