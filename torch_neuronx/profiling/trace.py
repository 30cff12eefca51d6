"""The device and runtime trace: Chrome trace JSON that Perfetto (ui.perfetto.dev) and
chrome://tracing open, one process per NeuronCore with one track per stream, and one process for
the host's runtime events, one track per host thread.

The framework trace (``prof.export_chrome_trace``) holds the same device and runtime events next to
PyTorch's ops; this one adds what Kineto's format cannot name (every core as its own process).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from torch_neuronx.profiling.tables import Records
from torch_neuronx.runtime.launch_records import Work

__all__ = ["write_trace"]

#: Process ids of the cores' tracks: far above any host pid, so the two never collide.
CORE_PID_BASE = 1 << 30


def _us(ns: int, base: int) -> float:
    return (ns - base) / 1e3


def trace_events(records: Records, base_ns: int) -> list[dict[str, Any]]:
    """The trace events of a session's records, times in microseconds since ``base_ns``."""
    host_pid = os.getpid()
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": host_pid, "args": {"name": f"host (pid {host_pid}) runtime"}},
        {"name": "process_sort_index", "ph": "M", "pid": host_pid, "args": {"sort_index": 0}},
    ]
    tracks: set[tuple[int, int]] = set()
    threads: set[int] = set()
    for r in records.device:
        pid = CORE_PID_BASE + r.core
        if (r.core, r.stream) not in tracks:
            if not any(core == r.core for core, _ in tracks):
                events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"neuron:{r.core}"}})
                events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": 1 + r.core}})
            events.append(
                {"name": "thread_name", "ph": "M", "pid": pid, "tid": r.stream, "args": {"name": f"stream {r.stream}"}}
            )
            tracks.add((r.core, r.stream))
        threads.add(r.thread)
        args = {"kind": r.work.name.lower(), "sequence": r.sequence, "correlation_id": r.correlation}
        if r.executable >= 0:
            args["executable_id"] = r.executable
        if r.bytes:
            args["bytes"] = r.bytes
        events.append(
            {
                "name": r.name,
                "cat": "neuron_device" if r.work is not Work.COPY else "neuron_memcpy",
                "ph": "X",
                "pid": pid,
                "tid": r.stream,
                "ts": _us(r.start_ns, base_ns),
                "dur": (r.end_ns - r.start_ns) / 1e3,
                "args": args,
            }
        )
        dispatch = {
            "name": f"dispatch {r.name}",
            "cat": "neuron_runtime",
            "ph": "X",
            "pid": host_pid,
            "tid": r.thread,
            "ts": _us(r.dispatch_begin_ns, base_ns),
            "dur": (r.dispatch_end_ns - r.dispatch_begin_ns) / 1e3,
            "args": {"core": r.core, "stream": r.stream, "sequence": r.sequence},
        }
        events.append(dispatch)
        # The flow arrow from the dispatch to the device event, as Kineto draws CUDA's (ac2g).
        events.append(
            {
                "name": "launch",
                "cat": "ac2g",
                "ph": "s",
                "id": r.sequence,
                "pid": host_pid,
                "tid": r.thread,
                "ts": dispatch["ts"],
            }
        )
        events.append(
            {
                "name": "launch",
                "cat": "ac2g",
                "ph": "f",
                "bp": "e",
                "id": r.sequence,
                "pid": pid,
                "tid": r.stream,
                "ts": _us(r.start_ns, base_ns),
            }
        )
    for r in records.runtime:
        threads.add(r.thread)
        args: dict[str, Any] = {"detail": r.detail}
        if r.core >= 0:
            args.update(core=r.core, stream=r.stream)
        if r.bytes:
            args["bytes"] = r.bytes
        events.append(
            {
                "name": r.name,
                "cat": "neuron_runtime",
                "ph": "X",
                "pid": host_pid,
                "tid": r.thread,
                "ts": _us(r.start_ns, base_ns),
                "dur": (r.end_ns - r.start_ns) / 1e3,
                "args": args,
            }
        )
    for thread in sorted(threads):
        events.append(
            {"name": "thread_name", "ph": "M", "pid": host_pid, "tid": thread, "args": {"name": f"thread {thread}"}}
        )
    return events


def write_trace(path: Path, records: Records, base_ns: int, metadata: dict[str, Any]) -> Path:
    """Writes the device and runtime trace of ``records`` to ``path`` (JSON)."""
    document = {
        "displayTimeUnit": "ns",
        "otherData": {"base_time_ns": base_ns, **metadata},
        "traceEvents": trace_events(records, base_ns),
    }
    path.write_text(json.dumps(document))
    return path
