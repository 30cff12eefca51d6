"""Destroyed neuron groups, kept until a thread of the caller's can free them.

``ProcessGroupGloo``'s destructor joins the gloo group's worker threads. Those threads run Python:
the callbacks chained on collectives' futures, and the neuron group's own completions, whose
closures they let go of once the callbacks return. When that is the last reference to a destroyed
neuron group, the group and its gloo transports are freed on a gloo thread, a destructor joins the
thread it runs on, ``std::thread::join`` throws ``Resource deadlock avoided`` out of a noexcept
destructor and std::terminate aborts the process (CI, in the sample of the distributed checks; 6 jobs
in 7 with four groups destroyed as their collectives' callbacks return:
``tests/distributed/checks.py``'s ``destroyed_groups_are_freed_off_gloo_threads``).

So a destroyed group is kept here (:func:`retire`) until nothing else references it or its
transports, and then freed by :func:`free_unreferenced` on the main thread: the next group made or
destroyed there does, and the exit frees the rest (:func:`free_all`). A reference can only be
dropped, never taken again, once this module holds the last one, so the scan cannot race a gloo
thread. A group still referenced (a script keeps it) stays until a later scan or the exit.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence

__all__ = ["free_all", "free_unreferenced", "retire"]

_lock = threading.Lock()

#: Each retired group with its gloo transports.
_retired: list[tuple[object, tuple[object, ...]]] = []

# sys.getrefcount's counts when only this module holds the object (see _unreferenced).
_GROUP_REFERENCES = 3  # the entry's tuple, the loop's name, getrefcount's argument
_TRANSPORT_REFERENCES = 4  # the group's attribute, the entry's tuple, the loop's name, the argument


def retire(group: object, transports: Sequence[object]) -> None:
    """Keeps ``group`` (a destroyed neuron group) and its gloo ``transports`` (``ProcessGroupGloo``
    objects the group holds as attributes) until :func:`free_unreferenced` or :func:`free_all`."""
    with _lock:
        if all(group is not kept for kept, _ in _retired):  # shutdown, then abort, retire it once
            _retired.append((group, tuple(transports)))


def _unreferenced(entry: tuple[object, tuple[object, ...]]) -> bool:
    group, transports = entry
    if sys.getrefcount(group) > _GROUP_REFERENCES:
        return False
    for transport in transports:  # noqa: SIM110 (a generator's frame would add a reference)
        if sys.getrefcount(transport) > _TRANSPORT_REFERENCES:
            return False
    return True


def free_unreferenced() -> int:
    """Frees the retired groups that nothing but this module references, when called on the main
    thread; returns how many it freed. Elsewhere it frees none: a gloo thread (running a callback
    chained on a CPU collective's future, which may destroy groups) would free the transports whose
    threads it may be (helper-80: an abort, 3 of 3 runs)."""
    if threading.current_thread() is not threading.main_thread():
        return 0
    with _lock:
        freeing = [entry for entry in _retired if _unreferenced(entry)]
        _retired[:] = [entry for entry in _retired if all(entry is not other for other in freeing)]
    count = len(freeing)
    del freeing  # the groups' destructors run here, outside the lock
    return count


def free_all() -> None:
    """Lets go of every retired group (at exit, once their collectives are drained): each is freed
    here unless something else still references it."""
    with _lock:
        freeing = list(_retired)
        _retired.clear()
    del freeing
