"""Call arguments as the C++ call signature sees them (csrc/runtime/NeuronCallSignature.h).

A call's schema says what each argument is (:func:`argument_type`); :func:`call_signature` turns
that into the C++ signature of an ATen op, whose ``prepare`` gives the fast path its cache key and
inputs, and whose ``describe`` gives a cache miss a typed :class:`CallDescription`: one description
per argument, saying where it sits:

- :class:`TensorArg` ``(slot, dtype_code, sizes, strides, offset, offset_scalar)``: a view of a
  storage slot, its offset given at launch as runtime scalar ``offset_scalar`` (-1: a constant);
- :class:`TensorListArg` ``(items)``: a tensor list, item by item;
- :class:`HostScalarArg` ``(index, dtype_code, wrapped)``: a 0-dim CPU tensor, a runtime scalar;
- :class:`NumberArg` ``(index, type_name)``: a Python number, a runtime scalar;
- :class:`NumberListArg` ``(indices)``: a list of Python numbers, all runtime scalars;
- :class:`GeneratorArg`: a generator, whose (seed, offset) the executable takes as inputs;
- :class:`StaticArg` ``(value)``: anything else, a constant of the executable.

Executables are built from descriptions, never from the call's tensors: inside the executable with
:func:`unpack` and :func:`materialize`, and for PyTorch's meta kernels with :func:`meta_values`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import torch

from torch_neuronx import _C
from torch_neuronx._compat.torch_internals import OpOverload, SchemaArgument, op_name, schema_of
from torch_neuronx.runtime import layout
from torch_neuronx.runtime.dtypes import DTYPE_OF, jax_dtype, view_dtype

TensorArg = _C.TensorArg
TensorListArg = _C.TensorListArg
HostScalarArg = _C.HostScalarArg
NumberArg = _C.NumberArg
NumberListArg = _C.NumberListArg
GeneratorArg = _C.GeneratorArg
StaticArg = _C.StaticArg
SlotInfo = _C.SlotInfo
CallDescription = _C.CallDescription

__all__ = [
    "ArgumentType",
    "CallDescription",
    "GeneratorArg",
    "HostScalarArg",
    "InputLayout",
    "NumberArg",
    "NumberListArg",
    "SlotInfo",
    "StaticArg",
    "TensorArg",
    "TensorListArg",
    "argument_type",
    "call_signature",
    "flat_tensors",
    "materialize",
    "meta_values",
    "tensor_descriptions",
    "unpack",
]


class ArgumentType(enum.Enum):
    """What a schema argument holds, as the call signature and type promotion see it."""

    TENSOR = "Tensor"  # Tensor, Tensor?, Tensor(a!)
    TENSOR_LIST = "Tensor[]"  # Tensor[], Tensor?[]
    NUMBER = "number"  # Scalar, Scalar?, float, float?
    NUMBER_LIST = "number[]"  # Scalar[]
    GENERATOR = "Generator"  # Generator?
    OTHER = "other"  # int, bool, int[], str, dtype, device, layout, ...


_TYPES = {
    "Tensor": ArgumentType.TENSOR,
    "Optional[Tensor]": ArgumentType.TENSOR,
    "List[Tensor]": ArgumentType.TENSOR_LIST,
    "List[Optional[Tensor]]": ArgumentType.TENSOR_LIST,
    "number": ArgumentType.NUMBER,
    "Optional[number]": ArgumentType.NUMBER,
    "float": ArgumentType.NUMBER,
    "Optional[float]": ArgumentType.NUMBER,
    "List[number]": ArgumentType.NUMBER_LIST,
    "Generator": ArgumentType.GENERATOR,
    "Optional[Generator]": ArgumentType.GENERATOR,
}


def argument_type(argument: SchemaArgument) -> ArgumentType:
    """The :class:`ArgumentType` of a schema argument (``schema_of(op).arguments[i]``)."""
    return _TYPES.get(str(argument.type), ArgumentType.OTHER)


_KINDS = {
    ArgumentType.TENSOR: _C.ArgKind.TENSOR,
    ArgumentType.TENSOR_LIST: _C.ArgKind.TENSOR_LIST,
    ArgumentType.NUMBER: _C.ArgKind.SCALAR,
    ArgumentType.NUMBER_LIST: _C.ArgKind.SCALAR_LIST,
    ArgumentType.GENERATOR: _C.ArgKind.GENERATOR,
    ArgumentType.OTHER: _C.ArgKind.STATIC,
}


def call_signature(
    op: OpOverload,
    static_scalars: bool = False,
    static: frozenset[str] = frozenset(),
    allow_cpu: frozenset[str] = frozenset(),
) -> _C.CallSignature:
    """The C++ call signature of ``op``.

    Args:
        static_scalars: numbers are constants of the executable, part of the key (a decomposition's
            graph captures them as constants); otherwise they are runtime inputs.
        static: names of number arguments that are constants all the same (a lowering's ``static``).
        allow_cpu: names of tensor arguments that may be CPU tensors (``prepare`` reports
            ``convert_first``; the kernel moves them to the device).
    """
    specs = []
    for argument in schema_of(op).arguments:
        kind = _KINDS[argument_type(argument)]
        if kind in (_C.ArgKind.SCALAR, _C.ArgKind.SCALAR_LIST) and (static_scalars or argument.name in static):
            kind = _C.ArgKind.STATIC
        has_default = argument.has_default_value()
        default = argument.default_value if has_default else None
        specs.append(
            _C.ArgSpec(argument.name, kind, argument.kwarg_only, has_default, default, argument.name in allow_cpu)
        )
    return _C.CallSignature(op_name(op), specs)


def graph_signature(name: str, example_inputs: list[Any], runtime_scalars: Sequence[int] = ()) -> _C.CallSignature:
    """The C++ call signature of a compiled graph: its inputs are tensors and integers, never lists;
    the integers at ``runtime_scalars`` are runtime inputs of the executable, the others constants
    of it (part of the key)."""
    specs = [
        _C.ArgSpec(
            f"input{index}",
            _C.ArgKind.TENSOR
            if isinstance(value, torch.Tensor)
            else _C.ArgKind.SCALAR
            if index in runtime_scalars
            else _C.ArgKind.STATIC,
            False,
            False,
            None,
        )
        for index, value in enumerate(example_inputs)
    ]
    return _C.CallSignature(name, specs)


def meta_values(values: list[Any], descriptions: list[Any]) -> list[Any]:
    """The call's arguments as PyTorch's meta kernel sees them: meta tensors with the arguments'
    views, 0-dim CPU tensors as numbers (wrapped) or meta scalars, everything else as it is."""

    def meta(value: Any, description: Any) -> Any:
        if isinstance(description, TensorArg):
            sizes, strides, offset = description.sizes, description.strides, description.offset
            dtype = DTYPE_OF[description.dtype_code]
            # A base as large as the view needs: meta kernels that restride (sort's as_strided_) check it.
            extent = offset + 1 + sum((size - 1) * stride for size, stride in zip(sizes, strides, strict=True))
            if not math.prod(sizes):
                return torch.empty_strided(sizes, strides, dtype=dtype, device="meta")
            return torch.empty(extent, dtype=dtype, device="meta").as_strided(sizes, strides, offset)
        if isinstance(description, TensorListArg):
            return [meta(v, d) for v, d in zip(value, description.items, strict=True)]
        if isinstance(description, HostScalarArg):
            # A wrapped number (a Python scalar PyTorch wrapped) promotes as a Python number; any
            # other 0-dim CPU tensor promotes as a 0-dim tensor of its dtype, on the meta device.
            return value.item() if description.wrapped else torch.empty((), dtype=value.dtype, device="meta")
        if isinstance(description, GeneratorArg):
            return None
        if isinstance(value, torch.device) and value.type == "neuron":
            return torch.device("meta")  # factories: the meta kernel must not come back here
        return value  # numbers, static values: as they are

    return [meta(v, d) for v, d in zip(values, descriptions, strict=True)]


def tensor_descriptions(description: Any) -> list[Any]:
    """The tensor descriptions of an argument: itself, or a list's items (``[None]`` for None)."""
    if description is None:
        return [None]
    return list(description.items) if isinstance(description, TensorListArg) else [description]


def flat_tensors(value: Any) -> list[Any]:
    """The leaves of nested lists and tuples, in order."""
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in flat_tensors(item)]
    return [value]


