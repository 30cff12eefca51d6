"""Device faults, raised at the next synchronisation point (decision 9).

An op that can fault on the device (an index out of range, say) computes a flag and a detail value
inside its executable instead of clamping. The flags are recorded here with the op that launched
them; a synchronisation point (a host read, ``synchronize()``, an event wait) reads the flags of its
core in launch order and raises the earliest fault, with the op and, when
``TORCH_NEURONX_ENABLE_STACK_TRACE=1``, the Python stack of its launch.

The runtime stays usable after a fault (CUDA's context is lost), but what the fault left undefined
stays unreadable, as on CUDA, where the error is sticky: while checks are pending on a core, each
buffer a launch writes is noted with the pending checks its value depends on (its own launch's, and
those of the buffers it read). Raising a fault *poisons* the buffers that depend on it: a host read
of one, or a launch that takes one, raises the fault again. Work that did not read the faulted
op's result, new tensors, and buffers overwritten whole from the host are unaffected.
"""

from __future__ import annotations

import dataclasses
import itertools
import traceback
import weakref
from collections.abc import Iterable

import jax
import numpy as np

from torch_neuronx import _config
from torch_neuronx._compat.aten_checks import stream_text


@dataclasses.dataclass
class PendingCheck:
    sequence: int
    op: str
    failed: jax.Array
    detail: jax.Array
    message: str
    error: type[Exception]
    stack: str | None
    #: Raised at its launch (:func:`record`), not after the op ran asynchronously.
    synchronous: bool = False


_sequence = itertools.count()
_RECORD_STACKS = _config.record_stack_traces()
_LAUNCH_BLOCKING = _config.launch_blocking()
#: Per core, the checks of launches not yet read, in launch order.
_pending: dict[int, list[PendingCheck]] = {}
#: The sequences of the launches whose checks are pending, on any core. Launchers note what they
#: write only while it is not empty (:func:`note_written`).
open_checks: set[int] = set()
#: While checks are pending: id of each buffer written since, on any core -> (a weak reference to
#: it, the sequences of the pending checks its value depends on). A copy to another core carries them.
_suspects: dict[int, tuple[weakref.ref, frozenset[int]]] = {}
#: id of a buffer that holds no defined values -> (a weak reference to it, the error, its message).
#: Launchers test it for emptiness before looking their inputs up (:func:`check_inputs`).
poisoned: dict[int, tuple[weakref.ref, type[Exception], str]] = {}
#: Counts the raises that poisoned buffers: a reader that scanned buffers at one count need not scan
#: them again while it holds (adaptive eager's recorded inputs).
generation = 0


def launch_stack() -> str | None:
    """The Python stack of the launch being made, with TORCH_NEURONX_ENABLE_STACK_TRACE=1 (else None)."""
    return "".join(traceback.format_stack()[:-4]) if _RECORD_STACKS else None


def record(
    device: int,
    op: str,
    outputs: list[jax.Array],
    checks: list[tuple[str, type[Exception], bool]],
    stack: str | None = None,
    *,
    at_launch: bool = True,
    wait: bool | None = None,
) -> int:
    """Records the checks of one launch: ``checks`` holds (message, error, synchronous) per check and
    ``outputs`` its (failed, detail); ``stack`` is where it was launched (default: the caller's stack,
    with TORCH_NEURONX_ENABLE_STACK_TRACE=1). ``at_launch``: the launch is being made now, so its
    synchronous checks are raised as made at the op (adaptive eager's flush records the checks of
    ops recorded earlier with False). When a check is synchronous and ``wait`` (default:
    ``at_launch``), waits for the launch and raises the earliest fault pending on ``device``, as
    CUDA's host-side checks synchronise; a caller that passes ``wait=False`` calls
    :func:`raise_at_launch` itself once its bookkeeping is done. Returns the launch's sequence (what
    :func:`note_written` takes)."""
    if stack is None and _RECORD_STACKS:
        stack = "".join(traceback.format_stack()[:-3])
    sequence = next(_sequence)
    open_checks.add(sequence)
    queue = _pending.setdefault(device, [])
    synchronous = False
    for (message, error, blocking), failed, detail in zip(checks, outputs[0::2], outputs[1::2], strict=True):
        queue.append(PendingCheck(sequence, op, failed, detail, message, error, stack, blocking and at_launch))
        synchronous = synchronous or blocking
    if synchronous and at_launch and (wait is None or wait):
        raise_at_launch(device, sequence)
    return sequence


