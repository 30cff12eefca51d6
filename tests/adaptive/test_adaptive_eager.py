"""Adaptive eager: recorded runs of ops fused into one executable, with eager's values, random
stream, autograd, memory statistics and faults, flushed wherever a value or an order shows."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import torch_neuronx
from torch_neuronx.eager import fallback


@pytest.fixture(autouse=True)
def _fresh_metrics():
    torch_neuronx.reset_adaptive_eager_metrics()
    yield


def _metrics():
    return torch_neuronx.adaptive_eager_metrics()


def _chain(x):
    return (x * 2 + 1).sin().exp() - 3


def test_a_run_of_ops_is_one_executable_with_eagers_bits():
    x = torch.randn(64, 64, device="neuron")
    plain = _chain(x).cpu()
    with torch_neuronx.adaptive_eager():
        fused = _chain(x)
        assert _metrics()["traces_run"] == 0  # recorded, not run
    assert _metrics()["fused_ops"] == {5: 1}
    assert _metrics()["flush_reasons"] == {"leaving adaptive_eager()": 1}
    assert torch.equal(fused.cpu(), plain)  # elementwise work computes bit for bit as eager


def test_a_reduction_fused_with_its_producers_matches_eager():
    """XLA may fuse a producer into a reduction (YNNPACK's reduce fusion), which can change the
    last bits of the sum, as compiled code does: values match eager within float32's rounding."""
    x = torch.randn(64, 64, device="neuron")
    plain = _chain(x).sum(0).cpu()
    with torch_neuronx.adaptive_eager():
        fused = _chain(x).sum(0)
    torch.testing.assert_close(fused.cpu(), plain, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize(
    "read",
    [
        lambda t: t.cpu(),
        lambda t: t.sum().item(),
        lambda t: t.tolist(),
        lambda t: repr(t),
        lambda t: bool(t.sum() > -1e9),
        lambda t: torch.nonzero(t > 0),
        lambda t: t.cumsum(0).to("neuron:1") if torch.neuron.device_count() > 1 else t.cpu(),
    ],
    ids=["cpu", "item", "tolist", "print", "bool", "data_dependent_shape", "copy_between_cores"],
)
def test_host_reads_and_shape_dependent_ops_flush(read):
    x = torch.randn(16, device="neuron")
    expected = _chain(x).cpu()
    with torch_neuronx.adaptive_eager():
        y = _chain(x)
        read(y)
        assert _metrics()["traces_run"] >= 1 and max(_metrics()["fused_ops"]) >= 5  # the chain ran
        torch.testing.assert_close(y.cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize(
    "order",
    [
        lambda: torch.neuron.synchronize(),
        lambda: torch.neuron.current_stream().synchronize(),
        lambda: torch.neuron.current_stream().query(),
        lambda: torch_neuronx.Event().record(),
    ],
    ids=["synchronize", "stream_synchronize", "stream_query", "event_record"],
)
def test_synchronization_streams_and_events_flush(order):
    x = torch.randn(16, device="neuron")
    with torch_neuronx.adaptive_eager():
        _chain(x)
        order()
        assert _metrics()["traces_run"] == 1


def test_event_timing_measures_the_recorded_work():
    x = torch.randn(256, 256, device="neuron")
    start, end = torch_neuronx.Event(enable_timing=True), torch_neuronx.Event(enable_timing=True)
    with torch_neuronx.adaptive_eager():
        start.record()
        for _ in range(4):
            x = x @ x / 256
        end.record()
        end.synchronize()
    assert start.elapsed_time(end) > 0


#: An op with a CPU kernel only (every ATen op the OpInfos cover has a neuron kernel now).
_CPU_ONLY = torch.library.Library("neuron_adaptive_tests", "DEF")
_CPU_ONLY.define("cpu_only(Tensor x) -> Tensor")
_CPU_ONLY.impl("cpu_only", lambda x: x * 2 + 1, "CPU")
_CPU_ONLY.impl("cpu_only", torch.empty_like, "Meta")


def test_a_cpu_fallback_op_flushes_and_its_result_is_right(monkeypatch):
    # The fallback warns once per op and process: another test in this worker may have warned.
    monkeypatch.setattr(fallback, "_warned", set())
    x = torch.eye(3, device="neuron") * 4
    with torch_neuronx.adaptive_eager(), pytest.warns(UserWarning, match="not supported natively"):
        result = torch.ops.neuron_adaptive_tests.cpu_only(x + 1)
    torch.testing.assert_close(result.cpu(), (torch.eye(3) * 4 + 1) * 2 + 1)
    assert "neuron_adaptive_tests::cpu_only.default" in torch_neuronx.get_fallback_ops()


def test_size_limit_splits_a_long_run(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_ADAPTIVE_EAGER_MAX_OPS", "4")
    x = torch.zeros(8, device="neuron")
    with torch_neuronx.adaptive_eager():
        for _ in range(10):
            x = x + 1
    assert _metrics()["fused_ops"] == {4: 2, 2: 1}
    assert _metrics()["flush_reasons"]["size limit"] == 2
    torch.testing.assert_close(x.cpu(), torch.full((8,), 10.0))


def test_enabled_false_runs_plain_eager_inside():
    x = torch.randn(8, device="neuron")
    with torch_neuronx.adaptive_eager():
        y = x + 1
        with torch_neuronx.adaptive_eager(enabled=False):
            z = y * 2  # runs now, after what was recorded
            assert _metrics()["traces_run"] == 1
        w = z - 1
    torch.testing.assert_close(w.cpu(), (x.cpu() + 1) * 2 - 1)


def test_deterministic_algorithms_run_plain_eager():
    x = torch.randn(8, device="neuron")
    torch.use_deterministic_algorithms(True)
    try:
        with torch_neuronx.adaptive_eager():
            x + 1
            assert _metrics()["ops_recorded"] == 0 and _metrics()["plain_launches"] == 1
    finally:
        torch.use_deterministic_algorithms(False)


def test_in_place_ops_on_views_write_through_to_the_base():
    base = torch.arange(12.0).reshape(3, 4)
    device_base = base.to("neuron")
    with torch_neuronx.adaptive_eager():
        view = device_base[1:, ::2]
        view.mul_(-1).add_(100)
        column = device_base[:, 1].clone()
        device_base.t()[0].zero_()
    expected = base.clone()
    expected[1:, ::2] = expected[1:, ::2] * -1 + 100
    expected_column = expected[:, 1].clone()
    expected.t()[0] = 0
    torch.testing.assert_close(device_base.cpu(), expected)
    torch.testing.assert_close(column.cpu(), expected_column)


def test_random_stream_is_eagers():
    torch.manual_seed(5)
    plain = [torch.nn.functional.dropout(torch.ones(1000, device="neuron"), 0.3).cpu() for _ in range(2)]
    torch.manual_seed(5)
    with torch_neuronx.adaptive_eager():
        fused = [torch.nn.functional.dropout(torch.ones(1000, device="neuron"), 0.3) for _ in range(2)]
    assert all(torch.equal(a, b.cpu()) for a, b in zip(plain, fused, strict=True))


def _train(adaptive: bool, optimizer: str, steps: int = 4):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Dropout(0.1), torch.nn.Linear(16, 1))
    model = model.to("neuron")
    if optimizer == "fused":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, foreach=True)
    data = torch.randn(steps, 16, 8, generator=torch.Generator().manual_seed(1))
    losses, compiled = [], []
    with torch_neuronx.adaptive_eager(enabled=adaptive):
        for step in range(steps):
            opt.zero_grad()
            loss = model(data[step].to("neuron")).square().mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            compiled.append(_metrics()["compiled"])
    return losses, [p.detach().cpu() for p in model.parameters()], compiled


@pytest.mark.parametrize("optimizer", ["fused", "foreach"])
def test_training_matches_eager_and_compiles_nothing_after_its_first_step(optimizer):
    plain_losses, plain_params, _ = _train(False, optimizer)
    losses, params, compiled = _train(True, optimizer)
    torch.testing.assert_close(losses, plain_losses, rtol=1e-5, atol=1e-6)
    for got, want in zip(params, plain_params, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert compiled[1] == compiled[-1]  # every later step replays cached executables
    assert _metrics()["cache_hits"] > 0


def test_autocast_and_executed_ops_as_in_eager():
    x, w = torch.randn(4, 8, device="neuron"), torch.randn(8, 8, device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        plain = (x @ w).relu()
    torch_neuronx.clear_op_tracking()
    with torch_neuronx.adaptive_eager(), torch.autocast("neuron", dtype=torch.bfloat16):
        fused = (x @ w).relu()
    assert fused.dtype == torch.bfloat16
    assert torch.equal(fused.cpu(), plain.cpu())
    executed = torch_neuronx.get_executed_ops()
    assert executed["aten::mm.default"] == 1 and executed["aten::relu.default"] == 1


def test_memory_statistics_are_eagers():
    torch.neuron.synchronize()
    before = torch.neuron.memory_allocated()
    with torch_neuronx.adaptive_eager():
        x = torch.ones(1024, device="neuron")
        y = x * 2
        assert torch.neuron.memory_allocated() == before + 2 * 4096
        del x
        assert torch.neuron.memory_allocated() == before + 4096
    torch.testing.assert_close(y.cpu(), torch.full((1024,), 2.0))
    del y
    assert torch.neuron.memory_allocated() == before


def test_a_trace_is_one_device_event_counted_to_the_op_that_ran_it():
    x = torch.randn(64, 64, device="neuron")
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
    with torch.profiler.profile(activities=activities) as prof, torch_neuronx.adaptive_eager():
        _chain(x).cpu()
    ran_by = {kernel.name: event.name for event in prof.events() for kernel in event.kernels}
    assert ran_by == {"adaptive eager trace (5 ops)": "aten::_copy_from", "Memcpy DtoH": "aten::_copy_from"}


def test_a_device_fault_names_the_op_that_caused_it():
    x = torch.arange(5.0, device="neuron")
    with torch_neuronx.adaptive_eager():
        picked = torch.index_select(x, 0, torch.tensor([0, 7], device="neuron"))
        doubled = picked * 2
        with pytest.raises(IndexError, match=r"aten::index_select.default on neuron:0: .*index 7 is out of bounds"):
            doubled.cpu()
        torch.testing.assert_close((x + 1).cpu(), torch.arange(1.0, 6.0))  # the device stays usable


def test_a_fault_leaves_undefined_only_what_was_computed_from_the_faulted_op():
    x = torch.arange(5.0, device="neuron")
    with torch_neuronx.adaptive_eager():
        picked = torch.index_select(x, 0, torch.tensor([0, 7], device="neuron"))
        doubled = picked * 2
        unrelated = x * 3  # fused into the same executable, but reads nothing the fault touched
        with pytest.raises(IndexError, match="index 7 is out of bounds"):
            torch.neuron.synchronize()
        torch.testing.assert_close(unrelated.cpu(), torch.arange(5.0) * 3)
        with pytest.raises(IndexError, match=r"index 7 is out of bounds.*\(raised before"):
            doubled.cpu()
        with pytest.raises(IndexError, match=r"\(raised before"):  # a recorded op reading it raises at the op
            doubled + 1


def test_an_op_recorded_before_its_input_was_poisoned_is_undefined_too(two_cores):
    x = torch.arange(12.0, device="neuron:0").reshape(4, 3)
    with torch_neuronx.adaptive_eager():
        moved = x.index_select(0, torch.tensor([0, 7], device="neuron:0")).to("neuron:1")
        derived = moved + 1  # recorded on core 1 before core 0's fault poisons what it reads
        unrelated = torch.ones(2, device="neuron:1") * 2
        with pytest.raises(IndexError, match="index 7 is out of bounds"):
            torch.neuron.synchronize(0)
        torch.testing.assert_close(unrelated.cpu(), torch.full((2,), 2.0))
        for tensor in (moved, derived):
            with pytest.raises(IndexError, match="which are undefined"):
                tensor.cpu()


def test_an_op_reading_a_recorded_result_of_a_poisoned_input_raises_at_the_op(two_cores):
    # Found by a breaker: the recorded `u0` reads a copy that core 1's fault poisons after `u0` was
    # recorded; `acc.add_(u0)` was recorded too, raised nothing, and lost the accumulator.
    with torch_neuronx.adaptive_eager():
        picked = torch.arange(12.0, device="neuron:1").reshape(4, 3)[torch.tensor([0, 6], device="neuron:1")]
        u0 = picked.to("neuron:0") + 1
        acc = torch.zeros(2, 3, device="neuron:0")
        with pytest.raises(IndexError, match="index 6 is out of bounds"):
            torch.neuron.synchronize(1)
        with pytest.raises(IndexError, match=r"\(raised before"):
            acc.add_(u0)
        torch.testing.assert_close(acc.cpu(), torch.zeros(2, 3))


def _histc_of_non_finite_data_after(x):
    before = x * 2
    with pytest.raises(RuntimeError, match=r"range of \[1, inf\] is not finite") as raised:
        torch.histc(torch.tensor([1.0, float("inf")], device="neuron"))
    return before, str(raised.value)


def test_a_synchronous_check_raises_at_the_op_as_in_eager():
    x = torch.arange(3.0, device="neuron")
    _, eager_message = _histc_of_non_finite_data_after(x)
    with torch_neuronx.adaptive_eager():
        before, message = _histc_of_non_finite_data_after(x)
        assert _metrics()["flush_reasons"] == {"a synchronous check": 1}  # the ops before it ran too
        torch.testing.assert_close(before.cpu(), torch.arange(3.0) * 2)
    assert message == eager_message  # made at the op: no "raised at a synchronization point"


def test_a_synchronous_check_raises_an_earlier_ops_fault_first_as_in_eager():
    def faulting_then_checked(x):
        torch.index_select(x, 0, torch.tensor([9], device="neuron"))
        with pytest.raises(IndexError, match="index 9 is out of bounds") as raised:
            torch.histc(torch.tensor([1.0, float("inf")], device="neuron"))
        torch.neuron.synchronize()  # histc's own check went with the call that raised
        return str(raised.value)

    x = torch.arange(3.0, device="neuron")
    eager_message = faulting_then_checked(x)
    with torch_neuronx.adaptive_eager():
        assert faulting_then_checked(x) == eager_message


def test_an_error_of_a_recorded_op_raises_at_the_op():
    with torch_neuronx.adaptive_eager():
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            torch.ones(3, dtype=torch.int64, device="neuron").add_(0.5)


def test_compiled_graphs_compose_with_recorded_ops():
    compiled = torch.compile(lambda t: torch.nn.functional.softplus(t) * 3, backend="neuron")
    x = torch.randn(32, device="neuron")
    expected = compiled(x + 1).cpu() - 1
    with torch_neuronx.adaptive_eager():
        result = compiled(x + 1) - 1
    torch.testing.assert_close(result.cpu(), expected)


def _output_under_the_environment_variable(code: str) -> str:
    """What ``code`` prints in a fresh process with TORCH_NEURONX_ADAPTIVE_EAGER=1."""
    env = dict(os.environ, TORCH_NEURONX_ADAPTIVE_EAGER="1")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_environment_variable_turns_it_on_for_the_process():
    code = (
        "import torch, torch_neuronx\n"
        "x = torch.randn(64, 64, device='neuron')\n"
        "y = ((x * 2 + 1).sin().exp() - 3).cpu()\n"
        "print(torch_neuronx.adaptive_eager_metrics()['fused_ops'])\n"
    )
    # randn's normal_ and the chain's five ops: one trace
    assert _output_under_the_environment_variable(code).strip() == "{6: 1}"


def test_a_block_that_disables_it_holds_when_the_device_starts_inside_it():
    # The device starts at the first op; under TORCH_NEURONX_ADAPTIVE_EAGER=1 the start turned
    # recording on even inside adaptive_eager(enabled=False), where the profiler's tests ran fused.
    code = (
        "import torch, torch_neuronx\n"
        "with torch_neuronx.adaptive_eager(enabled=False):\n"
        "    x = torch.randn(64, 64, device='neuron')\n"
        "    y = ((x * 2 + 1).sin() - 3).cpu()\n"
        "inside = torch_neuronx.adaptive_eager_metrics()['ops_recorded']\n"
        "z = ((x * 2 + 1).sin() - 3).cpu()\n"
        "print(inside, torch_neuronx.adaptive_eager_metrics()['ops_recorded'], torch.equal(y, z))\n"
    )
    # the chain's four ops, recorded only outside
    assert _output_under_the_environment_variable(code).split() == ["0", "4", "True"]


def test_overlapping_blocks_of_two_threads_leave_recording_off():
    # Each block restored the mode its entry saw, so the last to leave turned recording back on
    # for the rest of the process (helper-61).
    import threading

    from torch_neuronx.adaptive import trace

    x = torch.randn(4, device="neuron")
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first():
        with torch_neuronx.adaptive_eager():
            (x * 2).sin()
            first_in.set()
            second_in.wait()
        first_out.set()

    def second():  # enters while the first block is open (sees recording on), leaves last
        first_in.wait()
        with torch_neuronx.adaptive_eager():
            (x * 3).sin()
            second_in.set()
            first_out.wait()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not trace.active()


def test_threads_recording_and_stopping_at_once_lose_no_op():
    # One thread's stop flushed, then others recorded before recording was off: their ops stayed
    # unrun and a later plain launch read a pending buffer (TypeError, helper-61).
    import threading

    x = torch.randn(16, 16)
    device_x = x.to("neuron")
    device_x.cpu()
    results, errors = {}, []

    def work(i):
        try:
            with torch_neuronx.adaptive_eager():
                a = device_x
                for _ in range(10):
                    a = torch.tanh(torch.add(torch.mul(a, 0.5), i))
                results[i] = a.cpu()
        except Exception as error:  # noqa: BLE001 - collected, asserted below
            errors.append(error)

    for _ in range(10):  # a race: without the lock, most runs of 10 rounds failed
        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    for i, value in results.items():
        expected = x
        for _ in range(10):
            expected = torch.tanh(torch.add(torch.mul(expected, 0.5), i))
        torch.testing.assert_close(value, expected)
