"""Indexing lowerings (torch_neuronx/lowering/indexing.py) against CPU PyTorch."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from torch.testing import make_tensor

import torch_neuronx
from tests.utils import assert_matches_cpu, to_neuron
from torch_neuronx import _config

DTYPES = [torch.float32, torch.bfloat16, torch.int64]
INDEX_DTYPES = [torch.int64, torch.int32]


def _values(shape, dtype):
    return make_tensor(shape, dtype=dtype, device="cpu", low=-9, high=9)


def _index(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


# --- index_select, gather, scatter -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [*DTYPES, torch.bool])
@pytest.mark.parametrize("dim", [0, -1])
def test_index_select(dtype, dim):
    x = _values((4, 5), dtype)
    assert_matches_cpu(lambda x, i: torch.index_select(x, dim, i), x, _index([3, 0, 3, 1]))


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_index_select_out_and_scalars(index_dtype):
    x = _values((4, 5), torch.float32)
    index = _index([2, 0], index_dtype)
    assert_matches_cpu(lambda x, i: torch.index_select(x, 1, i, out=x.new_empty(0)), x, index)
    assert_matches_cpu(lambda x, i: torch.index_select(x, 0, i), _values((), torch.float32), _index([0], index_dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1])
def test_gather(dtype, dim):
    x = _values((4, 5), dtype)
    index = torch.randint(0, 4, (3, 4))
    assert_matches_cpu(lambda x, i: torch.gather(x, dim, i), x, index)
    assert_matches_cpu(lambda x, i: torch.gather(x, dim, i, out=x.new_empty(i.shape)), x, index)


def test_gather_int32_index_and_scalars():
    x = _values((4, 5), torch.float32)
    assert_matches_cpu(lambda x, i: torch.gather(x, 1, i), x, torch.randint(0, 5, (4, 2), dtype=torch.int32))
    assert_matches_cpu(lambda x, i: torch.gather(x, 0, i), _values((), torch.float32), _index(0))


SCATTERS = {
    "src": lambda x, i, s: x.scatter(1, i, s),
    "value": lambda x, i, s: x.scatter(1, i, 2),
    "reduce_add": lambda x, i, s: x.scatter(1, i, s, reduce="add"),
    "reduce_multiply": lambda x, i, s: x.scatter(1, i, s, reduce="multiply"),
    "value_reduce": lambda x, i, s: x.scatter(1, i, 3, reduce="add"),
    "inplace_src": lambda x, i, s: x.clone().scatter_(1, i, s),
    "inplace_value_reduce": lambda x, i, s: x.clone().scatter_(1, i, 2, reduce="multiply"),
    "out": lambda x, i, s: torch.scatter(x, 1, i, s, out=x.new_empty(x.shape)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", SCATTERS)
def test_scatter(dtype, form):
    x, src = _values((3, 5), dtype), _values((3, 4), dtype)
    # Row 0 writes column 1 twice: without reduce, the last write wins (CPU writes in order).
    index = _index([[1, 1, 4], [0, 2, 3], [4, 3, 2]])
    assert_matches_cpu(SCATTERS[form], x, index, src)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_add(dtype):
    x, src, index = _values((4, 3), dtype), _values((5, 3), dtype), torch.randint(0, 4, (5, 3))
    assert_matches_cpu(lambda x, i, s: x.scatter_add(0, i, s), x, index, src, float32_reference=True)
    assert_matches_cpu(lambda x, i, s: x.clone().scatter_add_(0, i, s), x, index, src, float32_reference=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(dtype, reduce, include_self):
    x, src = _values((4, 3), dtype), _values((6, 3), dtype)
    index = _index([[0, 1, 0], [0, 1, 2], [3, 1, 0], [0, 0, 0], [3, 2, 0], [1, 1, 1]])
    assert_matches_cpu(lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self), x, index, src)


def test_scatter_reduce_bfloat16_inplace_and_nan():
    x, src = _values((4, 3), torch.bfloat16), _values((6, 3), torch.bfloat16)
    index = torch.randint(0, 4, (6, 3))
    assert_matches_cpu(lambda x, i, s: x.clone().scatter_reduce_(0, i, s, "sum"), x, index, src, float32_reference=True)
    src = torch.tensor([[float("nan"), 1.0], [2.0, 3.0]])
    assert_matches_cpu(
        lambda x, i, s: x.scatter_reduce(0, i, s, "amax"), torch.zeros(2, 2), _index([[0, 1], [0, 1]]), src
    )


# --- advanced indexing -------------------------------------------------------------------------------

INDEXINGS = {
    "one": lambda x, i, j: x[i],
    "second_dim": lambda x, i, j: x[:, j],
    "two_broadcast": lambda x, i, j: x[i[:, None], j],
    "non_adjacent": lambda x, i, j: x[i, :, j % 2],
    "slice_and_index": lambda x, i, j: x[1:, j, ::2],
    "ellipsis_none": lambda x, i, j: x[..., None, i[:2] % 2],
    "empty": lambda x, i, j: x[i[:0]],
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pattern", INDEXINGS)
def test_index(dtype, pattern):
    x = _values((3, 4, 2), dtype)
    assert_matches_cpu(INDEXINGS[pattern], x, _index([2, -1, 0]), _index([3, 0, -4]))


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_index_int32_and_out(index_dtype):
    x = _values((3, 4), torch.float32)
    index = _index([2, 0, 2], index_dtype)
    assert_matches_cpu(lambda x, i: x[i], x, index)
    assert_matches_cpu(lambda x, i: torch.ops.aten.index.Tensor_out(x, [None, i], out=x.new_empty(0)), x, index)


def test_index_with_cpu_index_tensors():
    """As on CUDA, CPU index tensors index a device tensor (moved to the device, not a fallback)."""
    x = _values((4, 3), torch.float32)
    torch_neuronx.clear_op_tracking()
    got = x.to("neuron")[_index([0, 2]), _index([1, -1])]
    assert torch_neuronx.get_fallback_ops() == {}
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), x[_index([0, 2]), _index([1, -1])])
    y = x.to("neuron")
    y[_index([3, 0])] = torch.ones(3, device="neuron")
    expected = x.clone()
    expected[_index([3, 0])] = 1.0
    torch.testing.assert_close(y.cpu(), expected)


PUTS = {
    "functional": lambda x, i, v: x.index_put((i,), v),
    "accumulate": lambda x, i, v: x.index_put((i,), v, accumulate=True),
    "inplace": lambda x, i, v: x.clone().index_put_((i,), v),
    "inplace_accumulate": lambda x, i, v: x.clone().index_put_((i,), v, accumulate=True),
    "setitem_columns": lambda x, i, v: _setitem(x.clone(), (slice(None), i[:3]), v[0, :3]),
    "setitem_two": lambda x, i, v: _setitem(x.clone(), (i, i), v[:, 0]),
}


def _setitem(x, key, value):
    x[key] = value
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", PUTS)
def test_index_put(dtype, form):
    x, values = _values((5, 4), dtype), _values((4, 4), dtype)
    # Index 3 appears twice (and -2 wraps to it): accumulate sums them, otherwise the last wins.
    assert_matches_cpu(PUTS[form], x, _index([3, 0, 3, -2]), values)


def test_index_put_impl_accumulates_as_index_backward_does():
    x, values = torch.zeros(5, 3), _values((4, 3), torch.float32)
    index = _index([1, 4, 1, 1])
    assert_matches_cpu(lambda x, i, v: torch.ops.aten._index_put_impl_(x.clone(), [i], v, True, True), x, index, values)


MASK_PUTS = {
    "scalar": lambda x, m, v: _setitem(x.clone(), m, 0),
    "values": lambda x, m, v: _setitem(x.clone(), m, v),
    "accumulate": lambda x, m, v: x.index_put((m,), v, accumulate=True),
    "rows": lambda x, m, v: _setitem(x.clone(), m[:, 0], v[:1]),
    "after_slice": lambda x, m, v: _setitem(x.clone(), (slice(None), m[0]), v[:2, None]),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", MASK_PUTS)
def test_index_put_boolean_mask(dtype, form):
    """``x[mask] = v`` keeps its static shape, so it runs on the device: the k-th true element of the
    mask takes the k-th value."""
    mask = torch.tensor([[True, False, True], [False, True, False]])
    assert_matches_cpu(MASK_PUTS[form], _values((2, 3), dtype), mask, _values((3,), dtype))


USER_ERRORS = {
    "values_shape": (lambda x, m: x.index_put((m.nonzero()[:, 0],), x[:, :1].T), RuntimeError, "shape mismatch"),
    "mask_shape": (lambda x, m: torch.ops.aten.index_put(x, [None, m], x[0, 0]), IndexError, "shape of the mask"),
    "mask_count": (lambda x, m: x.index_put((m,), x[0, :2]), RuntimeError, "shape mismatch"),
}


@pytest.mark.parametrize("case", USER_ERRORS)
def test_index_put_shape_errors(case):
    """Shape errors raise PyTorch's exception type (a mask's count is checked on the device); a mask mixed
    with other index tensors, which CPU supports, raises a clear NotImplementedError."""
    fn, error, message = USER_ERRORS[case]
    x, mask = torch.zeros(3, 4), torch.tensor([True, False, True])
    if error is not NotImplementedError:
        with pytest.raises(error, match=message):
            fn(x, mask)
    with pytest.raises(error, match=message):
        fn(x.to("neuron"), mask.to("neuron")).cpu()


def test_boolean_mask_getitem_matches_cpu():
    x, mask = _values((3, 4), torch.float32), torch.tensor([True, False, True])
    assert_matches_cpu(lambda x, m: x[m], x, mask, native=False)


def test_boolean_mask_getitem_is_native():
    x, mask = _values((3, 4), torch.float32), torch.tensor([True, False, True])
    assert_matches_cpu(lambda x, m: x[m], x, mask)


def _mask_index_write(key, accumulate=False):
    def write(x, mask, index, values):
        y = x.clone()
        if accumulate:
            return y.index_put_(key(mask, index), values, accumulate=True)
        y[key(mask, index)] = values
        return y

    return write


MASK_BESIDE_INDEX = {
    "mask_then_index": (_mask_index_write(lambda m, i: (m, i)), (5,)),
    "index_then_mask": (_mask_index_write(lambda m, i: (i[:1], slice(None), m.repeat(2)[:5])), (1,)),
    "mask_index_broadcast_value": (_mask_index_write(lambda m, i: (m, i)), (1,)),
    "accumulate": (_mask_index_write(lambda m, i: (m, i), accumulate=True), (2, 5)),
}


@pytest.mark.parametrize("case", MASK_BESIDE_INDEX)
def test_boolean_mask_beside_an_index_tensor_in_index_put(case):
    # x[mask, idx] = v: the mask becomes its nonzero() coordinates, as in x[mask, idx] (it raised
    # NotImplementedError: a mask was supported only as the one index tensor).
    write, value_shape = MASK_BESIDE_INDEX[case]
    x, mask = _values((3, 4, 5), torch.float32), torch.tensor([True, False, True])
    index = torch.tensor([0, 2])
    assert_matches_cpu(write, x, mask, index, _values(value_shape, torch.float32), native=False)


# --- index_add, index_copy, index_fill ---------------------------------------------------------------


INDEX_ADDS = {
    "functional": lambda x, i, s: torch.index_add(x, 0, i, s),
    "inplace_alpha": lambda x, i, s: x.clone().index_add_(0, i, s, alpha=2),
    "transposed": lambda x, i, s: torch.index_add(x.T, 1, i, s.T),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", INDEX_ADDS)
def test_index_add(dtype, form):
    x, source = _values((5, 3), dtype), _values((4, 5), dtype)[:, :3]
    assert_matches_cpu(INDEX_ADDS[form], x, _index([4, 0, 4, 2]), source, atol=0, rtol=0)  # 4 twice


SIXTEEN_BIT_ACCUMULATIONS = {
    # the CPU's own loop rounds each addition (and source * alpha, rounded to the dtype first)
    "index_add_1d": lambda x, i, s: x[:, 0].index_add(0, i, s[:, 0]),
    "index_add_1d_alpha": lambda x, i, s: x[:, 0].index_add(0, i, s[:, 0], alpha=0.3),
    "index_add_int32_index": lambda x, i, s: x.index_add(0, i.int(), s),
    "index_add_alpha": lambda x, i, s: x.index_add(0, i, s, alpha=2.5),
    "index_add_middle_dim": lambda x, i, s: x[None].index_add(1, i, s[None]),
    # handed to scatter_add_, which accumulates in float and rounds once
    "index_add_first_dim": lambda x, i, s: x.index_add(0, i, s),
    "index_add_last_dim": lambda x, i, s: x.T.index_add(1, i, s.T),
    "scatter_add": lambda x, i, s: x.scatter_add(0, i[:, None].expand(s.shape).contiguous(), s),
    "index_put_accumulate": lambda x, i, s: x.index_put((i,), s, accumulate=True),
    "embedding_backward": lambda x, i, s: torch.ops.aten.embedding_dense_backward(s, i, x.shape[0], 2, False),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", SIXTEEN_BIT_ACCUMULATIONS)
def test_16_bit_accumulation_of_duplicate_indices_rounds_as_the_cpu(case, dtype):
    # 300 additions into 7 rows: index_add accumulated in float32 and rounded once, where the CPU's
    # loop rounds each addition (6 of 7 elements differed; test_put's float16 put/index_add pair).
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(7, 4, generator=generator).to(dtype)
    source = torch.randn(300, 4, generator=generator).to(dtype)
    index = torch.randint(0, 7, (300,), generator=generator)
    assert_matches_cpu(SIXTEEN_BIT_ACCUMULATIONS[case], x, index, source, atol=0, rtol=0)


def test_index_add_of_integers_with_a_float_alpha_as_cpu():
    # CPU and CUDA convert alpha to the integer dtype (1.5 adds once); PyTorch's meta refused it.
    x, source = torch.arange(6).reshape(2, 3), torch.tensor([[5, 6, 7]])
    assert_matches_cpu(lambda x, i, s: x.index_add(0, i, s, alpha=1.5), x, _index([1]), source)
    assert_matches_cpu(lambda x, i, s: x.t().index_add(1, i, s.t(), alpha=2), x, _index([0]), source)
    assert_matches_cpu(lambda x, i, s: x.clone().index_add_(0, i, s, alpha=2.7), x, _index([0]), source)


INDEX_ADDS_OUT_OF_RANGE = {
    # self of 2+ dims, first or last dim, int64 index, alpha 1: the CPU's scatter_add_ path raises
    # RuntimeError("index 5 is out of bounds for dimension 1 with size 3"); neuron raised IndexError.
    "2d_dim1": ((3, 3), 1, [0, 5], {}),
    "2d_dim0": ((3, 3), 0, [5], {}),
    "2d_dim-1_negative": ((3, 3), -1, [-1], {}),
    "3d_dim2": ((2, 3, 4), 2, [4], {}),
    "2d_dim1_alpha_1.0": ((3, 3), 1, [5], {"alpha": 1.0}),
    "2d_dim1_inplace": ((3, 3), 1, [5], {"inplace": True}),
    # Otherwise its own loop raises IndexError("index out of range in self").
    "1d": ((3,), 0, [5], {}),
    "0d": ((), 0, [1], {}),
    "3d_dim1": ((2, 3, 4), 1, [3], {}),
    "2d_dim1_int32_index": ((3, 3), 1, [5], {"index_dtype": torch.int32}),
    "2d_dim1_alpha_2": ((3, 3), 1, [5], {"alpha": 2}),
    "2d_dim0_complex32": ((3, 3), 0, [5], {"dtype": torch.complex32}),
}


@pytest.mark.parametrize("case", INDEX_ADDS_OUT_OF_RANGE)
def test_index_add_out_of_range_raises_the_cpus_error(case):
    shape, dim, indices, options = INDEX_ADDS_OUT_OF_RANGE[case]
    dtype, inplace = options.get("dtype", torch.float32), options.get("inplace", False)
    x = torch.zeros(shape, dtype=dtype)
    index = torch.tensor(indices, dtype=options.get("index_dtype", torch.int64))
    source_shape = list(shape)
    if shape:
        source_shape[dim] = len(indices)
    source = torch.ones(source_shape, dtype=dtype)
    alpha = {"alpha": options["alpha"]} if "alpha" in options else {}

    def run(x, index, source):
        return (x.index_add_ if inplace else x.index_add)(dim, index, source, **alpha)

    with pytest.raises((IndexError, RuntimeError)) as cpu_error:
        run(x, index, source)
    with pytest.raises(cpu_error.type, match=re.escape(str(cpu_error.value))):
        run(*to_neuron((x, index, source))).cpu()


def test_index_add_to_an_empty_tensor_checks_no_index_as_cpu():
    # The CPU's kernel returns before checking when a self of 2+ dims has no elements.
    assert_matches_cpu(lambda x, i, s: x.index_add(1, i, s), torch.zeros(0, 3), _index([5]), torch.ones(0, 1))
    torch.neuron.synchronize()  # no fault pending


@pytest.mark.parametrize(
    ("dtype", "alpha", "cpp_type"),
    [(torch.int64, 1e20, "int64_t"), (torch.uint8, -1.5, "uint8_t"), (torch.float32, 1j, "float")],
)
def test_index_add_alpha_that_does_not_fit_raises_as_cpu(dtype, alpha, cpp_type):
    # c10's checked conversion of alpha to the dtype; neuron wrapped 1e20 and dropped 1j.
    x, index = torch.zeros(3, dtype=dtype, device="neuron"), torch.tensor([0, 1], device="neuron")
    with pytest.raises(RuntimeError, match=f"^value cannot be converted to type {cpp_type} without overflow$"):
        x.index_add(0, index, torch.ones(2, dtype=dtype, device="neuron"), alpha=alpha)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inplace", [False, True])
def test_index_copy(dtype, inplace):
    x, source = _values((3, 5), dtype), _values((3, 3), dtype)
    index = _index([4, 1, 4])  # 4 twice: the last copy wins, as on CPU
    if inplace:
        assert_matches_cpu(lambda x, i, s: x.clone().index_copy_(-1, i, s), x, index, source)
    else:
        assert_matches_cpu(lambda x, i, s: torch.index_copy(x, 1, i, s), x, index, source)


def test_index_copy_rejects_int32_index_as_cpu_does():
    x, source = torch.zeros(3, 2, device="neuron"), torch.ones(2, 2, device="neuron")
    with pytest.raises(RuntimeError, match="Expected a long tensor for index"):
        x.index_copy_(0, torch.tensor([0, 1], dtype=torch.int32, device="neuron"), source).cpu()


@pytest.mark.parametrize("dtype", [*DTYPES, torch.bool])
@pytest.mark.parametrize("form", ["scalar", "tensor", "inplace"])
def test_index_fill(dtype, form):
    x = _values((3, 4), dtype)
    index = _index([0, -1])  # index_fill wraps negative indices, as on CPU
    if form == "scalar":
        assert_matches_cpu(lambda x, i: x.index_fill(1, i, True if dtype == torch.bool else -2), x, index)
    elif form == "tensor":
        assert_matches_cpu(lambda x, i, v: x.index_fill(0, i, v), x, index[:1], _values((), dtype))
    else:
        assert_matches_cpu(lambda x, i, v: x.clone().index_fill_(1, i, v), x, index, _values((), dtype))


# --- masks --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [*DTYPES, torch.bool])
@pytest.mark.parametrize("form", ["scalar", "tensor", "inplace", "out"])
def test_masked_fill(dtype, form):
    x, mask = _values((3, 4), dtype), torch.tensor([True, False, False, True])
    value = _values((), dtype)
    forms = {
        "scalar": lambda x, m, v: x.masked_fill(m, 1),
        "tensor": lambda x, m, v: x.masked_fill(m[None], v),
        "inplace": lambda x, m, v: x.clone().masked_fill_(m, v),
        "out": lambda x, m, v: torch.ops.aten.masked_fill.Scalar_out(x, m, 0, out=x.new_empty(x.shape)),
    }
    assert_matches_cpu(forms[form], x, mask, value)


def test_masked_fill_keeps_large_integers_exact():
    """The value converts to self's dtype: int64 elements never pass through a float dtype."""
    x = torch.tensor([2**40 + 1, 2**53 + 1, -(2**62) - 3])
    mask = torch.tensor([False, False, True])
    assert_matches_cpu(lambda x, m, v: x.masked_fill(m, v), x, mask, torch.tensor(2.5))
    assert_matches_cpu(lambda x, m: x.masked_fill(m, 2.5), x, mask)


