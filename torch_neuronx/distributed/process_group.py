"""The ``neuron`` process group: every c10d collective on neuron tensors, host-staged through gloo.

``NeuronProcessGroup`` is a ``torch.distributed.ProcessGroup`` whose collectives stage their neuron
tensors to the host (``staging.py``: one copy each way), run PyTorch's ``ProcessGroupGloo`` on the
host copies, and copy the results back. CPU tensors go to gloo as they are when the group was
created with ``"cpu:gloo,neuron:neuron"``; otherwise they raise, as NCCL's do.

Ordering (as NCCL's): staging waits for the earlier work of the tensors' core, so a collective sees
everything launched before it on the current stream. With ``async_op=False`` the results are back
on the device when the call returns. With ``async_op=True`` the call returns once the tensors are
staged, without waiting for the other ranks (NCCL enqueues): the ranks' agreement
(``agreement.py``, on a gloo transport of its own), gloo's collective (made in the group's call
order, ``call_order.py``) and the copy back run in the background. The work's future completes at
the call, as NCCL's does at the enqueue, so its callbacks run at once, in program order; device work
on the bytes the results land in waits for them (``runtime/storage_writes.py``), and so does
``work.wait()``, which raises the collective's error.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import functools
import itertools
import math
import threading
import time
import weakref
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from torch_neuronx._compat.distributed_internals import register_device_backend
from torch_neuronx.distributed import agreement, call_order, point_to_point, reduce_ops, retired_groups, staging
from torch_neuronx.runtime import launch_records, spans, storage_writes

__all__ = ["NeuronProcessGroup"]

#: A finished gloo collective's results, turned into the tensors the caller gave: host -> device.
Finish = Callable[[], None]


@dataclasses.dataclass(frozen=True)
class _InFlight:
    """An async collective of a group, from its call until its results land: ``landed`` completes
    once they are copied back into ``storages`` (the device addresses of the storages it reads or
    writes), with its error if it failed, and ``settled`` is set then (a waitable with a timeout)."""

    storages: frozenset[int]
    landed: torch.futures.Future
    settled: threading.Event


@dataclasses.dataclass(frozen=True)
class _Agreed:
    """A collective whose arguments this rank accepted: the core of its tensors, and the verdict
    of the ranks' agreement (``agreement.start_agreement``'s future; resolved for a synchronous
    call, which waited for it)."""

    device: int
    verdict: torch.futures.Future


class CollectiveWork(dist.Work):
    """The work of a collective of the neuron group.

    ``get_future()`` returns ``future``: for an async collective, completed with the output tensors
    at the call, as NCCL's (see ``NeuronProcessGroup._run``). ``wait()`` waits for ``landed``, which
    completes once gloo finished and the results are copied back, and raises the collective's
    error; ``is_completed()`` and ``is_success()`` read it. ``result()`` returns the collective's
    output tensors at any time, as NCCL's work does (``WorkNCCL::result``). ``write``: the copy
    back's announcement, whose failure ``wait()`` acknowledges once it raised it.
    """

    def __init__(
        self,
        future: torch.futures.Future,
        result: list[torch.Tensor],
        landed: torch.futures.Future | None = None,
        write: storage_writes.AsyncWrite | None = None,
    ) -> None:
        super().__init__()
        self._future = future
        self._result = result
        self._landed = future if landed is None else landed
        self._write = write

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        """Waits for the collective's results, at most ``timeout`` when one is given (c10d's default
        of 0 means no limit), and raises its error.

        Raises:
            torch.distributed.DistBackendError: ``timeout`` passed first, as NCCL's work raises it
                ("... timed out in blocking wait"); the collective carries on.
        """
        if timeout is not None and timeout > datetime.timedelta(0):
            deadline = time.monotonic() + timeout.total_seconds()
            while not self._landed.done():
                if time.monotonic() >= deadline:
                    milliseconds = int(timeout.total_seconds() * 1000)
                    raise dist.DistBackendError(
                        f"neuron collective work timed out in blocking wait (timeout={milliseconds} ms); "
                        "a rank of the group may not have called it yet"
                    )
                time.sleep(0.001)
        try:
            self._landed.wait()
        except Exception:
            if self._write is not None:
                self._write.acknowledge()
            raise
        return True

    def get_future(self) -> torch.futures.Future:
        return self._future

    def is_completed(self) -> bool:
        return self._landed.done()

    def is_success(self) -> bool:
        if not self._landed.done():
            return False
        try:
            self._landed.value()
        except Exception:  # noqa: BLE001 (a failed collective is not a success)
            return False
        return True

    def result(self) -> list[torch.Tensor]:
        return self._result


class _GatheredWork(dist.Work):
    """One work for several (``works``): its future completes with ``result`` once theirs have,
    ``wait()`` waits for each (raising the first error), and it is completed once they all are."""

    def __init__(self, works: list[dist.Work], result: list[torch.Tensor]) -> None:
        super().__init__()
        self._works = works
        self._result = result

        def completed(future: torch.futures.Future) -> list[torch.Tensor]:
            for each in future.value():
                each.value()
            return result

        self._future = torch.futures.collect_all([work.get_future() for work in works]).then(completed)

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        """Waits for every work (each failed one's tensors then usable again), raising the first
        error: stopping at it left the later failed works' tensors raising for good (helper-80)."""
        first: Exception | None = None
        for work in self._works:
            try:
                if timeout is None:
                    work.wait()
                else:
                    work.wait(timeout)
            except Exception as error:  # noqa: BLE001 (raised below, once every work was waited for)
                first = first or error
        if first is not None:
            raise first
        return True

    def get_future(self) -> torch.futures.Future:
        return self._future

    def is_completed(self) -> bool:
        return all(work.is_completed() for work in self._works)

    def is_success(self) -> bool:
        return all(work.is_success() for work in self._works)

    def result(self) -> list[torch.Tensor]:
        return self._result


def _resolved(value: object) -> torch.futures.Future:
    """A future completed with ``value``."""
    future = torch.futures.Future()
    future.set_result(value)
    return future


def _undefined_result(collective: str, error: Exception) -> RuntimeError:
    """What device work on the results of a failed async collective raises (storage_writes)."""
    failure = RuntimeError(
        f"neuron {collective}: this tensor was to receive the result of an async {collective} that "
        f"failed, so it holds no defined value; the collective's work.wait() raises the failure "
        f"and lets the tensor be used again: {error}"
    )
    failure.__cause__ = error
    return failure


def _done(result: list[torch.Tensor]) -> dist.Work:
    return CollectiveWork(_resolved(result), result)


def _check_lists(
    collective: str,
    inputs: list[torch.Tensor],
    outputs: list[torch.Tensor],
    lists: Sequence[tuple[Sequence[torch.Tensor], int]],
    role: str,
) -> int:
    """:func:`staging.check_tensors` of a list collective's tensors, then NCCL's rule for its own
    lists: each tensor of each ``(given, expected)`` pair of ``lists`` has ``expected`` elements
    (shapes may differ; ``role`` names the tensors in the error). Checked on the rank itself, before
    the ranks' agreement, so that a rank whose list is wrong refuses there and every rank raises,
    rather than that rank alone raising in gloo while the others wait for it. Returns the core.

    Raises:
        ValueError: a tensor of a list has another element count (and check_tensors' errors).
    """
    device = staging.check_tensors(collective, inputs + outputs, outputs_from=len(inputs))
    for given, expected in lists:
        for index, tensor in enumerate(given):
            if tensor.numel() != expected:
                raise ValueError(
                    f"neuron {collective}: {role} {index} has {tensor.numel()} elements where {expected} are "
                    f"expected; every tensor of {collective}'s list must have the element count of the "
                    "tensor it pairs with"
                )
    return device


def _flat(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """1-D views of contiguous host tensors, for gloo, which checks shapes where NCCL counts elements."""
    return [tensor.view(-1) for tensor in tensors]


def _storages(tensors: Sequence[torch.Tensor]) -> frozenset[int]:
    """The device addresses of the storages under ``tensors``."""
    return frozenset(tensor.untyped_storage().data_ptr() for tensor in tensors)


#: The neuron groups of this process, drained at exit (``NeuronProcessGroup._drain``): a script
#: may end with async collectives in flight and without ``destroy_process_group``.
_LIVE_GROUPS: weakref.WeakSet[NeuronProcessGroup] = weakref.WeakSet()


#: Whether this process made a neuron group, whose gloo threads run Python callbacks.
_gloo_threads_started = False

#: How long the exit gives gloo's threads, once the collectives are drained, to let go of the last
#: ones' Python objects (seconds): what they do then takes microseconds of one time slice.
_GLOO_SETTLE_S = 0.1


@atexit.register
def _drain_live_groups() -> None:
    """Finishes the live neuron groups' collectives at exit, then lets gloo's threads settle.

    A gloo thread drops a finished collective's Python callbacks and host tensors, which takes the
    GIL, just after the completion reached Python. Once the interpreter is finalizing, a thread
    asking for the GIL exits on the spot, unwinding through gloo's noexcept frames: std::terminate
    aborts the process after all its work is done (1 exit in 5 after a barrier and
    ``destroy_process_group``). The wait covers groups already destroyed too."""
    for group in list(_LIVE_GROUPS):
        group._drain()
    if _gloo_threads_started:
        time.sleep(_GLOO_SETTLE_S)
    retired_groups.free_all()


class _GlooTransport(dist.ProcessGroupGloo):
    """The gloo group that carries a neuron group's host-staged collectives, registered as that
    group's backend for the neuron device (so that ``group._device_types`` names neuron).

    ``dist.split_group`` deep-copies the ``options`` of the parent's device backend before it asks
    the parent group to split; gloo's options cannot be copied (a pybind object without pickling).
    The neuron group takes no backend options, so there are none to copy.

    Once the default group is bound to a core (``init_process_group(device_id=...)``), c10d's
    ``new_group`` has every rank left out of the new group call ``perform_nocolor_split`` on this
    backend, NCCL's way of keeping ``ncclCommSplit`` collective. A neuron group's new groups
    rendezvous among their members only, so a rank left out has nothing to do."""

    @property
    def options(self) -> None:
        return None

    def perform_nocolor_split(self, device: torch.device) -> None:
        """Nothing: a rank outside a new group takes no part in its rendezvous (see the class)."""


class NeuronProcessGroup(dist.ProcessGroup):
    """A c10d process group for neuron tensors (the ``neuron`` backend of ``init_process_group``).

    Args:
        store: the group's rendezvous store.
        rank: this process's rank in the group.
        size: the number of processes in the group.
        timeout: how long a collective waits for the other ranks before it raises.
        serves_cpu: whether the group serves CPU tensors too (``"cpu:gloo,neuron:neuron"``), on a
            gloo group of their own: ``cpu_transport`` when given (the one c10d built for the
            group's ``cpu`` device), else one made here. Made with the group, never at the first CPU
            collective: ranks that start CPU collectives on two groups in different orders would
            wait for each other's rendezvous until the timeout.
    """

    def __init__(
        self,
        store: dist.Store,
        rank: int,
        size: int,
        timeout: datetime.timedelta,
        serves_cpu: bool = False,
        cpu_transport: dist.ProcessGroupGloo | None = None,
    ) -> None:
        super().__init__(rank, size)
        retired_groups.free_unreferenced()
        self._store = store
        self._gloo = _GlooTransport(store, rank, size, timeout)
        # The agreements travel apart from the collectives: they are posted when a collective is
        # called, the collectives once their agreement is in (call_order.py).
        self._agreement_transport = dist.ProcessGroupGloo(dist.PrefixStore("agreement/", store), rank, size, timeout)
        self._order = call_order.CallOrder()
        self._timeout = timeout
        if serves_cpu and cpu_transport is None:
            cpu_transport = dist.ProcessGroupGloo(dist.PrefixStore("cpu/", store), rank, size, timeout)
        # Apart from the neuron collectives' gloo, as the backends of "cpu:gloo,cuda:nccl" are two
        # communicators: ranks may order their CPU and neuron collectives differently.
        self._cpu: dist.ProcessGroupGloo | None = cpu_transport if serves_cpu else None
        self._coalesced_works: list[dist.Work] | None = None
        self._payload_tags = point_to_point.PayloadTags()
        self._self_messages = point_to_point.SelfMessages(rank, timeout)
        self._pending: list[_InFlight] = []
        self._unwaited_receives: list[point_to_point.StagedReceive] = []
        self._send_completions = point_to_point.SendCompletions()
        self._pending_lock = threading.Lock()
        self._splits = 0
        register_device_backend(self, "neuron", self._gloo)
        _LIVE_GROUPS.add(self)
        # A callback chained on a collective may make its first compile during the exit's drain,
        # after threading's shutdown began, when a module that registers a threading atexit hook
        # (concurrent.futures', which Dynamo imports) can no longer be imported: import them now.
        import concurrent.futures.process  # noqa: F401, PLC0415
        import concurrent.futures.thread  # noqa: F401, PLC0415

        global _gloo_threads_started
        _gloo_threads_started = True

    def getBackendName(self) -> str:  # noqa: N802 (the C++ virtual's name)
        return "neuron"

    def __repr__(self) -> str:
        return f"NeuronProcessGroup(rank={self.rank()}, size={self.size()})"

    def shutdown(self) -> None:
        """Finishes the group's unfinished collectives (``_drain``), then shuts down its gloo
        transports (``destroy_process_group`` calls this): the registered one through c10d, the
        agreements' and the CPU's here, so that none outlives the group to the interpreter's exit."""
        self._drain()
        super().shutdown()
        for transport in (self._agreement_transport, self._cpu):
            if transport is not None:
                transport.shutdown()
        self._retire()

    def _retire(self) -> None:
        """Hands the destroyed group to ``retired_groups``, which frees it, and the groups destroyed
        before it, on the main thread: never on a thread of its gloo transports."""
        retired_groups.retire(self, [t for t in (self._gloo, self._agreement_transport, self._cpu) if t is not None])
        retired_groups.free_unreferenced()

    def abort(self) -> None:
        """Aborts the group's gloo transports, as ``shutdown`` shuts them down."""
        super().abort()
        for transport in (self._agreement_transport, self._cpu):
            if transport is not None:
                transport.abort()
        self._retire()

    def _drain(self) -> None:
        """Waits for this rank's unfinished work on the group: async collectives, their results
        copied back (each raising, if it fails, at its own work's ``wait()``, not here), and sends
        and receives not yet waited on (a receive's message is copied in, and the callbacks chained
        on its future run). Their gloo calls and copies back run on gloo's threads and ours: left
        running while the group is shut down or the interpreter exits, they abort the process (a
        thread that takes the GIL once the interpreter is finalizing exits through gloo's noexcept
        frames). What has not finished within the group's timeout is left running."""
        deadline = time.monotonic() + self._timeout.total_seconds()

        def left() -> datetime.timedelta:
            return datetime.timedelta(seconds=max(0.0, deadline - time.monotonic()))

        while time.monotonic() < deadline:
            # Until nothing is left: a receive's callback may start another collective, or a send.
            with self._pending_lock:
                in_flight = [collective for collective in self._pending if not collective.settled.is_set()]
                receives, self._unwaited_receives = self._unwaited_receives, []
            sends_done = self._send_completions.settle(left())
            if not in_flight and not receives and sends_done:
                return
            for collective in in_flight:
                collective.settled.wait(left().total_seconds())
            for receive in receives:
                receive.settle(left())

    def _wait_for_collectives(self) -> None:
        """Waits for this rank's unfinished async collectives on the group, their results copied
        back (each raising, if it fails, at its own work's ``wait()``, not here)."""
        with self._pending_lock:
            pending = [collective.landed for collective in self._pending]
        for future in pending:
            with contextlib.suppress(Exception):
                future.wait()

    def get_group_store(self) -> dist.Store:
        """The store the group was created with (c10d's ``ProcessGroup.get_group_store``)."""
        return self._store

    def split_group(
        self,
        ranks: Sequence[int],
        timeout: datetime.timedelta | None = None,
        opts: object | None = None,
        group_name: str | None = None,
        group_desc: str | None = None,
        device_types: Sequence[torch.device] | None = None,
    ) -> NeuronProcessGroup | None:
        """The step of ``dist.split_group`` (and of ``init_device_mesh`` after
        ``init_process_group(device_id=...)``) that makes the new group: a neuron group of the
        ``ranks`` of this group (sorted group ranks) with its own gloo transport. Only the members
        meet, as in NCCL's ``ncclCommSplit``; a rank outside ``ranks`` gets ``None``, as c10d's
        ``splitGroup`` returns. Every rank of this group makes each split call (c10d requires it),
        so the calls' count is the same on every rank: the members' transport rendezvous in this
        group's store under that count and their ranks (NCCL's split color). Not under
        ``group_name``: c10d hashes it from the ranks and the number of groups this process
        registered, which differs between ranks once a split has left some of them out.

        Raises:
            ValueError: ``opts`` given (the neuron backend takes no options), ``device_types``
                without neuron (the group splits whole), a rank outside this group, or no
                ``group_name`` (c10d always passes one).
        """
        if opts is not None:
            raise ValueError(
                f"neuron split_group: the neuron backend takes no pg_options (got {type(opts).__name__}); leave "
                "pg_options out"
            )
        if device_types is not None and not any(device.type == "neuron" for device in device_types):
            raise ValueError(
                f"neuron split_group: backend selects {[str(d) for d in device_types]}, but a neuron group splits "
                "with its neuron backend; leave backend out or include neuron:neuron"
            )
        if group_name is None:
            raise ValueError("neuron split_group: a group_name is needed (dist.split_group passes one)")
        self._splits += 1
        members = list(ranks)
        outside = [rank for rank in members if not 0 <= rank < self.size()]
        if outside:
            raise ValueError(f"neuron split_group: ranks {outside} are not ranks of a group of size {self.size()}")
        if self.rank() not in members:
            return None
        child = NeuronProcessGroup(
            dist.PrefixStore(f"split{self._splits}/{'_'.join(map(str, members))}/", self._store),
            members.index(self.rank()),
            len(members),
            timeout if timeout is not None else self._timeout,
            # c10d gives the child the parent's backend string, or the devices of ``backend``.
            serves_cpu=self._cpu is not None if device_types is None else any(d.type == "cpu" for d in device_types),
        )
        child._set_group_name(group_name)
        # NCCL's split names an undescribed child after its parent ("default_pg:split:1").
        child._set_group_desc(group_desc if group_desc is not None else f"{self.group_desc}:split:{self._splits}")
        return child

    # ---------------------------------------------------------------- dispatch helpers

    def _on_cpu(self, collective: str, tensors: Sequence[torch.Tensor]) -> bool:
        """Whether the collective's tensors are all CPU tensors, for a group that serves the CPU too
        (the caller then hands them to :meth:`_cpu_transport`); raises (through ``check_tensors``)
        for CPU tensors otherwise."""
        if not tensors or any(tensor.device.type != "cpu" for tensor in tensors):
            return False
        return self._cpu is not None

    def _cpu_transport(self) -> dist.ProcessGroupGloo:
        """The gloo group of this group's CPU collectives (only called when :meth:`_on_cpu` is true)."""
        assert self._cpu is not None
        return self._cpu

    def _agree(
        self,
        collective: str,
        check: Callable[[], int],
        tensors: Sequence[torch.Tensor],
        exchange: Callable[[], tuple[list[int], list[int]]] | None = None,
        async_op: bool = False,
        inline: tuple[Callable[[], torch.Tensor], torch.Tensor] | None = None,
        **fingerprint: object,
    ) -> _Agreed:
        """This rank's argument checks (``check``, returning the core; ``exchange``, an all-to-all's
        elements sent and received), then the agreement with the other ranks
        (``agreement.start_agreement``), which a refusal reaches first: the refusing rank raises its
        error and every other rank raises too, so that none waits for the collective until the
        group's timeout. A synchronous call waits for the agreement and raises here; an asynchronous
        one returns at once (its work raises), as NCCL's enqueue does. ``inline``: a small
        collective's (staging, which returns this rank's host data once the checks pass; where
        every rank's data goes), sent with the agreement (``agreement.Inline``)."""
        try:
            device, refused = check(), None
            sent_and_received = exchange() if exchange is not None else None
            sent_along = None if inline is None else agreement.Inline(inline[0](), inline[1])
        except (ValueError, TypeError, RuntimeError) as error:
            device, sent_and_received, sent_along, refused = -1, None, None, error
        verdict = agreement.start_agreement(
            self._agreement_transport,
            collective,
            tensors,
            exchange=sent_and_received,
            refused=refused,
            inline=sent_along,
            **fingerprint,
        )
        if refused is not None:
            if not async_op:
                verdict.wait()  # the others have this rank's fingerprint before it moves on
            raise refused
        if not async_op:
            error = verdict.wait()
            if error is not None:
                raise error
            verdict = call_order.agreed()
        return _Agreed(device, verdict)

    def _run(
        self,
        collective: str,
        agreed: _Agreed,
        nbytes: int,
        async_op: bool,
        stage: Callable[[], call_order.Post],
        finish: Finish,
        result: list[torch.Tensor],
        touched: Sequence[torch.Tensor],
        written: Sequence[torch.Tensor] | None = None,
    ) -> dist.Work:
        """Stages a collective's tensors to the host now (``stage``, returning its gloo call), makes
        the gloo call in the group's call order once the ranks agree, then ``finish`` (copy the
        results back into ``result``) once gloo is done: before returning, or, with ``async_op``,
        when gloo completes.

        An async collective's work future completes at the call, as NCCL's does when it enqueues
        the collective: callbacks chained on it run at once, in program order, so the collectives
        they start (PowerSGD's hooks chain them) reach the group in the same order on every rank.
        Its results land later: the copy back is announced (runtime/storage_writes.py), and device
        work on those bytes waits for it, as work on a CUDA stream synchronised with the collective
        runs after it; work on other bytes does not. ``work.wait()`` waits for the copy back and
        raises the collective's error; until then, device work on the bytes raises it too.

        ``written``: the tensors ``finish`` writes into on this rank, when not all of ``result`` (a
        reduce's off the root, a broadcast's on it write none).

        ``touched`` (the tensors the collective reads or writes) orders it after this group's
        unfinished async collectives on the same storages, as NCCL orders a group's collectives on
        its stream: ``all_reduce(t, async_op=True); all_reduce(t)`` reduces the first result."""
        self._after_pending(touched)
        with launch_records.collective(collective, agreed.device, nbytes):
            posted = self._order.post(agreed.verdict, stage())
            if not async_op:
                work = posted.wait()
                if isinstance(work, Exception):
                    raise work
                work.wait()
                finish()
                return self._coalesced(_done(result))

        landed = torch.futures.Future()
        in_flight = _InFlight(_storages(touched), landed, threading.Event())
        written = list(result if written is None else written)
        write = storage_writes.begin_async_write([spans.span_of(tensor) for tensor in written])

        def complete(error: Exception | None) -> None:
            try:
                if error is None:
                    write.landed()
                    landed.set_result(result)
                else:
                    write.failed(_undefined_result(collective, error), written)
                    landed.set_exception(error)
            finally:
                in_flight.settled.set()

        def completed(gloo_future: torch.futures.Future) -> None:
            try:
                gloo_future.value()
                with storage_writes.landing_async_writes.raised():  # its own announced write
                    finish()
            except Exception as error:  # noqa: BLE001 (the work raises it)
                complete(error)
            else:
                complete(None)

        def started(posted_future: torch.futures.Future) -> None:
            work = posted_future.value()
            if isinstance(work, Exception):
                complete(work)
            else:
                work.get_future().add_done_callback(completed)

        posted.add_done_callback(started)
        with self._pending_lock:
            self._pending.append(in_flight)
        return self._coalesced(CollectiveWork(_resolved(result), result, landed, write))

    def _after_pending(self, tensors: Sequence[torch.Tensor]) -> None:
        """Waits for the unfinished async collectives of this group that touch ``tensors``' storages
        (their results copied back), raising their error if one failed."""
        with self._pending_lock:
            self._pending = [collective for collective in self._pending if not collective.settled.is_set()]
            if not self._pending:
                return
            storages = _storages(tensors)
            earlier = [collective.landed for collective in self._pending if collective.storages & storages]
        for future in earlier:
            future.wait()

    def _coalesced(self, work: dist.Work) -> dist.Work:
        """``work``, kept for ``_end_coalescing`` while a coalescing manager is open."""
        if self._coalesced_works is not None:
            self._coalesced_works.append(work)
        return work

    # ---------------------------------------------------------------- all-reduce family

    def allreduce(self, tensors: list[torch.Tensor], opts: dist.AllreduceOptions) -> dist.Work:
        if self._on_cpu("all_reduce", tensors):
            return self._cpu_transport().allreduce(tensors, opts)
        if _inlines_all_reduce(tensors, opts.reduceOp):
            return self._all_reduce_inline(tensors[0], opts)
        check = functools.partial(staging.check_tensors, "all_reduce", tensors, reduces=True)
        agreed = self._agree("all_reduce", check, tensors, op=opts.reduceOp, async_op=opts.asyncOp)
        state = {}

        def stage() -> call_order.Post:
            hosts = [staging.to_host(tensor) for tensor in tensors]
            gloo_op, state["post"] = reduce_ops.prepare("all_reduce", opts.reduceOp, hosts, self.size())
            state["hosts"] = hosts
            gloo_opts = dist.AllreduceOptions()
            gloo_opts.reduceOp = gloo_op
            gloo_opts.timeout = opts.timeout
            return lambda: self._gloo.allreduce(hosts, gloo_opts)

        def finish() -> None:
            state["post"](state["hosts"])
            staging.copy_back(list(zip(tensors, state["hosts"], strict=True)))

        return self._run("all_reduce", agreed, staging.nbytes(tensors), opts.asyncOp, stage, finish, tensors, tensors)

    def _all_reduce_inline(self, tensor: torch.Tensor, opts: dist.AllreduceOptions) -> dist.Work:
        """An all_reduce of at most ``agreement.INLINE_BYTES`` (``_inlines_all_reduce``): each rank's
        staged data travels with its fingerprint, and each rank sums every rank's data in rank order,
        so the ranks get the same bits; one gloo round trip where the gloo all-reduce would add a
        second (10% to 44% of a small all_reduce's time, bench/distributed_small_all_reduce.py)."""
        tensors = [tensor]
        state = {}

        def stage() -> torch.Tensor:
            self._after_pending(tensors)
            host = staging.to_host(tensor)
            _, state["post"] = reduce_ops.prepare("all_reduce", opts.reduceOp, [host], self.size())
            return host

        gathered = torch.empty(self.size(), staging.nbytes(tensors), dtype=torch.uint8)
        check = functools.partial(staging.check_tensors, "all_reduce", tensors, reduces=True)
        agreed = self._agree(
            "all_reduce", check, tensors, op=opts.reduceOp, async_op=opts.asyncOp, inline=(stage, gathered)
        )

        def finish() -> None:
            ranks = gathered.view(tensor.dtype).view(self.size(), *tensor.shape)
            result = staging.empty_host(tensor)
            result.copy_(ranks[0])
            for data in ranks[1:]:
                result.add_(data)  # in the dtype, one rounding per rank, as gloo's sum
            state["post"]([result])
            staging.copy_back([(tensor, result)])

        return self._run(
            "all_reduce", agreed, staging.nbytes(tensors), opts.asyncOp, lambda: _ComputedWork, finish, tensors, tensors
        )

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: dist.AllreduceCoalescedOptions) -> dist.Work:
        if self._on_cpu("all_reduce_coalesced", tensors):
            return self._cpu_transport().allreduce_coalesced(tensors, opts)
        check = functools.partial(staging.check_tensors, "all_reduce_coalesced", tensors, reduces=True)
        agreed = self._agree("all_reduce_coalesced", check, tensors, op=opts.reduceOp, async_op=opts.asyncOp)
        state = {}

        def stage() -> call_order.Post:
            hosts = [staging.to_host(tensor) for tensor in tensors]
            gloo_op, state["post"] = reduce_ops.prepare("all_reduce_coalesced", opts.reduceOp, hosts, self.size())
            state["hosts"] = hosts
            gloo_opts = dist.AllreduceCoalescedOptions()
            gloo_opts.reduceOp = gloo_op
            gloo_opts.timeout = opts.timeout
            # gloo coalesces tensors of one dtype only; NCCL takes any mix: one gloo call per dtype,
            # in the order of first appearance (the same on every rank, whose dtypes agree).
            by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
            for host in hosts:
                by_dtype.setdefault(host.dtype, []).append(host)
            if len(by_dtype) == 1:
                return lambda: self._gloo.allreduce_coalesced(hosts, gloo_opts)
            groups = list(by_dtype.values())
            return lambda: _gathered([self._gloo.allreduce_coalesced(group, gloo_opts) for group in groups], hosts)

        def finish() -> None:
            state["post"](state["hosts"])
            staging.copy_back(list(zip(tensors, state["hosts"], strict=True)))

        return self._run(
            "all_reduce_coalesced", agreed, staging.nbytes(tensors), opts.asyncOp, stage, finish, tensors, tensors
        )

    def reduce(self, tensors: list[torch.Tensor], opts: dist.ReduceOptions) -> dist.Work:
        """``reduce``: complex tensors, which c10d hands over as they are, reduce as their
        ``view_as_real`` pairs, as ProcessGroupNCCL::reduce views them (SUM, AVG and PREMUL_SUM;
        other reductions raise its RuntimeError)."""
        if self._on_cpu("reduce", tensors):
            return self._cpu_transport().reduce(tensors, opts)
        result, tensors = tensors, [torch.view_as_real(t) if t.is_complex() else t for t in tensors]

        def check() -> int:
            kind = reduce_ops.op_type(opts.reduceOp)
            if any(t.is_complex() for t in result) and kind not in _COMPLEX_REDUCTIONS:
                raise RuntimeError(
                    f"neuron reduce: reduce does not support {kind.name} on complex tensors (as NCCL); use SUM, AVG "
                    "or PREMUL_SUM, or reduce torch.view_as_real(tensor)"
                )
            return staging.check_tensors("reduce", tensors, reduces=True)

        agreed = self._agree("reduce", check, tensors, op=opts.reduceOp, async_op=opts.asyncOp, root=opts.rootRank)
        is_root = self.rank() == opts.rootRank
        state = {}

        def stage() -> call_order.Post:
            hosts = [staging.to_host(tensor) for tensor in tensors]
            gloo_op, state["post"] = reduce_ops.prepare("reduce", opts.reduceOp, hosts, self.size())
            state["hosts"] = hosts
            gloo_opts = dist.ReduceOptions()
            gloo_opts.reduceOp = gloo_op
            gloo_opts.rootRank = opts.rootRank
            gloo_opts.rootTensor = opts.rootTensor
            gloo_opts.timeout = opts.timeout
            return lambda: self._gloo.reduce(hosts, gloo_opts)

        def finish() -> None:
            # Only the root receives the result; the other ranks' tensors stay as they were (NCCL's).
            if is_root:
                state["post"](state["hosts"])
                staging.copy_back(list(zip(tensors, state["hosts"], strict=True)))

        return self._run(
            "reduce",
            agreed,
            staging.nbytes(tensors),
            opts.asyncOp,
            stage,
            finish,
            result,
            tensors,
            written=tensors if is_root else [],
        )

    def broadcast(self, tensors: list[torch.Tensor], opts: dist.BroadcastOptions) -> dist.Work:
        if self._on_cpu("broadcast", tensors):
            return self._cpu_transport().broadcast(tensors, opts)
        agreed = self._agree(
            "broadcast",
            functools.partial(staging.check_tensors, "broadcast", tensors),
            tensors,
            async_op=opts.asyncOp,
            root=opts.rootRank,
        )
        is_root = self.rank() == opts.rootRank
        hosts: list[torch.Tensor] = []

        def stage() -> call_order.Post:
            # Only the root's values travel: the other ranks receive into empty host tensors.
            hosts.extend(staging.to_host(t) if is_root else staging.empty_host(t) for t in tensors)
            return lambda: self._gloo.broadcast(hosts, opts)

        def finish() -> None:
            if not is_root:
                staging.copy_back(list(zip(tensors, hosts, strict=True)))

        return self._run(
            "broadcast",
            agreed,
            staging.nbytes(tensors),
            opts.asyncOp,
            stage,
            finish,
            tensors,
            tensors,
            written=[] if is_root else tensors,
        )

    # ---------------------------------------------------------------- gathers

    def allgather(
        self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: dist.AllgatherOptions
    ) -> dist.Work:
        outputs = [tensor for outputs in output_lists for tensor in outputs]
        if self._on_cpu("all_gather", inputs + outputs):
            return self._cpu_transport().allgather(output_lists, inputs, opts)
        if len({tuple(tensor.shape) for tensor in outputs}) > 1:
            return self._allgather_uneven(outputs, inputs, opts)

        counts = [(outputs, input.numel()) for input in inputs]
        check = functools.partial(_check_lists, "all_gather", inputs, outputs, counts, "output")
        agreed = self._agree("all_gather", check, inputs + outputs, async_op=opts.asyncOp)
        host_lists = [[staging.empty_host(tensor) for tensor in outputs] for outputs in output_lists]

        def stage() -> call_order.Post:
            hosts = _flat([staging.to_host(tensor) for tensor in inputs])
            return lambda: self._gloo.allgather([_flat(hosts_) for hosts_ in host_lists], hosts, opts)

        def finish() -> None:
            staging.copy_back(list(zip(outputs, [h for hosts in host_lists for h in hosts], strict=True)))

        return self._run(
            "all_gather", agreed, staging.nbytes(inputs), opts.asyncOp, stage, finish, outputs, inputs + outputs
        )

    def _allgather_uneven(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: dist.AllgatherOptions
    ) -> dist.Work:
        """``all_gather`` into outputs of different sizes, one per rank, as NCCL allows (it runs one
        broadcast per rank, ``_broadcast_oop``): this rank's input must have as many elements as its
        own output. The ranks agree on the outputs' shapes; gloo gathers every input padded to the
        largest, and each output takes its rank's elements."""

        def check() -> int:
            if len(outputs) != self.size() or len(inputs) != 1:
                raise ValueError(
                    f"neuron all_gather: expected one input and one output per rank ({self.size()}), got "
                    f"{len(inputs)} input(s) and {len(outputs)} outputs"
                )
            if inputs[0].numel() != outputs[self.rank()].numel():
                raise ValueError("Tensor input and output of _broadcast_oop must have the same number of elements ")
            device = staging.check_tensors("all_gather", inputs + outputs, outputs_from=len(inputs))
            if any(tensor.dtype != inputs[0].dtype for tensor in outputs):
                raise TypeError(f"neuron all_gather: every output must be {inputs[0].dtype}, the input's dtype")
            return device

        agreed = self._agree("all_gather", check, outputs, async_op=opts.asyncOp)
        padded = max(tensor.numel() for tensor in outputs)
        wire = staging.wire_dtype(inputs[0].dtype)
        host_outputs = [torch.empty(padded, dtype=wire) for _ in outputs]

        def stage() -> call_order.Post:
            host_input = torch.zeros(padded, dtype=wire)
            host_input[: inputs[0].numel()] = staging.to_host(inputs[0]).view(-1)
            return lambda: self._gloo.allgather([host_outputs], [host_input], opts)

        def finish() -> None:
            staging.copy_back(
                [
                    (output, host[: output.numel()].reshape(output.shape))
                    for output, host in zip(outputs, host_outputs, strict=True)
                ]
            )

        return self._run(
            "all_gather", agreed, staging.nbytes(inputs), opts.asyncOp, stage, finish, outputs, inputs + outputs
        )

    def allgather_coalesced(
        self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: dist.AllgatherOptions
    ) -> dist.Work:
        outputs = [tensor for outputs in output_lists for tensor in outputs]
        if self._on_cpu("all_gather_coalesced", inputs + outputs):
            return self._cpu_transport().allgather_coalesced(output_lists, inputs, opts)

        counts = [([row[index] for row in output_lists], input.numel()) for index, input in enumerate(inputs)]
        check = functools.partial(_check_lists, "all_gather_coalesced", inputs, outputs, counts, "output")
        agreed = self._agree("all_gather_coalesced", check, inputs + outputs, async_op=opts.asyncOp)
        host_lists = [[staging.empty_host(tensor) for tensor in outputs] for outputs in output_lists]

        def stage() -> call_order.Post:
            hosts = _flat([staging.to_host(tensor) for tensor in inputs])
            return lambda: self._gloo.allgather_coalesced([_flat(hosts_) for hosts_ in host_lists], hosts, opts)

        def finish() -> None:
            staging.copy_back(list(zip(outputs, [h for hosts in host_lists for h in hosts], strict=True)))

        return self._run(
            "all_gather_coalesced",
            agreed,
            staging.nbytes(inputs),
            opts.asyncOp,
            stage,
            finish,
            outputs,
            inputs + outputs,
        )

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: dist.AllgatherOptions) -> dist.Work:
        """``all_gather_into_tensor``: every rank's ``input`` concatenated (or stacked) into ``output``."""
        if self._on_cpu("all_gather_into_tensor", [output, input]):
            return self._cpu_transport()._allgather_base(output, input, opts)
        check = functools.partial(staging.check_tensors, "all_gather_into_tensor", [input, output], outputs_from=1)
        agreed = self._agree("all_gather_into_tensor", check, [output, input], async_op=opts.asyncOp)
        host_output = staging.empty_host(output)

        def stage() -> call_order.Post:
            # Flat on the host: the output may stack the inputs (world_size, *shape) or concatenate them.
            host_input = staging.to_host(input).view(-1)
            return lambda: self._gloo._allgather_base(host_output.view(-1), host_input, opts)

        def finish() -> None:
            staging.copy_back([(output, host_output)])

        return self._run(
            "all_gather_into_tensor",
            agreed,
            staging.nbytes([input]),
            opts.asyncOp,
            stage,
            finish,
            [output],
            [output, input],
        )

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: dist.AllgatherOptions
    ) -> dist.Work:
        """Coalesced ``all_gather_into_tensor`` (``_coalescing_manager``): one gather per pair."""
        works = [self.all_gather_single(output, input, opts) for output, input in zip(outputs, inputs, strict=True)]
        return _gathered(works, outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(
        self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: dist.GatherOptions
    ) -> dist.Work:
        outputs = [tensor for outputs in output_lists for tensor in outputs]
        if self._on_cpu("gather", inputs + outputs):
            return self._cpu_transport().gather(output_lists, inputs, opts)

        counts = [(outputs, input.numel()) for input in inputs]
        check = functools.partial(_check_lists, "gather", inputs, outputs, counts, "output")
        agreed = self._agree("gather", check, inputs, async_op=opts.asyncOp, root=opts.rootRank)
        host_lists = [[staging.empty_host(tensor) for tensor in outputs] for outputs in output_lists]

        def stage() -> call_order.Post:
            hosts = _flat([staging.to_host(tensor) for tensor in inputs])
            return lambda: self._gloo.gather([_flat(hosts_) for hosts_ in host_lists], hosts, opts)

        def finish() -> None:
            staging.copy_back(list(zip(outputs, [h for hosts in host_lists for h in hosts], strict=True)))

        return self._run(
            "gather", agreed, staging.nbytes(inputs), opts.asyncOp, stage, finish, outputs, inputs + outputs
        )

    # ---------------------------------------------------------------- scatters

    def scatter(
        self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]], opts: dist.ScatterOptions
    ) -> dist.Work:
        inputs = [tensor for inputs in input_lists for tensor in inputs]
        if self._on_cpu("scatter", inputs + outputs):
            return self._cpu_transport().scatter(outputs, input_lists, opts)

        counts = [(inputs, output.numel()) for output in outputs]
        check = functools.partial(_check_lists, "scatter", inputs, outputs, counts, "input")
        agreed = self._agree("scatter", check, outputs, async_op=opts.asyncOp, root=opts.rootRank)
        host_outputs = [staging.empty_host(tensor) for tensor in outputs]

        def stage() -> call_order.Post:
            host_lists = [_flat([staging.to_host(tensor) for tensor in inputs]) for inputs in input_lists]
            return lambda: self._gloo.scatter(_flat(host_outputs), host_lists, opts)

        def finish() -> None:
            staging.copy_back(list(zip(outputs, host_outputs, strict=True)))

        return self._run(
            "scatter", agreed, staging.nbytes(outputs), opts.asyncOp, stage, finish, outputs, inputs + outputs
        )

    def reduce_scatter(
        self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]], opts: dist.ReduceScatterOptions
    ) -> dist.Work:
        """``reduce_scatter``: rank ``r`` receives the reduction of every rank's ``input_list[r]``.

        gloo has no reduce-scatter of its own, so the inputs are staged into one contiguous host
        buffer, all-reduced there, and each rank copies back only its own part.
        """
        inputs = [tensor for tensors in input_lists for tensor in tensors]
        if self._on_cpu("reduce_scatter", inputs + outputs):
            return self._cpu_transport().reduce_scatter(outputs, input_lists, opts)

        def check() -> int:
            if len(outputs) != 1 or len(input_lists) != 1:
                raise ValueError(f"neuron reduce_scatter: expected one output and one input list, got {len(outputs)}")
            if len(inputs) != self.size():
                raise ValueError(
                    f"neuron reduce_scatter: the input list holds {len(inputs)} tensors; it needs one per rank "
                    f"({self.size()})"
                )
            device = staging.check_tensors("reduce_scatter", inputs + outputs, reduces=True, outputs_from=len(inputs))
            if len({tuple(tensor.shape) for tensor in inputs}) > 1:
                # Inputs of different sizes, as NCCL allows (one reduce per rank, ``_reduce_oop``):
                # this rank's output takes the reduction of every rank's input at its position.
                if inputs[self.rank()].numel() != outputs[0].numel():
                    raise ValueError("Tensor input and output of _reduce_oop must have the same number of elements ")
            else:
                for position, tensor in enumerate(inputs):
                    if tensor.shape != outputs[0].shape:
                        raise ValueError(
                            f"neuron reduce_scatter: input {position} is {tensor.dtype} {tuple(tensor.shape)}, the "
                            f"output {outputs[0].dtype} {tuple(outputs[0].shape)}; every input must match the output"
                        )
            for position, tensor in enumerate(inputs):
                if tensor.dtype != outputs[0].dtype:
                    raise ValueError(
                        f"neuron reduce_scatter: input {position} is {tensor.dtype}, the output {outputs[0].dtype}; "
                        "every input must have the output's dtype"
                    )
            return device

        # The ranks agree on the inputs; each checks its own output against them.
        agreed = self._agree("reduce_scatter", check, inputs, op=opts.reduceOp, async_op=opts.asyncOp)
        return self._reduce_scatter_stacked("reduce_scatter", agreed, outputs[0], inputs, opts, stack=True)

    def reduce_scatter_single(
        self, output: torch.Tensor, input: torch.Tensor, opts: dist.ReduceScatterOptions
    ) -> dist.Work:
        """``reduce_scatter_tensor``: ``input`` is every rank's part, concatenated (or stacked)."""
        if self._on_cpu("reduce_scatter_tensor", [output, input]):
            return self._cpu_transport()._reduce_scatter_base(output, input, opts)
        check = functools.partial(
            staging.check_tensors, "reduce_scatter_tensor", [input, output], reduces=True, outputs_from=1
        )
        agreed = self._agree("reduce_scatter_tensor", check, [output, input], op=opts.reduceOp, async_op=opts.asyncOp)
        if input.numel() != output.numel() * self.size() or input.dtype != output.dtype:
            raise ValueError(
                f"neuron reduce_scatter_tensor: input {input.dtype} {tuple(input.shape)} must hold {self.size()} "
                f"times the elements of output {output.dtype} {tuple(output.shape)}, in the same dtype"
            )
        return self._reduce_scatter_stacked("reduce_scatter_tensor", agreed, output, [input], opts, stack=False)

    _reduce_scatter_base = reduce_scatter_single

    def _reduce_scatter_stacked(
        self,
        collective: str,
        agreed: _Agreed,
        output: torch.Tensor,
        sources: list[torch.Tensor],
        opts: dist.ReduceScatterOptions,
        stack: bool,
    ) -> dist.Work:
        """Every rank's part of ``sources`` (one tensor per rank to ``stack``, of any sizes, else one
        tensor holding them all) all-reduced on the host; this rank's part copied back into ``output``."""
        state = {}
        if stack:
            ends = list(itertools.accumulate(tensor.numel() for tensor in sources))
            start, end = ends[self.rank()] - sources[self.rank()].numel(), ends[self.rank()]
        else:
            start, end = output.numel() * self.rank(), output.numel() * (self.rank() + 1)

        def stage() -> call_order.Post:
            host = staging.to_host(torch.cat([tensor.reshape(-1) for tensor in sources]) if stack else sources[0])
            gloo_op, state["post"] = reduce_ops.prepare(collective, opts.reduceOp, [host], self.size())
            state["host"] = host
            gloo_opts = dist.AllreduceOptions()
            gloo_opts.reduceOp = gloo_op
            gloo_opts.timeout = opts.timeout
            return lambda: self._gloo.allreduce([host], gloo_opts)

        def finish() -> None:
            part = state["host"].reshape(-1)[start:end]
            state["post"]([part])
            staging.copy_back([(output, part.reshape(output.shape))])

        return self._run(
            collective, agreed, staging.nbytes(sources), opts.asyncOp, stage, finish, [output], [output, *sources]
        )

    def reduce_scatter_single_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: dist.ReduceScatterOptions
    ) -> dist.Work:
        """Coalesced ``reduce_scatter_tensor`` (``_coalescing_manager``): one per pair."""
        works = [self.reduce_scatter_single(output, input, opts) for output, input in zip(outputs, inputs, strict=True)]
        return _gathered(works, outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # ---------------------------------------------------------------- all-to-all

    def all_to_all_single(
        self,
        output: torch.Tensor,
        input: torch.Tensor,
        output_split_sizes: list[int],
        input_split_sizes: list[int],
        opts: dist.AllToAllOptions,
    ) -> dist.Work:
        """``all_to_all_single``: splits along dimension 0, even or given per rank (uneven)."""
        if self._on_cpu("all_to_all_single", [output, input]):
            return self._cpu_transport().alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)
        check = functools.partial(staging.check_tensors, "all_to_all_single", [input, output], outputs_from=1)
        exchange = functools.partial(_split_elements, self.size(), output, input, output_split_sizes, input_split_sizes)
        even = not output_split_sizes and not input_split_sizes
        agreed = self._agree(
            "all_to_all_single", check, [output, input], exchange=exchange, sizes=even, async_op=opts.asyncOp
        )
        host_output = staging.empty_host(output)

        def stage() -> call_order.Post:
            host_input = staging.to_host(input)
            return lambda: self._gloo.alltoall_base(
                host_output, host_input, output_split_sizes, input_split_sizes, opts
            )

        def finish() -> None:
            staging.copy_back([(output, host_output)])

        return self._run(
            "all_to_all_single",
            agreed,
            staging.nbytes([input]),
            opts.asyncOp,
            stage,
            finish,
            [output],
            [output, input],
        )

    alltoall_base = all_to_all_single

    def alltoall(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: dist.AllToAllOptions
    ) -> dist.Work:
        """``all_to_all`` of tensor lists: rank ``r``'s ``inputs[s]`` lands in rank ``s``'s ``outputs[r]``.

        Staged as one ``all_to_all_single`` of the flattened tensors, split per rank by their numbers
        of elements (one copy each way per tensor); the tensors must share one dtype.
        """
        if self._on_cpu("all_to_all", inputs + outputs):
            return self._cpu_transport().alltoall(outputs, inputs, opts)

        def check() -> int:
            if len(inputs) != self.size() or len(outputs) != self.size():
                raise ValueError(
                    f"neuron all_to_all: {len(inputs)} input and {len(outputs)} output tensors; it needs one of "
                    f"each per rank ({self.size()})"
                )
            return staging.check_tensors("all_to_all", inputs + outputs, outputs_from=len(inputs))

        def exchange() -> tuple[list[int], list[int]]:
            return [t.numel() for t in inputs], [t.numel() for t in outputs]

        agreed = self._agree(
            "all_to_all", check, inputs + outputs, exchange=exchange, sizes=False, async_op=opts.asyncOp
        )
        dtypes = {tensor.dtype for tensor in inputs + outputs}
        if len(dtypes) != 1:
            raise TypeError(f"neuron all_to_all: the tensors must share one dtype, got {sorted(map(str, dtypes))}")
        host_output = torch.empty(sum(t.numel() for t in outputs), dtype=staging.wire_dtype(outputs[0].dtype))

        def stage() -> call_order.Post:
            host_input = torch.cat([staging.to_host(tensor).reshape(-1) for tensor in inputs])
            return lambda: self._gloo.alltoall_base(
                host_output, host_input, [t.numel() for t in outputs], [t.numel() for t in inputs], opts
            )

        def finish() -> None:
            parts = host_output.split([tensor.numel() for tensor in outputs])
            staging.copy_back([(t, part.reshape(t.shape)) for t, part in zip(outputs, parts, strict=True)])

        return self._run(
            "all_to_all", agreed, staging.nbytes(inputs), opts.asyncOp, stage, finish, outputs, inputs + outputs
        )

    # ---------------------------------------------------------------- point to point, barrier

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int) -> dist.Work:
        point_to_point.check_peer("send", "dst", dst, self.size())
        if self._on_cpu("send", tensors):
            return self._cpu_transport().send(tensors, dst, tag)
        device = staging.check_tensors("send", tensors)
        (tensor,) = tensors  # c10d passes one tensor; the tag is ignored, as NCCL ignores it
        self._after_pending(tensors)
        with launch_records.collective("send", device, staging.nbytes(tensors)):
            if dst == self.rank():
                return self._self_messages.send(tensor)
            sent = point_to_point.StagedSend(self._gloo, tensor, dst, self._payload_tags)
            self._send_completions.track(sent)
            return sent

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> dist.Work:
        point_to_point.check_peer("recv", "src", src, self.size())
        if self._on_cpu("recv", tensors):
            return self._cpu_transport().recv(tensors, src, tag)
        return self._staged_receive(tensors, src)

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int) -> dist.Work:
        """``recv`` from whichever rank sends first; the work's ``_source_rank()`` names it."""
        if self._on_cpu("recv", tensors):
            return self._cpu_transport().recv_anysource(tensors, tag)
        return self._staged_receive(tensors, None)

    def _staged_receive(self, tensors: list[torch.Tensor], src: int | None) -> dist.Work:
        """A receive into a neuron tensor; the tag is ignored, as NCCL ignores it (point_to_point.py)."""
        device = staging.check_tensors("recv", tensors)
        (tensor,) = tensors  # c10d passes one tensor
        self._after_pending(tensors)
        with launch_records.collective("recv", device, staging.nbytes(tensors)):
            if src == self.rank():
                return self._self_messages.recv(tensor)
            received = point_to_point.StagedReceive(self._gloo, tensor, src)
            # Kept for _drain until waited on: a script may end, or destroy the group, with an irecv
            # it never waited for, whose header is awaited on a thread of the receive's own.
            with self._pending_lock:
                self._unwaited_receives = [r for r in self._unwaited_receives if not r.is_settled()]
                self._unwaited_receives.append(received)
            return received

    def _start_coalescing(self, device: torch.device) -> None:
        """``_coalescing_manager(group, device)``: the collectives issued until ``_end_coalescing``
        run as they come (the fast-path ones arrive as one coalesced call); their works are kept."""
        self._coalesced_works = []

    def _end_coalescing(self, device: torch.device) -> dist.Work:
        """One work for the collectives issued since ``_start_coalescing``."""
        works, self._coalesced_works = self._coalesced_works or [], None
        return _gathered(works, [])

    def barrier(self, opts: dist.BarrierOptions) -> dist.Work:
        """Returns once every rank has called ``barrier`` and this rank's earlier collectives on the
        group are done (as NCCL's barrier, an all-reduce on the group's stream, completes after
        them; their errors stay with their works). The agreement's exchange is the barrier: a rank
        that called another collective meanwhile makes every rank raise, where a gloo barrier facing
        an all-reduce would wait out the group's timeout and leave the group unusable."""
        verdict = agreement.start_agreement(self._agreement_transport, "barrier", [], sizes=False).wait()
        if verdict is not None:
            raise verdict
        self._wait_for_collectives()
        return _done([])