def view_of(description: TensorArg, scalars: Any) -> layout.View:
    """The view a tensor description takes of its slot's buffer, inside the executable: its offset
    is the runtime scalar ``scalars[description.offset_scalar]`` where it has one, else a constant."""
    index = description.offset_scalar
    offset = scalars[index] if index >= 0 else description.offset
    return layout.View(view_dtype(DTYPE_OF[description.dtype_code]), description.sizes, description.strides, offset)


def materialize(description: Any, slot_arrays: list[Any], scalars: Any) -> Any:
    """An argument inside the executable, from its description alone: views read from their slot,
    runtime scalars from the inputs, static values as they are."""
    if description is None:
        return None
    if isinstance(description, TensorArg):
        return layout.read(slot_arrays[description.slot], view_of(description, scalars))
    if isinstance(description, TensorListArg):
        return [materialize(d, slot_arrays, scalars) for d in description.items]
    if isinstance(description, HostScalarArg):
        return jax.numpy.asarray(scalars[description.index], jax_dtype(DTYPE_OF[description.dtype_code]))
    if isinstance(description, NumberArg):
        return scalars[description.index]
    if isinstance(description, NumberListArg):
        return [scalars[i] for i in description.indices]
    if isinstance(description, GeneratorArg):
        return None
    return description.value  # StaticArg