def test_masked_fill_with_cpu_scalar_value():
    x = torch.zeros(3)
    got = x.to("neuron").masked_fill(torch.tensor([True, False, True], device="neuron"), torch.tensor(2.0))
    torch.testing.assert_close(got.cpu(), torch.tensor([2.0, 0.0, 2.0]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inplace", [False, True])
def test_masked_scatter(dtype, inplace):
    x, source = _values((3, 4), dtype), _values((2, 7), dtype)
    mask = torch.tensor([[True, False, True, True], [False, False, False, False], [True, True, False, True]])
    if inplace:
        assert_matches_cpu(lambda x, m, s: x.clone().masked_scatter_(m, s), x, mask, source)
    else:
        assert_matches_cpu(lambda x, m, s: x.masked_scatter(m[0], s), x, mask, source)


# --- embedding, take ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_embedding(dtype, index_dtype):
    weight = _values((6, 3), dtype)
    assert_matches_cpu(torch.nn.functional.embedding, _index([[5, 0, 5], [1, 2, 0]], index_dtype), weight)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("padding_idx", "scale_grad_by_freq"), [(-1, False), (0, False), (5, True)])
def test_embedding_dense_backward(dtype, padding_idx, scale_grad_by_freq):
    grad, indices = _values((2, 3, 4), dtype), _index([[5, 0, 5], [1, 5, 0]])
    assert_matches_cpu(
        lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 6, padding_idx, scale_grad_by_freq),
        grad,
        indices,
        float32_reference=True,
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_take(dtype):
    x = _values((3, 4), dtype)
    assert_matches_cpu(lambda x, i: torch.take(x, i), x, _index([[0, 11], [-1, 5]]))
    assert_matches_cpu(lambda x, i: torch.take(x, i, out=x.new_empty(0)), x, _index([3, -12]))


def test_take_from_an_empty_tensor_has_the_index_shape():
    empty, index = torch.empty(0, 1, 2, 0), torch.empty(0, 1, 2, 0, dtype=torch.long)
    assert_matches_cpu(torch.take, empty, index)


# --- autograd -------------------------------------------------------------------------------------------

GRADIENTS = {
    "gather": lambda x, i: torch.gather(x, 1, i[:4].reshape(2, 2) % 3),
    "index_select": lambda x, i: torch.index_select(x, 0, i),
    "index": lambda x, i: x[i, 1:],
    "index_two": lambda x, i: x[i, i % 3],
    "embedding": lambda x, i: torch.nn.functional.embedding(i, x, padding_idx=3),
    "mask": lambda x, i: x[:, torch.tensor([True, False, True], device=x.device)],
}


@pytest.mark.parametrize("op", GRADIENTS)
def test_gradients_match_cpu(op):
    x = torch.randn(4, 3, requires_grad=True)
    index = _index([0, 3, 1, 3, 3])
    grads = []
    for device in ["cpu", "neuron"]:
        leaf = x.detach().to(device).requires_grad_()
        out = GRADIENTS[op](leaf, index.to(device))
        weights = torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape).to(device)
        (out * weights).sum().backward()
        grads.append(leaf.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])


