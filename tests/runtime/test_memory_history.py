"""torch.neuron.memory._record_memory_history, _snapshot, _dump_snapshot and memory_snapshot:
torch.cuda.memory's record of the allocator, which torch.cuda._memory_viz reads."""

from __future__ import annotations

import pickle

import pytest
import torch
from torch.cuda import _memory_viz


@pytest.fixture
def recording():
    torch.neuron.memory._record_memory_history(max_entries=10_000)
    yield
    torch.neuron.memory._record_memory_history(None)


def _allocate_a_megabyte():
    return torch.empty(1 << 20, dtype=torch.uint8, device="neuron")


def _block_of(snapshot, tensor):
    address = tensor.untyped_storage().data_ptr()
    return next(b for segment in snapshot["segments"] for b in segment["blocks"] if b["address"] == address)


def test_a_live_block_keeps_the_stack_that_allocated_it(recording):
    kept = _allocate_a_megabyte()
    block = _block_of(torch.neuron.memory._snapshot(), kept)
    assert block["state"] == "active_allocated"
    assert (block["size"], block["requested_size"]) == (1 << 20, 1 << 20)
    assert [frame["name"] for frame in block["frames"][:2]] == [
        "_allocate_a_megabyte",
        "test_a_live_block_keeps_the_stack_that_allocated_it",
    ]


def test_every_action_is_traced_in_order():
    torch.neuron.empty_cache()  # before the record: earlier tests' cached segments go now
    torch.neuron.memory._record_memory_history()
    tensor = torch.empty(1000, device="neuron")  # 4,000 bytes: a 4,096-byte block
    address = tensor.untyped_storage().data_ptr()
    del tensor
    torch.neuron.empty_cache()
    trace = torch.neuron.memory._snapshot()["device_traces"][torch.neuron.current_device()]
    torch.neuron.memory._record_memory_history(None)
    mine = [(entry["action"], entry["size"]) for entry in trace if entry.get("addr") == address]
    blocks = [(action, size) for action, size in mine if not action.startswith("segment")]
    assert blocks == [("alloc", 4096), ("free_requested", 4096), ("free_completed", 4096)]
    # A block of a segment of its own (none cached could take it) comes and goes with it.
    segments = [action for action, _ in mine if action.startswith("segment")]
    assert segments in ([], ["segment_alloc", "segment_free"])
    times = [entry["time_us"] for entry in trace]
    assert times == sorted(times)


def test_an_out_of_memory_error_is_traced(recording):
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(1 << 50, dtype=torch.uint8, device="neuron")
    (oom,) = [e for e in torch.neuron.memory._snapshot()["device_traces"][0] if e["action"] == "oom"]
    assert oom["size"] == 1 << 50 and oom["device_free"] > 0


def test_max_entries_keeps_the_newest():
    torch.neuron.memory._record_memory_history(max_entries=4)
    try:
        tensors = [torch.empty(256 * (i + 1), device="neuron") for i in range(6)]
        trace = torch.neuron.memory._snapshot()["device_traces"][0]
        assert len(trace) == 4
        assert trace[-1]["addr"] == tensors[-1].untyped_storage().data_ptr()
    finally:
        torch.neuron.memory._record_memory_history(None)


def test_stopping_drops_the_record_and_the_stacks():
    torch.neuron.memory._record_memory_history()
    kept = _allocate_a_megabyte()
    torch.neuron.memory._record_memory_history(None)
    after = _allocate_a_megabyte()
    snapshot = torch.neuron.memory._snapshot()
    assert snapshot["device_traces"][0] == []
    assert _block_of(snapshot, after)["frames"] == []
    assert _block_of(snapshot, kept)["frames"]  # allocated while recording: its stack stays


def test_the_dump_is_what_memory_viz_reads(recording, tmp_path):
    kept = _allocate_a_megabyte()
    path = tmp_path / "snapshot.pickle"
    torch.neuron.memory._dump_snapshot(str(path))
    snapshot = pickle.loads(path.read_bytes())
    assert "segments:" in _memory_viz.segsum(snapshot)
    assert _memory_viz.trace_plot(snapshot).lstrip().startswith("<!DOCTYPE html>")
    # Two snapshots taken one after the other may differ (the garbage collector can free an earlier
    # test's tensors between them), so the live block is what both must show.
    assert _block_of(snapshot, kept) == _block_of({"segments": torch.neuron.memory_snapshot()}, kept)
    assert _block_of(snapshot, kept)["state"] == "active_allocated"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"enabled": "yes"}, "expected state to be 'state', 'all', or None"),
        ({"context": "frees"}, "expected context to be 'state', 'alloc', 'all', or None"),
        ({"stacks": "cpp"}, "expected stacks to be 'python', or 'all'"),
    ],
)
def test_bad_arguments_raise_cudas_errors(arguments, message):
    with pytest.raises(RuntimeError, match=message):
        torch.neuron.memory._record_memory_history(**arguments)
