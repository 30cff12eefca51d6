"""Checks that run inside the processes of a distributed job (``harness.spawn``), by name.

Each check runs one collective on neuron tensors and the same collective on CPU copies of them
through gloo, in one group created with ``"cpu:gloo,neuron:neuron"`` (the neuron group hands CPU
tensors to gloo as they are): the CPU result is the oracle, compared with ``assert_close``. Inputs
differ per rank (seeded by rank and check), and are non-contiguous views where the collective
writes into the caller's tensor.

``run(names)`` runs the named checks in this process and returns {name: None or the traceback}, so
one job serves many tests.
"""

from __future__ import annotations

import datetime
import os
import time
import traceback
import warnings
import weakref
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch.testing import assert_close

from tests.distributed import stack_checks

CHECKS: dict[str, Callable[[int, int], None]] = {}

DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
FLOATS = ("float32", "bfloat16", "float16")
INTEGERS = ("int64", "int32", "int8", "uint8")


def check(name: str) -> Callable[[Callable[[int, int], None]], Callable[[int, int], None]]:
    def register(function: Callable[[int, int], None]) -> Callable[[int, int], None]:
        CHECKS[name] = function
        return function

    return register


def make_input(shape: tuple[int, ...], dtype: torch.dtype, rank: int, salt: int = 0) -> torch.Tensor:
    """Per-rank CPU values small enough that products and sums stay exact in every dtype."""
    generator = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    if dtype.is_floating_point:
        return torch.randint(-4, 5, shape, generator=generator).to(dtype) / 2
    low = 0 if dtype == torch.uint8 else -5
    return torch.randint(low, 6, shape, generator=generator).to(dtype)


def strided_view(base: torch.Tensor) -> torch.Tensor:
    """A non-contiguous view of ``base`` (its transpose) with the same values as ``base.t()``."""
    return base.t()


def init(rank: int, world_size: int, backend: str = "cpu:gloo,neuron:neuron", timeout: float = 60.0) -> None:
    """Joins the job's default group (the harness put MASTER_ADDR/PORT and LOCAL_RANK in the
    environment), bound to the core of its LOCAL_RANK, as NCCL jobs bind theirs with ``device_id``."""
    dist.init_process_group(
        backend,
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout),
        device_id=torch.device("neuron", int(os.environ["LOCAL_RANK"]) % torch.neuron.device_count()),
    )


def run(names: list[str]) -> dict[str, str | None]:
    outcome: dict[str, str | None] = {}
    for name in names:
        try:
            CHECKS[name](dist.get_rank(), dist.get_world_size())
            torch.neuron.synchronize()
            outcome[name] = None
        except Exception:
            outcome[name] = traceback.format_exc()
    return outcome


def worker(rank: int, world_size: int, names: list[str], backend: str = "cpu:gloo,neuron:neuron") -> dict:
    init(rank, world_size, backend)
    try:
        return run(names)
    finally:
        dist.destroy_process_group()


# ------------------------------------------------------------------------------------------ all_reduce

REDUCE_OPS = {
    "SUM": dist.ReduceOp.SUM,
    "PRODUCT": dist.ReduceOp.PRODUCT,
    "MIN": dist.ReduceOp.MIN,
    "MAX": dist.ReduceOp.MAX,
    "BAND": dist.ReduceOp.BAND,
    "BOR": dist.ReduceOp.BOR,
    "BXOR": dist.ReduceOp.BXOR,
}


def _all_reduce_check(op_name: str, dtype_name: str) -> None:
    def body(rank: int, world_size: int) -> None:
        dtype = DTYPES[dtype_name]
        cpu = make_input((3, 5), dtype, rank)
        neuron = cpu.to("neuron").t().contiguous().t()  # a neuron view with transposed strides
        expected = cpu.clone()
        dist.all_reduce(expected, op=REDUCE_OPS[op_name])
        dist.all_reduce(neuron, op=REDUCE_OPS[op_name])
        assert_close(neuron.cpu(), expected)

    CHECKS[f"all_reduce_{op_name}_{dtype_name}"] = body


for _op in ("SUM", "PRODUCT", "MIN", "MAX"):
    for _dtype in DTYPES:
        _all_reduce_check(_op, _dtype)
for _op in ("BAND", "BOR", "BXOR"):
    for _dtype in (*INTEGERS, "bool"):
        _all_reduce_check(_op, _dtype)


def _all_reduce_avg_check(dtype_name: str) -> None:
    def body(rank: int, world_size: int) -> None:
        dtype = DTYPES[dtype_name]
        cpu = make_input((4, 3), dtype, rank)
        neuron = cpu.to("neuron")
        if dtype.is_floating_point:  # NCCL's pre-multiplied sum: each input times 1 / size
            expected = cpu * (1 / world_size)
            dist.all_reduce(expected)
        else:  # the sum, divided and truncated
            total = cpu.clone()
            dist.all_reduce(total)
            expected = torch.div(total, world_size, rounding_mode="trunc")
        dist.all_reduce(neuron, op=dist.ReduceOp.AVG)
        assert_close(neuron.cpu(), expected)

    CHECKS[f"all_reduce_AVG_{dtype_name}"] = body


for _dtype in (*FLOATS, *INTEGERS):
    _all_reduce_avg_check(_dtype)


@check("all_reduce_AVG_near_the_largest_float16")
def _avg_near_max(rank: int, world_size: int) -> None:
    # The sum of 60000s overflows float16; NCCL scales each input by 1 / size first, and so does neuron.
    for dtype, large in ((torch.float16, 60000.0), (torch.float32, 3e38)):
        tensor = torch.tensor([large, 1.0], dtype=dtype, device="neuron")
        dist.all_reduce(tensor, op=dist.ReduceOp.AVG)
        assert_close(tensor.cpu(), torch.tensor([large, 1.0], dtype=dtype))


def _complex_input(dtype: torch.dtype, rank: int) -> torch.Tensor:
    """Per-rank complex values whose sums and halves are exact in complex32's float16 parts."""
    parts = make_input((3, 5, 2), torch.float32, rank, salt=7)
    return torch.view_as_complex(parts).to(dtype)


def _all_reduce_complex_check(op_name: str, dtype_name: str) -> None:
    def body(rank: int, world_size: int) -> None:
        # The CPU compares no complex32 tensors: their float16 (real, imag) pairs are compared.
        cpu = _complex_input(getattr(torch, dtype_name), rank)
        neuron = cpu.to("neuron").t().contiguous().t()
        expected = cpu.clone()
        dist.all_reduce(expected, op=REDUCE_OPS.get(op_name, dist.ReduceOp.AVG))
        dist.all_reduce(neuron, op=REDUCE_OPS.get(op_name, dist.ReduceOp.AVG))
        assert neuron.dtype == expected.dtype
        assert_close(torch.view_as_real(neuron.cpu()), torch.view_as_real(expected), rtol=0, atol=0)

    CHECKS[f"all_reduce_{op_name}_{dtype_name}"] = body


for _op in ("SUM", "AVG"):
    for _dtype in ("complex64", "complex32"):
        _all_reduce_complex_check(_op, _dtype)


@check("all_reduce_MAX_complex32_raises")
def _max_complex32(rank: int, world_size: int) -> None:
    # torch.distributed refuses it before any backend (the same words on CUDA with NCCL).
    try:
        dist.all_reduce(torch.ones(3, dtype=torch.complex32, device="neuron"), op=dist.ReduceOp.MAX)
    except ValueError as error:
        assert str(error) == "all_reduce does not support RedOpType.MAX on complex tensors", error
    else:
        raise AssertionError("MAX of complex32 tensors did not raise")


@check("complex_tensors_where_nccl_takes_them")
def _complex_where_nccl_takes_them(rank: int, world_size: int) -> None:
    # c10d hands neither reduce, gather nor reduce_scatter complex tensors as view_as_real pairs:
    # gloo raised a bare "Invalid scalar type". NCCL's reduce views them itself and computes (SUM,
    # AVG, PREMUL_SUM); the others reach getNcclDataType, which raises, on every rank at once here.
    for dtype in (torch.complex64, torch.complex32):
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
            cpu = _complex_input(dtype, rank)
            neuron = cpu.to("neuron").t().contiguous().t()
            before = torch.view_as_real(neuron.cpu())
            dist.reduce(neuron, dst=1, op=op)
            expected = torch.view_as_real(sum(_complex_input(torch.complex64, r) for r in range(world_size)))
            if op == dist.ReduceOp.AVG:
                expected = expected / world_size
            wanted = expected.to(before.dtype) if rank == 1 else before
            assert neuron.dtype == dtype
            assert_close(torch.view_as_real(neuron.cpu()), wanted, rtol=0, atol=0)
    started = time.monotonic()
    tensor = torch.ones(4, dtype=torch.complex64, device="neuron")
    try:
        dist.reduce(tensor, dst=0, op=dist.ReduceOp.MAX)
    except RuntimeError as error:
        assert "neuron reduce: reduce does not support MAX on complex tensors" in str(error), error
    else:
        raise AssertionError("reduce MAX of complex tensors did not raise")
    gathered = [torch.zeros_like(tensor) for _ in range(world_size)] if rank == 0 else None
    calls = {
        "gather": lambda: dist.gather(tensor, gathered, dst=0),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(
            torch.zeros(2, dtype=torch.complex64, device="neuron"), tensor
        ),
        "reduce_scatter": lambda: dist.reduce_scatter(
            torch.zeros(2, dtype=torch.complex64, device="neuron"), list(tensor.reshape(world_size, -1))
        ),
        "gather complex32": lambda: dist.gather(
            tensor.to(torch.complex32), [t.to(torch.complex32) for t in gathered] if rank == 0 else None, dst=0
        ),
    }
    for name, call in calls.items():
        try:
            call()
        except TypeError as error:
            kind = "ComplexHalf" if "complex32" in name else "ComplexFloat"
            assert str(error) == f"Input tensor data type is not supported for NCCL process group: {kind}", error
        else:
            raise AssertionError(f"{name} of complex tensors did not raise")
    assert time.monotonic() - started < 20
    dist.all_reduce(tensor)
    assert_close(tensor.cpu(), torch.full((4,), float(world_size), dtype=torch.complex64))