class InputLayout(NamedTuple):
    """How an executable's flat inputs map to a call's arguments: the argument descriptions, the
    slots, and the input counts of a :class:`CallDescription`, without the call's values (an
    executable must not hold the tensors of the call that built it)."""

    arguments: tuple[Any, ...]
    slots: tuple[SlotInfo, ...]
    buffer_count: int
    scalar_count: int

    @staticmethod
    def of(call: CallDescription) -> InputLayout:
        return InputLayout(tuple(call.arguments), tuple(call.slots), call.buffer_count, call.scalar_count)


def unpack(
    flat_inputs: tuple[Any, ...], inputs: InputLayout, random: bool
) -> tuple[list[Any], tuple[Any, ...], list[Any], Any, Any]:
    """Inside an executable: (the slots' buffers, the runtime scalars, the arguments materialised
    from their descriptions, seed, offset).

    The executable's inputs are the buffers of the slots that have one, then the runtime scalars,
    then (for random work) the generator's seed and offset. Arguments that are the same view of the
    same slot (``x * x``) are one value, so a lowering sees that its operands are one tensor (mul's
    keeps ``x * x`` from XLA's simplifier, which folds ``sqrt(x * x)`` to ``|x|``).
    """
    feed = iter(flat_inputs[: inputs.buffer_count])
    slot_arrays = [next(feed) if slot.has_buffer else None for slot in inputs.slots]
    scalars = flat_inputs[inputs.buffer_count : inputs.buffer_count + inputs.scalar_count]
    seed, offset = flat_inputs[inputs.buffer_count + inputs.scalar_count :] if random else (None, None)
    reads: dict[tuple[Any, ...], Any] = {}

    def argument(description: Any) -> Any:
        if not isinstance(description, TensorArg):
            return materialize(description, slot_arrays, scalars)
        d = description
        key = (d.slot, d.dtype_code, tuple(d.sizes), tuple(d.strides), d.offset, d.offset_scalar)
        if key not in reads:
            reads[key] = materialize(description, slot_arrays, scalars)
        return reads[key]

    return slot_arrays, scalars, [argument(d) for d in inputs.arguments], seed, offset
