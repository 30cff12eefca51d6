"""Checks that every rank calls the same collective on tensors of the same dtypes and sizes.

gloo trusts its callers: ranks whose tensors differ in size make it abort the process ("Received
data size doesn't match expected size", a C++ ``terminate``), and tensors of different dtypes but
equal byte sizes are reduced as if they were the same (a wrong value). Before each collective, the
neuron group therefore all-gathers a four-number fingerprint of the call (the collective, the first
tensor's dtype, the number of elements, a checksum of every dtype and shape) through gloo and
raises, on every rank, when the ranks disagree. It costs one small round trip per collective.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import torch
import torch.distributed as dist

__all__ = ["check_agreement", "dtype_code", "dtype_name"]

_COLLECTIVES: dict[str, int] = {}
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
]


def dtype_code(dtype: torch.dtype) -> int:
    """A small integer naming ``dtype`` in cross-rank messages (-1 for a dtype outside the list)."""
    return _DTYPES.index(dtype) if dtype in _DTYPES else -1


def dtype_name(code: int) -> str:
    """``float32`` for the code of ``torch.float32``; ``?`` for an unknown code."""
    return str(_DTYPES[code]).removeprefix("torch.") if 0 <= code < len(_DTYPES) else "?"


def _fingerprint(collective: str, tensors: Sequence[torch.Tensor], sizes: bool) -> torch.Tensor:
    code = _COLLECTIVES.setdefault(collective, zlib.crc32(collective.encode()))
    dtype = dtype_code(tensors[0].dtype) if tensors else -1
    numel = sum(tensor.numel() for tensor in tensors) if sizes else -1
    described = repr([(str(t.dtype), tuple(t.shape) if sizes else ()) for t in tensors])
    return torch.tensor([code, dtype, numel, zlib.crc32(described.encode())], dtype=torch.int64)


def check_agreement(
    gloo: dist.ProcessGroup, collective: str, tensors: Sequence[torch.Tensor], sizes: bool = True
) -> None:
    """Raises on every rank unless all ranks call ``collective`` with tensors of the same dtypes and,
    with ``sizes``, the same shapes (``sizes=False`` for collectives whose sizes may differ per rank,
    such as an uneven ``all_to_all_single``).

    Raises:
        RuntimeError: the ranks disagree; the message lists what each rank passed.
    """
    if gloo.size() == 1:
        return
    mine = _fingerprint(collective, tensors, sizes)
    everyone = torch.empty(gloo.size() * mine.numel(), dtype=torch.int64)
    gloo._allgather_base(everyone, mine).wait()
    rows = everyone.view(gloo.size(), -1)
    if bool((rows == mine).all()):
        return
    described = []
    for rank, (code, dtype, numel, _) in enumerate(rows.tolist()):
        name = next((n for n, c in _COLLECTIVES.items() if c == code), "another collective")
        count = f"{numel} elements" if numel >= 0 else "any size"
        described.append(f"rank {rank}: {name} of {dtype_name(dtype)}, {count}")
    raise RuntimeError(
        f"neuron {collective}: the ranks disagree on the collective or its tensors' dtypes and shapes "
        f"({'; '.join(described)}); every rank must call the same collective with tensors of the same "
        "dtype and shape"
    )
