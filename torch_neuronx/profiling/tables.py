"""The profile as Parquet tables, for scripts and agents (schema in docs/profiling.md).

Six tables per exported profile, each ``<profile id>.<table>.parquet`` in the profile directory:
``device_events``, ``ops``, ``executables``, ``transfers``, ``collectives`` and ``runtime_events``.
Every file's schema carries ``torch_neuronx.schema_version`` (:data:`SCHEMA_VERSION`) and
``torch_neuronx.table`` in its metadata; every row carries its ``profile_id``, so the files of
several profiles (a schedule's cycles) read back as one table (:func:`read_table`).
"""

from __future__ import annotations

import collections
import dataclasses
import re
from pathlib import Path
from typing import Any

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as error:
    raise ImportError(
        "torch_neuronx.profiling writes its tables with pyarrow, which is not installed; "
        "install it with: pip install 'torchneuron[profiling]' (or pip install pyarrow)"
    ) from error

from torch_neuronx import _C
from torch_neuronx.runtime import launch_records
from torch_neuronx.runtime.launch_records import ExecutableInfo, Work

__all__ = ["SCHEMA_VERSION", "SCHEMAS", "Records", "build_tables", "read_table", "write_tables"]

#: Version of the tables' schema: the major number changes when a column changes meaning or goes.
SCHEMA_VERSION = "1"

_OP = [("op", pa.string()), ("correlation_id", pa.int64())]
_INTERVAL = [("start_ns", pa.int64()), ("duration_ns", pa.int64())]

SCHEMAS: dict[str, pa.Schema] = {
    "device_events": pa.schema(
        [
            ("profile_id", pa.string()),
            ("sequence", pa.int64()),
            ("kind", pa.string()),
            ("name", pa.string()),
            *_OP,
            ("executable_id", pa.int64()),
            ("core", pa.int32()),
            ("stream", pa.int64()),
            *_INTERVAL,
            ("dispatch_start_ns", pa.int64()),
            ("dispatch_duration_ns", pa.int64()),
            ("bytes", pa.int64()),
            ("thread", pa.int32()),
        ]
    ),
    "ops": pa.schema(
        [
            ("profile_id", pa.string()),
            ("op", pa.string()),
            ("input_shapes", pa.string()),
            ("input_dtypes", pa.string()),
            ("calls", pa.int64()),
            ("host_time_us", pa.float64()),
            ("host_self_time_us", pa.float64()),
            ("device_time_us", pa.float64()),
            ("device_self_time_us", pa.float64()),
            ("cache_misses", pa.int64()),
            ("compile_time_us", pa.float64()),
            ("fallbacks", pa.int64()),
            ("fallback_time_us", pa.float64()),
        ]
    ),
    "executables": pa.schema(
        [
            ("profile_id", pa.string()),
            ("executable_id", pa.int64()),
            ("name", pa.string()),
            ("kind", pa.string()),
            ("core", pa.int32()),
            ("launches", pa.int64()),
            ("device_time_ns", pa.int64()),
            ("hlo_instructions", pa.int64()),
            ("flops", pa.float64()),
            ("bytes_accessed", pa.float64()),
            ("transcendentals", pa.float64()),
            ("cost_analysis_error", pa.string()),
        ]
    ),
    "transfers": pa.schema(
        [
            ("profile_id", pa.string()),
            ("sequence", pa.int64()),
            ("direction", pa.string()),
            ("core", pa.int32()),
            ("stream", pa.int64()),
            ("bytes", pa.int64()),
            *_INTERVAL,
            ("gigabytes_per_second", pa.float64()),
            *_OP,
        ]
    ),
    "collectives": pa.schema(
        [
            ("profile_id", pa.string()),
            ("sequence", pa.int64()),
            ("name", pa.string()),
            ("core", pa.int32()),
            ("stream", pa.int64()),
            ("bytes", pa.int64()),
            *_INTERVAL,
            *_OP,
        ]
    ),
    "runtime_events": pa.schema(
        [
            ("profile_id", pa.string()),
            ("name", pa.string()),
            ("core", pa.int32()),
            ("stream", pa.int64()),
            *_INTERVAL,
            ("bytes", pa.int64()),
            ("detail", pa.string()),
            *_OP,
            ("thread", pa.int32()),
        ]
    ),
}

_DIRECTIONS = {"Memcpy HtoD": "HtoD", "Memcpy DtoH": "DtoH", "Memcpy DtoD": "DtoD"}


@dataclasses.dataclass(frozen=True)
class DeviceRow:
    """One device record of the C++ launch recorder (NeuronLaunchRecorder.h's ``DeviceRecord``)."""

    name: str
    work: Work
    core: int
    stream: int
    executable: int
    correlation: int
    thread: int
    dispatch_begin_ns: int
    dispatch_end_ns: int
    start_ns: int
    end_ns: int
    bytes: int
    sequence: int