@check("all_reduce_AVG_bool_raises")
def _avg_bool(rank: int, world_size: int) -> None:
    try:
        dist.all_reduce(torch.ones(3, dtype=torch.bool, device="neuron"), op=dist.ReduceOp.AVG)
    except TypeError as error:
        assert "ReduceOp.AVG with boolean" in str(error), error
    else:
        raise AssertionError("AVG of bool tensors did not raise")


@check("all_reduce_PREMUL_SUM")
def _premul_sum(rank: int, world_size: int) -> None:
    cpu = make_input((6,), torch.float32, rank)
    scaled = cpu * 0.5
    dist.all_reduce(scaled)
    neuron = cpu.to("neuron")
    dist.all_reduce(neuron, op=dist._make_nccl_premul_sum(0.5))
    assert_close(neuron.cpu(), scaled)


@check("all_reduce_async_orders_later_work")
def _async(rank: int, world_size: int) -> None:
    cpu = make_input((64,), torch.float32, rank)
    expected = cpu.clone()
    dist.all_reduce(expected)
    neuron = (cpu.to("neuron") * 2) / 2  # earlier work on the stream that the collective must see
    work = dist.all_reduce(neuron, async_op=True)
    work.wait()
    later = neuron + 1  # stream work after wait() reads the result
    assert_close(later.cpu(), expected + 1)
    future_value = work.get_future().value()
    assert future_value[0] is neuron


@check("callbacks_run_in_program_order")
def _callbacks_in_program_order(rank: int, world_size: int) -> None:
    # NCCL's work future completes at the enqueue: a then() callback runs at once, and the
    # collective it starts reaches the group before the caller's next one on every rank. Callbacks
    # that ran once the results landed, on gloo's thread, raced the caller's next collective, and
    # the ranks disagreed (PowerSGD's DDP hook, 3 of 3 runs).
    def reduce_doubled(future: torch.futures.Future) -> torch.Tensor:
        doubled = future.value()[0] * 2  # reads the first result: waits for it to land
        dist.all_reduce(doubled)
        return doubled

    total = float(sum(range(world_size)))
    for numel in (256, 2048):  # the inline all_reduce and the staged one
        first = torch.full((numel,), float(rank), device="neuron")
        chained = dist.all_reduce(first, async_op=True).get_future().then(reduce_doubled)
        if rank == 1:
            time.sleep(0.3)  # the first all_reduce has landed here before this rank's next call
        second = torch.ones(3, device="neuron")
        dist.all_reduce(second)
        assert_close(chained.wait().cpu(), torch.full((numel,), 2 * total * world_size))
        assert_close(second.cpu(), torch.full((3,), float(world_size)))


@check("callback_result_saved_for_backward")
def _callback_result_for_backward(rank: int, world_size: int) -> None:
    # A callback runs at the call and autograd saves the output for backward before the result
    # lands; the copy back bumped the output's version counter, and backward() raised "modified by
    # an inplace operation" (helper-80, 5 of 6 ranks). gloo and NCCL leave the counter as it was.
    weight = torch.ones(4, device="neuron", requires_grad=True)
    reduced = torch.full((4,), float(rank + 1), device="neuron")
    if rank == 1:
        time.sleep(0.5)  # the result lands after rank 0's callback saved it
    work = dist.all_reduce(reduced, async_op=True)
    loss = work.get_future().then(lambda future: (weight * future.value()[0]).sum()).wait()
    work.wait()
    loss.backward()
    assert_close(weight.grad.cpu(), torch.full((4,), float(sum(range(1, world_size + 1)))))


@check("failed_async_results_refused_before_the_next_agreement")
def _failed_results_refused(rank: int, world_size: int) -> None:
    # The tensor of a failed async all_reduce, passed to a collective on another group: raised while
    # staging, after the ranks agreed, it left the others waiting until the timeout and the group
    # broken (helper-80). Refused before the agreement, every rank raises at once.
    timeout = datetime.timedelta(seconds=20)
    first, second = (dist.new_group(list(range(world_size)), timeout=timeout) for _ in range(2))
    failed = torch.ones(2048 + rank, device="neuron")  # the ranks disagree on its size
    work = dist.all_reduce(failed, group=first, async_op=True)
    given = failed[:2048] if rank == 0 else torch.ones(2048, device="neuron")
    start = time.monotonic()
    try:
        dist.all_reduce(given, group=second)
    except RuntimeError as error:
        expected = "holds no defined value" if rank == 0 else "rank 0 refused its arguments"
        assert expected in str(error), error
    else:
        raise AssertionError("an all_reduce of an undefined tensor did not raise")
    assert time.monotonic() - start < 10, f"took {time.monotonic() - start:.1f} s"
    try:
        work.wait()
    except RuntimeError as error:
        assert "the ranks disagree" in str(error), error
    after = torch.ones(3, device="neuron")
    dist.all_reduce(after, group=second)  # the group goes on working
    assert_close(after.cpu(), torch.full((3,), float(world_size)))
    for group in (first, second):
        dist.destroy_process_group(group)


@check("coalesced_failures_all_released_by_wait")
def _coalesced_failures(rank: int, world_size: int) -> None:
    # The coalescing manager's wait() stopped at the first failed work: the later ones' tensors
    # raised "holds no defined value" for good (helper-80).
    outputs = [torch.empty(world_size * (3 + rank + k), device="neuron") for k in (0, 2)]
    inputs = [torch.ones(3 + rank + k, device="neuron") for k in (0, 2)]  # sizes differ per rank
    with dist._coalescing_manager(async_ops=True) as manager:
        for output, input in zip(outputs, inputs, strict=True):
            dist.all_gather_into_tensor(output, input)
    try:
        manager.wait()
    except RuntimeError as error:
        assert "the ranks disagree" in str(error), error
    else:
        raise AssertionError("coalesced all_gathers whose ranks disagree did not raise")
    for output in outputs:
        assert_close(output.fill_(1).cpu(), torch.ones_like(output, device="cpu"))


@check("root_broadcast_and_non_root_reduce_tensors_are_not_written")
def _unwritten_tensors(rank: int, world_size: int) -> None:
    # An async broadcast's source on the root, and a reduce's tensor off it, are not written (as on
    # NCCL): they were announced as results, so work on them waited for the other ranks, and raised
    # when the collective failed (helper-80).
    untouched = torch.arange(4.0, device="neuron")
    if rank == 1:
        time.sleep(0.5)
    works = [
        dist.broadcast(untouched, src=0, async_op=True),
        dist.reduce(torch.ones(4, device="neuron"), dst=0, async_op=True),
    ]
    start = time.monotonic()
    if rank == 0:
        untouched.add_(1)  # the root's source: no wait for rank 1
        assert time.monotonic() - start < 0.4, f"the root's source waited {time.monotonic() - start:.1f} s"
    for work in works:
        work.wait()
    expected = torch.arange(4.0) + 1 if rank == 0 else torch.arange(4.0)
    assert_close(untouched.cpu(), expected)


@check("all_reduce_at_and_past_the_inline_size")
def _inline_sizes(rank: int, world_size: int) -> None:
    # Up to 4 KiB an all_reduce's data travels with the ranks' agreement and each rank sums it
    # (distributed/agreement.py); past it, and empty, gloo sums. Both give gloo's bits, in place and
    # async (an empty one raised a view error, helper-79).
    for dtype, limit in ((torch.float32, 1024), (torch.bfloat16, 2048), (torch.int64, 512)):
        for numel in (0, 1, limit, limit + 1):
            cpu = make_input((numel,), dtype, rank)
            expected = cpu.clone()
            dist.all_reduce(expected)
            neuron = cpu.to("neuron")
            dist.all_reduce(neuron)
            assert_close(neuron.cpu(), expected, rtol=0, atol=0)
            view = cpu.to("neuron").repeat_interleave(2)[::2]  # a strided view of a larger storage
            dist.all_reduce(view, async_op=True).wait()
            assert_close(view.cpu(), expected, rtol=0, atol=0)
    scalar = torch.tensor(float(rank + 1), device="neuron")
    dist.all_reduce(scalar, op=dist.ReduceOp.AVG)
    assert_close(scalar.cpu(), torch.tensor((world_size + 1) / 2))