def raise_at_launch(device: int, sequence: int) -> None:
    """Raises the earliest fault pending on ``device`` for the launch ``sequence``, whose synchronous
    check is made at the call. When an earlier launch's fault is raised instead, the call raised all
    the same and its own checks are dropped: on CUDA its host-side check is never reached, as the
    synchronisation it waits on raises the earlier asynchronous error."""
    try:
        raise_pending(device)
    finally:
        queue = _pending.get(device)
        if queue:
            queue[:] = [c for c in queue if c.sequence != sequence]
            _settle()


def dependencies(inputs: Iterable[object]) -> set[int]:
    """The sequences of the pending checks that the values of ``inputs`` (buffers, or anything a
    launch takes) depend on."""
    depends: set[int] = set()
    for value in inputs:
        entry = _suspects.get(id(value))
        if entry is not None and entry[0]() is value:
            depends |= entry[1]
    return depends


def note_dependencies(arrays: Iterable[jax.Array], depends: Iterable[int]) -> None:
    """Notes that the values of ``arrays`` depend on the pending checks ``depends`` (sequences
    :func:`record` returned); callers call it while :data:`open_checks` is not empty."""
    frozen = frozenset(depends)
    if frozen:
        for array in arrays:
            key = id(array)
            _suspects[key] = (weakref.ref(array, lambda _, key=key: _suspects.pop(key, None)), frozen)


def note_written(inputs: Iterable[object], arrays: Iterable[jax.Array], own: Iterable[int] = ()) -> None:
    """Notes the buffers ``arrays`` that a launch, a view read, a write or a copy between cores made
    from ``inputs``, with the pending checks their values depend on: the launch's ``own`` (the
    sequences :func:`record` returned) and those of the inputs. Callers call it while
    :data:`open_checks` is not empty."""
    note_dependencies(arrays, dependencies(inputs).union(own))


def _poison(device: int, check: PendingCheck, faulted: set[int]) -> None:
    """Poisons the buffers, on any core, whose values depend on the launches ``faulted`` (``check``'s
    and those of the repeats of its fault)."""
    text = (
        f"{check.op} on neuron:{device}: {_message(check)} (raised before: this tensor holds the result of the "
        "op that faulted, or a value computed from it, which are undefined; compute it again)"
    )
    for key, (reference, depends) in list(_suspects.items()):
        array = reference()
        if array is not None and depends & faulted:
            poisoned[key] = (weakref.ref(array, lambda _, key=key: poisoned.pop(key, None)), check.error, text)
    global generation
    generation += 1


def poison_of(arrays: Iterable[object]) -> tuple[type[Exception], str] | None:
    """The fault (its error and message) that left one of ``arrays`` undefined, or None."""
    for array in arrays:
        entry = poisoned.get(id(array))
        if entry is not None and entry[0]() is array:
            return entry[1], entry[2]
    return None


def poison(arrays: Iterable[jax.Array], fault: tuple[type[Exception], str]) -> None:
    """Marks ``arrays`` undefined by ``fault`` (:func:`poison_of`'s): values computed from a poisoned
    buffer by work that could not raise it at its launch (adaptive eager's ops recorded before the
    fault was raised)."""
    global generation
    generation += 1
    for array in arrays:
        key = id(array)
        poisoned[key] = (weakref.ref(array, lambda _, key=key: poisoned.pop(key, None)), *fault)