@dataclasses.dataclass(frozen=True)
class RuntimeRow:
    name: str
    core: int
    stream: int
    correlation: int
    thread: int
    start_ns: int
    end_ns: int
    bytes: int
    detail: str


@dataclasses.dataclass
class Records:
    """What the last profiling session recorded: its finished device records (launch order),
    runtime records, the counts of dropped launches, and its executables."""

    device: list[DeviceRow]
    runtime: list[RuntimeRow]
    dropped_over_limit: int
    dropped_unfinished: int
    executables: dict[int, ExecutableInfo]

    @staticmethod
    def of_last_session() -> Records:
        """The records of the session that stopped last (read from the C++ recorder)."""
        raw = _C._profiler_records()
        names = raw["names"]
        device = []
        for row in raw["device"]:
            name, work, *rest = row
            parsed = DeviceRow(names[name], Work(work), *rest)
            if parsed.end_ns:
                device.append(parsed)
        runtime = [RuntimeRow(names[row[0]], *row[1:]) for row in raw["runtime"]]
        return Records(
            device,
            runtime,
            raw["dropped_over_limit"],
            raw["dropped_unfinished"],
            dict(launch_records.executables),
        )


def _cost_analysis(info: ExecutableInfo) -> tuple[int | None, float | None, float | None, float | None, str | None]:
    """(HLO instructions, flops, bytes accessed, transcendentals, error) from XLA's cost analysis of
    the compiled executable; a program compiled at its first launch is lowered again from the
    shapes of its first profiled launch (XLA's compilation cache has it)."""
    try:
        program = info.program
        compiled = program if not hasattr(program, "lower") else program.lower(*info.arguments).compile()
        costs = compiled.cost_analysis()
        if isinstance(costs, list):
            costs = costs[0] if costs else {}
        instructions = len(re.findall(r"^\s*(?:ROOT\s+)?%?[\w.\-]+ = ", compiled.as_text(), flags=re.MULTILINE))
    except Exception as error:  # recorded in the table: the row stays, without its costs
        return None, None, None, None, f"{type(error).__name__}: {error}"
    return (
        instructions,
        costs.get("flops"),
        costs.get("bytes accessed"),
        costs.get("transcendentals"),
        None,
    )


#: Kineto activity types of the events a launch can be correlated with: PyTorch's ops and
#: ``record_function`` ranges (not the runtime's own events, whose ids are not correlation ids).
_LAUNCHING = ("cpu_op", "user_annotation")


def _launching_events(events: Any) -> dict[int, Any]:
    """The events of a torch.profiler result that launches are correlated with, by correlation id."""
    return {event.id: event for event in events if getattr(event, "activity_type", "cpu_op") in _LAUNCHING}