# --- device-side index checks -------------------------------------------------------------------------

OUT_OF_RANGE = {
    "index_select": (lambda x, i: torch.index_select(x, 0, i), IndexError, "index 7 is out of bounds for dimension 0"),
    "index_select_negative": (lambda x, i: torch.index_select(x, 0, -i), IndexError, "index -7 is out of"),
    "gather": (lambda x, i: torch.gather(x, 1, i[:, None]), RuntimeError, "index 7 is out of bounds for dimension 1"),
    "scatter": (lambda x, i: x.scatter(0, i[:, None], 1.0), RuntimeError, "index 7 is out of bounds for dimension 0"),
    "scatter_add": (lambda x, i: x.scatter_add(1, -i[:, None], x[:2, :1]), RuntimeError, "index -7 is out of"),
    "index": (lambda x, i: x[:, i], IndexError, "index 7 is out of bounds for dimension 1 with size 5"),
    "index_negative": (lambda x, i: x[-i], IndexError, "index -7 is out of bounds for dimension 0 with size 5"),
    "index_put": (lambda x, i: x.index_put((i,), x[0, 0]), IndexError, "index 7 is out of bounds for dimension 0"),
    "index_add": (lambda x, i: x.index_add(1, i, x[:, :2]), RuntimeError, "index 7 is out of bounds for dimension 1"),
    "index_add_alpha": (lambda x, i: x.index_add(1, i, x[:, :2], alpha=2), IndexError, "index out of range in self"),
    "index_copy": (lambda x, i: x.index_copy(0, i, x[:2]), IndexError, "index_copy_\\(\\): index 7 is out of"),
    "index_fill": (lambda x, i: x.index_fill(0, i, 0.0), IndexError, "index 7 is out of bounds for dimension 0"),
    "index_reduce": (lambda x, i: x.index_reduce(0, i, x[:2], "amax"), IndexError, "index out of range in self"),
    "index_reduce_excluding_self": (  # it fills the indexed slices first, in index_fill_'s words
        lambda x, i: x.index_reduce(0, i, x[:2], "amax", include_self=False),
        IndexError,
        "neuron:0: index 7 is out of bounds for dimension 0 with size 5\\n",
    ),
    "embedding": (lambda x, i: torch.nn.functional.embedding(i, x), IndexError, "index out of range in self"),
    "take": (lambda x, i: torch.take(x, i * 4), IndexError, "tried to access index 28 on a tensor of 25 elements"),
    "masked_scatter": (lambda x, i: x.masked_scatter(x > -1, x[:2]), RuntimeError, "Number of elements of source"),
}


