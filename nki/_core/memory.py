"""NKI's memories and the storage a tensor lives in.

A tensor's storage is one allocation in HBM (a kernel argument, an output, or scratch), SBUF or PSUM.
Inside the trace its elements are a JAX array of the allocation's shape that every write replaces
(JAX arrays are immutable), so a kernel becomes one functional JAX computation. New storage is
filled with NaN (the largest integer for integer dtypes): a read of memory no instruction wrote
shows in the result.
"""

from __future__ import annotations

import enum
import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from nki import errors
from nki._core import dtypes


class MemoryRegion(enum.Enum):
    """``nl.sbuf``, ``nl.psum``, ``nl.private_hbm`` (``nl.hbm``) and ``nl.shared_hbm``."""

    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"

    @property
    def on_chip(self) -> bool:
        return self in (MemoryRegion.sbuf, MemoryRegion.psum)

    @property
    def address_space(self) -> str:
        """The name NKI's messages use: 'sbuf', 'psum' or 'hbm'."""
        return self.value if self.on_chip else "hbm"


sbuf = MemoryRegion.sbuf
psum = MemoryRegion.psum
private_hbm = MemoryRegion.private_hbm
hbm = MemoryRegion.private_hbm
shared_hbm = MemoryRegion.shared_hbm


def as_region(buffer: Any) -> MemoryRegion:
    if isinstance(buffer, MemoryRegion):
        return buffer
    if isinstance(buffer, str):
        try:
            return {"hbm": private_hbm}.get(buffer) or MemoryRegion(buffer)
        except ValueError:
            pass
    raise TypeError(f"buffer {buffer!r} is not an NKI memory; use nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm")


class Storage:
    """One allocation.

    Attributes:
        shape: the allocation's shape (block dimensions, then the partition dimension ``par_axis``,
            then the free dimensions, for SBUF and PSUM).
        dtype: its element type.
        region: the memory it lives in.
        name: for messages (an argument's name, or the name given to ``nl.ndarray``).
        value: its elements, a JAX array of ``shape`` (replaced by every write); ``flat`` is the same
            elements in row-major order.
        par_axis: the partition dimension of an on-chip allocation.
        argument: the kernel argument position of an input, else None.
        written: whether any instruction wrote it (outputs must be written; inputs written are
            results of the kernel).
        accumulating: for PSUM, which elements hold a matmul result that a following matmul with
            ``accumulate=None`` adds to (NKI: "first write overwrites, subsequent writes accumulate";
            any other write, or a read by another engine, ends the accumulation).
    """

    __slots__ = ("accumulating", "argument", "dtype", "name", "par_axis", "region", "shape", "value", "written")

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype,
        region: MemoryRegion,
        name: str = "",
        value: Any = None,
        par_axis: int = 0,
        argument: int | None = None,
    ) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.region = region
        self.name = name
        count = math.prod(self.shape)
        self.value = value if value is not None else jnp.full(self.shape, dtypes.fill_value(dtype), self.dtype)
        self.par_axis = par_axis
        self.argument = argument
        self.written = False
        self.accumulating = np.zeros(count, dtype=bool) if region is MemoryRegion.psum else None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def flat(self) -> Any:
        return self.value.reshape(-1)

    @flat.setter
    def flat(self, elements: Any) -> None:
        self.value = elements.reshape(self.shape)

    def partition_bytes(self) -> int:
        """Bytes per partition of an on-chip allocation: its free dimensions (block dimensions count
        as free space too, each block being a tile of its own)."""
        return (self.size // max(self.shape[self.par_axis], 1)) * self.dtype.itemsize


def check_on_chip_allocation(storage: Storage, platform: Any) -> None:
    """The limits of an SBUF or PSUM allocation: at most 128 partitions; a PSUM tile within one 2 KiB
    bank per partition and the allocation within the 8 banks; an SBUF allocation within a partition
    (192 KiB on trn2)."""
    partitions = storage.shape[storage.par_axis]
    if partitions > platform.partitions:
        errors.num_partition_exceed_arch_limit(partitions, platform.partitions)
    per_partition = storage.partition_bytes()
    if storage.region is MemoryRegion.psum:
        blocks = math.prod(storage.shape[: storage.par_axis])
        tile_bytes = per_partition // max(blocks, 1)
        banks = blocks * max(1, -(-tile_bytes // platform.psum_bank_bytes))
        if banks > platform.psum_banks:
            errors.stack_overflow_psum(banks, platform.psum_banks)
    elif per_partition > platform.sbuf_partition_bytes:
        errors.stack_overflow_sbuf(per_partition, platform.sbuf_partition_bytes)
