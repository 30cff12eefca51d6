"""``@nki.jit``: a kernel, traced once per input signature and run where its arguments are.

Called with neuron tensors it runs on their NeuronCore through the device's one launch path (eager),
or becomes part of the compiled graph's executable (inside ``torch.compile`` through
``torch_neuronx.nki_op``); called with numpy arrays it runs on NeuronCore 0 and returns numpy arrays
(``mode="simulation"``: on the host CPU, as ``nki.simulate`` does). ``kernel[g0, g1](...)`` launches
an SPMD grid of programs (``nl.program_id``); ``kernel[n]`` is also how current NKI sets the logical
core count, which is the same thing here: ``n`` programs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from nki import errors
from nki._core import context, hardware
from nki.tracing import Signature, Static, TensorSpec, TraceCache, TracedKernel, bind_arguments, tensor_spec

__all__ = ["Kernel", "jit"]

_MODES = ("auto", "simulation", "baremetal", "torchxla", "jax", "trace", "benchmark")


def _grid(key: Any) -> tuple[int, ...]:
    key = key if isinstance(key, (tuple, list)) else (key,)
    grid = tuple(int(g) for g in key)
    if not grid or any(g < 1 for g in grid):
        raise ValueError(f"an SPMD launch grid needs positive sizes, got {list(key)}")
    return grid


class Kernel:
    """A function decorated with :func:`jit`.

    Args:
        fn: the kernel function.
        grid: the SPMD launch grid (set with ``kernel[g0, g1]``).
        mode: "simulation" runs numpy calls on the host CPU; other modes run on the device.
        platform_target: the hardware whose limits are checked (``trn2`` by default; ``trn1``, ``trn3``).
        options: other ``nki.jit`` options of the vendor's compiler, accepted and kept (they
            configure compilation steps the emulation does not have).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        grid: tuple[int, ...] = (),
        mode: str = "auto",
        platform_target: str | None = None,
        options: dict[str, Any] | None = None,
        traces: TraceCache | None = None,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"nki.jit: unknown mode {mode!r}; use one of {_MODES}")
        self.fn = fn
        self.grid = grid
        self.mode = mode
        self.platform_target = hardware.platform(platform_target).name
        self.options = options or {}
        self.traces = traces if traces is not None else TraceCache()
        functools.update_wrapper(self, fn)

    @property
    def name(self) -> str:
        return self.fn.__name__

    def __getitem__(self, grid: Any) -> Kernel:
        return Kernel(self.fn, _grid(grid), self.mode, self.platform_target, self.options, self.traces)

    def __repr__(self) -> str:
        grid = f"[{', '.join(map(str, self.grid))}]" if self.grid else ""
        return f"<nki kernel {self.name}{grid}>"

    def signature(self, arguments: dict[str, Any], describe: Callable[[str, Any], TensorSpec | None]) -> Signature:
        """The trace signature of a call: each argument a TensorSpec (``describe`` says which are
        tensors) or a Static value."""
        specs = []
        for name, value in arguments.items():
            spec = describe(name, value)
            specs.append((name, spec if spec is not None else Static(value)))
        return Signature(self.grid, tuple(specs), self.platform_target)

    def trace(self, signature: Signature) -> TracedKernel:
        return self.traces.get(self.fn, signature)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if context.current() is not None:
            # A kernel called from another kernel is traced inline, in the caller's programs.
            if self.grid:
                errors.nested_kernel_with_spmd_grid(self.name, self.grid)
            return self.fn(*args, **kwargs)
        values = [*args, *kwargs.values()]
        if any(_is_torch_tensor(v) for v in values):
            import torch

            if torch.compiler.is_dynamo_compiling():
                raise RuntimeError(
                    f"NKI kernel '{self.name}' was called inside a torch.compile'd function; register the "
                    "function that calls it as an op with torch_neuronx.nki_op (it then compiles into the "
                    "graph's executable), or call the kernel outside the compiled region"
                )
            from nki import framework

            if self.mode == "simulation" and all(v.device.type == "cpu" for v in values if _is_torch_tensor(v)):
                return framework.simulate_torch(self, args, kwargs)
            return framework.call(self, args, kwargs)
        if self.mode == "simulation":
            from nki import simulation

            return simulation.run(self, args, kwargs)
        if any(isinstance(v, np.ndarray) for v in values):
            from nki import framework

            return framework.call_numpy(self, args, kwargs)
        raise TypeError(
            f"NKI kernel '{self.name}' was called without tensors; call it with neuron tensors, with numpy "
            "arrays, or through nki.simulate(kernel)"
        )

    def numpy_signature(self, arguments: dict[str, Any]) -> Signature:
        """The signature of a call with numpy arrays (and other values)."""

        def describe(name: str, value: Any) -> TensorSpec | None:
            if isinstance(value, np.ndarray):
                return tensor_spec(name, value.shape, value.dtype, self.name)
            return None

        return self.signature(arguments, describe)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            return bind_arguments(self.fn, args, kwargs)
        except TypeError as error:
            raise TypeError(f"NKI kernel '{self.name}': {error}") from None


def _is_torch_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "data_ptr")


def jit(
    fn: Callable[..., Any] | None = None, *, mode: str = "auto", platform_target: str | None = None, **options: Any
):
    """Makes ``fn`` an NKI kernel (usable as ``@nki.jit`` or ``@nki.jit(mode=..., platform_target=...)``).

    Returns:
        A :class:`Kernel`; calling it with neuron tensors runs it on the device, ``kernel[grid]`` sets
        an SPMD launch grid.
    """
    if fn is None:
        return lambda f: jit(f, mode=mode, platform_target=platform_target, **options)
    if isinstance(fn, Kernel):
        return Kernel(fn.fn, fn.grid, mode, platform_target or fn.platform_target, {**fn.options, **options}, fn.traces)
    return Kernel(fn, (), mode, platform_target, options)
