"""What the C++ core calls in Python (csrc/runtime/NeuronPython.h, ``call_runtime``).

The profiler's Kineto session (csrc/profiler) starts and stops the launch records here too.

Registered when the package is imported, before JAX is: each method imports the runtime only when
there is device work to act on, so ``import torch`` stays cheap (decision 1). Streams multiplex onto
one queue per core (decision 10): stream operations act on their core's queue.
"""

from __future__ import annotations

from typing import Any


def _runtime_started() -> bool:
    from torch_neuronx import runtime

    return runtime.started()


class RuntimeCallbacks:
    """Stream, event, synchronisation and storage services for the C++ core."""

    def device_synchronize(self, device: int) -> None:
        if _runtime_started():
            from torch_neuronx.runtime import queue

            queue.synchronize(device, "neuronDeviceSynchronize")

    def stream_synchronize(self, device: int, stream_id: int) -> None:
        from torch_neuronx.runtime import sync_debug

        sync_debug.check(lambda: f"Stream.synchronize() on neuron:{device}")  # as CUDA's stream_synchronize
        if _runtime_started():
            from torch_neuronx.runtime import queue

            queue.synchronize(device, "neuronStreamSynchronize")

    def stream_query(self, device: int, stream_id: int) -> bool:
        if not _runtime_started():
            return True
        from torch_neuronx.runtime import queue

        return queue.is_idle(device)

    def event_record(self, event_id: int, device: int, stream_id: int, timing: bool) -> None:
        if not _runtime_started():
            from torch_neuronx import runtime

            runtime.start()
        from torch_neuronx.runtime import events

        events.record(event_id, device, timing)

    def event_block(self, event_id: int, device: int, stream_id: int) -> None:
        if _runtime_started():
            from torch_neuronx.runtime import events

            events.wait(event_id, device)

    def event_query(self, event_id: int) -> bool:
        if not _runtime_started():
            return True
        from torch_neuronx.runtime import events

        return events.query(event_id)

    def event_synchronize(self, event_id: int) -> None:
        if _runtime_started():
            from torch_neuronx.runtime import events

            events.synchronize(event_id)

    def event_elapsed_ms(self, start_id: int, end_id: int) -> float:
        from torch_neuronx.runtime import events

        return events.elapsed_ms(start_id, end_id)

    def event_destroy(self, event_id: int) -> None:
        if _runtime_started():
            from torch_neuronx.runtime import events

            events.destroy(event_id)

    def profiler_start(self, config: str) -> tuple[list[int], int, bool, bool, bool]:
        from torch_neuronx.runtime import launch_records

        return launch_records.start(config)

    def profiler_stop(self) -> None:
        from torch_neuronx.runtime import launch_records

        launch_records.stop()

    def profiler_stopped(self, dropped_over_limit: int, dropped_unfinished: int) -> None:
        from torch_neuronx.runtime import launch_records

        launch_records.stopped(dropped_over_limit, dropped_unfinished)

    def resize_buffer(self, array: Any, dtype_code: int, nbytes: int) -> Any:
        from torch_neuronx.runtime import buffers

        return buffers.resize(array, dtype_code, nbytes)

    def transfer_buffer(self, array: Any, device: int) -> Any:
        from torch_neuronx.runtime import buffers

        return buffers.transfer(array, device)
