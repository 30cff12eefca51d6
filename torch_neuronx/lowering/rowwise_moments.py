"""Mean and biased variance of each row as the CPU's ``RowwiseMoments`` computes them.

ATen's layer norm (``aten/src/ATen/native/cpu/moments_utils.h``, torch 2.13) takes its statistics
from a Welford pass in float32 over 8 lanes (the AVX2 kernel, which the AVX-512 capability runs as
well: layer norm registers no AVX-512 kernel; the DEFAULT build's generic vectors hold 8 floats
too):

1. The row's whole vectors (8 floats; a 16-bit vector of 16 elements is two float vectors, its
   "halves", with accumulators of their own) go in chunks of 16 vectors. In a chunk, each lane runs
   Welford's update ``m1 = fmadd(1 / (j + 1), d, m1)``, ``m2 = fmadd(d, x - m1, m2)``.
2. Chunk statistics merge pairwise (``AddMomentsVec``: ``m1 + c * delta`` and
   ``fmadd(delta * m0, c * delta, m2 + m2_add)``, ``c = m0_add / n``) in a binary counter over the
   chunks: each aligned block of 2^k chunks is its left half merged with its right half; a 16-bit
   chunk folds its halves in turn, so a pair of chunks is ``((a0 + a1) + b0) + b1``. What the counter
   holds at the end (one block per set bit of the chunk count) merges from the smallest block up.
3. The elements after the last whole vector run Welford's scalar update (``m1 += d / k``; ``m2 +=
   d * (x - m1)`` contracted in the float16 build of the kernel only), and the 8 lanes fold into
   that, in order, with the scalar ``AddMoments``, whose products the compiler contracts.

Each step is followed to the bit (fitted against torch 2.13's CPU: every mean and variance of
4,000 rows of 1 to 8,200 elements in float32, bfloat16 and float16 equal), with the fused
multiply-adds where the host's kernels make them
(:func:`~torch_neuronx.lowering.fused_multiply_add.contracted_in_float64`: exact but where a float64
sum lands halfway between two float32 values).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from torch_neuronx.lowering.fused_multiply_add import contracted_in_float64
from torch_neuronx.lowering.pointwise import true_divide

#: Float32 lanes of ATen's vectorised kernel; vectors per Welford chunk (``kChunkSize``).
LANES, CHUNK = 8, 16


class _Moments:
    """Welford statistics of a batch of lanes: ``count`` values each (a static number, or a numpy
    array broadcast along an axis), their mean ``m1`` and sum of squared deviations ``m2``."""

    def __init__(self, count, m1, m2):
        self.count, self.m1, self.m2 = count, m1, m2


def _merge_factors(base_count, add_count):
    """(``c = m0_add / n``, ``m0`` as float32) of ``AddMomentsVec`` for counts (numbers or numpy
    arrays), computed on the host as the kernel computes them in float32."""
    total = base_count + add_count
    factor = np.where(total == 0, 0, np.float32(add_count) / np.maximum(total, 1).astype(np.float32))
    return factor.astype(np.float32), np.asarray(base_count, np.float32)


def _merge_by(base_m1, base_m2, add_m1, add_m2, factor, base_count, fma):
    """ATen's ``AddMomentsVec`` given its factor and the base's count (:func:`_merge_factors`):
    ``m1 + c * delta`` and ``fmadd(delta * m0, c * delta, m2 + m2_add)``. Returns (m1, m2)."""
    delta = add_m1 - base_m1
    scaled_delta = factor * delta
    return base_m1 + scaled_delta, fma(delta * base_count, scaled_delta, base_m2 + add_m2)


def _merge(base: _Moments, add: _Moments, fma) -> _Moments:
    """ATen's ``AddMomentsVec``: ``add``'s statistics folded into ``base``'s."""
    factor, base_count = _merge_factors(base.count, add.count)
    return _Moments(base.count + add.count, *_merge_by(base.m1, base.m2, add.m1, add.m2, factor, base_count, fma))


def _merge_scalar(base_m1, base_m2, base_count, factor, add_m1, add_m2, fma):
    """ATen's scalar ``AddMoments`` of ``add``'s statistics into ``base``'s, ``factor`` its
    ``c = m0_add / n`` (float32, computed on the host): ``m1 += c * delta`` and ``m2 += m2_add +
    delta * delta * c * m0``, whose products the compiler contracts (``m2`` then adds the result).
    Returns (m1, m2)."""
    delta = add_m1 - base_m1
    m1 = fma(factor, delta, base_m1)
    return m1, base_m2 + fma(delta * delta * factor, base_count, add_m2)


