"""Host-staged send and receive that check what they carry: a header before every payload.

gloo's receive trusts its caller: a message larger than the receive buffer aborts the process
("Received data size doesn't match expected size", a C++ ``terminate``), and a smaller one fills a
prefix of it and leaves the rest as it was (a wrong value). NCCL requires the count and datatype of
a send to match its receive too, but the neuron group must not crash the interpreter or return
garbage when they do not. So every send of a neuron tensor is two gloo messages:

- a header (:data:`HEADER_ELEMENTS` int64s on :data:`HEADER_TAG`): the payload's tag, dtype, element
  count and shape (the receive checks the dtype and count, as NCCL; the shape names it in errors);
- the payload (the host copy of the tensor) on a tag of its own, unique per sender and receiver.

The user's tag is ignored, as NCCL ignores it (``ProcessGroupNCCL::send``/``recv`` take no tag
into the communicator): every header between two ranks of a group travels on the one header tag,
so a pair's sends and receives match in the order they were called, whatever their tags.

A receive posts its header receive at once and, in a background thread, posts the payload receive
as soon as the header arrives: into the receive tensor's host buffer when the header matches it,
otherwise into a scratch buffer of the payload's size (so the sender completes and the channel
stays clean), and ``wait()`` then raises naming both sides. Posting from a thread, not in
``wait()``, keeps gloo's progress rule: a send completes once its receive is posted, whether or not
the receiver has waited yet (``isend``; ``recv``; ``wait`` rings rely on it).

A rank's sends to itself, which NCCL allows and gloo's transport cannot carry (it has no pair to
itself), go through :class:`SelfMessages`: the host copy waits there, in call order, for the receive.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import itertools
import queue
import threading
import zlib
from collections import defaultdict
from collections.abc import Callable

import torch
import torch.distributed as dist

from torch_neuronx.distributed import agreement, staging
from torch_neuronx.runtime import spans, storage_writes

__all__ = [
    "HEADER_ELEMENTS",
    "HEADER_TAG",
    "PayloadTags",
    "SelfMessages",
    "SendCompletions",
    "StagedReceive",
    "StagedSend",
    "check_peer",
]

#: Header layout: payload tag, dtype code, element count, byte count, number of dims, the first
#: ``_SHAPE_DIMS`` sizes (-1 past the last), and a checksum of the whole shape.
_SHAPE_DIMS = 6
HEADER_ELEMENTS = 5 + _SHAPE_DIMS + 1

#: The gloo tag of every header (the user's tag is ignored, as NCCL ignores it); payloads' tags
#: are above it, :data:`_PAYLOAD_TAGS` of them per pair, reused in turn.
HEADER_TAG = 0
_PAYLOAD_TAGS = 2**30


def check_peer(operation: str, argument: str, peer: int, size: int) -> None:
    """Raises ``DistBackendError`` (NCCL's type for an invalid peer) for a peer rank outside the
    group: gloo would use it as an index into its pairs and crash the process (SIGSEGV)."""
    if not 0 <= peer < size:
        raise dist.DistBackendError(
            f"neuron {operation}: {argument} {peer} is not a rank of this group of size {size}; pass a rank from 0 "
            f"to {size - 1}"
        )


def _header(payload_tag: int, tensor: torch.Tensor) -> torch.Tensor:
    shape = list(tensor.shape)
    dims = (shape + [-1] * _SHAPE_DIMS)[:_SHAPE_DIMS]
    checksum = zlib.crc32(repr(shape).encode())
    return torch.tensor(
        [payload_tag, agreement.dtype_code(tensor.dtype), tensor.numel(), staging.nbytes([tensor]), len(shape)]
        + dims
        + [checksum],
        dtype=torch.int64,
    )


def _describe(header: list[int]) -> str:
    _, code, numel, _, ndim, *rest = header
    dims = rest[:_SHAPE_DIMS]
    shape = f"({', '.join(map(str, dims[:ndim]))}{',' if ndim == 1 else ''})" if ndim <= _SHAPE_DIMS else f"{ndim} dims"
    return f"{agreement.dtype_name(code)} of shape {shape} ({numel} elements)"


class PayloadTags:
    """Payload tags per peer: each (sender, receiver) pair counts its own, so they stay unique."""

    def __init__(self) -> None:
        self._counters: dict[int, itertools.count] = defaultdict(itertools.count)
        self._lock = threading.Lock()

    def next(self, peer: int) -> int:
        with self._lock:
            return HEADER_TAG + 1 + next(self._counters[peer]) % _PAYLOAD_TAGS


class _PointToPointWork(dist.Work):
    """A send's or receive's work of one tensor: ``result()`` is that tensor, as NCCL's work returns
    it (a receive's holds the message after ``wait()``), and ``get_future()`` a future completed with
    it once ``wait()`` returns (or with its error), waited for on a thread of its own: gloo's
    point-to-point works have no future to chain."""

    def __init__(self, tensor: torch.Tensor) -> None:
        super().__init__()
        self._tensor = tensor
        self._future_threads: list[threading.Thread] = []

    def result(self) -> list[torch.Tensor]:
        return [self._tensor]

    #: Whether ``wait()`` writes into the tensor (a receive's copy back).
    _writes = False

    def _copy_in(self, host: torch.Tensor) -> None:
        """Copies a received message into the tensor: the landing of the write ``get_future()``
        announced, whichever thread makes it, so it waits for no announced write itself."""
        with storage_writes.landing_async_writes.raised():
            staging.copy_back([(self._tensor, host)])

    def get_future(self) -> torch.futures.Future:
        future: torch.futures.Future = torch.futures.Future()
        # A receive's copy back then lands from the future's thread: device work on the tensor
        # meanwhile waits for it (runtime/storage_writes.py).
        write = storage_writes.begin_async_write([spans.span_of(self._tensor)]) if self._writes else None

        def complete() -> None:
            try:
                self.wait()
            except BaseException as error:  # noqa: BLE001 (handed to the future's waiter)
                outcome = error
            else:
                outcome = None
            finally:
                if write is not None:
                    write.landed()
            if outcome is None:
                future.set_result(self.result())
            else:
                future.set_exception(outcome)

        thread = threading.Thread(target=complete, name="neuron-p2p-future", daemon=True)
        self._future_threads.append(thread)
        thread.start()
        return future

    def is_settled(self) -> bool:
        """Whether nothing of the work runs any more: it completed, and so did its futures' threads
        (with the callbacks chained on them)."""
        return self.is_completed() and not any(thread.is_alive() for thread in self._future_threads)

    def settle(self, timeout: datetime.timedelta) -> None:
        """Waits for the work (its error is left to its own ``wait()``), then for its futures'
        threads, at most ``timeout`` each: what the process group does before it shuts down or
        the interpreter exits, when the user never waited."""
        with contextlib.suppress(Exception):
            self.wait()
        for thread in self._future_threads:
            thread.join(timeout.total_seconds())


class StagedSend(_PointToPointWork):
    """A send of one neuron tensor: its header and its host copy, both posted at once.

    Args:
        gloo: the group's gloo process group.
        tensor: the neuron tensor to send.
        dst: the receiver's rank in the group.
        tags: the group's payload tags (each process group keeps its own).
    """

    def __init__(self, gloo: dist.ProcessGroup, tensor: torch.Tensor, dst: int, tags: PayloadTags) -> None:
        super().__init__(tensor)
        payload_tag = tags.next(dst)
        # gloo reads these until the sends complete: the work keeps them.
        self._buffers = [_header(payload_tag, tensor), staging.to_host(tensor)]
        self._works = [
            gloo.send([self._buffers[0]], dst, HEADER_TAG),
            gloo.send([self._buffers[1]], dst, payload_tag),
        ]
        self._done = False
        self._lock = threading.Lock()

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        with self._lock:
            if not self._done:
                for work in self._works:
                    _wait(work, timeout)
                self._done = True
                self._buffers.clear()
        return True

    def is_completed(self) -> bool:
        return self._done

    def is_success(self) -> bool:
        return self._done


class SendCompletions:
    """Waits for a group's sends in the background, in the order they were made, so that a send
    whose work the caller never waits on (``dist.isend(t, dst)`` alone, which NCCL completes) still
    completes and lets go of its tensor and host copy: gloo's send work has no completion but
    ``wait()`` (``is_completed()`` stays False until then). One daemon thread, started at the
    first send; only the sends not yet complete are held."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[StagedSend] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._outstanding = 0
        self._changed = threading.Condition()

    def track(self, send: StagedSend) -> None:
        """Waits for ``send`` after the sends tracked before it (its error is left to its own ``wait()``)."""
        with self._changed:
            self._outstanding += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._complete, name="neuron-send-completions", daemon=True)
                self._thread.start()
        self._queue.put(send)

    def settle(self, timeout: datetime.timedelta) -> bool:
        """Waits, at most ``timeout``, until every tracked send has completed (or failed); whether they have."""
        with self._changed:
            return self._changed.wait_for(lambda: self._outstanding == 0, timeout.total_seconds())

    def _complete(self) -> None:
        while True:
            send = self._queue.get()
            with contextlib.suppress(Exception):
                send.wait()
            del send  # not held while the next one is awaited
            with self._changed:
                self._outstanding -= 1
                self._changed.notify_all()


class StagedReceive(_PointToPointWork):
    """A receive into one neuron tensor (any layout), checked against the sender's header.

    Args:
        gloo: the group's gloo process group.
        tensor: the neuron tensor to receive into.
        src: the sender's rank in the group, or ``None`` for whichever rank sends first.

    ``wait()`` raises ``RuntimeError`` when the sender's tensor differs from ``tensor`` in dtype or
    shape (``tensor`` keeps its values), and gloo's error when the sender never comes.
    """

    _writes = True

    def __init__(self, gloo: dist.ProcessGroup, tensor: torch.Tensor, src: int | None) -> None:
        super().__init__(tensor)
        self._gloo = gloo
        self._host = staging.empty_host(tensor)
        self._expected = _header(0, tensor)
        self._header = torch.empty(HEADER_ELEMENTS, dtype=torch.int64)
        if src is None:
            header_work = gloo.recv_anysource([self._header], HEADER_TAG)
        else:
            header_work = gloo.recv([self._header], src, HEADER_TAG)
        self._source = src
        self._payload: dist.Work | None = None
        self._mismatch: str | None = None
        self._error: BaseException | None = None
        self._done = False
        self._lock = threading.Lock()
        self._posted = threading.Thread(target=self._post_payload, args=(header_work,), name="neuron-recv", daemon=True)
        self._posted.start()

    def _post_payload(self, header_work: dist.Work) -> None:
        try:
            header_work.wait()
            if self._source is None:
                self._source = header_work._source_rank()
            header = self._header.tolist()
            # dtype, element count, bytes: as NCCL, a (6,) send fills a (2, 3) receive in row-major order.
            if header[1:4] == self._expected.tolist()[1:4]:
                buffer = self._host
            else:
                self._mismatch = _describe(header)
                buffer = torch.empty(header[3], dtype=torch.uint8)
            self._payload = self._gloo.recv([buffer], self._source, header[0])
        except BaseException as error:  # noqa: BLE001 (raised again by wait())
            self._error = error

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        with self._lock:
            if self._done:
                return True
            self._posted.join()
            if self._error is not None:
                raise self._error
            # gloo's receive work waits for a new message at every wait(): wait for it once only.
            _wait(self._payload, timeout)
            self._done = True
            if self._mismatch is not None:
                raise RuntimeError(
                    f"neuron recv: rank {self._source} sent {self._mismatch}, but the receive tensor is "
                    f"{_describe(self._expected.tolist())}; a send and its receive must have the same dtype "
                    "and number of elements (the receive tensor is unchanged)"
                )
            self._copy_in(self._host)
        return True

    def is_completed(self) -> bool:
        return self._done

    def is_success(self) -> bool:
        return self._done and self._mismatch is None

    def _source_rank(self) -> int:
        """The rank the receive got its data from (after ``wait()``)."""
        self._posted.join()
        if self._source is None:
            raise RuntimeError("neuron recv: the source rank is known once the header has arrived")
        return self._source


class SelfMessages:
    """A rank's sends to itself, matched with its receives from itself in call order (tags are
    ignored, as NCCL ignores them), as NCCL matches a send and receive of the same peer (inside
    ``batch_isend_irecv`` either may come first). A send completes at once: its host copy waits
    here for its receive.

    Args:
        rank: this rank in the group (the peer of these messages, in errors).
        timeout: how long a receive's ``wait()`` waits for its send before it raises.
    """

    def __init__(self, rank: int, timeout: datetime.timedelta) -> None:
        self._rank = rank
        self._timeout = timeout
        self._lock = threading.Lock()
        self._sent: collections.deque[tuple[list[int], torch.Tensor]] = collections.deque()
        self._waiting: collections.deque[_SelfReceive] = collections.deque()

    def send(self, tensor: torch.Tensor) -> dist.Work:
        """Hands the host copy of ``tensor`` to the first receive waiting, now or when it comes."""
        message = (_header(0, tensor).tolist(), staging.to_host(tensor))
        with self._lock:
            receive = self._waiting.popleft() if self._waiting else None
            if receive is None:
                self._sent.append(message)
        if receive is not None:
            receive.deliver(*message)
        return _SelfSend(tensor)

    def recv(self, tensor: torch.Tensor) -> dist.Work:
        """A receive of the first send not yet received."""
        receive = _SelfReceive(tensor, self._rank, self._timeout, lambda: self._withdraw(receive))
        with self._lock:
            message = self._sent.popleft() if self._sent else None
            if message is None:
                self._waiting.append(receive)
        if message is not None:
            receive.deliver(*message)
        return receive

    def _withdraw(self, receive: _SelfReceive) -> bool:
        """Takes a receive whose wait timed out off the queue, so that the next send goes to the
        next receive; False when a send reached it meanwhile."""
        with self._lock:
            if receive in self._waiting:
                self._waiting.remove(receive)
                return True
            return False


class _SelfSend(_PointToPointWork):
    """A send to the rank itself: complete once made (its host copy is with :class:`SelfMessages`)."""

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True


class _SelfReceive(_PointToPointWork):
    """A receive from the rank itself: ``wait()`` waits for the send, then copies its host copy in
    or raises, as :class:`StagedReceive` does, when the send's dtype or element count differs."""

    _writes = True

    def __init__(
        self, tensor: torch.Tensor, rank: int, timeout: datetime.timedelta, withdraw: Callable[[], bool]
    ) -> None:
        super().__init__(tensor)
        self._rank = rank
        self._timeout = timeout
        self._withdraw = withdraw
        self._arrived = threading.Event()
        self._message: tuple[list[int], torch.Tensor] | None = None
        self._done = False

    def deliver(self, header: list[int], host: torch.Tensor) -> None:
        self._message = (header, host)
        self._arrived.set()

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        if self._done:
            return True
        limit = timeout if timeout is not None and timeout > datetime.timedelta(0) else self._timeout
        if not self._arrived.wait(limit.total_seconds()):
            if self._withdraw():
                raise dist.DistBackendError(
                    f"neuron recv: rank {self._rank} waited {limit.total_seconds():g} s for its own send to itself; "
                    "post the send (isend, or batch_isend_irecv's P2POp) before waiting for the receive; this "
                    "receive is withdrawn, so a later send goes to the next one"
                )
            self._arrived.wait()  # a send took it off the queue just now: its delivery is under way
        header, host = self._message
        expected = _header(0, self._tensor).tolist()
        self._done = True
        if header[1:4] != expected[1:4]:
            raise RuntimeError(
                f"neuron recv: rank {self._rank} sent {_describe(header)}, but the receive tensor is "
                f"{_describe(expected)}; a send and its receive must have the same dtype and number of elements "
                "(the receive tensor is unchanged)"
            )
        self._copy_in(host.reshape(self._tensor.shape))
        return True

    def is_completed(self) -> bool:
        return self._done

    def is_success(self) -> bool:
        return self._done

    def _source_rank(self) -> int:
        return self._rank


def _wait(work: dist.Work, timeout: datetime.timedelta | None) -> None:
    if timeout is None or timeout == datetime.timedelta(0):
        work.wait()
    else:
        work.wait(timeout)
