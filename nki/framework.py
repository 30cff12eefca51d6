"""NKI kernels on neuron tensors: the ``nki::kernel_call`` operator.

A kernel called with torch tensors becomes one call of ``nki::kernel_call(tensors, key)``, a
functional custom op: the key names the kernel, its launch grid and its non-tensor arguments; the
result is the kernel's new outputs and then the new values of the tensor arguments it writes, which
are copied back into them (a whole contiguous tensor takes the new buffer without a copy). So the
same call works wherever PyTorch runs an op:

- eager, on neuron tensors: the op's neuron kernel launches the traced kernel through the device's
  one launch path (runtime/executable.py: a C++ call signature for the cache key, ``executable.build``
  with the traced kernel as its computation, the shared bounded executable cache);
- under FakeTensor or meta tracing: its fake kernel gives the outputs' shapes from the trace;
- in a compiled graph (a graph traced from an ``nki_op``'s function): its lowering inlines the
  traced kernel into the graph's executable.

Bad input (a CPU tensor, tensors on two cores, a dtype NKI has not) raises before anything runs,
naming the kernel and the argument.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from typing import Any

import numpy as np
import torch
from torch.fx.experimental.symbolic_shapes import guard_scalar

from nki import simulation
from nki.tracing import Signature, Static, TensorSpec, TracedKernel, tensor_spec
from torch_neuronx._compat.torch_internals import dynamo_disabled, is_fake, pytree
from torch_neuronx.lowering.registry import lowering
from torch_neuronx.runtime import arguments, executable, launch_records, spans
from torch_neuronx.runtime.dtypes import JAX_DTYPE, TORCH_DTYPE, numpy_to_torch, torch_to_numpy
from torch_neuronx.runtime.executable_cache import EXECUTABLES
from torch_neuronx.runtime.layout import contiguous_strides

__all__ = ["call", "call_numpy", "simulate_torch"]


@dataclasses.dataclass(frozen=True)
class CallSpec:
    """What ``nki::kernel_call``'s key stands for: a kernel, its grid and its non-tensor arguments."""

    kernel: Any  # an nki.Kernel
    names: tuple[str, ...]  # every parameter, in order
    statics: tuple[tuple[str, Any], ...]  # the non-tensor ones with their values
    key: str

    @property
    def tensor_names(self) -> list[str]:
        static = {n for n, _ in self.statics}
        return [n for n in self.names if n not in static]

    def signature(self, specs: list[TensorSpec]) -> Signature:
        statics = dict(self.statics)
        feed = iter(specs)
        ordered = tuple((n, Static(statics[n]) if n in statics else next(feed)) for n in self.names)
        return Signature(self.kernel.grid, ordered, self.kernel.platform_target)

    def trace(self, tensors: list[Any]) -> TracedKernel:
        """The kernel traced for tensors (torch tensors or metas) of these shapes and dtypes."""
        specs = [
            tensor_spec(n, t.shape, JAX_DTYPE.get(t.dtype, t.dtype), self.kernel.name, t.dtype)
            for n, t in zip(self.tensor_names, tensors, strict=True)
        ]
        return self.kernel.trace(self.signature(specs))


_CALLS: dict[str, CallSpec] = {}
_KEYS: dict[Any, str] = {}
_counter = itertools.count()
_lock = threading.Lock()


def _call_spec(kernel: Any, arguments: dict[str, Any], tensor_names: list[str]) -> CallSpec:
    statics = tuple((n, v) for n, v in arguments.items() if n not in tensor_names)
    identity = (id(kernel.traces), kernel.grid, kernel.platform_target, tuple(arguments), Static(statics).key())
    with _lock:
        key = _KEYS.get(identity)
        if key is None:
            key = f"{kernel.name}#{next(_counter)}"
            _KEYS[identity] = key
            _CALLS[key] = CallSpec(kernel, tuple(arguments), statics, key)
    return _CALLS[key]


