"""Call arguments as the C++ call signature describes them (csrc/runtime/NeuronCallSignature.h).

A description says where each argument sits: ("T", slot, dtype code, sizes, strides, offset) for a
tensor over a storage slot, ("L", [...]) for a tensor list, ("C", index, dtype code, wrapped) for a
0-dim CPU tensor, ("N"/"D", index, type) for a Python number, ("R", [indices]) for a Scalar list
(all runtime scalars), ("G",) for a generator and ("S", value) for a static value. Eager kernels and
compiled graphs both build executables from descriptions: inside the executable with
:func:`materialize`, and for PyTorch's meta kernels with :func:`meta_values`.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import torch

from torch_neuronx.runtime import layout
from torch_neuronx.runtime.dtypes import DTYPE_OF, jax_dtype


def meta_values(values: list[Any], descriptions: list[Any]) -> list[Any]:
    """The call's arguments as PyTorch's meta kernel sees them."""

    def meta(value: Any, description: Any) -> Any:
        if description is None:
            return value
        kind = description[0]
        if kind == "T":
            _, _, code, sizes, strides, offset = description
            # A base as large as the view needs: meta kernels that restride (sort's as_strided_) check it.
            extent = offset + 1 + sum((size - 1) * stride for size, stride in zip(sizes, strides, strict=True))
            base = torch.empty(extent if math.prod(sizes) else 0, dtype=DTYPE_OF[code], device="meta")
            return (
                base.as_strided(sizes, strides, offset)
                if math.prod(sizes)
                else torch.empty_strided(sizes, strides, dtype=DTYPE_OF[code], device="meta")
            )
        if kind == "L":
            return [meta(v, d) for v, d in zip(value, description[1], strict=True)]
        if kind == "C":
            # A wrapped number (a Python scalar PyTorch wrapped) promotes as a Python number; any
            # other 0-dim CPU tensor promotes as a 0-dim tensor of its dtype, on the meta device.
            return value.item() if description[3] else torch.empty((), dtype=value.dtype, device="meta")
        if kind == "G":
            return None
        if isinstance(value, torch.device) and value.type == "neuron":
            return torch.device("meta")  # factories: the meta kernel must not come back here
        return value  # numbers, static values: as they are

    return [meta(v, d) for v, d in zip(values, descriptions, strict=True)]


def tensor_descriptions(description: Any) -> list[Any]:
    """The tensor descriptions ("T", ...) of an argument: itself, or a list's elements (None for None)."""
    if description is None:
        return [None]
    return list(description[1]) if description[0] == "L" else [description]


def flat_tensors(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in flat_tensors(item)]
    return [value]


def materialize(description: Any, slot_arrays: list[Any], scalars: Any) -> Any:
    """An argument inside the executable, from its description alone (an executable must not hold
    the tensors of the call that built it): views read from their slot, runtime scalars from the
    inputs, static values as they are."""
    if description is None:
        return None
    kind = description[0]
    if kind == "T":
        _, slot, code, sizes, strides, offset = description
        view = layout.View(jax_dtype(DTYPE_OF[code]), tuple(sizes), tuple(strides), offset)
        return layout.read(slot_arrays[slot], view)
    if kind == "L":
        return [materialize(d, slot_arrays, scalars) for d in description[1]]
    if kind == "C":
        return jax.numpy.asarray(scalars[description[1]], jax_dtype(DTYPE_OF[description[2]]))
    if kind in ("N", "D"):
        return scalars[description[1]]
    if kind == "R":
        return [scalars[i] for i in description[1]]
    if kind == "G":
        return None
    return description[1]  # "S": a static value


def unpack(
    flat_inputs: tuple[Any, ...],
    described: list[Any],
    slots: list[Any],
    buffer_count: int,
    scalar_count: int,
    random: bool,
) -> tuple[list[Any], list[Any], Any, Any]:
    """Inside an executable: (the slots' buffers, the arguments materialised from their
    descriptions, seed, offset).

    The executable's inputs are the buffers of the slots that have one, then the runtime scalars,
    then (for random work) the generator's seed and offset.
    """
    feed = iter(flat_inputs[:buffer_count])
    slot_arrays = [next(feed) if has_buffer else None for has_buffer, _, _ in slots]
    scalars = flat_inputs[buffer_count : buffer_count + scalar_count]
    seed, offset = flat_inputs[buffer_count + scalar_count :] if random else (None, None)
    return slot_arrays, [materialize(d, slot_arrays, scalars) for d in described], seed, offset