def check_inputs(device: int, arrays: Iterable[object]) -> None:
    """Raises the fault that poisoned one of ``arrays`` (the buffers a launch or a read of ``device``
    takes); a fault still pending on ``device`` is raised first (it may be the array's own).

    Raises:
        The fault's exception (IndexError, RuntimeError, ...), saying the value is undefined.
    """
    fault = poison_of(arrays)
    if fault is not None:
        raise_pending(device)
        raise fault[0](fault[1])


def _same_fault(later: PendingCheck, raised: PendingCheck) -> bool:
    """Whether ``later`` failed with what ``raised`` said: the same op, message and detail (the
    index out of range). Another op's fault, or another index, is its own and raises in turn."""
    return (
        later.op == raised.op
        and later.message == raised.message
        and bool(np.asarray(later.failed))
        and int(np.asarray(later.detail)) == int(np.asarray(raised.detail))
    )


def raise_depended_on(array: object) -> None:
    """Raises the earliest fault pending on any core whose checks the value of ``array`` depends
    on (a copy of another core's faulted result, read on this one): a host read waits for what it
    reads, as CUDA's copy between devices waits for the source's work and raises its error."""
    depends = dependencies([array])
    for device, queue in list(_pending.items()):
        if any(check.sequence in depends for check in queue):
            raise_pending(device)


def raise_pending(device: int) -> None:
    """Raises the earliest fault recorded on ``device``; the checks before it, the other checks of
    the launch that faulted (one launch raises at most one fault) and the later faults of the same
    check are consumed: one cause (a constant out of range that tracing evaluated several times,
    a check repeated in a loop) raises once, where later unrelated ops raised it again."""
    queue = _pending.get(device)
    try:
        while queue:
            check = queue.pop(0)
            if bool(np.asarray(check.failed)):
                while queue and queue[0].sequence == check.sequence:
                    queue.pop(0)
                repeats = {c.sequence for c in queue if _same_fault(c, check)}
                queue[:] = [c for c in queue if c.sequence not in repeats]
                _poison(device, check, {check.sequence, *repeats})
                raise check.error(_describe(device, check))
    finally:
        _settle()


def _settle() -> None:
    """Keeps in :data:`open_checks` the launches whose checks are still pending, and drops the
    dependencies on checks no longer pending (they passed, or their fault was raised)."""
    open_checks.intersection_update({c.sequence for checks in _pending.values() for c in checks})
    if not open_checks:
        _suspects.clear()
        return
    for key, (reference, depends) in list(_suspects.items()):
        if depends & open_checks:
            _suspects[key] = (reference, depends & open_checks)
        else:
            del _suspects[key]


def _float32_text(bits: int) -> str:
    """The float32 of ``bits`` as ``std::ostream`` prints it (6 significant digits: 1, 0.5, inf, -nan)."""
    return stream_text(np.array(bits, np.uint32).view(np.float32))


def _message(check: PendingCheck) -> str:
    detail = int(np.asarray(check.detail))
    # A detail may pack two numbers, (batch << 32) + info: linalg's "(Batch element {batch})", or
    # two float32s' bits, printed as C++ streams a float (histc's "range of [1, inf]"), or be a
    # float64's bits, printed as C++ streams a double (a sampler's "lambda=1e-50").
    high, low = (detail >> 32) & 0xFFFFFFFF, detail & 0xFFFFFFFF
    return check.message.format(
        detail=detail,
        batch=detail >> 32,
        info=low,
        high_float=_float32_text(high),
        low_float=_float32_text(low),
        double=stream_text(np.array(detail, np.int64).view(np.float64)),
    )


def _describe(device: int, check: PendingCheck) -> str:
    text = f"{check.op} on neuron:{device}: {_message(check)}"
    if _LAUNCH_BLOCKING or check.synchronous:
        return text
    text += (
        "\nThis device fault was raised at a synchronization point after the op ran asynchronously; "
        "set NEURON_LAUNCH_BLOCKING=1 to raise it at the op itself."
    )
    if check.stack is not None:
        text += "\nThe op was launched at:\n" + check.stack
    else:
        text += " Set TORCH_NEURONX_ENABLE_STACK_TRACE=1 to record where it was launched."
    return text