#: The reductions ProcessGroupNCCL computes on complex tensors' real pairs (``isComplexViewAsRealAllowed``).
_COMPLEX_REDUCTIONS = frozenset({dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.PREMUL_SUM})

#: The reductions and dtypes an inline all_reduce computes (``NeuronProcessGroup._all_reduce_inline``):
#: sums, whose result is the same whichever rank adds first; AVG and PREMUL_SUM become sums
#: (``reduce_ops.prepare``). Others (MIN/MAX's NaNs, PRODUCT, bitwise, bool) go through gloo.
_INLINE_REDUCTIONS = frozenset({dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.PREMUL_SUM})
_INLINE_DTYPES = frozenset(
    {torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8, torch.uint8}
)


def _inlines_all_reduce(tensors: Sequence[torch.Tensor], op: dist.ReduceOp) -> bool:
    """Whether an all_reduce of ``tensors`` travels with its agreement: one non-empty neuron tensor of
    at most ``agreement.INLINE_BYTES`` of a summed dtype, summed. Decided from what the agreement compares
    (collective, reduction, dtype, element count), so every rank that agrees decides the same."""
    if len(tensors) != 1:
        return False
    (tensor,) = tensors
    return (
        reduce_ops.op_type(op) in _INLINE_REDUCTIONS
        and tensor.device.type == "neuron"
        and tensor.dtype in _INLINE_DTYPES
        and 0 < staging.nbytes(tensors) <= agreement.INLINE_BYTES  # an empty one is gloo's no-op
    )


