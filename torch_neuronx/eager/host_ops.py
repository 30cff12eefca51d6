"""Ops whose result goes to the host or whose output shape depends on device data.

Each one is a synchronisation point: it waits for the values it needs (raising any pending device
fault), then continues with a shape that is known.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from torch_neuronx._compat import transformer_encoder
from torch_neuronx._compat.aten_checks import check_index_count
from torch_neuronx.eager import rules, runners, tracking
from torch_neuronx.runtime import buffers
from torch_neuronx.runtime.dtypes import aten_name, cpp_name, jax_dtype, numpy_to_torch

aten = torch.ops.aten


def _local_scalar_dense(tensor: torch.Tensor) -> Any:
    """``Tensor.item()``."""
    tracking.executed["aten::_local_scalar_dense"] += 1
    return numpy_to_torch(buffers.device_to_host(tensor)).item()


def _nonzero(tensor: torch.Tensor) -> torch.Tensor:
    """``torch.nonzero``: indices of the nonzero elements in row-major order, shape (count, dim),
    int64, laid out column-major (strides (1, count)) as CPU and CUDA write it: the transpose of a
    (dim, count) tensor."""
    tracking.executed["aten::nonzero"] += 1
    if tensor.numel() == 0:
        return torch.zeros((0, tensor.dim()), dtype=torch.int64, device=tensor.device)
    mask = tensor != 0
    count = int(mask.sum().item())
    if tensor.dim() == 0:
        return torch.zeros((count, 0), dtype=torch.int64, device=tensor.device)
    flat_positions = torch.arange(tensor.numel(), device=tensor.device)
    selected = torch.sort(torch.where(mask.reshape(-1), flat_positions, tensor.numel())).values[:count]
    coordinates = []
    for size in reversed(tensor.shape):
        coordinates.append(torch.remainder(selected, size))
        selected = torch.div(selected, size, rounding_mode="floor")
    return torch.stack(coordinates[::-1]).t() if coordinates else selected.reshape(count, 0)


def _masked_select(tensor: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``torch.masked_select``: the elements where the broadcast mask is true, as a 1-D tensor.

    Raises:
        RuntimeError: ``mask`` is not bool (ATen's check, CPU and CUDA alike; uint8 masks are gone).
    """
    if mask.dtype != torch.bool:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    tracking.executed["aten::masked_select"] += 1
    mask, tensor = torch.broadcast_tensors(mask, tensor)  # ATen's expand_outplace(mask, self): its error
    return tensor.reshape(-1)[_nonzero(mask.reshape(-1)).reshape(-1)]


def _write_out(name: str, argument: str, out: torch.Tensor, other: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    """Resizes ``out`` to ``result``'s shape (with ATen's warning when a non-empty ``out`` changes
    shape, as CUDA's structured ``index_out`` gives it) and copies it in; ``out`` must be on
    ``other``'s device (the device-mismatch error CPU and CUDA raise)."""
    if out.device != other.device:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but got {argument} is on {out.device}, different "
            f"from other tensors on {other.device} (when checking argument {argument} in method {name}). Move it "
            f"first, e.g. {argument}.to('{other.device}')."
        )
    runners.resize_output(out, result.shape)
    return out.copy_(result)


