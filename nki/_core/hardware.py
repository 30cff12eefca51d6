"""The NeuronCore limits kernels are checked against, per platform target.

Sources: NKI's ``nl.tile_size`` documentation and the ISA pages (``nisa.nc_matmul``: stationary free
size <= 128, moving free size <= 512 on NeuronCore-v2/v3, up to 4096 on v4; 128 partitions; a PSUM
bank holds 2 KiB per partition, 8 banks), and the Trainium2 architecture guide (SBUF 24 MiB,
192 KiB per partition).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Platform:
    """Hardware limits of one NeuronCore generation. Sizes per partition unless named otherwise."""

    name: str
    partitions: int = 128
    psum_bank_bytes: int = 2048
    psum_banks: int = 8
    sbuf_partition_bytes: int = 192 * 1024
    gemm_stationary_fmax: int = 128
    gemm_moving_fmax: int = 512
    vector_transpose_max: int = 32


PLATFORMS = {
    "trn1": Platform("trn1"),
    "inf2": Platform("inf2"),
    "trn2": Platform("trn2"),
    # NeuronCore-v4: the moving operand may span all 8 PSUM banks (4096 float32).
    "trn3": Platform("trn3", sbuf_partition_bytes=256 * 1024, gemm_moving_fmax=4096),
}
ALIASES = {"gen2": "trn1", "gen3": "trn2", "gen4": "trn3"}
DEFAULT = "trn2"


def platform(target: str | None) -> Platform:
    """The limits of ``target`` (``trn2`` by default; ``gen3`` is an alias of ``trn2``).

    Raises:
        ValueError: an unknown target.
    """
    name = ALIASES.get(target or DEFAULT, target or DEFAULT)
    if name not in PLATFORMS:
        raise ValueError(f"unknown NKI platform_target {target!r}; use one of {sorted(PLATFORMS)}")
    return PLATFORMS[name]


class TileSize:
    """``nl.tile_size``: the tile limits of the default platform (trn2), as NKI names them."""

    pmax = 128
    #: Free size of one PSUM bank per partition, in float32 elements (2 KiB).
    psum_fmax = 512
    psum_bank_fmax = 512
    psum_bank_fmax_bytes = 2048
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_min_align = 4
    sbuf_min_align = 1
    psum_num_banks = 8
    sbuf_size_bytes = 24 * 1024 * 1024
    sbuf_fmax_bytes = 192 * 1024
    sbuf_fmax = 192 * 1024 // 4
    total_available_sbuf_size = 192 * 1024


tile_size = TileSize()