@pytest.mark.parametrize("case", OUT_OF_RANGE)
def test_out_of_range_index_raises_at_synchronization(case):
    fn, error, message = OUT_OF_RANGE[case]
    x = torch.arange(25.0).reshape(5, 5).to("neuron")
    with pytest.raises(error, match=message):
        fn(x, torch.tensor([0, 7], device="neuron")).cpu()
    torch.testing.assert_close((x + 1).cpu(), torch.arange(1.0, 26.0).reshape(5, 5))


@pytest.mark.skipif(_config.launch_blocking(), reason="NEURON_LAUNCH_BLOCKING=1 raises faults at the op")
def test_out_of_range_fault_waits_for_synchronization():
    """The fault is not raised when the op is launched (it runs asynchronously) but at the next host read."""
    x = torch.arange(5.0, device="neuron")
    result = torch.index_select(x, 0, torch.tensor([0, 7], device="neuron"))
    later = to_neuron(torch.ones(2)) * 3
    with pytest.raises(IndexError, match="index 7 is out of bounds"):
        result.cpu()
    torch.testing.assert_close(later.cpu(), torch.full((2,), 3.0))


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16, torch.bfloat16])
def test_index_reduce_with_duplicate_indices_matches_cpu(reduce, include_self, dtype):
    # 16-bit floats: the CPU's kernel rounds each product or sum in index order, and so does neuron,
    # to the bit (it was 2.6% off, as float32 rounded once).
    x = make_tensor((4, 3), dtype=dtype, device="cpu", low=-5, high=5)
    source = make_tensor((9, 3), dtype=dtype, device="cpu", low=-5, high=5)
    index = torch.tensor([0, 2, 0, 3, 2, 0, 0, 2, 0])
    exact = 0 if dtype in (torch.float16, torch.bfloat16) else None
    assert_matches_cpu(
        lambda x, i, s: x.index_reduce(0, i, s, reduce, include_self=include_self),
        x,
        index,
        source,
        atol=exact,
        rtol=exact,
    )


