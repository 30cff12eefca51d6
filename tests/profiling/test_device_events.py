"""torch.profiler with ProfilerActivity.PrivateUse1 (decision 16): each launch is a device event on
its core and stream, timed when the core ran it, linked to the op that launched it, counted as that
op's device time by key_averages()."""

from __future__ import annotations

import time

import pytest
import torch
from torch.profiler import ProfilerActivity, record_function

import torch_neuronx
from torch_neuronx.profiling import NeuronConfig, ProfileMode, tables
from torch_neuronx.runtime import launch_records

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]

_library = torch.library.Library("neuron_profiling_test", "DEF")
_library.define("doubled(Tensor self) -> Tensor")  # a CPU kernel only: it falls back
_library.impl("doubled", lambda self: self * 2, "CPU")


def _is_device(event) -> bool:
    return event.device_type == torch.autograd.DeviceType.PrivateUse1


class Session:
    """One profiled run of every kind of launch, shared by the tests of this module."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        compiled = torch.compile(lambda x: (x.sin() * 2).sum(dim=0), backend="neuron")
        host = torch.randn(64, 64)
        a = host.to("neuron")
        compiled(a)  # compiled and its eager ops built before the profile: warm launches
        (a @ a).relu()
        torch.neuron.synchronize()
        stream = torch_neuronx.Stream()
        self.start_ns = time.time_ns()
        with torch.profiler.profile(activities=ACTIVITIES, record_shapes=True) as prof:
            with record_function("eager block"):
                product = a @ a  # eager op
                product.relu_()
            self.graph_result = compiled(product)  # compiled graph
            moved = torch.randn(64, 64).to("neuron")  # copy host -> device
            moved[1:3] = 5.0  # a view program writes part of a storage
            self.readback = moved.cpu()  # copy device -> host
            if torch.neuron.device_count() > 1:
                product.to("neuron:1")  # copy core -> core
            with launch_records.collective("all_reduce", 0, a.nbytes):
                pass  # how torch_neuronx.distributed records a collective
            with torch.neuron.stream(stream):
                self.streamed = [product * float(i) for i in range(4)]  # work on a second stream
            torch.neuron.synchronize()
        self.end_ns = time.time_ns()
        self.prof = prof
        self.records = tables.Records.of_last_session()
        self.events = prof.events()
        self.product = product


@pytest.fixture(scope="module")
def session() -> Session:
    return Session()


def test_every_kind_of_launch_is_a_device_event(session):
    names = {r.name for r in session.records.device}
    assert {"aten::mm.default", "aten::relu_.default", "aten::mul.Tensor"} <= names
    assert any(name.startswith("neuron graph") for name in names)
    assert {"Memcpy HtoD", "Memcpy DtoH", "neuron::write_view", "all_reduce"} <= names
    if torch.neuron.device_count() > 1:
        assert "Memcpy DtoD" in names
    # and torch.profiler sees them as device (PrivateUse1) events
    device_names = {e.name for e in session.events if _is_device(e)}
    assert names == device_names


def test_device_events_lie_in_the_window_and_add_up_to_no_more_than_it(session):
    window = session.end_ns - session.start_ns
    for record in session.records.device:
        assert session.start_ns <= record.dispatch_begin_ns <= record.start_ns < record.end_ns <= session.end_ns
    for core in {r.core for r in session.records.device}:
        busy = sum(r.end_ns - r.start_ns for r in session.records.device if r.core == core)
        assert 0 < busy <= window


def test_a_core_runs_its_launches_in_order_and_streams_keep_theirs(session):
    for core in {r.core for r in session.records.device}:
        on_core = [r for r in session.records.device if r.core == core]
        for earlier, later in zip(on_core, on_core[1:], strict=False):
            assert earlier.sequence < later.sequence and earlier.end_ns <= later.start_ns
    streams = {r.stream for r in session.records.device if r.name == "aten::mul.Tensor"}
    assert len(streams) == 1 and streams != {0}


def test_each_device_event_is_linked_to_the_op_that_launched_it(session):
    launched_by = {
        "aten::mm.default": "aten::mm",
        "aten::relu_.default": "aten::relu_",
        "aten::mul.Tensor": "aten::mul",
        "Memcpy HtoD": "aten::_copy_from",
        "Memcpy DtoH": "aten::_copy_from",
    }
    ops = {e.id: e for e in session.events if not _is_device(e) and e.activity_type == "cpu_op"}
    for record in session.records.device:
        if record.name in launched_by:
            assert ops[record.correlation].name == launched_by[record.name]
    # torch.profiler attaches the device time to the op's event: mm's kernel is mm's
    mm = [e for e in session.events if e.name == "aten::mm" and e.kernels]
    assert len(mm) == 1 and [k.name for k in mm[0].kernels] == ["aten::mm.default"]
    record = next(r for r in session.records.device if r.name == "aten::mm.default")
    assert mm[0].kernels[0].duration == pytest.approx((record.end_ns - record.start_ns) / 1e3, abs=1e-3)


def test_key_averages_ranks_ops_by_device_time(session):
    averages = session.prof.key_averages()
    by_name = {a.key: a for a in averages}
    assert by_name["aten::mm"].self_device_time_total > 0
    assert by_name["aten::matmul"].device_time_total == pytest.approx(by_name["aten::mm"].device_time_total)
    assert by_name["aten::matmul"].self_device_time_total == 0  # mm's time, not matmul's
    for sort_by in ("self_privateuse1_time_total", "self_device_time_total"):
        table = averages.table(sort_by=sort_by, row_limit=50)
        assert "Self NEURON" in table and "aten::mm" in table
        rows = [a for a in averages if a.self_device_time_total > 0]
        ranked = sorted(rows, key=lambda a: a.self_device_time_total, reverse=True)
        positions = [table.index(f" {a.key} ") for a in ranked[:3]]
        assert positions == sorted(positions)


def test_record_function_ranges_hold_the_device_time_of_their_ops(session):
    block = next(e for e in session.events if e.name == "eager block")
    assert block.device_time_total > 0


def test_dispatch_and_device_event_are_joined_by_flow_arrows(session, tmp_path):
    import json

    path = tmp_path / "trace.json"
    session.prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in trace if e.get("cat") == "kernel" and e["name"] == "aten::mm.default"]
    assert len(kernels) == 1 and kernels[0]["pid"] == 0 and kernels[0]["tid"] == 0
    flows = [e for e in trace if e.get("cat") == "ac2g"]
    starts = {e["id"] for e in flows if e["ph"] == "s"}
    ends = {e["id"] for e in flows if e["ph"] == "f"}
    assert starts == ends and len(starts) >= len(session.records.device) - 1  # the collective has no op
    names = {e["name"] for e in trace if e.get("cat") == "privateuse1_runtime"}
    assert {"neuronLaunchExecutable", "neuronMemcpyAsync", "neuronDeviceSynchronize"} <= names


def test_profiled_values_are_the_unprofiled_values(session):
    torch.manual_seed(0)
    host = torch.randn(64, 64)
    product = host @ host
    product.relu_()
    torch.testing.assert_close(session.product.cpu(), product)
    torch.testing.assert_close(session.graph_result.cpu(), (product.sin() * 2).sum(dim=0))
    torch.testing.assert_close(session.streamed[3].cpu(), product * 3.0)


def _train_step(profiled: bool) -> list[torch.Tensor]:
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to("neuron")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 8, device="neuron"), torch.randn(4, 1, device="neuron")

    def step():
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()

    if profiled:
        with torch.profiler.profile(activities=ACTIVITIES):
            step()
            torch.neuron.synchronize()
    else:
        step()
    return [p.detach().cpu() for p in model.parameters()]


def test_a_profiled_training_step_gives_the_values_of_an_unprofiled_one():
    for profiled, plain in zip(_train_step(True), _train_step(False), strict=True):
        torch.testing.assert_close(profiled, plain, rtol=0, atol=0)


def test_runtime_events_name_what_the_host_did():
    x = torch.randn(3, 5, device="neuron")
    event = torch.neuron.Event()
    with torch.profiler.profile(activities=ACTIVITIES):
        with pytest.warns(UserWarning, match="not supported natively"):
            torch.ops.neuron_profiling_test.doubled(x)  # falls back to the CPU
        torch.ones(7, 11, device="neuron").exp()  # a shape no earlier test compiled: cache misses
        event.record()
        torch.neuron.current_stream().wait_event(event)
        event.synchronize()
        torch.neuron.synchronize()
    records = tables.Records.of_last_session()
    names = {r.name for r in records.runtime}
    assert {"neuronCpuFallback", "neuronEventRecord", "neuronStreamWaitEvent", "neuronEventSynchronize"} <= names
    assert "neuronDeviceSynchronize" in names
    fallback = next(r for r in records.runtime if r.name == "neuronCpuFallback")
    assert fallback.detail == "neuron_profiling_test::doubled.default" and fallback.end_ns > fallback.start_ns
    misses = [r for r in records.runtime if r.name == "neuronCacheMiss" and r.detail == "aten::exp.default"]
    assert len(misses) == 1 and misses[0].end_ns > misses[0].start_ns


def test_building_an_executable_adds_no_ops_to_the_profile():
    # A cache miss traces the op's decomposition on fake tensors: those aten::/prims:: calls are
    # not the user's (helper-60: a first gelu counted aten::gelu twice and prims::mul three times).
    x = torch.randn(13, 17, device="neuron")  # a shape no earlier test compiled
    counts = []
    for _ in range(2):
        with torch.profiler.profile(activities=ACTIVITIES) as prof:
            torch.nn.functional.gelu(x)
            torch.neuron.synchronize()
        counts.append({e.key: e.count for e in prof.key_averages()})
    first, second = counts
    assert first["neuronCacheMiss"] == 1 and "neuronCacheMiss" not in second
    assert first["aten::gelu"] == second["aten::gelu"] == 1
    assert not [key for key in first if key.startswith("prims::")]
    assert {k: v for k, v in first.items() if k != "neuronCacheMiss"} == second


@pytest.mark.parametrize(
    ("modes", "device_events", "runtime_events"),
    [([ProfileMode.DEVICE], True, False), ([ProfileMode.RUNTIME], False, True)],
)
def test_modes_choose_device_or_runtime_activity(modes, device_events, runtime_events):
    x = torch.randn(8, 8, device="neuron")
    config = NeuronConfig(modes=modes)
    with torch.profiler.profile(activities=ACTIVITIES, experimental_config=config) as prof:
        (x @ x).sum()
        torch.neuron.synchronize()
    events = prof.events()
    assert any(_is_device(e) for e in events) == device_events
    assert any(e.activity_type == "privateuse1_runtime" for e in events) == runtime_events


def test_without_privateuse1_activity_nothing_is_recorded():
    x = torch.randn(8, 8, device="neuron")
    with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
        (x @ x).sum()
        assert not launch_records.active
    assert not any(_is_device(e) for e in prof.events())
    assert not launch_records.active


def test_capture_enabled_for_nc_and_max_events_per_nc_limit_what_is_recorded(two_cores):
    x0, x1 = torch.randn(8, 8, device="neuron:0"), torch.randn(8, 8, device="neuron:1")
    config = NeuronConfig(capture_enabled_for_nc="1", max_events_per_nc=2)
    with pytest.warns(UserWarning, match="reached max_events_per_nc"):
        with torch.profiler.profile(activities=ACTIVITIES, experimental_config=config):
            for _ in range(3):
                x0 + x0
                x1 + x1
            torch.neuron.synchronize(0)
            torch.neuron.synchronize(1)
    records = tables.Records.of_last_session()
    assert [r.core for r in records.device] == [1, 1] and records.dropped_over_limit == 1


def test_a_schedule_records_its_active_steps_only():
    x = torch.randn(8, 8, device="neuron")
    traces = []
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    with torch.profiler.profile(
        activities=ACTIVITIES, schedule=schedule, on_trace_ready=lambda p: traces.append(p.events())
    ) as prof:
        for step in range(5):
            with record_function(f"step {step}"):
                x * float(step)
                torch.neuron.synchronize()
            prof.step()
    assert len(traces) == 1
    steps = {e.name for e in traces[0] if e.name.startswith("step ")}
    assert steps == {"step 2", "step 3"}
    assert sum(1 for e in traces[0] if _is_device(e) and e.name == "aten::mul.Tensor") == 2


def test_with_stack_and_acc_events_keep_the_device_time():
    x = torch.randn(8, 8, device="neuron")
    x @ x  # built before the profile: a cache miss runs PyTorch's meta kernel, another aten::mm
    config = NeuronConfig(verbose=False)  # other _ExperimentalConfig options pass through
    with torch.profiler.profile(
        activities=ACTIVITIES, experimental_config=config, with_stack=True, acc_events=True
    ) as prof:
        x @ x
        torch.neuron.synchronize()
    (mm,) = [e for e in prof.events() if e.name == "aten::mm"]
    # with_stack records the Python frames, as for a CPU or CUDA profile
    assert any(e.name.startswith("tests/profiling/test_device_events.py(") for e in prof.events())
    assert [k.name for k in mm.kernels] == ["aten::mm.default"] and mm.device_time_total > 0


def test_legacy_autograd_profiler_times_device_ops_as_cudas_does(capfd):
    # torch.autograd.profiler.profile(use_device="neuron") without Kineto records a timing event
    # around every op, through the device's profiler stubs as CUDA's; without them every op printed
    # "PrivateUse1 used in profiler but not enabled" and no device time came back (helper-83).
    x = torch.randn(64, 64, device="neuron")
    (x @ x).sum().item()  # built before the profile
    with torch.autograd.profiler.profile(use_device="neuron") as prof:
        product = x @ x
        product.sum().item()
    timed = {e.key: e.self_device_time_total for e in prof.key_averages()}
    assert timed["aten::mm"] > 0
    assert "PrivateUse1 used in profiler but not enabled" not in capfd.readouterr().err
    torch.testing.assert_close(product.cpu(), x.cpu() @ x.cpu())