def build_tables(profile_id: str, records: Records, events: Any) -> dict[str, pa.Table]:
    """The six tables of a profile.

    Args:
        profile_id: the profile's id (each row carries it).
        records: the session's records (:meth:`Records.of_last_session`).
        events: the session's ``torch.profiler`` events (``prof.events()``), for op names, shapes,
            dtypes and host times.
    """
    ops_by_id = _launching_events(events)

    def op_of(correlation: int) -> str | None:
        event = ops_by_id.get(correlation)
        return event.name if event is not None else None

    costs = {exe_id: _cost_analysis(info) for exe_id, info in records.executables.items()}
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in SCHEMAS}
    launches: collections.Counter[int] = collections.Counter()
    device_time: collections.Counter[int] = collections.Counter()
    for r in records.device:
        duration = r.end_ns - r.start_ns
        nbytes = r.bytes if r.work is not Work.EXECUTABLE else costs.get(r.executable, (None,) * 5)[2]
        rows["device_events"].append(
            {
                "profile_id": profile_id,
                "sequence": r.sequence,
                "kind": r.work.name.lower(),
                "name": r.name,
                "op": op_of(r.correlation),
                "correlation_id": r.correlation,
                "executable_id": r.executable if r.executable >= 0 else None,
                "core": r.core,
                "stream": r.stream,
                "start_ns": r.start_ns,
                "duration_ns": duration,
                "dispatch_start_ns": r.dispatch_begin_ns,
                "dispatch_duration_ns": r.dispatch_end_ns - r.dispatch_begin_ns,
                "bytes": None if nbytes is None else int(nbytes),
                "thread": r.thread,
            }
        )
        if r.work is Work.EXECUTABLE:
            launches[r.executable] += 1
            device_time[r.executable] += duration
        elif r.work is Work.COPY:
            rows["transfers"].append(
                {
                    "profile_id": profile_id,
                    "sequence": r.sequence,
                    "direction": _DIRECTIONS.get(r.name, r.name),
                    "core": r.core,
                    "stream": r.stream,
                    "bytes": r.bytes,
                    "start_ns": r.start_ns,
                    "duration_ns": duration,
                    "gigabytes_per_second": r.bytes / duration if duration > 0 else None,
                    "op": op_of(r.correlation),
                    "correlation_id": r.correlation,
                }
            )
        else:
            rows["collectives"].append(
                {
                    "profile_id": profile_id,
                    "sequence": r.sequence,
                    "name": r.name,
                    "core": r.core,
                    "stream": r.stream,
                    "bytes": r.bytes,
                    "start_ns": r.start_ns,
                    "duration_ns": duration,
                    "op": op_of(r.correlation),
                    "correlation_id": r.correlation,
                }
            )
    for exe_id, info in records.executables.items():
        instructions, flops, accessed, transcendentals, error = costs[exe_id]
        rows["executables"].append(
            {
                "profile_id": profile_id,
                "executable_id": exe_id,
                "name": info.name,
                "kind": info.kind,
                "core": info.device,
                "launches": launches[exe_id],
                "device_time_ns": device_time[exe_id],
                "hlo_instructions": instructions,
                "flops": flops,
                "bytes_accessed": accessed,
                "transcendentals": transcendentals,
                "cost_analysis_error": error,
            }
        )
    misses: collections.defaultdict[int, list[int]] = collections.defaultdict(list)
    fallbacks: collections.defaultdict[int, list[int]] = collections.defaultdict(list)
    for r in records.runtime:
        rows["runtime_events"].append(
            {
                "profile_id": profile_id,
                "name": r.name,
                "core": r.core if r.core >= 0 else None,
                "stream": r.stream if r.core >= 0 else None,
                "start_ns": r.start_ns,
                "duration_ns": r.end_ns - r.start_ns,
                "bytes": r.bytes,
                "detail": r.detail,
                "op": op_of(r.correlation),
                "correlation_id": r.correlation,
                "thread": r.thread,
            }
        )
        if r.name == "neuronCacheMiss":
            misses[r.correlation].append(r.end_ns - r.start_ns)
        elif r.name == "neuronCpuFallback":
            fallbacks[r.correlation].append(r.end_ns - r.start_ns)
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for event in ops_by_id.values():
        if getattr(event, "activity_type", "cpu_op") != "cpu_op":
            continue
        key = (event.name, str(event.input_shapes or ""), str(getattr(event, "input_dtypes", None) or ""))
        row = groups.setdefault(
            key,
            {
                "profile_id": profile_id,
                "op": key[0],
                "input_shapes": key[1],
                "input_dtypes": key[2],
                "calls": 0,
                "host_time_us": 0.0,
                "host_self_time_us": 0.0,
                "device_time_us": 0.0,
                "device_self_time_us": 0.0,
                "cache_misses": 0,
                "compile_time_us": 0.0,
                "fallbacks": 0,
                "fallback_time_us": 0.0,
            },
        )
        row["calls"] += 1
        row["host_time_us"] += event.cpu_time_total
        row["host_self_time_us"] += event.self_cpu_time_total
        row["device_time_us"] += event.device_time_total
        row["device_self_time_us"] += event.self_device_time_total
        row["cache_misses"] += len(misses.get(event.id, ()))
        row["compile_time_us"] += sum(misses.get(event.id, ())) / 1e3
        row["fallbacks"] += len(fallbacks.get(event.id, ()))
        row["fallback_time_us"] += sum(fallbacks.get(event.id, ())) / 1e3
    rows["ops"] = list(groups.values())
    return {name: _table(name, rows[name]) for name in SCHEMAS}


def _table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = SCHEMAS[name].with_metadata({"torch_neuronx.schema_version": SCHEMA_VERSION, "torch_neuronx.table": name})
    return pa.Table.from_pylist(rows, schema=schema)


def write_tables(directory: Path, profile_id: str, tables: dict[str, pa.Table]) -> list[Path]:
    """Writes each table as ``<directory>/<profile_id>.<table>.parquet``; returns the paths."""
    paths = []
    for name, table in tables.items():
        path = directory / f"{profile_id}.{name}.parquet"
        pq.write_table(table, path)
        paths.append(path)
    return paths


def read_table(directory: str | Path, name: str) -> pa.Table:
    """Every profile's ``name`` table in ``directory``, as one table (empty if none was written).

    Raises:
        ValueError: ``name`` is not a table, or a file has another schema version.
    """
    if name not in SCHEMAS:
        raise ValueError(f"{name!r} is not a profile table; the tables are {', '.join(SCHEMAS)}")
    parts = []
    for path in sorted(Path(directory).glob(f"*.{name}.parquet")):
        table = pq.read_table(path)
        version = (table.schema.metadata or {}).get(b"torch_neuronx.schema_version", b"?").decode()
        if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
            raise ValueError(
                f"{path} has profile schema version {version}; this torch_neuronx reads version {SCHEMA_VERSION} "
                "(export the profile again, or read it with the torch_neuronx that wrote it)"
            )
        parts.append(table.cast(SCHEMAS[name]))
    if not parts:
        return SCHEMAS[name].empty_table()
    return pa.concat_tables(parts)
