"""Tracing a kernel into one JAX function, once per input signature.

A kernel is a Python function over NKI tensors. For one signature (its launch grid, the shape and
dtype of each tensor argument, the value of every other argument) it runs once with JAX tracers for
its input tensors, every program of the SPMD grid in turn; its NKI calls check the hardware's rules
and build a functional JAX computation (jax.jit, so tracing happens once and later calls reuse it).
The result is a :class:`TracedKernel`: the function from the input tensors to the kernel's outputs
and the new values of the inputs it wrote, and how to rebuild the kernel's return value from them.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import linecache
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from nki import errors
from nki._core import context, dtypes, hardware
from nki._core.compute import NkiTensor
from nki._core.memory import Storage, shared_hbm


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """A tensor argument as the trace sees it: shape and NKI dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype


@dataclasses.dataclass(frozen=True)
class Static:
    """A non-tensor argument: its value is part of the signature (a new value traces again)."""

    value: Any

    def key(self) -> Any:
        try:
            hash(self.value)
            return (type(self.value), self.value)
        except TypeError:
            return (type(self.value), repr(self.value))


@dataclasses.dataclass(frozen=True)
class Signature:
    """What one trace is specialised to."""

    grid: tuple[int, ...]
    arguments: tuple[tuple[str, TensorSpec | Static], ...]
    platform: str

    def key(self) -> Any:
        return (
            self.grid,
            self.platform,
            tuple((n, a if isinstance(a, TensorSpec) else a.key()) for n, a in self.arguments),
        )

    @property
    def tensor_names(self) -> list[str]:
        return [n for n, a in self.arguments if isinstance(a, TensorSpec)]


@dataclasses.dataclass
class TracedKernel:
    """One kernel traced for one signature.

    Attributes:
        function: ``function(*inputs) -> (*outputs, *written)``: the input tensors' values in
            ``signature.tensor_names`` order give the new output tensors, then the new values of the
            inputs the kernel wrote (``written``: their positions among the inputs).
        outputs: the shape and dtype of each new output.
        written: positions (among the tensor inputs) of the inputs the kernel writes.
        returns: the kernel's return value, with ("output", k) and ("input", i) for its tensors.
    """

    signature: Signature
    function: Callable[..., tuple[Any, ...]]
    outputs: list[TensorSpec]
    written: list[int]
    returns: Any