@pytest.mark.parametrize("accumulate", [False, True])
def test_put_with_negative_indices_matches_cpu(accumulate):
    x = make_tensor((3, 4), dtype=torch.float32, device="cpu")
    index = torch.tensor([[0, -1], [5, 7]])
    source = make_tensor((2, 2), dtype=torch.float32, device="cpu")
    assert_matches_cpu(lambda x, i, s: torch.put(x, i, s, accumulate), x, index, source)


@pytest.mark.parametrize("shape", [(3, 4), (5, 0, 5), ()])
@pytest.mark.parametrize("size", [0, 2, 20])
def test_nonzero_static_pads_with_the_fill_value_as_cpu(shape, size):
    x = make_tensor(shape, dtype=torch.float32, device="cpu", low=-1, high=1) * (torch.rand(shape) > 0.5)
    assert_matches_cpu(lambda x: torch.nonzero_static(x, size=size, fill_value=-7), x)


def test_boolean_accumulation_is_logical_or_as_on_cpu():
    x = torch.tensor([False, True, False, False])
    index, source = torch.tensor([0, 0, 2]), torch.tensor([True, False, False])

    def run(x, index, source):
        return (
            x.index_add(0, index, source),
            x.scatter_add(0, index, source),
            torch.put(x, index, source, accumulate=True),
            x.index_put((index,), source, accumulate=True),
            x.scatter(0, index, source, reduce="add"),
            x.scatter(0, index, source, reduce="multiply"),
        )

    assert_matches_cpu(run, x, index, source)