def _chunk_statistics(vectors, counts, fma):
    """Welford over each chunk's vectors: ``vectors`` (rows, chunks, CHUNK, halves, LANES), the
    last chunk holding ``counts[-1]`` of them. Returns m1, m2 of shape (rows, chunks, halves, LANES).
    Unrolled, XLA fuses the steps into one pass; its result must have a single consumer that
    needs all of it (a loop's operand, :func:`_packed`), or XLA recomputes the steps in each."""
    m1 = m2 = jnp.zeros(vectors[:, :, 0].shape, jnp.float32)
    short = counts[-1] < CHUNK
    for j in range(int(max(counts))):
        x = vectors[:, :, j]
        delta = x - m1
        new_m1 = fma(np.float32(1) / np.float32(j + 1), delta, m1)
        new_m2 = fma(delta, x - new_m1, m2)
        if short and j >= counts[-1]:  # the last chunk has no vector j
            updated = (np.arange(len(counts)) < len(counts) - 1)[None, :, None, None]
            new_m1, new_m2 = jnp.where(updated, new_m1, m1), jnp.where(updated, new_m2, m2)
        m1, m2 = new_m1, new_m2
    return m1, m2


def _packed(m1, m2):
    """``m1`` and ``m2`` (float32, one shape) as one uint64 array, m1's bits high: one loop operand
    computed by one fusion. Two operands are two fusions, and the one for ``m2`` runs the whole
    Welford chain again for the ``m1`` it reads (XLA's CPU backend makes no multi-output fusion
    here): packed, the statistics of a (2048, 4096) input take 9 ms instead of 14."""

    def bits(value):
        return jax.lax.bitcast_convert_type(value, jnp.uint32).astype(jnp.uint64)

    return (bits(m1) << 32) | bits(m2)


def _unpacked(packed):
    """:func:`_packed`'s inverse: (m1, m2)."""

    def value(bits):
        return jax.lax.bitcast_convert_type(bits.astype(jnp.uint32), jnp.float32)

    return value(packed >> 32), value(packed & 0xFFFFFFFF)