class _ComputedWork(dist.Work):
    """The gloo call of a collective computed from the agreement's data: complete once made."""

    def __init__(self) -> None:
        super().__init__()
        self._future = torch.futures.Future()
        self._future.set_result([])

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        return True

    def get_future(self) -> torch.futures.Future:
        return self._future


def _split_elements(
    size: int, output: torch.Tensor, input: torch.Tensor, output_splits: list[int], input_splits: list[int]
) -> tuple[list[int], list[int]]:
    """An uneven ``all_to_all_single``'s elements sent to each rank and received from each: its
    splits (rows of dimension 0; an even split where a list is empty) times a row's elements.

    Raises:
        RuntimeError: c10d's ``checkSplitSizes`` errors (a list not one per rank, or not summing to
            dimension 0, or a dimension 0 the ranks do not divide).
    """

    def per_rank(tensor: torch.Tensor, splits: list[int]) -> list[int]:
        rows = tensor.shape[0] if tensor.dim() else 1
        if not splits:
            if tensor.numel() and rows % size:
                raise RuntimeError("Tensor's dim 0 does not divide equally across group size")
            splits = [rows // size] * size
        elif len(splits) != size:
            raise RuntimeError("Number of tensor splits not equal to group size")
        elif sum(splits) != rows:
            raise RuntimeError("Split sizes doesn't match total dim 0 size")
        return [split * math.prod(tensor.shape[1:]) for split in splits]

    return per_rank(input, input_splits), per_rank(output, output_splits)


def _gathered(works: list[dist.Work], result: list[torch.Tensor]) -> dist.Work:
    """One work for several (:class:`_GatheredWork`)."""
    return _GatheredWork(works, result)
