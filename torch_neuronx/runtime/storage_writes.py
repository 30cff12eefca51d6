"""Writes into storages from more than one thread.

A storage's buffer is immutable: writing into part of a storage reads its buffer, computes the
successor and binds that (runtime/buffers.py; runtime/executable.py for the storages a launch
writes). Two threads writing different parts of one storage at once would both read the same
buffer, and the later bind would drop the earlier write: an async collective's copy back, which
runs on gloo's thread, and an in-place op on another part of the tensor, which CUDA runs on two
streams that touch different bytes, so both land. Every read-compute-bind of a storage therefore
runs under :data:`lock`.
"""

from __future__ import annotations

import threading

#: Held from reading the buffers of the storages a call writes to binding their successors: by the
#: eager kernels of in-place and out= overloads (eager/kernel.py's ``WritingKernel``) and by :func:`buffers.write` and
#: :func:`buffers.share_whole` (copies, and collectives' copies back). Compiled graphs write no
#: input: AOTAutograd applies their input mutations with ``copy_`` after the graph. Reentrant: a
#: write may run others (a copy that casts runs the cast's kernel). One lock for every storage,
#: since a call writes several and another thread rarely waits on it.
lock = threading.RLock()