def _level_zero(m1, m2, counts, fma):
    """Level 0 of the counter, in one loop over the groups of chunks: each pair of chunks ``(2i, 2i
    + 1)`` folds its parts (the chunks' halves, in order) in turn, and an odd last chunk folds its
    own halves (the counter's remainder). ``m1``, ``m2``: (rows, chunks, halves, LANES), two chunks
    or more.

    Returns (pairs, lone): the pairs as (counts, m1, m2), m1 and m2 of shape (rows, pairs, LANES);
    the odd chunk's :class:`_Moments` of shape (rows, LANES), or None.

    Every merge reads the chunks' statistics through the loop's one operand, which XLA computes in
    one fusion (:func:`_packed`). Merged outside a loop, XLA fuses the chunk chain into the merges
    and computes it again for each of their reads, three times as slow. The loop has at least two
    steps (a dummy group where there is one group), as XLA inlines a loop of one."""
    rows, chunks, halves, _ = m1.shape
    groups = -(-chunks // 2)
    steps, parts = max(groups, 2), 2 * halves
    chunk_counts = np.zeros(2 * steps, np.int64)
    chunk_counts[:chunks] = counts
    part_counts = np.repeat(chunk_counts.reshape(steps, 2), halves, axis=1)  # (steps, parts)
    before = np.cumsum(part_counts, axis=1) - part_counts
    factors, base_counts = _merge_factors(before[:, 1:], part_counts[:, 1:])
    present = part_counts[:, 1:] > 0  # not: the lone chunk's missing partner, the dummy group's parts
    every_part_present = bool(present[:groups].all())  # the dummy group's results are dropped

    def fold(carry, inputs):
        packed, factor, base_count, part_present = inputs  # (rows, parts, LANES), (parts - 1,) each
        part_m1, part_m2 = _unpacked(packed)
        m1, m2 = part_m1[:, 0], part_m2[:, 0]
        for k in range(1, parts):
            merged = _merge_by(m1, m2, part_m1[:, k], part_m2[:, k], factor[k - 1], base_count[k - 1], fma)
            if every_part_present:
                m1, m2 = merged
            else:
                m1, m2 = (jnp.where(part_present[k - 1], new, old) for new, old in zip(merged, (m1, m2), strict=True))
        return carry, _packed(m1, m2)

    padding = ((0, 0), (0, 2 * steps - chunks), (0, 0), (0, 0))
    by_group = jnp.pad(_packed(m1, m2), padding).reshape(rows, steps, parts, LANES)
    inputs = (jnp.moveaxis(by_group, 1, 0), factors, base_counts, present)
    _, group_statistics = jax.lax.scan(fold, None, inputs)
    group_m1, group_m2 = _unpacked(jnp.moveaxis(group_statistics, 0, 1))  # (rows, steps, LANES)
    pairs = chunks // 2
    lone = _Moments(counts[-1] * halves, group_m1[:, pairs], group_m2[:, pairs]) if chunks % 2 else None
    return (part_counts[:pairs].sum(axis=1), group_m1[:, :pairs], group_m2[:, :pairs]), lone


def _fold(parts: list[_Moments], fma) -> _Moments:
    """Statistics folded in turn into an empty accumulator (the first merge copies)."""
    folded = parts[0]
    for part in parts[1:]:
        folded = _merge(folded, part, fma)
    return folded


def _vector_statistics(vectors, vector_count: int, fma) -> _Moments:
    """Steps 1 and 2: the lanes' statistics over the row's ``vector_count`` whole vectors,
    ``vectors`` (rows, vector_count, halves, LANES)."""
    rows, _, halves, _ = vectors.shape
    chunks = -(-vector_count // CHUNK)
    if chunks == 1:  # a short row: no padding to a whole chunk (16 times the row for one vector)
        padded = vectors.reshape(rows, 1, vector_count, halves, LANES)
    else:
        padding = chunks * CHUNK - vector_count
        padded = jnp.pad(vectors, ((0, 0), (0, padding), (0, 0), (0, 0))).reshape(rows, chunks, CHUNK, halves, LANES)
    counts = np.array([CHUNK] * (chunks - 1) + [vector_count - (chunks - 1) * CHUNK])
    m1, m2 = _chunk_statistics(padded, counts, fma)

    if chunks == 1:  # its halves folded in turn, outside a loop (a loop cost 10x for 65536 short rows)
        return _fold([_Moments(counts[0], m1[:, 0, half], m2[:, 0, half]) for half in range(halves)], fma)
    pairs, lone = _level_zero(m1, m2, counts, fma)
    remainders = [] if lone is None else [lone]
    level = _Moments(*pairs)
    # Levels above: aligned blocks merge left into right, batched along the block axis.
    while level.m1.shape[1] > 1:
        blocks = level.m1.shape[1]
        if blocks % 2:
            remainders.append(_Moments(level.count[-1], level.m1[:, -1], level.m2[:, -1]))
        even = blocks - blocks % 2
        left = _Moments(level.count[0:even:2][None, :, None], level.m1[:, 0:even:2], level.m2[:, 0:even:2])
        right = _Moments(level.count[1:even:2][None, :, None], level.m1[:, 1:even:2], level.m2[:, 1:even:2])
        merged = _merge(left, right, fma)
        level = _Moments(merged.count[0, :, 0], merged.m1, merged.m2)
    remainders.append(_Moments(level.count[0], level.m1[:, 0], level.m2[:, 0]))
    return _fold(remainders, fma)


def rowwise_moments(x, input_dtype):
    """The mean and biased variance of each row of ``x`` as the CPU's ``RowwiseMoments``.

    Args:
        x: (rows, N) float32 values (a 16-bit input converted to float32 exactly).
        input_dtype: the input's dtype (float32, bfloat16 or float16), which sets the elements per
            vector of ATen's kernel (8 for float32, 16 for 16-bit ones) and whether the compiler
            contracted the scalar tail's ``m2 += delta * (x - m1)`` (in the float16 instantiation
            only, fitted: 0 of 256 rows of 7 to 15 elements differ with it, a third without).

    Returns:
        (mean, variance), each (rows,) float32.
    """
    fma = contracted_in_float64
    rows, length = x.shape
    vector_width = LANES if input_dtype == jnp.float32 else 2 * LANES
    tail_contracted = input_dtype == jnp.float16
    vector_count = length // vector_width
    halves = vector_width // LANES
    if vector_count:
        vectors = x[:, : vector_count * vector_width].reshape(rows, vector_count, halves, LANES)
        lanes = _vector_statistics(vectors, vector_count, fma)
    else:
        lanes = _Moments(0, jnp.zeros((rows, LANES), jnp.float32), jnp.zeros((rows, LANES), jnp.float32))
    # Step 3: the scalar tail, then the lanes folded into it in order.
    tail = _Moments(0, jnp.zeros((rows,), jnp.float32), jnp.zeros((rows,), jnp.float32))
    for index in range(vector_count * vector_width, length):
        value = x[:, index]
        delta = value - tail.m1
        m1 = tail.m1 + true_divide(delta, np.float32(tail.count + 1))
        deviation = value - m1
        m2 = fma(delta, deviation, tail.m2) if tail_contracted else tail.m2 + delta * deviation
        tail = _Moments(tail.count + 1, m1, m2)
    per_lane = vector_count * vector_width // LANES
    counts = tail.count + per_lane * np.arange(LANES)  # the accumulator's count before each lane
    totals = counts + per_lane
    factors = np.where(totals == 0, 0, np.float32(per_lane) / np.maximum(totals, 1).astype(np.float32))

    def fold(carry, inputs):
        lane_statistics, count, factor = inputs
        return _merge_scalar(*carry, count, factor, *_unpacked(lane_statistics), fma), None

    # A loop, not unrolled: XLA would recompute the fold inside every consumer, once per element
    # of the layer norm's output; its lanes packed, computed once for short rows (one chunk).
    lanes_in_order = (_packed(lanes.m1, lanes.m2).T, counts.astype(np.float32), factors.astype(np.float32))
    (mean, m2), _ = jax.lax.scan(fold, (tail.m1, tail.m2), lanes_in_order)
    return mean, true_divide(m2, np.float32(length))