def bind_arguments(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The kernel's parameters bound to a call's arguments, defaults filled in.

    Raises:
        TypeError: the arguments do not fit the kernel's parameters (Python's message).
    """
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _programs(grid: tuple[int, ...]):
    return itertools.product(*(range(g) for g in grid)) if grid else [()]


def _return_structure(value: Any, inputs: list[Storage], outputs: list[Storage]) -> Any:
    if isinstance(value, NkiTensor):
        storage = value.storage
        whole = value.gather is None and value.offset == 0 and value.shape == storage.shape and value.is_contiguous()
        if storage.argument is not None:
            if not whole:
                errors.not_supported("returning a view of an input tensor; return the whole tensor")
            return ("input", inputs.index(storage))
        if storage.region.on_chip:
            raise TypeError(
                f"a kernel returns HBM tensors, but it returned the {storage.region.value} tile "
                f"`{storage.name or '<tile>'}`; allocate the output with nl.ndarray(..., buffer=nl.shared_hbm) "
                "and store into it"
            )
        if not whole:
            errors.not_supported("returning a view of an output tensor; return the whole tensor")
        if storage not in outputs:
            outputs.append(storage)
        return ("output", outputs.index(storage))
    if isinstance(value, (tuple, list)):
        return type(value)(_return_structure(v, inputs, outputs) for v in value)
    if value is None or isinstance(value, (int, float, bool, str)):
        return ("constant", value)
    raise TypeError(f"a kernel returns HBM tensors (or tuples of them), got {type(value).__name__}")


def _definition(fn: Callable[..., Any]) -> errors.SourceLocation:
    """The ``def`` line of a kernel (past its decorators)."""
    code = fn.__code__
    line = code.co_firstlineno
    while (
        not linecache.getline(code.co_filename, line).lstrip().startswith(("def ", "async def "))
        and line < code.co_firstlineno + 50
    ):
        line += 1
    return errors.SourceLocation(code.co_filename, line, code.co_name)


def trace(fn: Callable[..., Any], signature: Signature) -> TracedKernel:
    """Traces ``fn`` for ``signature``; the hardware rules are checked here, before anything runs.

    Raises:
        NKIError: a rule of the hardware or of the language is broken (NKI's error name, the line).
        Whatever the kernel's own code raises (its asserts), with a note naming the kernel.
    """
    platform = hardware.platform(signature.platform)
    names = signature.tensor_names
    found: dict[str, Any] = {}

    def function(*arrays: Any) -> tuple[Any, ...]:
        ctx = context.TraceContext(fn.__name__, signature.grid, platform)
        with context.tracing(ctx):
            inputs = [
                Storage(spec.shape, spec.dtype, shared_hbm, name, value=array, argument=i)
                for i, (name, spec, array) in enumerate(
                    zip(names, [a for _, a in signature.arguments if isinstance(a, TensorSpec)], arrays, strict=True)
                )
            ]
            by_name = dict(zip(names, inputs, strict=True))
            returned = None
            for program in _programs(signature.grid):
                ctx.start_program(program)
                kwargs = {
                    name: NkiTensor.whole(by_name[name]) if isinstance(a, TensorSpec) else a.value
                    for name, a in signature.arguments
                }
                returned = fn(**kwargs)
            outputs: list[Storage] = []
            structure = _return_structure(returned, inputs, outputs)
            for position, storage in enumerate(outputs):
                if not storage.written:
                    errors.tensor_output_not_written_to(
                        f"`{storage.name}` ({storage.dtype}{list(storage.shape)}, output {position})", _definition(fn)
                    )
            written = [i for i, storage in enumerate(inputs) if storage.written]
        found.update(outputs=[TensorSpec(s.shape, s.dtype) for s in outputs], written=written, returns=structure)
        return (*(s.value for s in outputs), *(inputs[i].value for i in written))

    jitted = jax.jit(function)
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for _, a in signature.arguments if isinstance(a, TensorSpec)]
    try:
        jitted.trace(*specs)
    except errors.NKIError as error:
        errors.clean_notes(error)
        raise
    except Exception as error:
        described = ", ".join(
            f"{n}: {a.dtype}{list(a.shape)}" if isinstance(a, TensorSpec) else f"{n}={a.value!r}"
            for n, a in signature.arguments
        )
        error.add_note(f"while tracing NKI kernel '{fn.__name__}' for ({described})")
        raise
    return TracedKernel(signature, jitted, found["outputs"], found["written"], found["returns"])


class TraceCache:
    """The traces of one kernel, by signature (the least recently used beyond ``capacity`` dropped)."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self.entries: OrderedDict[Any, TracedKernel] = OrderedDict()

    def get(self, fn: Callable[..., Any], signature: Signature) -> TracedKernel:
        key = signature.key()
        traced = self.entries.get(key)
        if traced is None:
            traced = trace(fn, signature)
            self.entries[key] = traced
            if len(self.entries) > self.capacity:
                self.entries.popitem(last=False)
        else:
            self.entries.move_to_end(key)
        return traced


def tensor_spec(name: str, shape: tuple[int, ...], dtype: Any, kernel: str, shown: Any = None) -> TensorSpec:
    """The spec of a tensor argument; a TypeError naming the kernel and the argument for a dtype NKI
    does not have (float64, int64, complex). ``shown`` is the dtype as the caller knows it (a torch
    dtype), for the message."""
    try:
        return TensorSpec(tuple(int(s) for s in shape), dtypes.as_dtype(dtype))
    except TypeError:
        raise TypeError(
            f"NKI kernel '{kernel}': argument '{name}' is {shown if shown is not None else np.dtype(dtype)}, which NKI "
            f"does not support; NKI tensors are {dtypes.names()}. Convert it first (e.g. .to(torch.float32) or "
            ".to(torch.int32))"
        ) from None
