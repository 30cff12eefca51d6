"""Tensors on neuron: factories, copies across host and cores, views, in-place writes through views."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import make_tensor

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool]


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_is_bit_exact(dtype):
    x = make_tensor((3, 5), dtype=dtype, device="cpu")
    torch.testing.assert_close(x.to("neuron").cpu(), x, rtol=0, atol=0)


def test_host_to_device_copy_does_not_alias_host_memory():
    x = torch.zeros(4)
    y = x.to("neuron")
    x.add_(1)
    torch.testing.assert_close(y.cpu(), torch.zeros(4))


@pytest.mark.parametrize(
    ("factory", "args", "kwargs"),
    [
        (torch.zeros, ((2, 3),), {}),
        (torch.ones, ((4,),), {"dtype": torch.int32}),
        (torch.full, ((2, 2), 7.5), {}),
        (torch.arange, (10,), {}),
        (torch.arange, (1.0, 2.0, 0.25), {}),
        (torch.linspace, (0.0, 1.0, 7), {}),
        (torch.eye, (3,), {}),
        (torch.eye, (2, 4), {"dtype": torch.int64}),
        (torch.tensor, ([[1.5, 2.0], [3.0, 4.0]],), {}),
    ],
)
def test_factories_match_cpu(factory, args, kwargs):
    torch.testing.assert_close(factory(*args, device="neuron", **kwargs).cpu(), factory(*args, **kwargs))


@pytest.mark.parametrize("non_blocking", [False, True])
def test_copies_between_cores(two_cores, non_blocking):
    x = torch.randn(5, 6)
    on_zero = x.to("neuron:0")
    on_one = on_zero.to("neuron:1", non_blocking=non_blocking)
    assert on_one.device == torch.device("neuron", 1)
    torch.testing.assert_close(on_one.cpu(), x)
    back = on_one.t().to("neuron:0")
    torch.testing.assert_close(back.cpu(), x.t())


@pytest.mark.parametrize("non_blocking", [False, True])
def test_pinned_memory_and_non_blocking_copies(non_blocking):
    # test_torch's test_pin_memory, as it runs where CUDA is available.
    source = torch.randn(16)
    pinned = source.pin_memory()
    assert pinned.is_pinned() and not source.is_pinned()
    assert pinned.data_ptr() != source.data_ptr() and torch.equal(pinned, source)
    assert pinned.pin_memory() is pinned
    on_device = pinned.to("neuron", non_blocking=non_blocking)
    host = on_device.to("cpu", non_blocking=non_blocking)
    torch.neuron.synchronize()
    torch.testing.assert_close(host, pinned)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.empty(2, device="neuron", pin_memory=True),
        lambda: torch.zeros(2, device="neuron", pin_memory=True),
        lambda: torch.empty_strided((2,), (1,), device="neuron", pin_memory=True),
    ],
    ids=["empty", "zeros", "empty_strided"],
)
def test_pinning_a_device_tensor_raises_as_cuda(make):
    with pytest.raises(RuntimeError, match="^Only dense CPU tensors can be pinned$"):
        make()


def test_host_allocator_is_pytorchs_for_the_device():
    # torch.accelerator's host-memory calls reach at::getHostAllocator(PrivateUse1), which had no
    # allocator: a segmentation fault once the device had started (helper-62).
    torch.ones(1, device="neuron")
    pinned = torch.ones(1000).pin_memory()
    torch.accelerator.empty_host_cache()  # nothing cached: freed blocks go back at once
    assert pinned.is_pinned() and torch.equal(pinned, torch.ones(1000))


def test_copy_with_dtype_conversion_and_broadcast():
    source = torch.arange(4, dtype=torch.int64)
    target = torch.empty(3, 4, dtype=torch.float32, device="neuron")
    target.copy_(source)
    torch.testing.assert_close(target.cpu(), source.float().expand(3, 4))
    torch.testing.assert_close(target.to(torch.bfloat16).cpu(), source.float().expand(3, 4).to(torch.bfloat16))


@pytest.mark.parametrize("value", [float("nan"), float("-inf"), 3, True, 2.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
def test_copy_of_a_python_number_fills_as_on_cpu(value, dtype):
    # x.copy_(nan): PyTorch wraps the number in a 0-d CPU tensor, which reaches the kernel as the number.
    expected = torch.zeros(2, 3, dtype=dtype).copy_(value)
    actual = torch.zeros(2, 3, dtype=dtype, device="neuron").copy_(value)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


@pytest.mark.parametrize(
    "make_pair",
    [
        pytest.param(lambda x: (x, torch.empty_like(x)), id="whole-storage"),
        pytest.param(lambda x: (x.t(), torch.empty(6, 4, device=x.device)), id="transposed-source"),
        pytest.param(lambda x: (x[1:], torch.empty(3, 6, device=x.device)), id="source-view"),
        pytest.param(lambda x: (x, torch.empty(8, 6, device=x.device)[::2]), id="strided-destination"),
        pytest.param(lambda x: (x, torch.empty(4, 6, dtype=torch.bfloat16, device=x.device)), id="cast"),
    ],
)
def test_device_copies_stay_independent_of_their_source(make_pair):
    # A whole-buffer copy binds the source's buffer to the destination's storage (runtime/buffers.py
    # share_whole); writes to either side afterwards must not reach the other.
    x_cpu = torch.arange(24.0).reshape(4, 6)
    source, destination = make_pair(x_cpu.to("neuron"))
    expected_source, expected_destination = make_pair(x_cpu.clone())
    destination.copy_(source)
    expected_destination.copy_(expected_source)
    torch.testing.assert_close(destination.cpu(), expected_destination)
    source.add_(100)
    expected_source.add_(100)
    torch.testing.assert_close(destination.cpu(), expected_destination)
    destination.mul_(-1)
    expected_destination.mul_(-1)
    torch.testing.assert_close(source.cpu(), expected_source)
    torch.testing.assert_close(destination.cpu(), expected_destination)


def test_lazy_clone_is_a_clone_whose_writes_stay_its_own():
    # The CPU's and CUDA's _lazy_clone shares a copy-on-write storage; neuron's is a clone.
    values = torch.tensor([[0, 1], [2, 3]])
    source = values.to("neuron")
    clone = source._lazy_clone()
    source.view(4).add_(1)
    torch.testing.assert_close(clone.cpu(), values)
    clone.add_(10)
    torch.testing.assert_close((source.cpu(), clone.cpu()), (values + 1, values + 10))


def test_device_copy_reaches_every_view_of_the_destination():
    base = torch.zeros(2, 12, device="neuron")
    view = base.view(4, 6)[2:]
    base.view(4, 6).copy_(torch.arange(24.0).reshape(4, 6).to("neuron"))
    torch.testing.assert_close(view.cpu(), torch.arange(12.0, 24.0).reshape(2, 6))
    torch.testing.assert_close(base.cpu(), torch.arange(24.0).reshape(2, 12))


def test_views_read_their_storage():
    x = torch.arange(24.0).reshape(4, 6)
    y = x.to("neuron")
    for view in (
        lambda t: t[1:3],
        lambda t: t[:, ::2],
        lambda t: t.t(),
        lambda t: t.permute(1, 0)[2:],
        lambda t: t.reshape(2, 12),
        lambda t: t.unsqueeze(0).expand(3, 4, 6),
        lambda t: t.diagonal(),
        lambda t: t[2],
        lambda t: t.narrow(1, 1, 3),
        lambda t: t.unfold(1, 2, 2),
    ):
        torch.testing.assert_close(view(y).cpu(), view(x))
        torch.testing.assert_close((view(y) * 2).cpu(), view(x) * 2)


def test_in_place_writes_through_views_reach_the_base():
    x = torch.arange(24.0).reshape(4, 6)
    y = x.to("neuron")
    for write in (
        lambda t: t[1:3].add_(100),
        lambda t: t[:, ::2].mul_(-1),
        lambda t: t.t()[1].fill_(7),
        lambda t: t.diagonal().zero_(),
        lambda t: t.__setitem__((slice(None), 4), torch.tensor(5.0, device=t.device)),
    ):
        write(x)
        write(y)
        torch.testing.assert_close(y.cpu(), x)


def test_view_dtype_reinterprets_bits():
    x = torch.tensor([1.0, -2.0, 0.5])
    y = x.to("neuron")
    torch.testing.assert_close(y.view(torch.int32).cpu(), x.view(torch.int32))
    y.view(torch.int32).add_(1)
    x.view(torch.int32).add_(1)
    torch.testing.assert_close(y.cpu(), x)
    torch.testing.assert_close(y.view(torch.uint8).cpu(), x.view(torch.uint8))


def test_base_and_storage_sharing():
    y = torch.zeros(4, 4, device="neuron")
    view = y[1]
    assert view._base is y
    assert view.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    assert view.storage_offset() == 4


def _is_set_to_answers(device):
    t1 = torch.empty(3, 4, device=device)
    set_to_t1 = torch.tensor([], device=device).set_(t1)
    bools = torch.tensor([True, True], device=device)
    contiguous = torch.empty(2, 3, 4, device=device)
    empty = torch.empty(2, 5, 0, device=device)
    pairs = [
        (t1, torch.empty(3, 4, device=device)),  # another storage
        (t1, set_to_t1),
        (set_to_t1, t1),
        (t1, set_to_t1.clone().resize_(2, 6)),
        (torch.tensor([], device=device), torch.tensor([], device=device)),  # two empty storages
        (bools, torch.tensor([False], device=device).set_(bools)),
        (contiguous, contiguous.view(4, 3, 2)),  # sizes differ
        (t1, t1.t()),  # strides differ
        (t1[1:], t1[1:]),
        (t1[1:], t1[:2]),  # storage offsets differ
        (empty, empty.view([0])),
    ]
    return [a.is_set_to(b) for a, b in pairs]


def test_is_set_to_answers_as_on_cpu():
    # On the device, not on host copies (the CPU fallback saw two storages where there is one).
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no CPU fallback
        answers = _is_set_to_answers("neuron")
    assert answers == _is_set_to_answers("cpu")
    assert answers[:3] == [False, True, True]


def test_param_data_assignment_and_module_to_keep_parameters():
    module = torch.nn.Linear(3, 2)
    weight = module.weight
    module.to("neuron")
    assert module.weight is weight
    assert weight.device.type == "neuron"
    weight.data = torch.ones(2, 3, device="neuron")
    torch.testing.assert_close(module.weight.cpu(), torch.ones(2, 3))
    module.cpu()
    assert module.weight is weight and weight.device.type == "cpu"


def test_resize_keeps_contents():
    x = torch.arange(4.0, device="neuron")
    x.resize_(6)
    torch.testing.assert_close(x[:4].cpu(), torch.arange(4.0))
    x.resize_(2)
    torch.testing.assert_close(x.cpu(), torch.arange(2.0))


def test_printing():
    text = repr(torch.tensor([1.5, 2.0], device="neuron"))
    assert text == "tensor([1.5000, 2.0000], device='neuron:0')"
    assert "dtype=torch.bfloat16" in repr(torch.ones(2, dtype=torch.bfloat16, device="neuron"))
    assert "grad_fn" in repr(torch.ones(2, device="neuron", requires_grad=True) * 2)
    assert str(torch.zeros(0, device="neuron")) == "tensor([], device='neuron:0')"


def test_item_and_tolist():
    x = torch.tensor([[1, 2], [3, 4]], device="neuron")
    assert x[1, 0].item() == 3
    assert x.tolist() == [[1, 2], [3, 4]]
    assert bool(torch.tensor(True, device="neuron"))


def test_data_dependent_ops_on_empty_tensors():
    empty = torch.zeros(0, 4, device="neuron")
    assert empty[empty > 0].shape == (0,)
    assert torch.nonzero(empty).shape == (0, 2)
    torch.neuron.synchronize()  # nothing pending: no spurious device fault


def test_elementwise_results_keep_the_layout_of_their_inputs():
    x = torch.randn(3, 4)
    y = x.to("neuron").t() + 1
    assert y.stride() == (x.t() + 1).stride() == (1, 4)
    torch.testing.assert_close(y.cpu(), x.t() + 1)


def test_resize_to_the_same_size_keeps_strides_as_cpu():
    # An out= argument that is a strided view of the right size stays that view (resize_ leaves it):
    # nonzero(out=) and every out= kernel that resizes first write through its strides.
    mask = torch.tensor([[1, 0, 1], [0, 1, 1]])
    for device in ("cpu", "neuron"):
        out = torch.full((4, 4), -1, dtype=torch.long, device=device)[:, ::2]
        assert out.resize_(4, 2).stride() == (4, 2)
        torch.nonzero(mask.to(device), out=out)
        assert out.stride() == (4, 2)
        torch.testing.assert_close(out.cpu(), torch.nonzero(mask))
        assert out.resize_(2, 4).stride() == (4, 1)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.complex64, torch.int32, torch.uint8, torch.bool]
)
def test_empty_fills_uninitialized_memory_under_deterministic_algorithms(dtype):
    # torch.use_deterministic_algorithms(True) makes empty tensors hold NaN, or the dtype's largest
    # value, as the CPU's and CUDA's empty kernels do.
    factories = [
        lambda device: torch.empty(3, 4, device=device, dtype=dtype),
        lambda device: torch.empty_strided((3, 4), (1, 3), device=device, dtype=dtype),
        lambda device: torch.empty_like(torch.zeros(3, 4, device=device, dtype=dtype)),
        lambda device: torch.empty_permuted((2, 3, 4), (1, 0, 2), device=device, dtype=dtype),
    ]
    deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        for factory in factories:
            torch.testing.assert_close(factory("neuron").cpu(), factory("cpu"), equal_nan=True)
    finally:
        torch.use_deterministic_algorithms(deterministic)


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint16, torch.int8])
def test_resize_fills_the_added_elements_under_deterministic_algorithms(dtype):
    results = []
    deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        for device in ("cpu", "neuron"):
            tensor = torch.zeros(2, 3, dtype=dtype, device=device)
            tensor.resize_(3, 4)
            results.append(tensor.cpu())
    finally:
        torch.use_deterministic_algorithms(deterministic)
    torch.testing.assert_close(results[1], results[0], equal_nan=True)


SHARED_MEMORY_TENSORS = {
    "expand": lambda device: torch.zeros(3, device=device).expand(4, 3),
    # Filled first: threshold_ keeps elements above the threshold, so uninitialized memory would
    # leave the CPU's leftover bytes in the expected value.
    "empty_strided-stride-0": lambda device: torch.empty_strided((10,), (0,), device=device).fill_(2.0),
    "expanded-column-of-a-matrix": lambda device: torch.arange(12.0, device=device).reshape(3, 4)[:, :1].expand(3, 5),
    "sliced-expand": lambda device: torch.zeros(2, 1, 3, device=device).expand(2, 4, 3)[:, :, 1:],
}


@pytest.mark.parametrize(
    "fill",
    [lambda t: t.fill_(3), lambda t: t.zero_(), lambda t: torch.nn.functional.threshold_(t, 5.0, -1.0)],
    ids=["fill_", "zero_", "threshold_"],
)
@pytest.mark.parametrize("make", SHARED_MEMORY_TENSORS.values(), ids=SHARED_MEMORY_TENSORS)
def test_fills_of_tensors_whose_elements_share_memory(make, fill):
    # ATen's fill_ and threshold_ (idempotent) run without the internal-overlap check (Fill.cpp,
    # Activation.cpp): every element of a location gets one value.
    expected, actual = make("cpu"), make("neuron")
    fill(expected)
    assert fill(actual) is actual
    torch.testing.assert_close(actual.cpu(), expected)
    if expected._base is not None:
        torch.testing.assert_close(actual._base.cpu(), expected._base)


@pytest.mark.parametrize("make", SHARED_MEMORY_TENSORS.values(), ids=SHARED_MEMORY_TENSORS)
def test_threshold_out_into_shared_memory_keeps_each_locations_last_element(make):
    # threshold.out has no overlap check either (it is also what threshold_ reaches before the
    # device starts): each location holds its last element's result, row-major, as ATen's loop.
    expected, actual = make("cpu"), make("neuron")
    source = torch.arange(float(expected.numel())).reshape(expected.shape) % 7
    torch.threshold(source, 3.0, -1.0, out=expected)
    assert torch.threshold(source.to("neuron"), 3.0, -1.0, out=actual) is actual
    torch.testing.assert_close(actual.cpu(), expected)


def test_fill_with_a_tensor_of_the_same_device_refuses_shared_memory_as_copy_does():
    # fill_(Tensor) with a value on the tensor's own device is copy_, which refuses the overlap on
    # the CPU and CUDA; a CPU scalar tensor fills, as CUDA's fill_out(value.item()) does.
    message = "more than one element of the written-to tensor refers to a single memory location"
    with pytest.raises(RuntimeError, match=message):
        torch.zeros(3).expand(4, 3).fill_(torch.tensor(2.5))
    with pytest.raises(RuntimeError, match=message):
        torch.zeros(3, device="neuron").expand(4, 3).fill_(torch.tensor(2.5, device="neuron"))
    filled = torch.zeros(3, device="neuron").expand(4, 3).fill_(torch.tensor(2.5))
    torch.testing.assert_close(filled.cpu(), torch.full((4, 3), 2.5))


# Writes ATen refuses into a tensor whose elements share memory, before any other check (sort's
# meta kernel restrides its out= first and raised PyTorch's setStorage error here).
REFUSED_SHARED_MEMORY_WRITES = {
    "sort-out": lambda x, shared, index: torch.sort(x, out=(shared, index)),
    "topk-out": lambda x, shared, index: torch.topk(x, 4, out=(shared, index)),
    "cumsum-out": lambda x, shared, index: torch.cumsum(x, 1, out=shared),
    "add-out": lambda x, shared, index: torch.add(x, 1, out=shared),
    "exp_": lambda x, shared, index: shared.exp_(),
}


@pytest.mark.parametrize("write", REFUSED_SHARED_MEMORY_WRITES.values(), ids=REFUSED_SHARED_MEMORY_WRITES)
def test_writes_into_tensors_whose_elements_share_memory_raise_as_cpu(write):
    message = "^unsupported operation: more than one element of the written-to tensor refers to a single"
    for device in ("cpu", "neuron"):
        x = torch.randn(3, 4, device=device)
        shared = torch.zeros(4, device=device).expand(3, 4)
        with pytest.raises(RuntimeError, match=message):
            write(x, shared, torch.empty(3, 4, dtype=torch.long, device=device))


def _rows(d):
    return torch.arange(3.0, device=d).view(1, 3).expand(2, 3)  # two rows, one memory


def _index(d, *values):
    return torch.tensor(values, device=d)


# (op the warning names, the write): each location holds what its last written element got, or
# (accumulate=True) the sum of every element's contribution, as ATen's kernels write element by element.
SHARED_MEMORY_WRITES = {
    "masked_fill_": (
        "masked_fill_",
        lambda d: _rows(d).masked_fill_(_index(d, [True, False, False], [False, False, True]), 7.0),
    ),
    "masked_fill_-tensor-value": (
        "masked_fill_",
        lambda d: _rows(d).masked_fill_(_index(d, [False, True, False]), torch.tensor(7.0, device=d)),
    ),
    "index_fill_-along-the-shared-dim": ("index_fill_", lambda d: _rows(d).index_fill_(0, _index(d, 1), 5.0)),
    "index_fill_-across-it": ("index_fill_", lambda d: _rows(d).index_fill_(1, _index(d, 0, 2), 5.0)),
    "index_put_-one-row": ("index_put_", lambda d: _rows(d).index_put_((_index(d, 0),), torch.tensor(1.0, device=d))),
    "index_put_-last-row-wins": (
        "index_put_",
        lambda d: _rows(d).index_put_((_index(d, 0, 1),), _index(d, [1.0, 2, 3], [4, 5, 6])),
    ),
    "index_put_-accumulate": (
        "index_put_",
        lambda d: _rows(d).index_put_((_index(d, 1, 1),), _index(d, [1.0, 2, 3], [4, 5, 6]), accumulate=True),
    ),
    "index_put_-accumulate-int32": (
        "index_put_",
        lambda d: (
            torch.zeros(1, 3, dtype=torch.int32, device=d)
            .expand(2, 3)
            .index_put_((_index(d, 0, 1),), _index(d, [1, 2, 3], [4, 5, 6]).int(), accumulate=True)
        ),
    ),
    "two-shared-dims": (
        "masked_fill_",
        lambda d: torch.zeros(1, 3, 1, device=d).expand(2, 3, 4).masked_fill_(_index(d, 0, 1, 1, 0).bool(), 2.0),
    ),
}


@pytest.mark.parametrize("case", SHARED_MEMORY_WRITES)
def test_writes_into_tensors_whose_elements_share_memory_warn_and_write_as_on_cpu(case):
    name, write = SHARED_MEMORY_WRITES[case]
    results = {}
    for device in ("cpu", "neuron"):
        with pytest.warns(UserWarning, match=f"Use of {name} on expanded tensors is deprecated"):
            written = write(device)
        results[device] = written
    torch.testing.assert_close(results["neuron"].cpu(), results["cpu"], rtol=0, atol=0)


def test_a_shared_memory_write_through_setitem_matches_cpu():
    # The CPU takes a mask and a number as masked_fill_, neuron as index_put_ (the warning names it).
    tensors = {device: _rows(device) for device in ("cpu", "neuron")}
    for device, tensor in tensors.items():
        with pytest.warns(UserWarning, match="Use of (masked_fill_|index_put_) on expanded tensors is deprecated"):
            tensor[_index(device, [True, False, True], [False, True, False])] = 9.0
    torch.testing.assert_close(tensors["neuron"].cpu(), tensors["cpu"], rtol=0, atol=0)


def test_where_takes_a_uint8_condition_with_atens_deprecation_warning_once():
    """ATen warns once per process (TORCH_WARN_ONCE); no other test takes where of uint8."""
    results = []
    for device in ("cpu", "neuron"):
        condition = torch.tensor([1, 0, 7], dtype=torch.uint8, device=device)
        with pytest.warns(UserWarning, match="where received a uint8 condition tensor. This behavior is deprecated"):
            results.append(torch.where(condition, torch.ones(3, device=device), -1.0).cpu())
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            results.append(torch.where(condition, torch.ones(3, device=device), -1.0).cpu())
    torch.testing.assert_close(results[2:], results[:2])


def test_a_write_into_shared_memory_refused_by_the_kernel_raises_its_error():
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks"):
        _rows("neuron").masked_fill_(_index("neuron", 1, 0, 1), 5.0)


LARGE, UINT64 = 2**64 - 2, torch.uint64


@pytest.mark.parametrize(
    "make",
    [
        lambda device: torch.empty(3, dtype=torch.uint64, device=device).fill_(2**64 - 1),
        lambda device: torch.full((2,), 2**63, dtype=torch.uint64, device=device),
        lambda device: torch.tensor([1, 2], dtype=torch.uint64, device=device) * (2**63 + 1),
        lambda device: torch.zeros(2, device=device).add_(2**64 - 1),
        lambda device: torch.empty(2, dtype=torch.uint64, device=device).fill_(torch.tensor(LARGE, dtype=UINT64)),
    ],
    ids=["fill_", "full", "mul", "float-add_", "fill_-cpu-tensor"],
)
def test_numbers_only_uint64_holds_are_runtime_scalars(make):
    # Python ints in [2**63, 2**64) are valid uint64 Scalars; JAX converts an int argument to int64
    # and raised OverflowError for them.
    torch.testing.assert_close(make("neuron").cpu(), make("cpu"), rtol=0, atol=0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn([1] * 65).to("neuron"),
        lambda: torch.empty([1] * 65, device="neuron").sum(0),
    ],
    ids=["copy", "op"],
)
def test_tensors_of_more_than_64_dims_raise_the_reductions_error(make):
    # NumPy's and JAX's arrays, which hold neuron's values, have at most 64 dimensions: NumPy's
    # ValueError came from deep in a copy; the CPU's and CUDA's reductions raise these words.
    with pytest.raises(RuntimeError, match="only tensors with up to 64 dims are supported"):
        make()