@check("async_collective_returns_before_the_peers_call_it")
def _async_returns_at_once(rank: int, world_size: int) -> None:
    # NCCL enqueues an async collective and returns: rank 0's all_reduce on one group must not wait
    # for rank 1, which first receives on another group what rank 0 sends after its all_reduce.
    # (The groups' short timeout bounds the job's time if this regresses into a wait.)
    timeout = datetime.timedelta(seconds=10)
    reducing, sending = (dist.new_group(list(range(world_size)), timeout=timeout) for _ in range(2))
    reduced, message = torch.ones(4, device="neuron"), torch.full((3,), 7.0, device="neuron")
    if rank == 0:
        work = dist.all_reduce(reduced, group=reducing, async_op=True)
        for peer in range(1, world_size):
            dist.send(message, peer, group=sending)
        work.wait()
    else:
        received = torch.zeros(3, device="neuron")
        dist.recv(received, 0, group=sending)
        assert_close(received.cpu(), message.cpu())
        dist.all_reduce(reduced, group=reducing)
    assert_close(reduced.cpu(), torch.full((4,), float(world_size)))


@check("async_disagreement_raises_at_wait_on_every_rank")
def _async_disagreement(rank: int, world_size: int) -> None:
    # An async collective's agreement is checked after the call returns: the ranks' disagreement
    # (here element counts) raises at wait() on every rank, no rank posts the collective, and the
    # group goes on working.
    mismatched = dist.all_reduce(torch.ones(4 + rank, device="neuron"), async_op=True)
    agreed = torch.ones(2, device="neuron")
    after = dist.all_reduce(agreed, async_op=True)
    # Its future completed at the call, as NCCL's; work on its tensor raises the failure, which
    # says the tensor holds no defined value, until wait() raised it.
    assert mismatched.get_future().done()
    (undefined,) = mismatched.result()
    try:
        undefined.add_(1)
    except RuntimeError as error:
        assert "holds no defined value" in str(error) and "the ranks disagree" in str(error), error
    else:
        raise AssertionError("work on the tensor of a failed async all_reduce did not raise")
    try:
        mismatched.wait()
    except RuntimeError as error:
        assert "the ranks disagree" in str(error), error
    else:
        raise AssertionError("an all_reduce whose ranks disagree did not raise at wait()")
    assert not mismatched.is_success()
    assert_close(undefined.add_(1).cpu(), torch.full((4 + rank,), 2.0))  # usable once wait() raised
    after.wait()
    assert_close(agreed.cpu(), torch.full((2,), float(world_size)))
    # A rank that refuses its own arguments raises at the call; the others at wait().
    refused = torch.ones(2, device="neuron").to(torch.int16 if rank == 1 else torch.int32)
    try:
        dist.all_reduce(refused, async_op=True).wait()
    except TypeError as error:
        assert rank == 1 and "not supported for NCCL process group: Short" in str(error), error
    except RuntimeError as error:
        assert rank != 1 and "rank 1 refused its arguments" in str(error), error
    else:
        raise AssertionError("an all_reduce that rank 1 refuses did not raise")


@check("destroying_a_group_finishes_its_async_collectives")
def _destroy_with_async_pending(rank: int, world_size: int) -> None:
    # destroy_process_group with async collectives in flight: their copies back ran on gloo's
    # threads while the group shut down, and the process aborted ("terminate called without an
    # active exception"). The group finishes them first; their works stay waitable.
    group = dist.new_group(list(range(world_size)), timeout=datetime.timedelta(seconds=20))
    tensors = [torch.full((256,), float(rank + index), device="neuron") for index in range(8)]
    works = [dist.all_reduce(tensor, group=group, async_op=True) for tensor in tensors]
    dist.destroy_process_group(group)
    for index, (tensor, work) in enumerate(zip(tensors, works, strict=True)):
        work.wait()
        expected = sum(float(r + index) for r in range(world_size))
        assert_close(tensor.cpu(), torch.full((256,), expected))


@check("destroyed_groups_are_freed_off_gloo_threads")
def _destroyed_groups_freed(rank: int, world_size: int) -> None:
    # Callbacks that hold their group (as a PowerSGD hook's state does): once the script let go of
    # a destroyed group, gloo's thread dropped the last reference as a callback returned and freed
    # the group there; gloo's destructor joined its own thread and the process aborted ("Resource
    # deadlock avoided": 6 of 7 jobs; the CI's sample, once).
    class Holds:
        def __init__(self, group: dist.ProcessGroup) -> None:
            self.group = group

    freed = []
    for _ in range(4):
        group = dist.new_group(list(range(world_size)), timeout=datetime.timedelta(seconds=20))
        tensor = torch.ones(1024, device="neuron")  # an inline all_reduce: its callbacks run on the agreement's thread
        work = dist.all_reduce(tensor, group=group, async_op=True)
        holds = Holds(group)
        chained = work.get_future().then(lambda _, holds=holds: holds.group.size())
        dist.destroy_process_group(group)
        assert chained.wait() == world_size
        freed.append(weakref.ref(group))
        del group, holds, work, chained
        time.sleep(0.2)  # the gloo thread lets go of the callback
        assert_close(tensor.cpu(), torch.full((1024,), float(world_size)))
    dist.barrier()
    dist.new_group(list(range(world_size)))  # a new group frees the unreferenced destroyed ones
    assert all(group() is None for group in freed), "a destroyed group nothing references was kept"


@check("groups_destroyed_in_a_cpu_collectives_callback_are_freed_on_the_main_thread")
def _destroyed_in_cpu_callback(rank: int, world_size: int) -> None:
    # A CPU collective's callback runs on its gloo thread; destroying a second group there freed
    # the first, already destroyed and let go of, on that thread: gloo joined its own thread and
    # the process aborted (helper-80, 3 of 3).
    timeout = datetime.timedelta(seconds=20)
    held = [dist.new_group(list(range(world_size)), timeout=timeout)]
    other = dist.new_group(list(range(world_size)), timeout=timeout)
    work = dist.all_reduce(torch.ones(4), group=held[0], async_op=True)

    def destroy(_: torch.futures.Future) -> str:
        group = held.pop()
        dist.destroy_process_group(group)
        del group
        dist.destroy_process_group(other)
        return "destroyed"

    assert work.get_future().then(destroy).wait() == "destroyed"
    dist.barrier()


@check("destroying_a_group_inside_its_callback")
def _destroy_inside_callback(rank: int, world_size: int) -> None:
    # The destroy waited for the running callback, its own caller, until the group's timeout, and
    # the process then aborted as gloo's thread freed the group.
    for numel in (1024, 4096):  # the inline all_reduce and the staged one
        group = dist.new_group(list(range(world_size)), timeout=datetime.timedelta(seconds=20))
        tensor = torch.ones(numel, device="neuron")
        work = dist.all_reduce(tensor, group=group, async_op=True)
        start = time.monotonic()
        work.get_future().then(lambda _, group=group: dist.destroy_process_group(group)).wait()
        assert time.monotonic() - start < 10, f"the destroy took {time.monotonic() - start:.1f} s"
        assert_close(tensor.cpu(), torch.full((numel,), float(world_size)))
        del group, work
    dist.barrier()


@check("async_collective_into_a_view_keeps_other_writes_to_its_storage")
def _async_view_and_in_place(rank: int, world_size: int) -> None:
    # The copy back into row 0 runs on gloo's thread while this thread writes row 1 in place: on
    # NCCL the two streams touch different bytes and both land; here one write was lost in 4 to 17
    # of 40 trials until the device serialised writes per storage.
    for _ in range(10):
        base = torch.full((2, 1024), float(rank + 1), device="neuron")
        work = dist.all_reduce(base[0], async_op=True)
        for _ in range(10):
            base[1].add_(1)
        work.wait()
        expected = torch.stack(
            [torch.full((1024,), float(sum(range(1, world_size + 1)))), torch.full((1024,), rank + 11.0)]
        )
        assert_close(base.cpu(), expected)


@check("async_collective_into_a_view_keeps_a_compiled_write_to_its_storage")
def _async_view_and_compiled(rank: int, world_size: int) -> None:
    # As above, with row 1 written by a compiled function: AOTAutograd's graph reads the whole input
    # and its wrapper writes it all back after the graph, undoing a copy back that landed between
    # (lost in 3 to 6 of 40 trials), so the compiled call waits for the collective first.
    @torch.compile(backend="neuron")
    def bump(base: torch.Tensor) -> None:
        base[1] += 1

    bump(torch.zeros(2, 1024, device="neuron"))  # compiled before the trials
    for _ in range(10):
        base = torch.full((2, 1024), float(rank + 1), device="neuron")
        work = dist.all_reduce(base[0], async_op=True)
        for _ in range(10):
            bump(base)
        work.wait()
        expected = torch.stack(
            [torch.full((1024,), float(sum(range(1, world_size + 1)))), torch.full((1024,), rank + 11.0)]
        )
        assert_close(base.cpu(), expected)


@check("a_callback_running_a_compiled_update_waits_for_no_later_collective")
def _callback_with_compiled_update(rank: int, world_size: int) -> None:
    # While then() callbacks ran when a collective landed, on the thread that posts the group's
    # later collectives, a compiled update of y there waited for y's async all_reduce, which that
    # thread had yet to post (rank 0 hung in 4 of 4 runs, helper-77). They run at the call now.
    @torch.compile(backend="neuron")
    def bump(tensor: torch.Tensor) -> None:
        tensor.add_(1)

    group = dist.new_group(list(range(world_size)), timeout=datetime.timedelta(seconds=30))
    y = torch.zeros(1024, device="neuron")
    bump(y)  # compiled before
    works = [dist.all_reduce(torch.ones(1024, device="neuron"), group=group, async_op=True) for _ in range(2)]
    callbacks = [work.get_future().then(lambda _: bump(y)) for work in works]
    if rank == 1:
        time.sleep(1.0)  # rank 1 calls y's all_reduce later
    dist.all_reduce(y, group=group, async_op=True).wait()
    for callback in callbacks:
        callback.wait()
    assert 2 <= y[0].item() <= 2 * (1 + 2) + 2  # the order of the callbacks and the reduction is a race


