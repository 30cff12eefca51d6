"""Checks that every rank calls the same collective, with the same reduction and root, on tensors of
the same dtypes and element counts (not shapes: NCCL's collectives take counts), and that what an all-to-all
sends each rank is what that rank expects.

gloo trusts its callers: ranks whose tensors differ in size make it abort the process ("Received
data size doesn't match expected size", a C++ ``terminate``), and tensors of different dtypes but
equal byte sizes are reduced as if they were the same (a wrong value). Before each collective, the
neuron group therefore all-gathers a fingerprint of the call through gloo (:data:`FINGERPRINT`
numbers plus two per rank, one layout for every collective, so that ranks calling different ones
still exchange equal sizes) and raises, on every rank, when the ranks disagree. It costs one small
round trip per collective.

A small collective's data can travel in that same message (:data:`INLINE_BYTES` at most): every
fingerprint carries a slot of that size, used or not, so the message keeps one size for every
collective. The caller then computes the collective from every rank's data (``Inline``), and the
collective costs one round trip instead of two.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence

import torch
import torch.distributed as dist

__all__ = ["INLINE_BYTES", "Inline", "dtype_code", "dtype_name", "start_agreement"]

#: The most bytes of a rank's data that travel in its fingerprint's message (a slot every
#: fingerprint carries): 1,024 float32 values, enough for losses, norms and small statistics.
INLINE_BYTES = 4096
_INLINE_WORDS = INLINE_BYTES // 8

#: Every collective the neuron group checks, so that any rank can name what another one called.
COLLECTIVES = (
    "all_reduce",
    "all_reduce_coalesced",
    "reduce",
    "broadcast",
    "all_gather",
    "all_gather_coalesced",
    "all_gather_into_tensor",
    "gather",
    "scatter",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all_single",
    "all_to_all",
    "barrier",
)
_DTYPES = [
    torch.float32,
    torch.bfloat16,
    torch.float16,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
    torch.complex64,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.bool,
    torch.float8_e4m3fnuz,
    torch.float8_e5m2fnuz,
]
_DIMS = 6  # dimensions of the first tensor named in a disagreement
#: Fingerprint layout: collective, reduction, dtype, elements, tensors, dims, _DIMS sizes, checksum,
#: root (a broadcast's, reduce's, gather's or scatter's; -1 otherwise), whether this rank refused its
#: arguments; then the elements sent to each rank and received from each (an all-to-all's; -1 otherwise).
FINGERPRINT = 6 + _DIMS + 3
_ROOT = FINGERPRINT - 2
_REFUSED = FINGERPRINT - 1
#: The columns ranks must agree on: not the first tensor's shape (dims and sizes), only described.
#: NCCL's collectives take counts, so tensors of one element count but different shapes (a (6,)
#: tensor on one rank, a (2, 3) one on another) compute, in row-major order, as gloo's do.
_COMPARED = [column for column in range(FINGERPRINT) if not 5 <= column < 6 + _DIMS]


def dtype_code(dtype: torch.dtype) -> int:
    """A small integer naming ``dtype`` in cross-rank messages (-1 for a dtype outside the list)."""
    return _DTYPES.index(dtype) if dtype in _DTYPES else -1


def dtype_name(code: int) -> str:
    """``float32`` for the code of ``torch.float32``; ``?`` for an unknown code."""
    return str(_DTYPES[code]).removeprefix("torch.") if 0 <= code < len(_DTYPES) else "?"


def _reduction_code(op: dist.ReduceOp | None) -> int:
    if op is None:
        return -1
    return int(getattr(op, "op", op))


def _fingerprint(
    collective: str,
    op: dist.ReduceOp | None,
    tensors: Sequence[torch.Tensor],
    sizes: bool,
    exchange: tuple[Sequence[int], Sequence[int]] | None,
    world_size: int,
    refused: bool,
    root: int | None,
) -> torch.Tensor:
    first = tensors[0] if tensors else None
    shape = list(first.shape) if first is not None and sizes else []
    described = repr([(str(t.dtype), t.numel() if sizes else -1) for t in tensors])
    sent, received = exchange if exchange is not None else ([-1] * world_size, [-1] * world_size)
    return torch.tensor(
        [
            COLLECTIVES.index(collective),
            _reduction_code(op),
            dtype_code(first.dtype) if first is not None else -1,
            sum(t.numel() for t in tensors) if sizes else -1,
            len(tensors),
            len(shape) if sizes else -1,
            *(shape + [-1] * _DIMS)[:_DIMS],
            zlib.crc32(described.encode()),
            -1 if root is None else root,
            int(refused),
            *sent,
            *received,
        ],
        dtype=torch.int64,
    )


@dataclasses.dataclass(frozen=True)
class Inline:
    """A rank's data sent with its fingerprint, and where every rank's arrives.

    Args:
        payload: this rank's data, a contiguous host tensor of at most :data:`INLINE_BYTES` bytes.
        gathered: a contiguous ``uint8`` host tensor of shape (ranks, ``payload``'s bytes), filled
            in rank order once the ranks agree (before the verdict completes).
    """

    payload: torch.Tensor
    gathered: torch.Tensor


def start_agreement(
    gloo: dist.ProcessGroup,
    collective: str,
    tensors: Sequence[torch.Tensor],
    sizes: bool = True,
    op: dist.ReduceOp | None = None,
    exchange: tuple[Sequence[int], Sequence[int]] | None = None,
    refused: Exception | None = None,
    inline: Inline | None = None,
    root: int | None = None,
) -> torch.futures.Future:
    """Posts this rank's fingerprint of the call to ``gloo`` and returns a future of the verdict:
    ``None`` when all ranks call ``collective`` with the same reduction ``op`` and ``root`` (a
    broadcast's, reduce's, gather's or scatter's group rank; gloo's ranks given different roots wait
    for each other until the timeout) on tensors of the same dtypes and, with ``sizes``, the same
    element counts, as NCCL requires (shapes may differ; ``sizes=False`` for collectives whose sizes
    may differ per rank, such as an uneven ``all_to_all_single``); otherwise the exception to raise,
    as the future's value (gloo's own error too, the group's timeout for one: the future itself does
    not fail). ``exchange`` is an all-to-all's (elements sent to each rank, elements received from
    each): what rank ``s`` sends rank ``r`` must be what ``r`` expects from ``s``. ``refused`` is
    this rank's own error about its arguments, posted so that the other ranks learn of it and none
    of them waits for a collective that will not come (NCCL's ranks would, until the group's
    timeout); it is the verdict here. ``inline``: this rank's data to send along, and where every
    rank's goes (:class:`Inline`).

    The verdict's exceptions: ``refused``; or RuntimeError when the ranks disagree (the message
    says what each rank passed) or another rank refused its arguments.
    """
    size = gloo.size()
    nbytes = 0 if inline is None else inline.payload.numel() * inline.payload.element_size()
    if nbytes > INLINE_BYTES:
        raise ValueError(f"neuron {collective}: {nbytes} bytes do not fit the agreement's {INLINE_BYTES}-byte slot")
    if size == 1:
        if inline is not None:
            inline.gathered.copy_(inline.payload.reshape(-1).view(torch.uint8).view(1, -1))
        verdict = torch.futures.Future()
        verdict.set_result(refused)
        return verdict
    fingerprint = _fingerprint(collective, op, tensors, sizes, exchange, size, refused is not None, root)
    mine = torch.zeros(fingerprint.numel() + _INLINE_WORDS, dtype=torch.int64)
    mine[: fingerprint.numel()] = fingerprint
    slot = fingerprint.numel()
    if nbytes:
        mine[slot:].view(torch.uint8)[:nbytes] = inline.payload.reshape(-1).view(torch.uint8)
    everyone = torch.empty(size * mine.numel(), dtype=torch.int64)

    def judge(future: torch.futures.Future) -> Exception | None:
        try:
            future.value()
        except Exception as error:  # noqa: BLE001 (gloo's error, the timeout's for one, is the verdict)
            return error
        rows = everyone.view(size, -1)
        verdict = refused or _disagreement(collective, fingerprint, rows[:, :slot], exchange is not None)
        if verdict is None and inline is not None:
            inline.gathered.copy_(rows[:, slot:].contiguous().view(torch.uint8)[:, :nbytes])
        return verdict

    return gloo._allgather_base(everyone, mine).get_future().then(judge)


def _disagreement(collective: str, mine: torch.Tensor, rows: torch.Tensor, exchanged: bool) -> Exception | None:
    """The error for the ranks' fingerprints ``rows`` (one per rank; this rank's is ``mine``), or None."""
    size = rows.shape[0]
    refusing = [rank for rank, flag in enumerate(rows[:, _REFUSED].tolist()) if flag]
    if refusing:
        ranks = ", ".join(map(str, refusing))
        return RuntimeError(
            f"neuron {collective}: rank {ranks} refused its arguments (its error says why), so this rank raises "
            "too instead of waiting for a collective that will not come"
        )
    calls = rows[:, :FINGERPRINT]
    sent, received = rows[:, FINGERPRINT : FINGERPRINT + size], rows[:, FINGERPRINT + size :]
    if not bool((calls[:, _COMPARED] == mine[_COMPARED]).all()):
        described = "; ".join(f"rank {rank}: {_describe(row)}" for rank, row in enumerate(calls.tolist()))
        return RuntimeError(
            f"neuron {collective}: the ranks disagree on the collective, its reduction, its root or its "
            f"tensors' dtypes and sizes ({described}); every rank must call the same collective, with the same "
            "root, on tensors of the same dtype and number of elements"
        )
    if exchanged and not bool((sent == received.t()).all()):
        wrong = [
            f"rank {source} sends {sent[source, target]} elements to rank {target}, which expects "
            f"{received[target, source]}"
            for source in range(size)
            for target in range(size)
            if sent[source, target] != received[target, source]
        ]
        return RuntimeError(
            f"neuron {collective}: the ranks disagree on the split sizes ({'; '.join(wrong)}); what each rank "
            "sends another must be what that rank's output splits expect from it"
        )
    return None


def _describe(row: list[int]) -> str:
    collective, reduction, dtype, numel, count, ndim, *rest = row[:_REFUSED]
    dims, root = rest[:_DIMS], row[_ROOT]
    name = COLLECTIVES[collective] if 0 <= collective < len(COLLECTIVES) else "another collective"
    arguments = []
    if reduction >= 0:
        try:
            arguments.append(dist.ReduceOp.RedOpType(reduction).name)
        except (TypeError, ValueError):  # not a fingerprint: the ranks' exchanges are out of step
            return "a message that is not a collective's fingerprint (the ranks are out of step)"
    if root >= 0:
        arguments.append(f"root {root}")
    if arguments:
        name += f" ({', '.join(arguments)})"
    if count == 0:
        return name
    if numel < 0:
        return f"{name} of {dtype_name(dtype)}, any size"
    shape = f"({', '.join(map(str, dims[:ndim]))}{',' if ndim == 1 else ''})" if ndim <= _DIMS else f"{ndim} dims"
    tensors = f"{count} tensors, the first" if count > 1 else "tensor"
    return f"{name} of {dtype_name(dtype)}, {tensors} of shape {shape}, {numel} element{'' if numel == 1 else 's'}"
