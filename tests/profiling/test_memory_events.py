"""torch.profiler(profile_memory=True): the allocator reports each neuron allocation and free to the
profiler as CUDA's caching allocator does (the block's rounded bytes, with the core's totals)."""

from __future__ import annotations

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def test_allocations_and_frees_are_memory_events_of_the_op_that_made_them():
    a = torch.randn(256, 256, device="neuron")
    a @ a  # built before the profile
    with profile(activities=ACTIVITIES, profile_memory=True) as prof:
        product = a @ a  # 256 KiB
        del product
    # The free happens outside any op: a "[memory]" event of its own.
    assert [event.device_memory_usage for event in prof.events() if event.name == "[memory]"] == [-256 * 1024]
    (mm,) = [event for event in prof.key_averages() if event.key == "aten::mm"]
    assert mm.device_memory_usage == 256 * 1024
    assert "NEURON Mem" in prof.key_averages().table()


@pytest.mark.filterwarnings("ignore:`export_memory_timeline` is deprecated")
def test_memory_timeline_of_a_training_step(tmp_path):
    model = torch.nn.Linear(64, 64).to("neuron")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 64, device="neuron")
    with profile(activities=ACTIVITIES, profile_memory=True, record_shapes=True, with_stack=True) as prof:
        for _ in range(2):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    prof.export_memory_timeline(str(tmp_path / "timeline.json"), device="neuron:0")
    times, sizes = json.loads((tmp_path / "timeline.json").read_text())
    assert len(times) == len(sizes) > 0
    # Its peak holds at least the parameters and their gradients (64*64 + 64 floats each).
    assert max(sum(row) for row in sizes) >= 2 * (64 * 64 + 64) * 4
