"""Writes into storages from more than one thread, and the order of device work after them.

A storage's buffer is immutable: writing into part of a storage reads its buffer, computes the
successor and binds that (runtime/buffers.py; runtime/executable.py for the storages a launch
writes). Two threads writing different parts of one storage at once would both read the same
buffer, and the later bind would drop the earlier write: an async collective's copy back, which
runs on gloo's thread, and an in-place op on another part of the tensor, which CUDA runs on two
streams that touch different bytes, so both land. Every read-compute-bind of a storage therefore
runs under :func:`locked`.

An async collective's work future completes when the collective is called, as NCCL's does (its
``then()`` callbacks run at once, in program order), while its results land later, from another
thread. The collective announces that write (:func:`begin_async_write`): until it lands, device
work that reads or writes bytes it covers waits for it (:func:`wait_for_writes_into`, called by
the eager kernels, the compiled graphs' launch and the buffers' reads and writes), as the work of
a CUDA stream synchronised with the collective's would run after it. Work on other bytes, of the
same storage too, does not wait. A write that fails leaves the bytes undefined: work on them raises
the failure until the writer acknowledges it (the collective's ``work.wait()``, which raises it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from torch_neuronx.runtime.spans import Span, span_of
from torch_neuronx.runtime.thread_flags import ThreadFlag

__all__ = [
    "AsyncWrite",
    "active",
    "begin_async_write",
    "landing_async_writes",
    "locked",
    "wait_for_writes_into",
    "wait_for_writes_into_arguments",
]

#: Held from reading the buffers of the storages a call writes to binding their successors (through
#: :func:`locked`): by the eager kernels of in-place and out= overloads (eager/kernel.py's
#: ``WritingKernel``) and by :func:`buffers.write` and :func:`buffers.share_whole` (copies, and
#: collectives' copies back). Compiled graphs write no input: AOTAutograd applies their input
#: mutations with ``copy_`` after the graph. Reentrant: a write may run others (a copy that casts
#: runs the cast's kernel). One lock for every storage, since a call writes several and another
#: thread rarely waits on it.
_lock = threading.RLock()

#: Raised while this thread holds :data:`_lock`: it waits for no announced write there (the write
#: may need the lock to land), having waited before it took the lock.
_holding_lock = ThreadFlag()

#: Raised in a thread that lands announced writes (a collective's copy back): it waits for none,
#: since the writes it would wait for may be its own.
landing_async_writes = ThreadFlag()


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """Holds the storages' write lock (see the module docstring)."""
    with _lock, _holding_lock.raised():
        yield


@dataclasses.dataclass
class _Announced:
    spans: tuple[Span, ...]
    done: threading.Event
    #: Set when the write failed: the error, and what the work on its bytes raises.
    failure: RuntimeError | None = None
    #: The written tensors, kept while they hold the failure so that their memory is not reused.
    keep: tuple[torch.Tensor, ...] = ()


_announced: dict[int, _Announced] = {}
_announced_lock = threading.Lock()
_tickets = itertools.count()

#: Whether a write is announced or a failure unacknowledged: the one check device work makes
#: otherwise (a module attribute read).
active = False


def _update_active() -> None:
    global active
    active = bool(_announced)


class AsyncWrite:
    """A write another thread will make into some bytes (:func:`begin_async_write`)."""

    def __init__(self, ticket: int) -> None:
        self._ticket = ticket

    def landed(self) -> None:
        """The write is in: work on its bytes goes on. Calling it again does nothing."""
        with _announced_lock:
            entry = _announced.pop(self._ticket, None)
            _update_active()
        if entry is not None:
            entry.done.set()

    def failed(self, failure: RuntimeError, keep: Sequence[torch.Tensor]) -> None:
        """The write will never land: work on its bytes raises ``failure`` until
        :meth:`acknowledge` (``keep``: the written tensors, held until then)."""
        with _announced_lock:
            entry = _announced.get(self._ticket)
            if entry is None:
                return
            entry.failure, entry.keep = failure, tuple(keep)
        entry.done.set()

    def acknowledge(self) -> None:
        """The writer raised the failure itself: work on the bytes goes on (they hold what they held)."""
        self.landed()


def begin_async_write(spans: Sequence[Span | None]) -> AsyncWrite:
    """Announces that another thread will write the bytes ``spans`` (None entries, for empty
    tensors, are skipped): an async collective's copy back, or a receive's. End it with
    :meth:`AsyncWrite.landed` or :meth:`AsyncWrite.failed`."""
    ticket = next(_tickets)
    with _announced_lock:
        _announced[ticket] = _Announced(tuple(span for span in spans if span is not None), threading.Event())
        _update_active()
    return AsyncWrite(ticket)


def wait_for_writes_into(tensors: Sequence[Any]) -> None:
    """Waits until no announced write into the bytes of ``tensors`` (neuron tensors; other values
    are skipped) is still to land; raises the failure of one that failed.

    A module attribute check when nothing is announced (the common case); nothing on a thread that
    lands writes (:data:`landing_async_writes`) or holds the write lock.

    Raises:
        RuntimeError: an announced write into these bytes failed (the message names it).
    """
    if not active or landing_async_writes or _holding_lock:
        return
    spans = [
        span_of(t)
        for t in tensors
        if isinstance(t, torch.Tensor) and t.device.type == "neuron" and t.layout == torch.strided
    ]
    spans = [span for span in spans if span is not None]
    if not spans:
        return
    with _announced_lock:
        entries = [entry for entry in _announced.values() if any(s.overlaps(w) for w in entry.spans for s in spans)]
    for entry in entries:
        entry.done.wait()
        if entry.failure is not None:
            raise entry.failure


def wait_for_writes_into_arguments(args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """:func:`wait_for_writes_into` for the tensors of an op's arguments (in lists too)."""
    if not active or landing_async_writes or _holding_lock:
        return
    tensors: list[Any] = []
    for value in itertools.chain(args, kwargs.values()):
        if isinstance(value, (list, tuple)):
            tensors.extend(value)
        else:
            tensors.append(value)
    wait_for_writes_into(tensors)