@check("irecv_future_keeps_a_compiled_write_to_its_storage")
def _irecv_future_and_compiled(rank: int, world_size: int) -> None:
    # get_future() copies a receive in from a thread of its own: a compiled update of another row of
    # the tensor meanwhile undid it (19 of 30 trials, helper-77) until the copy was announced.
    @torch.compile(backend="neuron")
    def bump(base: torch.Tensor) -> None:
        base[1] += 1

    bump(torch.zeros(2, 1024, device="neuron"))
    for _ in range(10):
        base = torch.zeros(2, 1024, device="neuron")
        if rank == 0:
            dist.send(torch.full((1024,), 7.0, device="neuron"), dst=1)
        elif rank == 1:
            future = dist.irecv(base[0], src=0).get_future()
            for _ in range(10):
                bump(base)
            future.wait()
            assert_close(base.cpu(), torch.stack([torch.full((1024,), 7.0), torch.full((1024,), 10.0)]))


@check("self_receive_future_completes")
def _self_receive_future(rank: int, world_size: int) -> None:
    # A receive from the rank itself (batch_isend_irecv) copied its message in without marking it
    # the landing of the write its get_future() announced: the copy waited for itself, for good.
    sent = torch.full((8,), float(rank), device="neuron")
    received = torch.zeros(8, device="neuron")
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, sent, rank), dist.P2POp(dist.irecv, received, rank)])
    works[1].get_future().wait()
    for work in works:
        work.wait()
    assert_close(received.cpu(), torch.full((8,), float(rank)))


@check("isend_never_waited_is_delivered")
def _isend_fire_and_forget(rank: int, world_size: int) -> None:
    # NCCL completes an isend whose work is dropped; gloo's send work completes only in wait(), and
    # the message was lost (the receiver timed out) until the group waited for such sends itself.
    for step in range(20):
        if rank == 0:
            dist.isend(torch.full((256,), float(step), device="neuron"), dst=1)
        elif rank == 1:
            received = torch.empty(256, device="neuron")
            dist.recv(received, src=0)
            assert_close(received.cpu(), torch.full((256,), float(step)))
    dist.barrier()


@check("cpu_and_neuron_collectives_in_either_order")
def _cpu_and_neuron_orders(rank: int, world_size: int) -> None:
    # A "cpu:gloo,neuron:neuron" group's CPU and neuron collectives travel apart, as the two
    # communicators of "cpu:gloo,cuda:nccl" do: the ranks may order them differently.
    group = dist.new_group(list(range(world_size)), timeout=datetime.timedelta(seconds=20))
    on_cpu, on_neuron = torch.ones(3), torch.ones(3, device="neuron")
    if rank == 0:
        work = dist.all_reduce(on_neuron, group=group, async_op=True)
        dist.all_reduce(on_cpu, group=group)
        work.wait()
    else:
        dist.all_reduce(on_cpu, group=group)
        dist.all_reduce(on_neuron, group=group)
    assert_close(on_cpu, torch.full((3,), float(world_size)))
    assert_close(on_neuron.cpu(), torch.full((3,), float(world_size)))