def test_gather_with_an_empty_index_of_another_rank_is_empty_as_on_cpu():
    assert_matches_cpu(lambda x, i: torch.gather(x, 0, i), torch.randn(5), torch.zeros(2, 0, dtype=torch.int64))


@pytest.mark.parametrize(
    "write",
    [
        lambda x, i: x.scatter(0, i, 1.0),
        lambda x, i: x.scatter_add(0, i, torch.ones(i.shape, device=x.device)),
        lambda x, i: x.scatter_reduce(0, i, torch.ones(i.shape, device=x.device), "amax"),
    ],
    ids=["scatter", "scatter_add", "scatter_reduce"],
)
def test_scatter_of_an_empty_index_of_another_rank_writes_nothing(write):
    """gather's gradient of an empty 2-d index into a 1-d input (an OpInfo sample) is such a call."""
    x, index = torch.arange(5.0), torch.zeros(2, 0, dtype=torch.long)
    torch.testing.assert_close(write(x.neuron(), index.neuron()).cpu(), write(x, index))


def test_gather_gradient_of_an_empty_index():
    x = torch.arange(5.0, requires_grad=True)
    index = torch.zeros(2, 0, dtype=torch.long)
    on_neuron = x.detach().neuron().requires_grad_()
    torch.gather(on_neuron, 0, index.neuron()).sum().backward()
    torch.gather(x, 0, index).sum().backward()
    torch.testing.assert_close(on_neuron.grad.cpu(), x.grad)