def _nonzero_out(tensor: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    """``torch.nonzero(out=)`` with CUDA's checks (``nonzero_out_cuda``): an int64 ``out`` on the
    input's device. As there, an ``out`` of the result's shape that is not column-major keeps its
    layout and takes a copy; any other is resized to (dim, count) and transposed in place."""
    if out.dtype != torch.int64:
        raise RuntimeError(f"Expected object of scalar type Long as out, but got {cpp_name(jax_dtype(out.dtype))}")
    if out.device != tensor.device:
        raise RuntimeError(
            f"expected self and out to be on the same device, but got out on {out.device} and self on {tensor.device}"
        )
    result = _nonzero(tensor)
    if out.shape == result.shape and not out.t().is_contiguous():
        return out.copy_(result)
    out.resize_(result.shape[::-1]).t_()
    return out.copy_(result)


def _masked_select_out(tensor: torch.Tensor, mask: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    """``torch.masked_select(out=)``: ``out`` of the input's dtype on its device, resized to the
    result (the CPU's and CUDA's checks)."""
    result = torch.masked_select(tensor, mask)
    if out.dtype != tensor.dtype:
        raise RuntimeError("masked_select(): self and result must have the same scalar type")
    rules.check_no_overlap(out, tensor)  # ATen's masked_select_out_impl, CPU and CUDA alike
    rules.check_no_overlap(out, mask)
    return _write_out("aten::masked_select.out", "out", out, tensor, result)


def _equal(tensor: torch.Tensor, other: torch.Tensor) -> bool:
    """``torch.equal``: same shape and same values."""
    tracking.executed["aten::equal"] += 1
    if tensor.shape != other.shape:
        return False
    return bool(torch.eq(tensor, other).all().item())


def _group_runs(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Runs of equal consecutive rows of ``rows`` (n >= 1, k): (the run of each row, the first row of
    each run, the number of runs), with one synchronisation to read the number. Rows holding NaN
    differ from each other, as PyTorch's ``!=`` comparisons make them."""
    n = rows.shape[0]
    differs = (rows[1:] != rows[:-1]).any(dim=1)
    starts = torch.cat([torch.ones(1, dtype=torch.bool, device=rows.device), differs])
    run = torch.cumsum(starts, 0) - 1
    count = int(run[-1].item()) + 1
    positions = torch.arange(n, device=rows.device)
    slots = torch.where(starts, run, count)
    first = torch.zeros(count + 1, dtype=torch.int64, device=rows.device).scatter_(0, slots, positions)[:count]
    return run, first, count


def _run_counts(first: torch.Tensor, n: int) -> torch.Tensor:
    return torch.diff(first, append=torch.full((1,), n, dtype=torch.int64, device=first.device))


def _empty_index(tensor: torch.Tensor, shape: tuple[int, ...] = (0,)) -> torch.Tensor:
    return torch.zeros(shape, dtype=torch.int64, device=tensor.device)


def _refuse_complex(tensor: torch.Tensor, kernel: str) -> None:
    """CUDA's unique kernels dispatch no complex dtype (Unique.cu: ``AT_ALL_TYPES``, bool, half and
    the unsigned types), and the CPU's none either: their dispatch error, before anything else.

    Raises:
        NotImplementedError: ``"unique" not implemented for 'ComplexFloat'``.
    """
    if tensor.dtype.is_complex:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{aten_name(tensor.dtype)}'")


def _unique_consecutive(
    tensor: torch.Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.unique_consecutive``: (the first of each run of equal consecutive elements, or slices
    along ``dim``; the run of each element when ``return_inverse``; each run's length when
    ``return_counts``); results not asked for are empty, as on CPU."""
    _refuse_complex(tensor, "unique" if dim is None else "unique_dim")
    tracking.executed["aten::unique_consecutive"] += 1
    if dim is None:
        flat = tensor.reshape(-1)
        if flat.numel() == 0:
            inverse = _empty_index(tensor, tuple(tensor.shape) if return_inverse else (0,))
            return flat, inverse, _empty_index(tensor)
        run, first, _ = _group_runs(flat.reshape(-1, 1))
        inverse = run.reshape(tensor.shape) if return_inverse else _empty_index(tensor)
        counts = _run_counts(first, flat.numel()) if return_counts else _empty_index(tensor)
        return flat[first], inverse, counts
    dim = _unique_dim_checks(tensor, dim)
    if tensor.shape[dim] == 0:
        return tensor, _empty_index(tensor), _empty_index(tensor)
    run, first, _ = _group_runs(tensor.movedim(dim, 0).reshape(tensor.shape[dim], -1))
    inverse = run if return_inverse else _empty_index(tensor)
    counts = _run_counts(first, tensor.shape[dim]) if return_counts else _empty_index(tensor)
    return tensor.index_select(dim, first), inverse, counts


def _unique_dim_checks(tensor: torch.Tensor, dim: int) -> int:
    """PyTorch's checks for unique along ``dim``: a dimension that exists, and no empty dimension
    other than ``dim``; returns ``dim`` wrapped."""
    if tensor.dim() == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if not -tensor.dim() <= dim < tensor.dim():
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-tensor.dim()}, {tensor.dim() - 1}], but got {dim})"
        )
    dim %= tensor.dim()
    if any(size == 0 for d, size in enumerate(tensor.shape) if d != dim):
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
    return dim


def _unique2(
    tensor: torch.Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.unique`` without ``dim``: the distinct elements in ascending order (also for
    ``sorted=False``, whose order PyTorch leaves unspecified); each NaN is distinct, as on CPU; the
    inverse (input-shaped) and counts are empty unless asked for."""
    _refuse_complex(tensor, "unique")
    tracking.executed["aten::_unique2"] += 1
    return _distinct(tensor, return_inverse, return_counts)


def _unique(
    tensor: torch.Tensor, sorted: bool = True, return_inverse: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch._unique``, the older overload (``index_fill``'s backward calls it): :func:`_unique2`
    without the counts."""
    _refuse_complex(tensor, "unique")
    tracking.executed["aten::_unique"] += 1
    values, inverse, _ = _distinct(tensor, return_inverse, return_counts=False)
    return values, inverse


def _distinct(
    tensor: torch.Tensor, return_inverse: bool, return_counts: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The distinct elements of ``tensor`` in ascending order (each NaN distinct), the inverse and the
    counts (empty unless asked for)."""
    flat = tensor.reshape(-1)
    if flat.numel() == 0:
        inverse = _empty_index(tensor, tuple(tensor.shape) if return_inverse else (0,))
        return flat, inverse, _empty_index(tensor)
    values, order = torch.sort(flat, stable=True)
    run, first, _ = _group_runs(values.reshape(-1, 1))
    inverse = _empty_index(tensor)
    if return_inverse:
        inverse = torch.empty_like(run).scatter_(0, order, run).reshape(tensor.shape)
    counts = _run_counts(first, flat.numel()) if return_counts else _empty_index(tensor)
    return values[first], inverse, counts


def _unique_dim(
    tensor: torch.Tensor, dim: int, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.unique(dim=...)``: the distinct slices along ``dim`` in lexicographic order, the
    inverse and the counts (always computed, as on CPU).

    Slices holding NaN are distinct, and where they land is the CPU's: ATen sorts the slices with
    ``std::sort`` and a comparison that is no order with NaN (a NaN is neither less nor greater
    than anything, so the next element decides), which leaves the result to the sort's algorithm
    (Unique.cpp, ``_unique_dim_cpu_template``; PyTorch's test_unique_dim expects it). A tensor
    holding NaN is therefore computed by the CPU's kernel itself, on a host copy (one more
    synchronisation, for floating tensors only)."""
    _refuse_complex(tensor, "unique_dim")
    tracking.executed["aten::unique_dim"] += 1
    dim = _unique_dim_checks(tensor, dim)
    n = tensor.shape[dim]
    if n == 0:
        return tensor, _empty_index(tensor), _empty_index(tensor)
    if tensor.dtype.is_floating_point and bool(torch.isnan(tensor).any()):
        host = torch.ops.aten.unique_dim.default(tensor.cpu(), dim, sorted, return_inverse, return_counts)
        return tuple(result.to(tensor.device) for result in host)
    rows = tensor.movedim(dim, 0).reshape(n, -1)
    order = torch.arange(n, device=tensor.device)
    for column in reversed(range(rows.shape[1])):  # least significant key first: a stable lexicographic sort
        order = order[torch.sort(rows[order, column], stable=True).indices]
    run, first, _ = _group_runs(rows[order])
    inverse = torch.empty_like(run).scatter_(0, order, run)
    return tensor.index_select(dim, order[first]), inverse, _run_counts(first, n)


def _bincount(tensor: torch.Tensor, weights: torch.Tensor | None = None, minlength: int = 0) -> torch.Tensor:
    """``torch.bincount``: the number of occurrences (or the summed ``weights``) of each value of a
    1-d non-negative integer tensor, with at least ``minlength`` bins; one synchronisation reads the
    extrema. As on CPU, float32 weights give float32 sums and other weights float64, which neuron
    does not have (an error); an empty input gives int64 zeros."""
    tracking.executed["aten::bincount"] += 1
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
        # _bincount_cuda's AT_DISPATCH_INTEGRAL_TYPES (cuda/SummaryOps.cu)
        raise NotImplementedError(f"\"bincount_cuda\" not implemented for '{aten_name(tensor.dtype)}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if tensor.dim() == 1 and tensor.numel() == 0:
        return torch.zeros(minlength, dtype=torch.int64, device=tensor.device)
    if tensor.dim() != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.dim() != 1 or weights.shape[0] != tensor.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if weights is not None and weights.dtype != torch.float32:
        raise TypeError(
            f"bincount on neuron: weights of dtype {weights.dtype} give float64 (double) sums on CPU, and float64 "
            "(double) tensors are not supported because Trainium has no FP64 arithmetic. Pass "
            "weights.to(torch.float32) for float32 sums."
        )
    low, high = torch.stack(torch.aminmax(tensor)).to(torch.int64).cpu().tolist()
    if low < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    bins = max(high + 1, minlength)
    if weights is None:
        weights = torch.ones(tensor.shape, dtype=torch.int64, device=tensor.device)
    return torch.zeros(bins, dtype=weights.dtype, device=tensor.device).index_add_(0, tensor.long(), weights)


def _repeat_interleave(repeats: torch.Tensor, *, output_size: int | None = None) -> torch.Tensor:
    """``torch.repeat_interleave(repeats)``: each index ``i`` repeated ``repeats[i]`` times, in
    ``repeats``' dtype (int32 or int64); ``x.repeat_interleave(tensor, dim)`` is built on it.

    Without ``output_size`` one synchronisation reads the total and the smallest repeat (the output's
    size, the negativity check). With it, as on CUDA, nothing is read: the CPU's two checks (no
    negative repeat, a total equal to ``output_size``) are device checks that raise the CPU's
    RuntimeError at the next synchronisation (DESIGN.md, 9)."""
    tracking.executed["aten::repeat_interleave"] += 1
    if repeats.dim() != 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if repeats.dtype not in (torch.int32, torch.int64):
        raise RuntimeError("repeats has to be Long or Int tensor")
    if repeats.numel() == 0:
        return torch.empty(0, dtype=repeats.dtype, device=repeats.device)
    ends = torch.cumsum(repeats, 0, dtype=torch.int64)
    if output_size is None:
        total, smallest = torch.stack([ends[-1], repeats.min().to(torch.int64)]).cpu().tolist()
        if smallest < 0:
            raise RuntimeError("repeats can not be negative")
    else:
        # The functional form hands ``ends`` back from the launch that checks, so a failed check
        # leaves the result undefined (unreadable), as device faults do; positions past a short
        # total are clamped so that they make no second fault in the caller's index_select.
        ends = aten._functional_assert_async.msg(repeats.min() >= 0, "repeats can not be negative", ends)
        ends = aten._functional_assert_async.msg(
            ends[-1] == output_size, "allocated size does not match required size", ends
        )
        positions = torch.arange(output_size, dtype=torch.int64, device=repeats.device)
        found = torch.searchsorted(ends, positions, right=True).clamp_(max=repeats.numel() - 1)
        return found.to(repeats.dtype)
    positions = torch.arange(total, dtype=torch.int64, device=repeats.device)
    return torch.searchsorted(ends, positions, right=True).to(repeats.dtype)


def _ctc_lengths(name: str, lengths: torch.Tensor) -> list[int]:
    if lengths.dtype.is_floating_point or lengths.dtype.is_complex or lengths.dtype == torch.bool:
        raise RuntimeError(f"{name} must be integral")
    return lengths.to("cpu", torch.int64).tolist()


def _ctc_loss_tensor(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    zero_infinity: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``aten::_ctc_loss.Tensor``: the lengths are read back (log_alpha's shape depends on them) and
    the int-list overload computes the loss, as CPU and CUDA's ``ctc_loss_tensor`` do."""
    tracking.executed["aten::_ctc_loss"] += 1
    lengths = _ctc_lengths("input_lengths", input_lengths), _ctc_lengths("target_lengths", target_lengths)
    return aten._ctc_loss.default(log_probs, targets, *lengths, blank, zero_infinity)


def _ctc_loss_backward_tensor(
    grad: torch.Tensor,
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    neg_log_likelihood: torch.Tensor,
    log_alpha: torch.Tensor,
    blank: int,
    zero_infinity: bool = False,
) -> torch.Tensor:
    """``aten::_ctc_loss_backward.Tensor``: the int-list overload with the lengths read back."""
    tracking.executed["aten::_ctc_loss_backward"] += 1
    lengths = _ctc_lengths("input_lengths", input_lengths), _ctc_lengths("target_lengths", target_lengths)
    return aten._ctc_loss_backward.default(
        grad, log_probs, targets, *lengths, neg_log_likelihood, log_alpha, blank, zero_infinity
    )


#: ATen's deprecation warning for a uint8 mask index (IndexingUtils.h), given once per mask as on CPU and CUDA.
_UINT8_MASK_WARNING = "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead."


def _is_mask(index: torch.Tensor | None) -> bool:
    return index is not None and index.dtype in (torch.bool, torch.uint8)


def _mask_coordinates(self: torch.Tensor, indices: list[torch.Tensor | None]) -> list[torch.Tensor | None]:
    """``indices`` with each k-dimensional mask replaced by k int64 index tensors, its ``nonzero``
    coordinates (a synchronisation point: how many depends on the data).

    Raises:
        IndexError: a mask's shape does not match the dimensions it indexes (the CPU's message).
    """
    check_index_count(self.dim(), len(indices))
    converted: list[torch.Tensor | None] = []
    for index_tensor in indices:
        if not _is_mask(index_tensor):
            converted.append(index_tensor)
            continue
        if index_tensor.dtype == torch.uint8:
            warnings.warn(_UINT8_MASK_WARNING, UserWarning, stacklevel=3)
        start = len(converted)
        for offset, size in enumerate(index_tensor.shape):
            if start + offset >= self.dim() or self.shape[start + offset] != size:
                raise IndexError(
                    f"The shape of the mask {list(index_tensor.shape)} at index {offset} does not match the "
                    f"shape of the indexed tensor {list(self.shape)} at index {start + offset}"
                )
        mask = index_tensor.to(self.device)
        converted.extend(_nonzero(mask).unbind(1) if mask.dim() else [mask.reshape(1).nonzero().reshape(-1)])
    return converted


def index_with_masks(kernel: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``aten::index.Tensor`` that accepts boolean masks (``x[mask]``), for the eager ``kernel``.

    A k-dimensional mask selects the positions where it is true, so the result's length depends on
    the data: each mask becomes k int64 index tensors (its ``nonzero`` coordinates, a
    synchronisation point) and the integer indexing runs on the device. A CPU ``self`` with neuron
    indices raises ATen's error (``index``'s meta: indices on the CPU or on self's device), as CUDA
    indices of a CPU tensor do.
    """

    def index(self: torch.Tensor, indices: list[torch.Tensor | None]) -> torch.Tensor:
        if self.device.type != "neuron":  # a CPU tensor indexed by neuron indices reaches neuron's kernel
            raise RuntimeError(
                f"indices should be either on cpu or on the same device as the indexed tensor ({self.device})"
            )
        if not any(_is_mask(i) for i in indices):
            return kernel(self, indices)
        return kernel(self, _mask_coordinates(self, indices))

    return index


def _masked_fill_mask(
    self: torch.Tensor,
    indices: list[torch.Tensor | None],
    values: Any = None,
    accumulate: bool = False,
    *_: Any,
    **kwargs: Any,
) -> torch.Tensor | None:
    """The mask ``index_put`` fills through, as ATen's ``canDispatchToMaskedFill`` finds it
    (TensorAdvancedIndexing.cpp, CPU and CUDA alike): one bool or uint8 index tensor on ``self``'s
    device, None elsewhere, a one-element CPU value, no accumulation. ATen then calls
    ``masked_fill_(mask, value.item())``, which casts the value to ``self``'s dtype (``x_half[m] =
    torch.tensor(1.0)``), where index_put requires one dtype. A 0-dim value of ``self``'s dtype on
    its device qualifies too: that is how ``x[mask] = 0`` reaches a PrivateUse1 device, where CUDA's
    indexing makes the number a CPU tensor (python_variable_indexing.cpp); so ``x[x] = False``
    fills as on CUDA instead of refusing the mask's overlap with ``self``. None when the call does
    not qualify.

    Raises:
        IndexError: the mask's shape differs from the dimensions it indexes (ATen's words).
    """
    values = kwargs.get("values", values)
    if kwargs.get("accumulate", accumulate) or not isinstance(values, torch.Tensor):
        return None
    on_device_number = values.dim() == 0 and values.device == self.device and values.dtype == self.dtype
    if values.numel() != 1 or not (values.device.type == "cpu" or on_device_number):
        return None
    check_index_count(self.dim(), len(indices))
    given = [(position, i) for position, i in enumerate(indices) if i is not None]
    if len(given) != 1:
        return None
    position, mask = given[0]
    if mask.dtype not in (torch.bool, torch.uint8) or mask.device != self.device:
        return None
    for j in range(mask.dim()):
        if mask.shape[j] != self.shape[position + j]:
            raise IndexError(
                f"The shape of the mask {list(mask.shape)} at index {j} does not match the shape of the indexed "
                f"tensor {list(self.shape)} at index {position + j}"
            )
    return mask.reshape(*mask.shape, *([1] * (self.dim() - position - mask.dim())))


def index_put_with_masks(kernel: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``aten::index_put(_)`` for the eager ``kernel`` where a boolean mask stands beside other index
    tensors (``x[mask, idx] = v``): the masks become their ``nonzero`` coordinates, as for
    :func:`index_with_masks`. A mask that is the only index tensor stays one: the lowering writes
    through it without reading the data back. A one-element CPU value written through one mask fills
    it as ``masked_fill_`` (:func:`_masked_fill_mask`)."""
    functional = getattr(kernel, "op", None) is aten.index_put.default  # ATen's clones, then index_put_

    def index_put(self: torch.Tensor, indices: list[torch.Tensor | None], *args: Any, **kwargs: Any) -> torch.Tensor:
        mask = _masked_fill_mask(self, indices, *args, **kwargs)
        if mask is not None:
            value = args[0] if args else kwargs["values"]
            value = value if value.device == self.device else value.item()  # a device value: no sync
            return torch.masked_fill(self, mask, value) if functional else self.masked_fill_(mask, value)
        given = [i for i in indices if i is not None]
        if len(given) < 2 or not any(_is_mask(i) for i in given):
            for index_tensor in given:
                if index_tensor.dtype == torch.uint8:
                    warnings.warn(_UINT8_MASK_WARNING, UserWarning, stacklevel=2)
            return kernel(self, indices, *args, **kwargs)
        return kernel(self, _mask_coordinates(self, indices), *args, **kwargs)

    return index_put


def _nested_tensor_from_mask_left_aligned(tensor: torch.Tensor, mask: torch.Tensor) -> bool:
    """Whether every row of ``mask`` (batch, sequence; True = kept) keeps a prefix of its positions, as
    ATen's kernel answers, while ``nn.TransformerEncoder``'s wrapper probes which path PyTorch takes
    (_compat/transformer_encoder.py); False otherwise, which sends an unwrapped encoder (under
    ``torch.compile``) down the standard path instead of a nested tensor neuron does not hold."""
    tracking.executed["aten::_nested_tensor_from_mask_left_aligned"] += 1
    if not transformer_encoder.probing():
        return False
    # ATen's checks (NestedTensorMath.cpp), in its words
    if mask.dtype != torch.bool:
        raise RuntimeError(f"Expected mask to be of ScalarType Bool, but got {aten_name(mask.dtype)} instead.")
    if mask.dim() != 2:
        raise RuntimeError("Padding mask should be 2D")
    if tensor.dim() != 3:
        raise RuntimeError("Input should be a 3D tensor, N * L * D")
    if tuple(mask.shape) != tuple(tensor.shape[:2]):
        raise RuntimeError("Mask size should match input size")
    kept = mask.to(torch.int64)
    return bool((kept.cumprod(1).sum(1) == kept.sum(1)).all().item())


KERNELS = {
    aten._nested_tensor_from_mask_left_aligned.default: _nested_tensor_from_mask_left_aligned,
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.nonzero.default: _nonzero,
    aten.masked_select.default: _masked_select,
    aten.nonzero.out: _nonzero_out,
    aten.masked_select.out: _masked_select_out,
    aten.equal.default: _equal,
    aten.unique_consecutive.default: _unique_consecutive,
    aten._unique2.default: _unique2,
    aten._unique.default: _unique,
    aten.unique_dim.default: _unique_dim,
    aten.bincount.default: _bincount,
    aten.repeat_interleave.Tensor: _repeat_interleave,
    aten._ctc_loss.Tensor: _ctc_loss_tensor,
    aten._ctc_loss_backward.Tensor: _ctc_loss_backward_tensor,
}
