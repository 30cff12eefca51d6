"""The state of the kernel being traced (per thread): its name, its SPMD launch grid and the program
being traced, the shared HBM tensors its programs share, and the engines' accumulator registers.

Every ``nl``/``nisa`` call reaches it through ``nki._core.scope.require``, which is how a call
outside a kernel raises NKI's ``err_nki_api_outside_of_nki_kernel``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

from nki._core import hardware

_local = threading.local()


@dataclasses.dataclass
class TraceContext:
    """One kernel trace.

    Attributes:
        kernel_name: the kernel's function name (errors name it).
        grid: the SPMD launch grid, ``()`` for a single program.
        platform: the hardware limits the kernel is checked against.
        program_id: the program being traced (a point of ``grid``).
        shared: shared HBM tensors in allocation order; the k-th ``shared_hbm`` allocation of every
            program is the same tensor (NKI: visible to all kernel instances of the grid).
        shared_cursor: how many shared allocations the current program has made.
        registers: accumulator registers of the engines (``reduce_cmd``), per engine name.
    """

    kernel_name: str
    grid: tuple[int, ...]
    platform: hardware.Platform
    program_id: tuple[int, ...] = ()
    shared: list[Any] = dataclasses.field(default_factory=list)
    shared_cursor: int = 0
    registers: dict[str, Any] = dataclasses.field(default_factory=dict)

    def start_program(self, program_id: tuple[int, ...]) -> None:
        self.program_id = program_id
        self.shared_cursor = 0
        self.registers.clear()


def current() -> TraceContext | None:
    return getattr(_local, "context", None)


def current_kernel_name() -> str | None:
    context = current()
    return context.kernel_name if context is not None else None


@contextlib.contextmanager
def tracing(context: TraceContext) -> Iterator[TraceContext]:
    """Makes ``context`` the active trace for the block; restores the previous one after (a kernel
    called from another kernel runs inline, in the caller's trace)."""
    previous = current()
    _local.context = context
    try:
        yield context
    finally:
        _local.context = previous