def _check_tensors(kernel: Any, arguments: dict[str, Any]) -> list[str]:
    """The names of the tensor arguments, after checking them: all on the same NeuronCore (or meta
    and fake tensors while PyTorch traces), dtypes NKI has.

    Raises:
        RuntimeError: a tensor on another device, or tensors on two cores.
        TypeError: a dtype NKI does not support.
    """
    names = [n for n, v in arguments.items() if isinstance(v, torch.Tensor)]
    devices: dict[torch.device, str] = {}
    for name in names:
        tensor = arguments[name]
        if tensor.device.type not in ("neuron", "meta"):
            raise RuntimeError(
                f"NKI kernel '{kernel.name}': argument '{name}' is on {tensor.device}; NKI kernels run on neuron "
                f"tensors (move it with {name}.to('neuron')), or on the host CPU with nki.simulate(kernel)"
            )
        devices.setdefault(tensor.device, name)
        tensor_spec(name, tensor.shape, JAX_DTYPE.get(tensor.dtype, tensor.dtype), kernel.name, tensor.dtype)
    if len({d for d in devices if d.type == "neuron"}) > 1:
        listed = ", ".join(f"'{n}' on {d}" for d, n in devices.items())
        raise RuntimeError(
            f"NKI kernel '{kernel.name}': its tensors are on different NeuronCores ({listed}); "
            "a kernel runs on one core"
        )
    return names


def _concrete(value: Any) -> Any:
    """A kernel's number argument as a Python number: a kernel is traced for the values of its
    non-tensor arguments, so a symbolic one (Dynamo's automatic dynamic ints, after a call with
    another value) is specialised to this call's value, with a guard that recompiles for others."""
    return pytree.tree_map(
        lambda v: guard_scalar(v) if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)) else v, value
    )


def call(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Runs ``kernel`` on torch tensors (see the module docstring); returns torch tensors where the
    kernel returns tensors (its written arguments are the argument tensors themselves)."""
    arguments = {name: _concrete(value) for name, value in kernel.bind(args, kwargs).items()}
    names = _check_tensors(kernel, arguments)
    spec = _call_spec(kernel, arguments, names)
    tensors = [arguments[n] for n in names]
    traced = spec.trace(tensors)  # the rules are checked here, before anything runs
    _check_aliasing(kernel, names, tensors, traced.written)
    results = torch.ops.nki.kernel_call(tensors, spec.key)
    outputs, updates = results[: len(traced.outputs)], results[len(traced.outputs) :]
    for position, value in zip(traced.written, updates, strict=True):
        tensors[position].copy_(value)
    return simulation.rebuild(traced.returns, outputs, tensors)


def _span(tensor: torch.Tensor) -> spans.Span | None:
    """The bytes of a real tensor's storage that its elements reach (None for fake and meta tensors,
    which have no storage, and for empty ones, which reach none)."""
    if tensor.device.type == "meta" or is_fake(tensor):
        return None
    try:
        return spans.span_of(tensor)
    except RuntimeError:
        return None


def _check_aliasing(kernel: Any, names: list[str], tensors: list[torch.Tensor], written: list[int]) -> None:
    """A kernel sees each tensor argument as its own HBM tensor: one it writes may not share bytes
    with another argument (the emulation would read the old values where hardware reads the new).
    Views of one storage whose bytes do not meet (the halves of a buffer) and empty tensors pass;
    strided views of more than 1 MiB count as their whole range (``spans.Span``).

    Raises:
        RuntimeError: naming the kernel and both arguments.
    """
    if not written:
        return
    reached = [_span(t) for t in tensors]
    for position in written:
        for other, span in enumerate(reached):
            if other == position or span is None or reached[position] is None:
                continue
            if span.overlaps(reached[position]):
                raise RuntimeError(
                    f"NKI kernel '{kernel.name}' writes argument '{names[position]}', which shares memory with "
                    f"argument '{names[other]}'; pass a copy ({names[other]}.clone()) or a separate output tensor"
                )


def call_numpy(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Runs ``kernel`` on NeuronCore 0 for numpy arguments (``nki.baremetal``); returns numpy arrays,
    and updates the numpy arrays the kernel writes."""
    arguments = kernel.bind(args, kwargs)
    moved = {n: numpy_to_torch(v).to("neuron") if isinstance(v, np.ndarray) else v for n, v in arguments.items()}
    result = call(kernel, (), moved)
    for name, value in arguments.items():
        if isinstance(value, np.ndarray):
            np.copyto(value, torch_to_numpy(moved[name].cpu()))
    return _map_tensors(result, lambda t: torch_to_numpy(t.cpu()))