@pytest.mark.parametrize("index", [lambda m: (m,), lambda m: (m, 0)], ids=["mask", "mask_and_int"])
def test_uint8_mask_warns_deprecation_as_cpu(index):
    # ATen warns once per uint8 mask (IndexingUtils.h), on CPU and CUDA alike; PyTorch's
    # test_indexing counts the warnings.
    x = torch.arange(6.0).reshape(3, 2)
    mask = torch.tensor([1, 0, 1], dtype=torch.uint8)
    results = {}
    for device in ("cpu", "neuron"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results[device] = x.to(device)[index(mask.to(device))].cpu()
        messages = [str(w.message) for w in caught if "uint8" in str(w.message)]
        assert len(messages) == 1 and messages[0].startswith("indexing with dtype torch.uint8 is now deprecated")
    torch.testing.assert_close(results["neuron"], results["cpu"])


def _assign_columns(x):
    x[:, [0, 1]] = 1.0


@pytest.mark.parametrize("call", [lambda x: x[:, [0, 1]], _assign_columns], ids=["index", "index_put"])
def test_index_into_a_size_0_dimension_raises_index_error_as_cpu(call):
    for device in ("cpu", "neuron"):
        with pytest.raises(IndexError, match="^index is out of bounds for dimension with size 0"):
            call(torch.empty(10, 0, device=device))


def test_uint8_mask_assignment_warns_deprecation_as_cpu():
    mask = torch.tensor([1, 0, 1], dtype=torch.uint8)
    results = {}
    for device in ("cpu", "neuron"):
        x = torch.zeros(3, 2, device=device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x[mask.to(device)] = torch.ones(2, 2, device=device)
            x.index_put_((mask.to(device),), torch.ones(2, 2, device=device), accumulate=True)
        assert sum("uint8 is now deprecated" in str(w.message) for w in caught) == 2
        results[device] = x.cpu()
    torch.testing.assert_close(results["neuron"], results["cpu"])


INDEX_READ_ERRORS = {
    # ATen raises these as IndexError (TORCH_CHECK_INDEX); PyTorch's meta kernel raises RuntimeError.
    "shapes": (lambda x: x[[0, 1], [0, 1, 2]], "shape mismatch: indexing tensors could not be broadcast together"),
    "false_mask": (lambda x: x[False, [0, 1], ...], r"with shapes \[0\], \[2\]"),
    "float_index": (lambda x: x[torch.tensor([], device=x.device)], "tensors used as indices must be long, int"),
}


@pytest.mark.parametrize("case", INDEX_READ_ERRORS)
def test_index_read_errors_raise_index_error_as_cpu(case):
    fn, message = INDEX_READ_ERRORS[case]
    for device in ("cpu", "neuron"):
        with pytest.raises(IndexError, match=message):
            fn(torch.zeros(5, 5, device=device))


@pytest.mark.parametrize(
    ("source_dtype", "reduce", "message"),
    [
        (torch.int32, "amax", r"index_reduce_\(\): self \(Float\) and source \(Int\) must have the same scalar type"),
        (
            torch.float32,
            "sum",
            r"index_reduce\(\): Expected reduce to be one of prod, mean, amax or amin but got sum\.",
        ),
    ],
)
def test_index_reduce_checks_dtype_and_reduction_as_aten(source_dtype, reduce, message):
    """ATen's index_reduce meta checks both on CPU and CUDA; PyTorch's meta kernel neither."""
    for device in ("cpu", "neuron"):
        self = torch.zeros(3, device=device)
        index, source = torch.tensor([0, 1], device=device), torch.ones(2, dtype=source_dtype, device=device)
        with pytest.raises(RuntimeError, match=message):
            self.index_reduce_(0, index, source, reduce)


def _index_call(name, self_shape, index, source_shape, source_dtype=torch.float32):
    """``self.<name>_(0, index, source)`` on a device, with ``self`` zeros and ``source`` ones."""
    extra = ("amax",) if name == "index_reduce" else ()

    def call(device):
        self = torch.zeros(self_shape, device=device)
        source = torch.ones(source_shape, dtype=source_dtype, device=device)
        return getattr(self, name + "_")(0, torch.tensor(index, device=device), source, *extra)

    return call


#: Calls ATen's index_func_meta_impl and index_copy meta refuse (PyTorch's meta kernels let some
#: through: index_reduce computed a 2-d index and a 0-dim self) or word otherwise.
INDEX_FUNC_ERRORS = {
    **{
        f"{name}_{case}": _index_call(name, *arguments)
        for name in ("index_add", "index_reduce", "index_copy")
        for case, arguments in {
            "2d_index": ((3,), [[0, 1]], (2,)),
            "0d_self_1d_source": ((), [0], (1,)),
            "1d_self_0d_source": ((3,), [0], ()),
            "0d_source_two_indices": ((3,), [0, 1], ()),
            "count": ((3,), [0, 1], (1,)),
            "slice_shape": ((3, 2), [0], (1, 3)),
            "rank": ((3, 2), [0], (1,)),
            "float_index_2d": ((3,), [[0.0]], (1,)),
        }.items()
    },
    # PyTorch's meta kernel flattens a 2-d index: neuron computed.
    "index_select_2d_index": lambda d: torch.ones(3, 4, device=d).index_select(0, torch.tensor([[0, 1]], device=d)),
    "index_fill_2d_index": lambda d: torch.zeros(3, device=d).index_fill_(0, torch.tensor([[0]], device=d), 1.0),
    "index_fill_1d_value": lambda d: torch.zeros(3, device=d).index_fill_(
        0, torch.tensor([0], device=d), torch.ones(2, device=d)
    ),
}


@pytest.mark.parametrize("case", INDEX_FUNC_ERRORS)
def test_index_func_errors_as_aten(case):
    """Neuron raises the CPU's exception and message, or computes the CPU's value where it computes
    (index_copy takes a 0-dim self with a 1-element source)."""
    call = INDEX_FUNC_ERRORS[case]
    try:
        expected = call("cpu")
    except Exception as error:  # noqa: BLE001 - the CPU's refusal is the expectation
        with pytest.raises(type(error)) as on_neuron:
            call("neuron").cpu()
        assert str(on_neuron.value) == str(error)
    else:
        torch.testing.assert_close(call("neuron").cpu(), expected)


@pytest.mark.parametrize(
    "case", ["index_reduce_2d_index", "index_add_0d_self_1d_source", "index_reduce_0d_self_1d_source"]
)
def test_index_func_errors_under_compile(case):
    """Compiled graphs check with the same rule: Dynamo's fake tensors run PyTorch's meta kernels,
    which let these calls through."""
    call = INDEX_FUNC_ERRORS[case]
    with pytest.raises(Exception) as on_cpu:
        call("cpu")
    torch._dynamo.reset()
    with pytest.raises(type(on_cpu.value), match=re.escape(str(on_cpu.value))):
        torch.compile(call, backend="neuron")("neuron")


def _grid(device):
    return torch.arange(6.0, device=device).reshape(2, 3)


def _mask(device):
    return torch.tensor([[True, False, True], [False, True, False]], device=device)


#: index_put_ with one mask and a one-element CPU value, which ATen fills as masked_fill_
#: (canDispatchToMaskedFill, CPU and CUDA alike): the value casts to self's dtype.
MASKED_FILL_PUTS = {
    "half-value": lambda d: _grid(d).index_put_((_mask(d),), torch.tensor(1.0, dtype=torch.half)),
    "float-into-long": lambda d: (lambda x: (x.__setitem__(x > 1, torch.tensor(7.9)), x)[1])(torch.arange(6, device=d)),
    "row-mask": lambda d: _grid(d).index_put_((torch.tensor([False, True], device=d),), torch.tensor(9.0)),
    "functional": lambda d: torch.index_put(_grid(d), (_mask(d),), torch.tensor(5)),
    "one-element-1d-value": lambda d: _grid(d).index_put_((_mask(d),), torch.tensor([2.0])),
    "bool-into-float": lambda d: _grid(d).index_put_((_mask(d),), torch.tensor(True)),
    # A Python number reaches neuron as a 0-dim device tensor (CUDA's indexing makes it a CPU one):
    # the mask is self here, which index_put's overlap check refused.
    "bool-mask-of-itself": lambda d: (lambda x: (x.__setitem__(x, False), x)[1])(_mask(d).clone()),
    "python-number": lambda d: (lambda x: (x.__setitem__(x > 2, 7), x)[1])(_grid(d)),
}


@pytest.mark.parametrize("case", MASKED_FILL_PUTS)
def test_index_put_of_a_cpu_scalar_through_a_mask_fills_as_aten(case):
    """neuron refused these with "Index put requires the source and destination dtypes match"."""
    torch.testing.assert_close(MASKED_FILL_PUTS[case]("neuron").cpu(), MASKED_FILL_PUTS[case]("cpu"))


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (
            lambda d: _grid(d).index_put_((_mask(d).to(torch.uint8),), torch.tensor(1.0)),
            RuntimeError,
            "masked_fill_ only supports boolean masks, but got mask with dtype unsigned char",
        ),
        (
            lambda d: _grid(d).index_put_((torch.tensor([False, True, True], device=d),), torch.tensor(9.0)),
            IndexError,
            r"The shape of the mask \[3\] at index 0 does not match the shape of the indexed tensor \[2, 3\] at index",
        ),
    ],
    ids=["uint8-mask", "mask-shape"],
)
def test_index_put_of_a_cpu_scalar_through_a_mask_raises_as_aten(make, error, message):
    for device in ("cpu", "neuron"):
        with pytest.raises(error, match=message):
            make(device)


