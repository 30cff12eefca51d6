"""The host's intra-op thread count as the user's code sets it.

Some lowerings follow a CPU kernel's split of its work between threads (batch norm's per-thread
sums, arange, softmax's scalar tail), and executables are keyed on that count. ``torch.get_num_threads``
reads the calling thread's OpenMP setting, and autograd runs neuron's backward on a device thread of
its own, whose setting stays what it was when the thread started: after ``torch.set_num_threads(1)``
the backward read 2 where the CPU's backward, which runs on the caller's thread, used 1. The count is
therefore the main thread's, as last read there.
"""

from __future__ import annotations

import threading

import torch

__all__ = ["cpu_thread_count"]

_main_thread_count = torch.get_num_threads()
_MAIN_THREAD = threading.main_thread().ident


def cpu_thread_count() -> int:
    """``torch.get_num_threads()`` as the process's main thread last saw it (read afresh when called
    there; about 0.1 us)."""
    global _main_thread_count
    if threading.get_ident() == _MAIN_THREAD:
        _main_thread_count = torch.get_num_threads()
    return _main_thread_count
