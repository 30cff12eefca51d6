"""In-place tensor-list ops (``_foreach_mul_``, ``_fused_adam_``): items that share memory, and
version counters.

The CPU's kernels of these ops update the list item by item (ATen's ``foreach_tensor_*_slow_``
loops, ``_fused_adam_kernel_cpu_``): an item that shares memory with an item at another index sees
that item's update already made, so ``torch._foreach_mul_([t, t], 0.5)`` scales ``t`` by 0.25. One
executable computes every item from the values before the call. A call signature whose items
overlap across indices (the key records where the views of one storage sit relative to each other,
so it decides this once per executable) therefore runs item by item, each a one-item call of the
same overload; calls without such overlap, every optimizer step over distinct parameters among
them, keep the one executable.

PyTorch's dispatcher bumps the version counter of a tensor an in-place op writes in its
``ADInplaceOrView`` kernel, which tensor-list ops do not have: the CPU's ``_foreach_*_`` kernels bump
each item through the per-tensor ops they call, CUDA's fast path with ``increment_version``. The
device's do so too (:func:`with_version_bumps`), so autograd refuses a backward through a value a
foreach op overwrote, as it does on those devices (``_fused_adam_`` and AMP's unscaling bump nothing
there either).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_neuronx._compat.torch_internals import has_kernel, schema_of
from torch_neuronx.eager import rules
from torch_neuronx.eager.plan import Plan, split
from torch_neuronx.lowering import engine
from torch_neuronx.runtime.arguments import ArgumentType, argument_type
from torch_neuronx.runtime.executable import Runner
from torch_neuronx.runtime.spans import byte_span


def _written_list_position(plan: Plan) -> int | None:
    """The schema position of the tensor list an in-place overload returning nothing updates, or
    None for any other overload (``out=`` lists are written after every item is computed, as the
    CPU's generated ``out=`` kernels copy the functional results)."""
    schema = schema_of(plan.op)
    if schema.returns:
        return None
    for position in plan.writes:
        if plan.is_in_place_self(position) and argument_type(schema.arguments[position]) is ArgumentType.TENSOR_LIST:
            return position
    return None


def _per_item_tensor(op_name: str, argument: Any) -> bool:
    """Whether a tensor argument holds one value per item: the ``scalars`` tensor of
    ``_foreach_addcmul_.Tensor`` / ``_foreach_addcdiv_.Tensor`` (ATen's ``convert_tensor_to_scalar_list``)."""
    return op_name.startswith("_foreach_") and argument.name == "scalars"


def _address_range(tensor: torch.Tensor) -> tuple[int, int]:
    """The device addresses ``[first, end)`` a non-empty tensor's elements span."""
    first, end = byte_span(tensor)
    base = tensor.untyped_storage().data_ptr()
    return base + first, base + end


def _items(plan: Plan, values: list[Any], count: int) -> list[tuple[int, torch.Tensor, bool]]:
    """(item index, tensor, written) of every non-empty device tensor of the call (a CPU tensor,
    ``_foreach_copy_``'s source, shares no memory with one); a tensor every item reads
    (``_foreach_mul_.Tensor``'s ``other``, ``found_inf``) has index -1."""
    schema = schema_of(plan.op)
    name = schema.name.removeprefix("aten::")
    items = []
    for position, (argument, value) in enumerate(zip(schema.arguments, values, strict=True)):
        written = position in plan.writes
        if isinstance(value, (list, tuple)) and argument_type(argument) is ArgumentType.TENSOR_LIST:
            items.extend((i, t, written) for i, t in enumerate(value) if isinstance(t, torch.Tensor))
        elif isinstance(value, torch.Tensor) and not _per_item_tensor(name, argument):
            items.append((-1, value, written))
    return [(i, t, written) for i, t, written in items if t.numel() and t.device.type != "cpu" and i < count]


def items_share_memory(plan: Plan, values: list[Any]) -> bool:
    """Whether an in-place tensor-list call must run item by item: it has two items or more, and
    an item it writes may share memory with a tensor of another index or one every item reads
    (address ranges that intersect; interleaved views count, which only costs launches)."""
    position = _written_list_position(plan)
    if position is None or len(values[position]) < 2:
        return False
    items = _items(plan, values, len(values[position]))
    spans = sorted((*_address_range(tensor), index, written) for index, tensor, written in items)
    for k, (_, end, index, written) in enumerate(spans):
        for other_first, _, other_index, other_written in spans[k + 1 :]:
            if other_first >= end:
                break
            if index != other_index and (written or other_written):
                return True
    return False


def check_item_overlap(plan: Plan, values: list[Any]) -> None:
    """TensorIterator's check of each item's op on the CPU (``self[i].add_(other[i])``): a written
    item and what it reads (the items of its index, the tensors every item reads) are the same
    memory or disjoint, not partly the same.

    Raises:
        RuntimeError: ATen's "unsupported operation: some elements of the input tensor and the
            written-to tensor refer to a single memory location. ..."
    """
    position = _written_list_position(plan)
    if position is None or not schema_of(plan.op).name.startswith("aten::_foreach_"):
        return
    count = len(values[position])
    if any(isinstance(v, (list, tuple)) and len(v) != count for v in values):
        return  # the foreach check of list lengths comes first (PyTorch's meta kernel makes it)
    items = _items(plan, values, count)
    for index, target, written in items:
        if written and index >= 0:
            for other_index, source, _ in items:
                if source is not target and other_index in (index, -1):
                    rules.check_no_partial_overlap(target, source)


def _item_values(op: Any, values: list[Any], index: int, count: int) -> list[Any]:
    """The call's arguments (schema order) for its item ``index`` alone: one-item lists (a list of
    another length, such as ``_fused_adam_``'s empty ``max_exp_avg_sqs``, stays as it is)."""
    schema = schema_of(op)
    name = schema.name.removeprefix("aten::")
    item_values = []
    for argument, value in zip(schema.arguments, values, strict=True):
        kind = argument_type(argument)
        per_item_list = kind in (ArgumentType.TENSOR_LIST, ArgumentType.NUMBER_LIST)
        if per_item_list and isinstance(value, (list, tuple)) and len(value) == count:
            value = [value[index]]
        elif isinstance(value, torch.Tensor) and _per_item_tensor(name, argument):
            value = value[index : index + 1]
        item_values.append(value)
    return item_values


def item_by_item_runner(plan: Plan, kernel: Callable[..., Any]) -> Runner:
    """The CPU's order for a call :func:`items_share_memory` holds for: ``kernel`` (the overload's
    eager kernel, below the dispatcher's autograd and version handling) once per item, in index
    order."""
    count_position = _written_list_position(plan)

    def run(inputs, device, slot_tensors, generator, values):
        count = len(values[count_position])
        for index in range(count):
            positional, keywords = split(plan.op, _item_values(plan.op, values, index, count))
            kernel(*positional, **keywords)

    return run


def _lists(op: Any, values: list[Any]) -> list[tuple[ArgumentType, list[Any]]]:
    """(kind, list) of each tensor-list and number-list argument, in schema order."""
    kinds = (ArgumentType.TENSOR_LIST, ArgumentType.NUMBER_LIST)
    return [
        (argument_type(argument), list(value))
        for argument, value in zip(schema_of(op).arguments, values, strict=True)
        if argument_type(argument) in kinds and isinstance(value, (list, tuple))
    ]


def spans_devices(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a ``_foreach_*`` call CUDA's foreach kernels take through their slow path, the
    per-tensor op of each item on its own device, where one executable runs on one core: its tensor
    lists hold tensors of two or more NeuronCores, or (``_foreach_copy_``, whose slow path is
    ``copy_``) an item copies between devices."""
    name = schema_of(op).name
    if not name.startswith("aten::_foreach_"):
        return False
    tensor_lists = [
        items for kind, items in _lists(op, engine.schema_values(op, args, kwargs)) if kind is ArgumentType.TENSOR_LIST
    ]
    if not tensor_lists:
        return False
    if name == "aten::_foreach_copy_":
        return len(tensor_lists) == 2 and any(
            isinstance(t, torch.Tensor) and isinstance(s, torch.Tensor) and t.device != s.device
            for t, s in zip(*tensor_lists, strict=False)
        )
    if len(tensor_lists[0]) < 2:  # one item: its own devices' error
        return False
    devices = {
        tensor.device
        for items in tensor_lists
        for tensor in items
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "neuron"
    }
    return len(devices) > 1


def _check_lengths(lists: list[tuple[ArgumentType, list[Any]]], count: int) -> None:
    """ATen's foreach check of the lists' lengths (``check_foreach_api_restrictions``), in its words."""
    for kind, items in lists[1:]:
        if len(items) == count:
            continue
        if kind is ArgumentType.NUMBER_LIST:
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        if items:  # an empty list of another role (_fused_adam_'s max_exp_avg_sqs) is not per item
            raise RuntimeError(f"Tensor lists must have the same number of tensors, got {count} and {len(items)}")


def run_per_item(op: Any, kernel: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """CUDA's foreach slow path for a call :func:`spans_devices` holds for: ``kernel`` (the
    overload's eager kernel) on each item alone, in index order (``copy_`` for ``_foreach_copy_``);
    the items' results are joined into the lists the overload returns.

    Raises:
        RuntimeError: lists of other lengths, in ATen's words.
    """
    schema = schema_of(op)
    values = engine.schema_values(op, args, kwargs)
    lists = _lists(op, values)
    count = next(len(items) for kind, items in lists if kind is ArgumentType.TENSOR_LIST)
    _check_lengths(lists, count)
    if schema.name == "aten::_foreach_copy_":
        targets, sources, non_blocking = values
        for target, source in zip(targets, sources, strict=True):
            target.copy_(source, non_blocking=non_blocking)
        return None
    per_item = []
    for index in range(count):
        positional, keywords = split(op, _item_values(op, values, index, count))
        per_item.append(kernel(*positional, **keywords))
    if not schema.returns:
        return None
    if len(schema.returns) == 1:
        return [result[0] for result in per_item]
    return tuple([result[k][0] for result in per_item] for k in range(len(schema.returns)))


def bumps_versions(plan: Plan) -> bool:
    """Whether the overload is an in-place ``_foreach_*_`` one, whose kernels bump each written
    item's version counter (the dispatcher has no ``ADInplaceOrView`` kernel for it)."""
    return (
        _written_list_position(plan) is not None
        and schema_of(plan.op).name.startswith("aten::_foreach_")
        and not has_kernel(plan.op, "ADInplaceOrView")
    )


def with_version_bumps(plan: Plan, kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel`` followed, when it returns, by one version bump of each item of the list it wrote
    (an item given twice is bumped twice, as the CPU's per-tensor ops bump it)."""
    position = _written_list_position(plan)
    name = schema_of(plan.op).arguments[position].name

    def run(*args: Any, **kwargs: Any) -> Any:
        result = kernel(*args, **kwargs)
        torch.autograd.graph.increment_version(args[position] if position < len(args) else kwargs[name])
        return result

    return run
