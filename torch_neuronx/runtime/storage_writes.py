"""Writes into storages from more than one thread.

A storage's buffer is immutable: writing into part of a storage reads its buffer, computes the
successor and binds that (runtime/buffers.py; runtime/executable.py for the storages a launch
writes). Two threads writing different parts of one storage at once would both read the same
buffer, and the later bind would drop the earlier write: an async collective's copy back, which
runs on gloo's thread, and an in-place op on another part of the tensor, which CUDA runs on two
streams that touch different bytes, so both land. Every read-compute-bind of a storage therefore
runs under :data:`lock`.

A compiled function's input mutations cannot run under it: AOTAutograd's graph reads the input,
and its runtime wrapper writes the whole input back with ``copy_`` after the graph, so a copy back
landing in between is overwritten. Such writes are announced instead (:func:`begin_async_write`),
and a compiled call that mutates an input first waits for those into its storage
(:func:`wait_for_async_writes`, from dynamo/aliasing.py).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence

import torch

from torch_neuronx.runtime.thread_flags import ThreadFlag

__all__ = ["begin_async_write", "landing_async_writes", "lock", "wait_for_async_writes"]

#: Held from reading the buffers of the storages a call writes to binding their successors: by the
#: eager kernels of in-place and out= overloads (eager/kernel.py's ``WritingKernel``) and by :func:`buffers.write` and
#: :func:`buffers.share_whole` (copies, and collectives' copies back). Compiled graphs write no
#: input: AOTAutograd applies their input mutations with ``copy_`` after the graph. Reentrant: a
#: write may run others (a copy that casts runs the cast's kernel). One lock for every storage,
#: since a call writes several and another thread rarely waits on it.
lock = threading.RLock()

#: Writes another thread will make, by ticket: the storages' addresses and the event set once done.
_async_writes: dict[int, tuple[frozenset[int], threading.Event]] = {}
_async_writes_lock = threading.Lock()
_tickets = itertools.count()


def begin_async_write(storages: frozenset[int]) -> Callable[[], None]:
    """Announces that another thread will write into ``storages`` (their ``data_ptr()``s): an async
    collective's copy back, made by gloo's thread. Returns the function that ends the announcement,
    to be called once the write has landed or will never land (the collective failed); calling it
    again does nothing."""
    ticket = next(_tickets)
    done = threading.Event()
    with _async_writes_lock:
        _async_writes[ticket] = (storages, done)

    def end() -> None:
        with _async_writes_lock:
            _async_writes.pop(ticket, None)
        done.set()

    return end


#: Raised in a thread that lands announced writes: a collective's completion, with the callbacks
#: chained on its future. :func:`wait_for_async_writes` returns at once there: the writes it would
#: wait for may need this very thread (the next collective's copy back), and it would wait for ever.
landing_async_writes = ThreadFlag()


def wait_for_async_writes(tensors: Sequence[torch.Tensor]) -> None:
    """Waits until no announced write into the storages of ``tensors`` is still to land. A dict
    check when none is announced (the common case); nothing on a thread that lands them
    (:data:`landing_async_writes`)."""
    if not _async_writes or landing_async_writes:
        return
    storages = {tensor.untyped_storage().data_ptr() for tensor in tensors}
    with _async_writes_lock:
        pending = [done for written, done in _async_writes.values() if written & storages]
    for done in pending:
        done.wait()
