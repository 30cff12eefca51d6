"""torch_neuronx.profiling: NeuronConfig, and NeuronProfiler's traces and Parquet tables with
their schema (docs/profiling.md)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from torch_neuronx._compat.profiler_internals import ExperimentalConfig
from torch_neuronx.profiling import NeuronConfig, ProfileMode, read_table, tables
from torch_neuronx.profiling.trace import CORE_PID_BASE


def test_neuron_config_is_a_torch_profiler_experimental_config():
    config = NeuronConfig(modes=[ProfileMode.RUNTIME], capture_enabled_for_nc="0", max_events_per_nc=10)
    assert isinstance(config, ExperimentalConfig)
    assert config.recording.device is False and config.recording.cores == (0,)
    assert "NeuronConfig(modes=[ProfileMode.RUNTIME]" in repr(config)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"modes": []}, ValueError, "modes is empty"),
        ({"modes": ["device"]}, TypeError, "must be ProfileMode values"),
        ({"modes": [ProfileMode.CPU_UTIL]}, NotImplementedError, "not recorded on neuron yet"),
        ({"capture_enabled_for_nc": "0,x"}, ValueError, "'x' is not a core index"),
        ({"capture_enabled_for_nc": "3-1"}, ValueError, "empty range"),
        ({"capture_enabled_for_nc": "0-99"}, ValueError, "names core 99, but this process sees"),
        ({"max_events_per_nc": 0}, ValueError, "at least 1"),
        ({"custom_profiler_config": "x"}, TypeError, "writes custom_profiler_config itself"),
    ],
)
def test_neuron_config_rejects_what_it_cannot_record(kwargs, error, message):
    with pytest.raises(error, match=message):
        NeuronConfig(**kwargs)


def test_export_trace_puts_every_trace_and_table_in_one_directory(exported):
    output, exporter, _ = exported
    names = sorted(path.name for path in output.iterdir())
    (profile_id,) = {name.split(".")[0] for name in names}
    expected = ["neuron.trace.json", "pt.trace.json", *(f"{t}.parquet" for t in tables.SCHEMAS)]
    assert names == sorted(f"{profile_id}.{suffix}" for suffix in expected)
    assert sorted(exporter.last_export) == sorted(output / name for name in names)


def test_parquet_tables_read_back_with_the_documented_schema(exported):
    output, _, _ = exported
    for name, schema in tables.SCHEMAS.items():
        (path,) = output.glob(f"*.{name}.parquet")
        written = pq.read_table(path)
        assert written.schema.equals(schema, check_metadata=False)
        assert written.schema.metadata[b"torch_neuronx.schema_version"] == tables.SCHEMA_VERSION.encode()
        assert read_table(output, name).schema.equals(schema)


def test_tables_describe_the_profiled_work(exported):
    output, _, prof = exported
    device = read_table(output, "device_events").to_pylist()
    assert {row["op"] for row in device if row["name"] == "aten::rsqrt.default"} == {"aten::rsqrt"}
    assert all(row["duration_ns"] > 0 for row in device)
    ops = {row["op"]: row for row in read_table(output, "ops").to_pylist()}
    averages = {a.key: a for a in prof.key_averages()}
    for op in ("aten::pow", "aten::mean", "aten::rsqrt", "aten::mul"):
        assert ops[op]["device_time_us"] == pytest.approx(averages[op].device_time_total)
        assert ops[op]["calls"] == averages[op].count
    executables = {row["name"]: row for row in read_table(output, "executables").to_pylist()}
    mean = executables["aten::mean.dim"]
    assert mean["launches"] == 1 and mean["hlo_instructions"] > 0 and mean["cost_analysis_error"] is None
    assert mean["flops"] >= 32 * 256 - 32  # XLA counts the reduction's additions
    (readback,) = read_table(output, "transfers").to_pylist()
    assert readback["direction"] == "DtoH" and readback["bytes"] == 32 * 256 * 4
    runtime = {row["name"] for row in read_table(output, "runtime_events").to_pylist()}
    assert {"neuronHostReadSynchronize", "neuronDeviceSynchronize"} <= runtime


def test_read_table_refuses_another_schema_version(tmp_path):
    table = tables.SCHEMAS["ops"].empty_table().replace_schema_metadata({"torch_neuronx.schema_version": "99"})
    pq.write_table(table, tmp_path / "old.ops.parquet")
    with pytest.raises(ValueError, match="schema version 99"):
        read_table(tmp_path, "ops")
    with pytest.raises(ValueError, match="not a profile table"):
        read_table(tmp_path, "kernels")


def test_the_neuron_trace_has_a_track_per_core_and_stream(exported):
    output, _, _ = exported
    (path,) = output.glob("*.neuron.trace.json")
    events = json.loads(path.read_text())["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert processes[CORE_PID_BASE] == "neuron:0"
    device = [e for e in events if e.get("cat") == "neuron_device"]
    assert device and {(e["pid"], e["tid"]) for e in device} == {(CORE_PID_BASE, 0)}
    starts = {e["id"] for e in events if e.get("ph") == "s"}
    assert starts == {e["id"] for e in events if e.get("ph") == "f"} and len(starts) >= len(device)