def test_two_ops_faulting_with_the_same_words_each_raise():
    # The second fault was consumed as a repeat of the first (same message), and v's values read.
    a, b = torch.arange(5.0, device="neuron"), torch.arange(10.0, 15.0, device="neuron")
    u = a.index_select(0, torch.tensor([7], device="neuron"))
    v = b.index_select(0, torch.tensor([9], device="neuron"))
    with pytest.raises(IndexError, match="index 7 is out of bounds"):
        u.cpu()
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        v.cpu()


@pytest.mark.parametrize("out", [None, "empty", "wrong shape", "right shape"])
def test_nonzero_is_column_major_as_cpu_and_cuda_write_it(out):
    # CPU and CUDA fill a (dim, count) tensor and return its transpose; an out= of the result's
    # shape that is not column-major keeps its layout (nonzero_out_cuda). neuron's was row-major.
    mask = torch.tensor([[True, False, True], [False, True, True]])
    count = int(mask.sum())
    outs = {"empty": (0,), "wrong shape": (2, 7), "right shape": (count, 2)}

    def nonzero(device):
        if out is None:
            return torch.nonzero(mask.to(device))
        return torch.nonzero(mask.to(device), out=torch.zeros(outs[out], dtype=torch.int64, device=device))

    expected, actual = nonzero("cpu"), nonzero("neuron")
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual.cpu(), expected)


def test_cpu_tensor_indexed_by_neuron_indices_raises_atens_error():
    # ATen's index meta: indices on the CPU or on the indexed tensor's device (as with CUDA indices).
    x = torch.randn(3, 4, 4)
    indices = torch.tensor([0, 2, 1], device="neuron")
    message = r"^indices should be either on cpu or on the same device as the indexed tensor \(cpu\)$"
    for index in (lambda: x[indices], lambda: x[:, indices, None], lambda: x[indices.cpu(), indices]):
        with pytest.raises(RuntimeError, match=message):
            index()
    torch.testing.assert_close(x.to("neuron")[indices.cpu()].cpu(), x[indices.cpu()])