@check("cpu_collectives_start_on_two_groups_in_either_order")
def _cpu_collectives_on_two_groups(rank: int, world_size: int) -> None:
    # Each group's CPU gloo is connected with the group: made at the first CPU collective, rank 0
    # waited in g1's rendezvous while rank 1 waited in g2's, until the store's timeout (helper-80).
    timeout = datetime.timedelta(seconds=20)
    g1 = dist.new_group(list(range(world_size)), timeout=timeout)
    g2 = dist.new_group(list(range(world_size)), timeout=timeout)
    reduced, message = torch.full((3,), float(rank + 1)), torch.empty(5)
    if rank == 0:
        work = dist.all_reduce(reduced, group=g1, async_op=True)
        dist.send(torch.arange(5.0), 1, group=g2)
        work.wait()
    elif rank == 1:
        dist.recv(message, 0, group=g2)
        dist.all_reduce(reduced, group=g1)
        assert_close(message, torch.arange(5.0))
    else:
        dist.all_reduce(reduced, group=g1)
    assert_close(reduced, torch.full((3,), float(world_size * (world_size + 1) // 2)))


@check("all_reduce_async_then_sync_on_one_tensor")
def _async_then_sync(rank: int, world_size: int) -> None:
    # NCCL runs a group's collectives in order: the second reduces the first's result.
    for _ in range(4):
        tensor = torch.ones(4, device="neuron")
        first = dist.all_reduce(tensor, async_op=True)
        dist.all_reduce(tensor)
        first.wait()
        assert_close(tensor.cpu(), torch.full((4,), float(world_size**2)))
    gathered = torch.empty(world_size, 4, device="neuron")
    source = torch.ones(4, device="neuron")
    pending = dist.all_reduce(source, async_op=True)
    dist.all_gather_into_tensor(gathered, source)
    pending.wait()
    assert_close(gathered.cpu(), torch.full((world_size, 4), float(world_size)))


@check("work_result_is_the_output")
def _work_result(rank: int, world_size: int) -> None:
    tensor = torch.ones(1 << 16, device="neuron")
    work = dist.all_reduce(tensor, async_op=True)
    (result,) = work.result()  # NCCL's work returns its outputs, waited for or not
    assert result is tensor
    work.wait()
    assert work.is_completed() and work.is_success()
    assert_close(work.result()[0].cpu(), torch.full((1 << 16,), float(world_size)))


@check("all_reduce_on_stream")
def _on_stream(rank: int, world_size: int) -> None:
    cpu = make_input((8,), torch.float32, rank)
    expected = cpu.clone() * 3
    dist.all_reduce(expected)
    stream = torch.neuron.Stream()
    with torch.neuron.stream(stream):
        neuron = cpu.to("neuron") * 3
        dist.all_reduce(neuron)
        result = neuron.cpu()
    assert_close(result, expected)


@check("all_reduce_coalesced")
def _coalesced(rank: int, world_size: int) -> None:
    cpus = [make_input((3,), torch.float32, rank, 1), make_input((2, 2), torch.float32, rank, 2)]
    neurons = [t.to("neuron") for t in cpus]
    expected = [t.clone() for t in cpus]
    dist.all_reduce_coalesced(expected)
    dist.all_reduce_coalesced(neurons)
    for got, want in zip(neurons, expected, strict=True):
        assert_close(got.cpu(), want)
    # A coalescing manager hands NCCL mixed dtypes in one coalesced all-reduce (gloo refuses them):
    # the same sums, dtype by dtype.
    mixed = [make_input((3,), torch.float32, rank, 3), make_input((4,), torch.bfloat16, rank, 4)]
    neurons = [t.to("neuron") for t in mixed]
    with dist._coalescing_manager(async_ops=True) as manager:
        for tensor in neurons:
            dist.all_reduce(tensor)
    manager.wait()
    for got, cpu in zip(neurons, mixed, strict=True):
        want = cpu.clone()
        dist.all_reduce(want)
        assert_close(got.cpu(), want)


@check("coalescing_manager")
def _coalescing_manager(rank: int, world_size: int) -> None:
    from torch.distributed.distributed_c10d import _coalescing_manager

    cpus = [make_input((5,), torch.float32, rank, 1), make_input((5,), torch.float32, rank, 2)]
    neurons = [t.to("neuron") for t in cpus]
    with _coalescing_manager(device=torch.device("neuron")):
        for tensor in neurons:
            dist.all_reduce(tensor)
    for got, cpu in zip(neurons, cpus, strict=True):
        want = cpu.clone()
        dist.all_reduce(want)
        assert_close(got.cpu(), want)


# ------------------------------------------------------------------------------------------ broadcast, reduce


def _broadcast_check(dtype_name: str) -> None:
    def body(rank: int, world_size: int) -> None:
        cpu = make_input((3, 4), DTYPES[dtype_name], rank)
        expected = cpu.clone()
        dist.broadcast(expected, src=world_size - 1)
        base = cpu.t().contiguous().to("neuron")
        neuron = strided_view(base)
        dist.broadcast(neuron, src=world_size - 1)
        assert_close(neuron.cpu(), expected)

    CHECKS[f"broadcast_{dtype_name}"] = body


for _dtype in DTYPES:
    _broadcast_check(_dtype)


@check("reduce")
def _reduce(rank: int, world_size: int) -> None:
    cpu = make_input((4,), torch.float32, rank)
    expected = cpu.clone()
    dist.reduce(expected, dst=0)
    neuron = cpu.to("neuron")
    dist.reduce(neuron, dst=0)
    assert_close(neuron.cpu(), expected if rank == 0 else cpu)


@check("reduce_AVG")
def _reduce_avg(rank: int, world_size: int) -> None:
    cpu = make_input((4,), torch.float32, rank)
    total = cpu.clone()
    dist.all_reduce(total)
    neuron = cpu.to("neuron")
    dist.reduce(neuron, dst=1, op=dist.ReduceOp.AVG)
    assert_close(neuron.cpu(), total / world_size if rank == 1 else cpu)


# ------------------------------------------------------------------------------------------ gathers


def _all_gather_check(dtype_name: str) -> None:
    def body(rank: int, world_size: int) -> None:
        cpu = make_input((2, 3), DTYPES[dtype_name], rank)
        expected = [torch.empty_like(cpu) for _ in range(world_size)]
        dist.all_gather(expected, cpu)
        outputs = [strided_view(torch.empty(3, 2, dtype=cpu.dtype, device="neuron")) for _ in range(world_size)]
        dist.all_gather(outputs, cpu.to("neuron").t().contiguous().t())
        for got, want in zip(outputs, expected, strict=True):
            assert_close(got.cpu(), want)

    CHECKS[f"all_gather_{dtype_name}"] = body


for _dtype in ("float32", "bfloat16", "int64", "bool"):
    _all_gather_check(_dtype)


@check("all_gather_into_tensor")
def _all_gather_into_tensor(rank: int, world_size: int) -> None:
    cpu = make_input((2, 3), torch.float32, rank)
    expected = torch.empty(2 * world_size, 3)
    dist.all_gather_into_tensor(expected, cpu)
    output = torch.empty(2 * world_size, 3, device="neuron")
    dist.all_gather_into_tensor(output, cpu.to("neuron"))
    assert_close(output.cpu(), expected)


@check("all_gather_into_tensor_stacked")
def _all_gather_stacked(rank: int, world_size: int) -> None:
    cpu = make_input((4,), torch.bfloat16, rank)
    output = torch.empty(world_size, 4, dtype=torch.bfloat16, device="neuron")
    dist.all_gather_into_tensor(output, cpu.to("neuron"))
    expected = torch.stack([make_input((4,), torch.bfloat16, r) for r in range(world_size)])
    assert_close(output.cpu(), expected)


@check("all_gather_coalesced")
def _all_gather_coalesced(rank: int, world_size: int) -> None:
    cpus = [make_input((3,), torch.float32, rank, 1), make_input((2,), torch.float32, rank, 2)]
    outputs = [[torch.empty_like(t, device="neuron") for t in cpus] for _ in range(world_size)]
    dist.all_gather_coalesced(outputs, [t.to("neuron") for t in cpus])
    for r in range(world_size):
        for k, t in enumerate(cpus):
            assert_close(outputs[r][k].cpu(), make_input(t.shape, t.dtype, r, k + 1))


@check("all_gather_uneven")
def _all_gather_uneven(rank: int, world_size: int) -> None:
    # Outputs of different sizes, one per rank (NCCL broadcasts each rank's input into its slot).
    shapes = [(r + 1, 2) if r % 2 == 0 else (3 * r,) for r in range(world_size)]
    outputs = [torch.empty(shape, dtype=torch.bfloat16, device="neuron") for shape in shapes]
    dist.all_gather(outputs, make_input(shapes[rank], torch.bfloat16, rank).to("neuron"))
    for r, got in enumerate(outputs):
        assert_close(got.cpu(), make_input(shapes[r], torch.bfloat16, r))
    try:  # this rank's input must have its own output's elements: every rank raises
        wrong_on_rank_1 = (1, 2) if rank == 0 else (rank, 5)
        dist.all_gather(outputs, torch.ones(wrong_on_rank_1, dtype=torch.bfloat16, device="neuron"))
    except (RuntimeError, ValueError) as error:
        wanted = "Tensor input and output of _broadcast_oop" if rank == 1 else "rank 1 refused its arguments"
        assert wanted in str(error), error
    else:
        raise AssertionError("an all_gather input of the wrong size did not raise")


@check("gather")
def _gather(rank: int, world_size: int) -> None:
    cpu = make_input((3,), torch.int32, rank)
    outputs = [torch.empty(3, dtype=torch.int32, device="neuron") for _ in range(world_size)] if rank == 0 else None
    dist.gather(cpu.to("neuron"), outputs, dst=0)
    if rank == 0:
        for r, got in enumerate(outputs):
            assert_close(got.cpu(), make_input((3,), torch.int32, r))


@check("all_gather_object")
def _all_gather_object(rank: int, world_size: int) -> None:
    objects = [None] * world_size
    dist.all_gather_object(objects, {"rank": rank, "name": "x" * (rank + 1)})
    assert objects == [{"rank": r, "name": "x" * (r + 1)} for r in range(world_size)], objects


@check("broadcast_object_list")
def _broadcast_object_list(rank: int, world_size: int) -> None:
    objects = [rank, {"k": [rank]}] if rank == 1 else [None, None]
    dist.broadcast_object_list(objects, src=1)
    assert objects == [1, {"k": [1]}], objects


# ------------------------------------------------------------------------------------------ scatters


@check("scatter")
def _scatter(rank: int, world_size: int) -> None:
    inputs = [make_input((2, 2), torch.float32, r, 7).to("neuron") for r in range(world_size)] if rank == 0 else None
    output = strided_view(torch.empty(2, 2, device="neuron"))
    dist.scatter(output, inputs, src=0)
    assert_close(output.cpu(), make_input((2, 2), torch.float32, rank, 7))


def _reduce_scatter_tensor_check(op_name: str, dtype_name: str) -> None:
    def body(rank: int, world_size: int) -> None:
        dtype = DTYPES[dtype_name]
        cpu = make_input((world_size * 2, 3), dtype, rank)
        total = cpu.clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM if op_name == "AVG" else REDUCE_OPS[op_name])
        if op_name == "AVG":
            total = total / world_size
        output = torch.empty(2, 3, dtype=dtype, device="neuron")
        op = dist.ReduceOp.AVG if op_name == "AVG" else REDUCE_OPS[op_name]
        dist.reduce_scatter_tensor(output, cpu.to("neuron"), op=op)
        assert_close(output.cpu(), total[2 * rank : 2 * rank + 2])

    CHECKS[f"reduce_scatter_tensor_{op_name}_{dtype_name}"] = body


for _op, _dtype in [("SUM", "float32"), ("SUM", "bfloat16"), ("MAX", "int32"), ("AVG", "float32")]:
    _reduce_scatter_tensor_check(_op, _dtype)


@check("reduce_scatter")
def _reduce_scatter(rank: int, world_size: int) -> None:
    cpus = [make_input((3,), torch.float32, rank, r) for r in range(world_size)]
    output = torch.empty(3, device="neuron")
    dist.reduce_scatter(output, [t.to("neuron") for t in cpus])
    expected = sum(make_input((3,), torch.float32, r, rank) for r in range(world_size))
    assert_close(output.cpu(), expected)


@check("reduce_scatter_uneven")
def _reduce_scatter_uneven(rank: int, world_size: int) -> None:
    # Inputs of different sizes (the same on every rank): rank r's output is the reduction of every
    # rank's input r (NCCL reduces each to its rank).
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.AVG):
        inputs = [make_input((r + 2,), torch.float32, rank, r).to("neuron") for r in range(world_size)]
        output = torch.empty(rank + 2, device="neuron")
        dist.reduce_scatter(output, inputs, op=op)
        parts = torch.stack([make_input((rank + 2,), torch.float32, r, rank) for r in range(world_size)])
        expected = {dist.ReduceOp.SUM: parts.sum(0), dist.ReduceOp.MAX: parts.amax(0), dist.ReduceOp.AVG: parts.mean(0)}
        assert_close(output.cpu(), expected[op])


@check("functional_collectives")
def _functional_collectives(rank: int, world_size: int) -> None:
    # The collectives DTensor and torch.compile'd code use (torch.distributed._functional_collectives):
    # each returns a new tensor, waited on its first use.
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD
    cpu = make_input((world_size * 2, 3), torch.float32, rank)
    neuron = cpu.to("neuron")
    expected_sum = sum(make_input((world_size * 2, 3), torch.float32, r) for r in range(world_size))
    assert_close(funcol.all_reduce(neuron, "sum", group).cpu(), expected_sum)
    gathered = torch.cat([make_input((world_size * 2, 3), torch.float32, r) for r in range(world_size)])
    assert_close(funcol.all_gather_single(neuron, 0, group).cpu(), gathered)
    assert_close(funcol.reduce_scatter_single(neuron, "sum", 0, group).cpu(), expected_sum[2 * rank : 2 * rank + 2])
    assert_close(neuron.cpu(), cpu)  # the input is not written


# ------------------------------------------------------------------------------------------ all-to-all


@check("all_to_all_single_even")
def _all_to_all_single(rank: int, world_size: int) -> None:
    cpu = make_input((world_size * 2, 3), torch.float32, rank)
    expected = torch.empty_like(cpu)
    dist.all_to_all_single(expected, cpu)
    output = torch.empty_like(cpu, device="neuron")
    dist.all_to_all_single(output, cpu.to("neuron"))
    assert_close(output.cpu(), expected)


@check("all_to_all_single_uneven")
def _all_to_all_single_uneven(rank: int, world_size: int) -> None:
    # Rank r sends r + s + 1 rows to rank s.
    input_splits = [rank + s + 1 for s in range(world_size)]
    output_splits = [s + rank + 1 for s in range(world_size)]
    cpu = make_input((sum(input_splits), 2), torch.int64, rank)
    expected = torch.empty(sum(output_splits), 2, dtype=torch.int64)
    dist.all_to_all_single(expected, cpu, output_splits, input_splits)
    output = torch.empty(sum(output_splits), 2, dtype=torch.int64, device="neuron")
    dist.all_to_all_single(output, cpu.to("neuron"), output_splits, input_splits)
    assert_close(output.cpu(), expected)


@check("all_to_all_single_mismatched_splits_raise")
def _all_to_all_single_mismatched_splits(rank: int, world_size: int) -> None:
    # Rank 0 sends rank 1 three rows, rank 1 expects one: gloo alone aborts rank 1's process.
    input_splits = [1, 3] if rank == 0 else [1, 1]
    tensor = torch.arange(float(sum(input_splits)), device="neuron")
    output = torch.zeros(2, device="neuron")
    try:
        dist.all_to_all_single(output, tensor, [1, 1], input_splits)
    except RuntimeError as error:
        assert "rank 0 sends 3 elements to rank 1, which expects 1" in str(error), error
    else:
        raise AssertionError("mismatched all_to_all splits did not raise")
    try:
        dist.all_to_all_single(output, tensor, [1, 1, 0], input_splits)
    except RuntimeError as error:
        assert str(error) == "Number of tensor splits not equal to group size", error
    dist.barrier()


@check("all_to_all")
def _all_to_all(rank: int, world_size: int) -> None:
    inputs = [make_input((s + 1, 2), torch.float32, rank, s) for s in range(world_size)]
    outputs = [torch.empty(rank + 1, 2, device="neuron") for _ in range(world_size)]
    dist.all_to_all(outputs, [t.to("neuron") for t in inputs])
    for s, got in enumerate(outputs):
        assert_close(got.cpu(), make_input((rank + 1, 2), torch.float32, s, rank))


# ------------------------------------------------------------------------------------------ point to point


@check("send_recv")
def _send_recv(rank: int, world_size: int) -> None:
    peer = (rank + 1) % world_size
    source = (rank - 1) % world_size
    received = strided_view(torch.empty(3, 2, device="neuron"))
    if rank % 2 == 0:
        dist.send(make_input((2, 3), torch.float32, rank).to("neuron"), dst=peer)
        dist.recv(received, src=source)
    else:
        dist.recv(received, src=source)
        dist.send(make_input((2, 3), torch.float32, rank).to("neuron"), dst=peer)
    assert_close(received.cpu(), make_input((2, 3), torch.float32, source))


@check("batch_isend_irecv_with_self")
def _batch_with_self(rank: int, world_size: int) -> None:
    # An all-to-all made of point-to-point ops, each rank sending to itself too, as NCCL allows
    # (gloo's transport has no pair to itself); receives posted before the sends.
    outputs = [strided_view(torch.zeros(3, 2, dtype=torch.float16, device="neuron")) for _ in range(world_size)]
    inputs = [make_input((2, 3), torch.float16, rank, salt=peer).to("neuron") for peer in range(world_size)]
    receives = [dist.P2POp(dist.irecv, outputs[peer], peer) for peer in range(world_size)]
    sends = [dist.P2POp(dist.isend, inputs[peer], peer) for peer in range(world_size)]
    for work in dist.batch_isend_irecv(receives + sends):
        work.wait()
    for peer, output in enumerate(outputs):
        assert_close(output.cpu(), make_input((2, 3), torch.float16, peer, salt=rank))
    # A receive from itself of another element count raises, as one from a peer does.
    unchanged = torch.full((4,), 5.0, device="neuron")
    works = dist.batch_isend_irecv(
        [dist.P2POp(dist.isend, torch.ones(3, device="neuron"), rank), dist.P2POp(dist.irecv, unchanged, rank)]
    )
    try:
        for work in works:
            work.wait()
    except RuntimeError as error:
        assert f"rank {rank} sent float32 of shape (3,) (3 elements), but the receive tensor" in str(error), error
    else:
        raise AssertionError("a receive from itself of another element count did not raise")
    assert_close(unchanged.cpu(), torch.full((4,), 5.0))
    # A receive from itself that times out is withdrawn: the next send goes to the next receive.
    abandoned = dist.irecv(torch.zeros(2, device="neuron"), rank, tag=7)
    try:
        abandoned.wait(datetime.timedelta(seconds=0.2))
    except dist.DistBackendError as error:
        assert "this receive is withdrawn" in str(error), error
    else:
        raise AssertionError("a receive from itself with no send did not time out")
    received = torch.zeros(2, device="neuron")
    works = dist.batch_isend_irecv(
        [
            dist.P2POp(dist.isend, torch.full((2,), 3.0, device="neuron"), rank, tag=7),
            dist.P2POp(dist.irecv, received, rank, tag=7),
        ]
    )
    for work in works:
        work.wait()
    assert_close(received.cpu(), torch.full((2,), 3.0))


@check("isend_irecv")
def _isend_irecv(rank: int, world_size: int) -> None:
    peer = (rank + 1) % world_size
    source = (rank - 1) % world_size
    received = torch.empty(5, dtype=torch.bfloat16, device="neuron")
    works = [
        dist.isend(make_input((5,), torch.bfloat16, rank).to("neuron"), dst=peer),
        dist.irecv(received, src=source),
    ]
    for work in works:
        work.wait()
    assert_close(received.cpu(), make_input((5,), torch.bfloat16, source))


@check("recv_any_source")
def _recv_any_source(rank: int, world_size: int) -> None:
    if rank == 0:
        received = torch.empty(4, device="neuron")
        sender = dist.recv(received)
        assert sender == 1, sender
        assert_close(received.cpu(), make_input((4,), torch.float32, 1))
    elif rank == 1:
        dist.send(make_input((4,), torch.float32, 1).to("neuron"), dst=0)


@check("batch_isend_irecv")
def _batch_isend_irecv(rank: int, world_size: int) -> None:
    peer = (rank + 1) % world_size
    source = (rank - 1) % world_size
    received = torch.empty(2, 2, dtype=torch.int32, device="neuron")
    operations = [
        dist.P2POp(dist.isend, make_input((2, 2), torch.int32, rank).to("neuron"), peer),
        dist.P2POp(dist.irecv, received, source),
    ]
    for work in dist.batch_isend_irecv(operations):
        work.wait()
    assert_close(received.cpu(), make_input((2, 2), torch.int32, source))


@check("isend_recv_ring_completes")
def _isend_recv_ring(rank: int, world_size: int) -> None:
    # Each rank waits for its receive before its send: the send must complete once the peer's receive
    # is posted, not when the peer waits on it (gloo's and NCCL's progress rule).
    peer = (rank + 1) % world_size
    source = (rank - 1) % world_size
    received = torch.empty(3, device="neuron")
    sent = dist.isend(make_input((3,), torch.float32, rank).to("neuron"), dst=peer, tag=7)
    dist.recv(received, src=source, tag=7)
    sent.wait()
    assert_close(received.cpu(), make_input((3,), torch.float32, source))


def _expect_receive_mismatch(sent: torch.Tensor, received: torch.Tensor, wanted: str) -> None:
    """Rank 0 sends ``sent``, rank 1 receives into ``received``: rank 1 must raise naming both, keep its
    tensor's values, and both must go on to a matching send/recv on the same tag."""
    before = received.cpu()
    if dist.get_rank() == 0:
        dist.send(sent, dst=1)
    elif dist.get_rank() == 1:
        try:
            dist.recv(received, src=0)
        except RuntimeError as error:
            assert wanted in str(error), error
        else:
            raise AssertionError("a receive whose tensor differs from the sent one did not raise")
        assert_close(received.cpu(), before)
    follow_up = torch.arange(4.0, device="neuron")
    if dist.get_rank() == 0:
        dist.send(follow_up, dst=1)
    elif dist.get_rank() == 1:
        got = torch.zeros(4, device="neuron")
        dist.recv(got, src=0)
        assert_close(got.cpu(), torch.arange(4.0))


@check("send_recv_mismatched_size_raises")
def _send_recv_mismatched_size(rank: int, world_size: int) -> None:
    # gloo itself aborts the process on a larger message and fills a prefix of a larger receive tensor.
    for sent_shape, received_shape in [((6,), (4,)), ((4,), (6,))]:
        _expect_receive_mismatch(
            torch.ones(sent_shape, device="neuron"),
            torch.full(received_shape, 5.0, device="neuron"),
            f"rank 0 sent float32 of shape ({sent_shape[0]},) ({sent_shape[0]} elements), but the receive tensor "
            f"is float32 of shape ({received_shape[0]},)",
        )


@check("send_recv_mismatched_dtype_raises")
def _send_recv_mismatched_dtype(rank: int, world_size: int) -> None:
    # Equal byte sizes: gloo itself would hand float32 bits to an int32 tensor (a wrong value).
    _expect_receive_mismatch(
        torch.ones(2, 3, device="neuron"),
        torch.zeros(3, 2, dtype=torch.int32, device="neuron"),
        "rank 0 sent float32 of shape (2, 3) (6 elements), but the receive tensor is int32 of shape (3, 2)",
    )


@check("tags_are_ignored_as_nccl_ignores_them")
def _tags_ignored(rank: int, world_size: int) -> None:
    # NCCL matches a pair's sends and receives in call order whatever their tags: gloo's matching by
    # tag waited out the timeout on mismatched tags and gave out-of-order tags another order.
    started = time.monotonic()
    peer, source = (rank + 1) % world_size, (rank - 1) % world_size
    received = torch.zeros(3, device="neuron")
    works = [
        dist.isend(torch.full((3,), float(rank), device="neuron"), peer, tag=1),
        dist.irecv(received, source, tag=2),
    ]
    for work in works:
        work.wait()
    assert_close(received.cpu(), torch.full((3,), float(source)))
    # Receives tagged 0..3, sends tagged 3..0: matched in call order.
    outputs = [torch.zeros(5, device="neuron") for _ in range(4)]
    receives = [dist.irecv(output, source, tag=index) for index, output in enumerate(outputs)]
    sends = [dist.isend(torch.full((5,), 10.0 * rank + i, device="neuron"), peer, tag=3 - i) for i in range(4)]
    for work in receives + sends:
        work.wait()
    assert_close(torch.stack([o.cpu() for o in outputs]), (10.0 * source + torch.arange(4.0))[:, None].expand(4, 5))
    # Any tag, a large one too (2**30 raised before), and from any source.
    if rank == 0:
        dist.send(torch.arange(4.0, device="neuron"), 1, tag=2**30)
        anyone = torch.zeros(2, device="neuron")
        assert dist.recv(anyone, tag=9) == 1
        assert_close(anyone.cpu(), torch.full((2,), 7.0))
    elif rank == 1:
        got = torch.zeros(4, device="neuron")
        dist.recv(got, 0, tag=5)
        assert_close(got.cpu(), torch.arange(4.0))
        dist.send(torch.full((2,), 7.0, device="neuron"), 0, tag=3)
    # A rank's messages to itself too.
    mine = torch.zeros(2, device="neuron")
    works = dist.batch_isend_irecv(
        [
            dist.P2POp(dist.irecv, mine, rank, tag=4),
            dist.P2POp(dist.isend, torch.full((2,), float(rank), device="neuron"), rank, tag=3),
        ]
    )
    for work in works:
        work.wait()
    assert_close(mine.cpu(), torch.full((2,), float(rank)))
    assert time.monotonic() - started < 20


@check("device_id_binds_the_group")
def _device_id_binds_the_group(rank: int, world_size: int) -> None:
    # As NCCL's: the group keeps the device it was given, and its barrier needs no guess (no warning).
    # A group made without device_id inherits the default group's (c10d's new_group); the default
    # group of these checks is bound (init()).
    core = torch.device("neuron", torch.neuron.current_device())
    assert dist.group.WORLD.bound_device_id == core, dist.group.WORLD.bound_device_id
    group = dist.new_group(ranks=list(range(world_size)), backend="neuron", device_id=core)
    assert group.bound_device_id == core, group.bound_device_id
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dist.barrier(group=group)
    inheriting = dist.new_group(ranks=list(range(world_size)), backend="neuron")
    assert inheriting.bound_device_id == core, inheriting.bound_device_id


@check("split_group")
def _split_group(rank: int, world_size: int) -> None:
    # dist.split_group (and init_device_mesh over several dimensions, which uses it once the default
    # group is bound to a device): one subgroup per rank, then the same ranks split off a second
    # time, as a mesh dimension that matches an earlier split does.
    alone = dist.split_group(split_ranks=[[r] for r in range(world_size)])
    assert alone.size() == 1 and alone.bound_device_id == dist.group.WORLD.bound_device_id, alone
    assert alone.group_desc.startswith(f"{dist.group.WORLD.group_desc}:split:"), alone.group_desc
    cpu = make_input((3, 2), torch.float32, rank)
    neuron = cpu.to("neuron")
    dist.all_reduce(neuron, group=alone)
    assert_close(neuron.cpu(), cpu)
    for _ in range(2):
        everyone = dist.split_group(split_ranks=[list(range(world_size))])
        assert dist.get_process_group_ranks(everyone) == list(range(world_size))
        neuron = cpu.to("neuron")
        dist.all_reduce(neuron, group=everyone)
        assert_close(neuron.cpu(), sum(make_input((3, 2), torch.float32, r) for r in range(world_size)))
    left_out = dist.split_group(split_ranks=[[0]])
    assert (left_out is None) == (rank != 0), left_out
    try:
        dist.split_group(split_ranks=[[0]], pg_options=dist.ProcessGroupGloo._Options())
    except ValueError as error:
        assert "the neuron backend takes no pg_options" in str(error), error
    else:
        raise AssertionError("split_group with pg_options did not raise")


@check("barrier")
def _barrier(rank: int, world_size: int) -> None:
    dist.barrier()
    dist.barrier(device_ids=[torch.neuron.current_device()])


# ------------------------------------------------------------------------------------------ groups, errors


@check("new_group")
def _new_group(rank: int, world_size: int) -> None:
    group = dist.new_group(ranks=list(range(world_size)), backend="neuron")
    cpu = make_input((3,), torch.float32, rank)
    neuron = cpu.to("neuron")
    dist.all_reduce(neuron, group=group)
    expected = sum(make_input((3,), torch.float32, r) for r in range(world_size))
    assert_close(neuron.cpu(), expected)
    singleton = dist.new_group(ranks=[0], backend="neuron")
    if rank == 0:
        alone = cpu.to("neuron")
        dist.all_reduce(alone, group=singleton)
        assert_close(alone.cpu(), cpu)
    dist.destroy_process_group(group)


@check("cpu_tensor_on_neuron_group_raises")
def _cpu_tensor(rank: int, world_size: int) -> None:
    group = dist.new_group(backend="neuron")
    try:
        dist.all_reduce(torch.ones(3), group=group)
    except ValueError as error:
        assert "tensors must be neuron and dense" in str(error), error
    else:
        raise AssertionError("a CPU tensor on a neuron-only group did not raise")
    # The raise needs no peer: without a barrier one rank may tear the group down while the other is
    # still connecting to it (gloo's "Connection closed by peer" on a loaded machine).
    dist.barrier(group=group)
    dist.destroy_process_group(group)
    # One CPU output among neuron tensors, on the default group that serves both devices.
    outputs = [torch.empty(3, device="neuron"), torch.empty(3)]
    try:
        dist.all_gather(outputs, torch.ones(3, device="neuron"))
    except ValueError as error:
        assert "all_gather: output 1 is a torch.strided tensor on cpu; the others are neuron" in str(error), error
    else:
        raise AssertionError("a CPU output among neuron tensors did not raise")


@check("current_device_follows_local_rank")
def _current_device(rank: int, world_size: int) -> None:
    assert torch.neuron.current_device() == rank % torch.neuron.device_count()
    assert dist.get_backend() == "cpu:gloo,neuron:neuron" or dist.get_backend() == "neuron", dist.get_backend()


def _expect_disagreement(call: Callable[[], object], wanted: str) -> None:
    try:
        call()
    except RuntimeError as error:
        assert "the ranks disagree" in str(error) and wanted in str(error), error
    else:
        raise AssertionError("a collective whose ranks disagree did not raise")


@check("mismatched_shapes_raise")
def _mismatched_shapes(rank: int, world_size: int) -> None:
    # gloo itself would abort the process ("Received data size doesn't match expected size").
    tensor = torch.ones(4 + rank, device="neuron")
    _expect_disagreement(
        lambda: dist.all_reduce(tensor), "rank 1: all_reduce (SUM) of float32, tensor of shape (5,), 5 elements"
    )


@check("shapes_of_one_element_count_compute")
def _shapes_of_one_element_count(rank: int, world_size: int) -> None:
    # NCCL takes counts: a (6,) tensor and a (2, 3) one reduce, broadcast and travel in row-major order.
    shape = (6,) if rank == 0 else (2, 3)
    tensor = torch.arange(6.0, device="neuron").reshape(shape)
    dist.all_reduce(tensor)
    assert_close(tensor.cpu().flatten(), torch.arange(6.0) * world_size)
    tensor = (torch.arange(6.0) if rank == 0 else torch.zeros(6)).reshape(shape).to("neuron")
    dist.broadcast(tensor, src=0)
    assert_close(tensor.cpu().flatten(), torch.arange(6.0))
    if rank == 0:
        dist.send(torch.arange(6.0, device="neuron"), dst=1)
    elif rank == 1:
        received = torch.zeros(2, 3, device="neuron")
        dist.recv(received, src=0)
        assert_close(received.cpu(), torch.arange(6.0).reshape(2, 3))
    # A rank's own input and outputs of different shapes (helper-71: gloo refused them on that rank
    # alone, after the ranks agreed, and the next collective crashed the other).
    outputs = [torch.zeros(2, 3, device="neuron") for _ in range(world_size)]
    dist.all_gather(outputs, torch.arange(6.0, device="neuron").reshape(shape) + rank)
    assert_close(torch.stack([o.cpu().flatten() for o in outputs]), torch.arange(6.0) + torch.arange(2.0)[:, None])
    gathered = [torch.zeros(6, device="neuron") for _ in range(world_size)] if rank == 0 else None
    dist.gather(torch.arange(6.0, device="neuron").reshape(2, 3) + rank, gathered, dst=0)
    if rank == 0:
        assert_close(torch.stack([g.cpu() for g in gathered]), torch.arange(6.0) + torch.arange(2.0)[:, None])
    short = [torch.zeros(6, device="neuron"), torch.zeros(4, device="neuron")] if rank == 0 else None
    try:
        dist.gather(torch.ones(6, device="neuron"), short, dst=0)
    except (ValueError, RuntimeError) as error:
        wanted = "output 1 has 4 elements where 6 are expected" if rank == 0 else "rank 0 refused its arguments"
        assert wanted in str(error), error
    else:
        raise AssertionError("a gather whose root has an output of another element count did not raise")


@check("mismatched_roots_raise")
def _mismatched_roots(rank: int, world_size: int) -> None:
    # Each rank its own root: gloo's ranks waited for each other until the group's timeout.
    started = time.monotonic()
    tensor = torch.ones(4, device="neuron")
    _expect_disagreement(
        lambda: dist.broadcast(tensor, src=rank),
        "rank 0: broadcast (root 0) of float32, tensor of shape (4,), 4 elements; rank 1: broadcast (root 1)",
    )
    _expect_disagreement(lambda: dist.reduce(tensor, dst=rank), "rank 0: reduce (SUM, root 0) of float32")
    gathered = [torch.zeros(4, device="neuron") for _ in range(world_size)]
    _expect_disagreement(lambda: dist.gather(tensor, gathered, dst=rank), "rank 1: gather (root 1) of float32")
    parts = [torch.ones(4, device="neuron") for _ in range(world_size)]
    _expect_disagreement(lambda: dist.scatter(tensor, parts, src=rank), "rank 0: scatter (root 0) of float32")
    work = dist.broadcast(tensor, src=rank, async_op=True)
    _expect_disagreement(work.wait, "rank 1: broadcast (root 1)")
    assert time.monotonic() - started < 20
    # One root: the group works on, and the values are the root's.
    tensor = torch.full((4,), float(rank), device="neuron")
    dist.broadcast(tensor, src=1)
    assert_close(tensor.cpu(), torch.full((4,), 1.0))


@check("mismatched_dtypes_raise")
def _mismatched_dtypes(rank: int, world_size: int) -> None:
    # Equal byte sizes: gloo itself would add float32 bits to int32 bits (a wrong value).
    tensor = torch.ones(4, dtype=torch.float32 if rank == 0 else torch.int32, device="neuron")
    _expect_disagreement(lambda: dist.all_reduce(tensor), "rank 1: all_reduce (SUM) of int32")
    # torch.distributed hands complex tensors to the backend as view_as_real: float16 pairs here.
    halves = torch.ones(4, dtype=torch.complex32 if rank == 0 else torch.float32, device="neuron")
    _expect_disagreement(
        lambda: dist.all_reduce(halves), "rank 0: all_reduce (SUM) of float16, tensor of shape (4, 2), 8 elements"
    )


@check("arguments_refused_on_one_rank_raise_on_every_rank")
def _refused_on_one_rank(rank: int, world_size: int) -> None:
    # A rank whose own checks refuse its arguments must not leave the others waiting (for the
    # group's timeout, 30 minutes by default): it raises its error, the others raise too, at once.
    started = time.monotonic()
    calls = {
        "split sum": lambda: dist.all_to_all_single(
            torch.empty(2, 3, device="neuron"), torch.ones(2, 3, device="neuron"), [1, 1], [1, 1 + rank]
        ),
        "dtype": lambda: dist.all_reduce(torch.ones(4, device="neuron").to(torch.int16 if rank else torch.int32)),
        "list length": lambda: dist.all_to_all(
            [torch.empty(1, device="neuron") for _ in range(world_size)],
            [torch.ones(1, device="neuron") for _ in range(world_size + rank)],
        ),
    }
    for name, call in calls.items():
        try:
            call()
        except (RuntimeError, TypeError, ValueError) as error:
            if rank == 0:
                assert "rank 1 refused its arguments" in str(error), (name, error)
        else:
            raise AssertionError(f"{name}: no error")
    assert time.monotonic() - started < 20
    # Even splits of a dimension 0 the ranks do not divide: c10d's error (gloo tore the floats).
    try:
        dist.all_to_all_single(torch.empty(3, device="neuron"), torch.arange(3.0, device="neuron"))
    except RuntimeError as error:
        assert str(error) == "Tensor's dim 0 does not divide equally across group size", error
    else:
        raise AssertionError("an even all_to_all_single of 3 rows did not raise")


@check("point_to_point_works_have_futures_and_results")
def _point_to_point_futures(rank: int, world_size: int) -> None:
    tensor = torch.full((3,), float(rank), device="neuron")
    if rank == 0:
        work = dist.isend(tensor, 1)
    elif rank == 1:
        work = dist.irecv(tensor, 0)
    else:
        return
    (value,) = work.get_future().wait()
    assert value is tensor and work.result()[0] is tensor
    assert_close(tensor.cpu(), torch.zeros(3))


@check("mismatched_reductions_raise")
def _mismatched_reductions(rank: int, world_size: int) -> None:
    tensor = torch.ones(2, 3, device="neuron")
    op = dist.ReduceOp.SUM if rank == 0 else dist.ReduceOp.MAX
    wanted = "rank 1: all_reduce (MAX) of float32, tensor of shape (2, 3), 6 elements"
    _expect_disagreement(lambda: dist.all_reduce(tensor, op=op), wanted)


@check("dtypes_nccl_lacks_raise")
def _dtypes_nccl_lacks(rank: int, world_size: int) -> None:
    # NCCL's dtypes, and its errors: int16 and the wide unsigned types are refused, float8 travels as
    # bytes but is not reduced.
    for dtype, name in ((torch.int16, "Short"), (torch.uint32, "UInt32")):
        try:
            dist.all_reduce(torch.ones(4, device="neuron").to(dtype))
        except TypeError as error:
            assert str(error) == f"Input tensor data type is not supported for NCCL process group: {name}", error
        else:
            raise AssertionError(f"all_reduce of {dtype} did not raise")

    def values(rank: int) -> torch.Tensor:
        return torch.tensor([0.5, -2.0, 448.0 / (rank + 1)]).to(torch.float8_e4m3fn)

    gathered = torch.empty(world_size, 3, dtype=torch.float8_e4m3fn, device="neuron")
    dist.all_gather_into_tensor(gathered, values(rank).to("neuron"))
    expected = torch.stack([values(r) for r in range(world_size)])
    assert torch.equal(gathered.cpu().view(torch.uint8), expected.view(torch.uint8))
    try:
        dist.all_reduce(values(rank).to("neuron"))
    except RuntimeError as error:
        assert str(error) == "Float8 dtypes are not currenlty supported for NCCL reductions", error
    else:
        raise AssertionError("all_reduce of float8 did not raise")


@check("mismatched_collectives_raise")
def _mismatched_collectives(rank: int, world_size: int) -> None:
    tensor = torch.ones(4, device="neuron")
    _expect_disagreement(
        lambda: dist.all_reduce(tensor) if rank == 0 else dist.broadcast(tensor, src=0),
        "rank 0: all_reduce (SUM) of float32, tensor of shape (4,), 4 elements; rank 1: broadcast (root 0) of float32",
    )
    # A barrier facing another collective: both raise at once (a gloo barrier waited out the timeout
    # and left the group unusable); the group works afterwards.
    _expect_disagreement(
        lambda: dist.barrier() if rank == 0 else dist.all_reduce(tensor),
        "rank 0: barrier; rank 1: all_reduce (SUM) of float32",
    )
    dist.all_reduce(tensor)
    assert_close(tensor.cpu(), torch.full((4,), float(world_size)))


# ------------------------------------------------------------------------------------- profiling


@check("profiled_all_reduce_is_a_device_event")
def _profiled_all_reduce(rank: int, world_size: int) -> None:
    """torch.profiler shows a collective as a device event of its core, with its bytes."""
    from torch.profiler import ProfilerActivity, profile

    from torch_neuronx.profiling import tables

    tensor = torch.full((256,), float(rank + 1), device="neuron")
    torch.neuron.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        dist.all_reduce(tensor)
        torch.neuron.synchronize()
    recorded = [(r.name, r.bytes) for r in tables.Records.of_last_session().device if r.name == "all_reduce"]
    assert recorded == [("all_reduce", tensor.nbytes)], recorded
    device_events = [
        e for e in prof.events() if e.name == "all_reduce" and e.device_type == torch.autograd.DeviceType.PrivateUse1
    ]
    assert len(device_events) == 1, [(e.name, e.device_type) for e in prof.events()]
    assert_close(tensor.cpu(), torch.full((256,), float(sum(range(1, world_size + 1)))))


# ------------------------------------------------------------------------- the parallelism stack


@check("sync_batch_norm_matches_batch_norm_in_one_cpu_process")
def _sync_batch_norm(rank: int, world_size: int) -> None:
    stack_checks.check_ddp_sync_batch_norm(stack_checks.Group.joined())


@check("ddp_step_matches_one_cpu_process")
def _ddp_step(rank: int, world_size: int) -> None:
    """One DDP step on neuron against the same step in one CPU process (``stack_checks.py``)."""
    stack_checks.check_ddp_one_step(stack_checks.Group.joined())


@check("ddp_powersgd_hook_matches_one_cpu_process")
def _ddp_powersgd(rank: int, world_size: int) -> None:
    """DDP with PowerSGD's comm hook, whose callbacks chain collectives (``stack_checks.py``)."""
    stack_checks.check_ddp_powersgd_hook(stack_checks.Group.joined())
