"""The state of an executable while it is traced: its random keys and its device checks.

Lowerings run only while an executable is traced (runtime/executable.py). They reach the trace of
their thread with :func:`active_context`: a random op draws its JAX PRNG key from it, and an op
that detects a data-dependent error (an index out of range) reports it with :func:`device_check`,
which becomes two extra outputs of the executable, raised at the next synchronisation point
(runtime/faults.py, decision 9).

Random keys follow decision 11: the executable takes the generator's (seed, offset) as runtime
inputs, and each random op of the trace draws from offset plus the increments of the ops before it
(:func:`offset_increment`, what each launch advances the offset by), as Philox counters are, so a
result depends only on the seed and the sequence of random ops, not on which executable ran them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp


def random_key(seed: Any, offset: Any) -> jax.Array:
    """The JAX PRNG key of the random op whose first element is ``offset`` under ``seed`` (both
    uint64 values, traced or concrete): threefry folding in the 32-bit halves of each."""
    seed = jnp.asarray(seed, jnp.uint64)
    offset = jnp.asarray(offset, jnp.uint64)
    key = jax.random.key(seed.astype(jnp.uint32))
    key = jax.random.fold_in(key, (seed >> 32).astype(jnp.uint32))
    key = jax.random.fold_in(key, (offset & 0xFFFFFFFF).astype(jnp.uint32))
    return jax.random.fold_in(key, (offset >> 32).astype(jnp.uint32))


def offset_increment(elements: int) -> int:
    """How far one random op advances the generator's offset: its elements (at least one) rounded up
    to a multiple of 4, as each launch advances it (NeuronGenerator::philox_inputs, CUDA's rule), so
    that ops traced into one executable draw what they draw launched one by one."""
    return (max(int(elements), 1) + 3) // 4 * 4


class DeviceCheck:
    """A device-side assertion of a traced executable: ``error(message)`` is raised when ``failed``
    (a bool scalar) is true; ``detail`` (an int64 scalar) is formatted into it as ``{detail}``. A
    ``synchronous`` check is raised at the launch itself (runtime/faults.py)."""

    __slots__ = ("detail", "error", "failed", "message", "synchronous")

    def __init__(
        self, failed: jax.Array, detail: jax.Array, message: str, error: type[Exception], synchronous: bool = False
    ) -> None:
        self.failed = failed
        self.detail = detail
        self.message = message
        self.error = error
        self.synchronous = synchronous


class TraceContext:
    """One executable being traced: where its random ops take their keys, and its device checks.

    Args:
        seed, offset: the generator's (seed, offset), runtime inputs of the executable; None for an
            executable without random ops (drawing a key then raises).
    """

    def __init__(self, seed: Any = None, offset: Any = None) -> None:
        self._seed = seed
        self._offset = offset
        self.random_elements = 0
        self.checks: list[DeviceCheck] = []
        #: The op whose checked runtime scalars the launcher checks on the host before each launch
        #: (an eager kernel of a lowered op), so the executable need not.
        self.host_checked: Any = None

    def next_key(self, elements: int) -> jax.Array:
        """The key of the next random op, which draws ``elements`` elements (counted as
        :func:`offset_increment` counts them).

        Raises:
            RuntimeError: the executable was traced without generator inputs.
        """
        if self._seed is None:
            raise RuntimeError("neuron: a random op was traced without generator inputs")
        key = random_key(self._seed, jnp.asarray(self._offset, jnp.uint64) + self.random_elements)
        self.random_elements += offset_increment(elements)
        return key

    def generator_state(self) -> jax.Array:
        """The generator's state where the next random op of the trace draws: 16 uint8 bytes, the
        seed then the offset as little-endian uint64s (``torch.neuron.get_rng_state``'s layout).
        A graph returns it so that another graph can draw the same elements again (:meth:`replaying`:
        activation checkpointing recomputes a dropout in the backward graph).

        Raises:
            RuntimeError: the executable was traced without generator inputs.
        """
        if self._seed is None:
            raise RuntimeError("neuron: a generator state was traced without generator inputs")
        seed = jnp.asarray(self._seed).astype(jnp.uint64)
        words = jnp.stack([seed, jnp.asarray(self._offset).astype(jnp.uint64) + self.random_elements])
        return jax.lax.bitcast_convert_type(words, jnp.uint8).reshape(16)

    @contextlib.contextmanager
    def replaying(self, state: Any) -> Iterator[None]:
        """Within it, random ops draw from ``state`` (a :meth:`generator_state`, a runtime value)
        instead of the generator, and the executable's own draws are not counted: the elements
        drawn are those drawn when the state was taken."""
        words = jax.lax.bitcast_convert_type(jnp.asarray(state, jnp.uint8).reshape(2, 8), jnp.uint64)
        saved = self._seed, self._offset, self.random_elements
        self._seed, self._offset, self.random_elements = words[0], words[1], 0
        try:
            yield
        finally:
            self._seed, self._offset, self.random_elements = saved

    def check(
        self, failed: jax.Array, detail: jax.Array, message: str, error: type[Exception], synchronous: bool = False
    ) -> None:
        """Records a device-side assertion (see :class:`DeviceCheck`)."""
        self.checks.append(DeviceCheck(failed, detail, message, error, synchronous))


class _Active(threading.local):
    """The contexts of the executables this thread is tracing, innermost last: per thread, because
    several threads may trace at once (user threads running eager ops, background graph builds)."""

    def __init__(self) -> None:
        self.stack: list[TraceContext] = []


_active = _Active()


def active_context() -> TraceContext:
    """The context of the executable this thread is tracing.

    Raises:
        RuntimeError: no executable is being traced.
    """
    if not _active.stack:
        raise RuntimeError("neuron: lowerings run only while an executable is traced")
    return _active.stack[-1]


def current_context() -> TraceContext | None:
    """The context of the executable this thread is tracing, or None."""
    return _active.stack[-1] if _active.stack else None


class tracing:
    """``with tracing(ctx):`` makes ``ctx`` the context this thread's lowerings report to."""

    def __init__(self, context: TraceContext) -> None:
        self.context = context

    def __enter__(self) -> TraceContext:
        _active.stack.append(self.context)
        return self.context

    def __exit__(self, *exc_info: object) -> None:
        _active.stack.pop()


def device_check(
    failed: Any, detail: Any, message: str, error: type[Exception] = RuntimeError, *, synchronous: bool = False
) -> None:
    """For lowerings: when ``failed`` is true on the device, ``error(message)`` is raised at the next
    synchronisation point, naming the op; ``{detail}`` in ``message`` is replaced by ``detail``, and
    ``{batch}`` and ``{info}`` by its high and low 32 bits (a detail packing two numbers), and
    ``{high_float}`` and ``{low_float}`` by those bits read as float32s, ``{double}`` by all 64 read
    as a float64.
    ``synchronous=True`` raises it at the op's launch instead, which waits for the op: for the checks
    that CUDA makes on the host after copying a result back (linalg's ``info``), not the asynchronous
    device-side asserts of indexing.

    Raises:
        RuntimeError: no executable is being traced.
    """
    active_context().check(jnp.asarray(failed, jnp.bool_), jnp.asarray(detail, jnp.int64), message, error, synchronous)