def simulate_torch(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``nki.simulate(kernel)`` with CPU torch tensors: numpy in between, torch tensors back."""
    arguments = kernel.bind(args, kwargs)
    arrays = {n: torch_to_numpy(v) if isinstance(v, torch.Tensor) else v for n, v in arguments.items()}
    result, written = simulation.run_reporting_writes(kernel, (), arrays)
    for name in written:  # only these: an input may be read-only (expanded, a leaf requiring grad)
        if isinstance(arguments[name], torch.Tensor):
            arguments[name].copy_(numpy_to_torch(arrays[name]))
    # A returned argument is the argument tensor itself, as on the device.
    tensors = {id(arrays[n]): v for n, v in arguments.items() if isinstance(v, torch.Tensor)}
    return _map_tensors(result, lambda array: tensors[id(array)] if id(array) in tensors else numpy_to_torch(array))


def _map_tensors(value: Any, fn: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return type(value)(_map_tensors(v, fn) for v in value)
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return fn(value)
    return value


def _torch_dtype(dtype: np.dtype, kernel: str) -> torch.dtype:
    try:
        return TORCH_DTYPE[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"NKI kernel '{kernel}' makes a {dtype} tensor, which PyTorch has no dtype for") from None


def _result_specs(traced: TracedKernel) -> list[TensorSpec]:
    inputs = [a for _, a in traced.signature.arguments if isinstance(a, TensorSpec)]
    return [*traced.outputs, *(inputs[i] for i in traced.written)]


@torch.library.custom_op("nki::kernel_call", mutates_args=(), device_types="neuron")
def kernel_call(tensors: list[torch.Tensor], key: str) -> list[torch.Tensor]:
    """The launch of a traced kernel on the tensors' NeuronCore: its new outputs, then the new values
    of the inputs it writes (see the module docstring)."""
    return _launch(tensors, key)


@kernel_call.register_fake
def _kernel_call_fake(tensors: list[torch.Tensor], key: str) -> list[torch.Tensor]:
    spec = _CALLS[key]
    traced = spec.trace(tensors)
    like = tensors[0] if tensors else torch.empty((), device="neuron")
    return [like.new_empty(s.shape, dtype=_torch_dtype(s.dtype, spec.kernel.name)) for s in _result_specs(traced)]


_state: dict[str, Any] = {}
_cache: dict[bytes, executable.Runner] = {}  # bounded by runtime.executable_cache


def _launch(tensors: list[torch.Tensor], key: str) -> list[torch.Tensor]:
    signature = _state.get("signature")
    if signature is None:
        signature = _state["signature"] = arguments.call_signature(torch.ops.nki.kernel_call.default)
    cache_key, inputs, device, slot_tensors, generator, values, _ = signature.prepare((tensors, key), {})
    run = _cache.get(cache_key)
    if run is None:
        with dynamo_disabled(), launch_records.ops_unrecorded():  # keep Dynamo out of JAX; the
            run = _build(signature, tensors, key, inputs)  # trace's ops are not the user's
        EXECUTABLES.admit(_cache, cache_key, run)
    else:
        EXECUTABLES.touch(_cache, cache_key)
    return run(inputs, device, slot_tensors, generator, values)


def _build(signature: Any, tensors: list[torch.Tensor], key: str, inputs: list[Any]) -> executable.Runner:
    spec = _CALLS[key]
    traced = spec.trace(tensors)
    description = signature.describe((tensors, key), {})
    results = [
        executable.ResultLayout(s.shape, contiguous_strides(s.shape), _torch_dtype(s.dtype, spec.kernel.name), None)
        for s in _result_specs(traced)
    ]

    def compute(context: Any, args: list[Any]) -> list[Any]:
        return list(traced.function(*args[0]))

    return executable.build(f"nki::{spec.kernel.name}", description, inputs, compute, results=results).launch


@lowering(torch.ops.nki.kernel_call.default, metas=True)
def _kernel_call_lowering(tensors: list[Any], key: str, *, metas: list[Any]) -> list[Any]:
    """The traced kernel inlined into a compiled graph's executable."""
    traced = _CALLS[key].trace(metas[0])
    return list(traced.function(*tensors))
