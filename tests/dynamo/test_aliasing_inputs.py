"""torch.compile(backend="neuron") with inputs that overlap in memory, against CPU eager.

Each case runs the function on CPU tensors (the reference), eagerly on neuron and compiled on
neuron, and compares the results, the inputs after the call (mutations), and where eager returns a
view of an input, that the compiled result is a view of the same input at the same offset. Cases
marked ``eager`` are the ones AOTAutograd compiles wrongly (dynamo/aliasing.py): they must warn
and run eagerly; the others must stay compiled and warn nothing.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch._dynamo

from torch_neuronx.dynamo.aliasing import overlapping_pair, split_aliased_list_updates


def _mutate_first_read_second(a, b):
    a.mul_(2)
    return b + 1


def _mutate_view_read_base(base, view):
    view.mul_(10)
    return base.sum(), base + 0


def _mutate_first_return_views_of_second(a, b):
    a.add_(1)
    return b[:3], b.narrow(0, 1, 2)


def _read_then_break_then_mutate(a, b):
    doubled = b * 2
    torch._dynamo.graph_break()
    a.mul_(2)
    return doubled + b


def _read_both(a, b):
    return a + b


def _foreach_update_items_that_alias(a, b):
    torch._foreach_mul_([a, a, b], 0.5)  # the same tensor twice in one list
    torch._foreach_add_([a[0], a[1]], [a[1], a[0]])  # an item read at another index
    return a + 1


def _foreach_update_disjoint_rows(a, b):
    torch._foreach_mul_([a[0], a[1], b], 0.5)
    return a + 1


def _matrix_and_vector(device):
    return torch.arange(1.0, 9.0, device=device).reshape(2, 4), torch.arange(3.0, device=device)


def _overlapping_slices(device):
    base = torch.arange(6.0, device=device)
    return base[:5], base[1:]


def _slices_overlapping_further(device):
    base = torch.arange(8.0, device=device)
    return base[:5], base[2:7]


def _distinct_slices(device):
    return torch.arange(5.0, device=device), torch.arange(5.0, device=device) * 3


def _same_tensor_twice(device):
    x = torch.arange(4.0, device=device)
    return x, x


def _base_and_view(device):
    base = torch.arange(8.0, device=device)
    return base, base[2:5]


def _as_strided_overlap(device):
    storage = torch.arange(12.0, device=device)
    return storage.as_strided((2, 3), (3, 1)), storage.as_strided((3, 2), (1, 3), 1)


def _distinct_as_strided(device):
    return torch.zeros(2, 3, device=device), torch.ones(2, 3, device=device).t()


def _base_and_offset_view(device):
    base = torch.arange(12.0, device=device)
    return base, base[2:8]


def _disjoint_slices_of_one_storage(device):
    base = torch.arange(9.0, device=device)
    return base[:4], base[4:8]


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable[..., Any]
    make: Callable[[str], tuple[torch.Tensor, ...]]
    eager: bool  # AOTAutograd would be wrong: the call must run eagerly, with the warning
    first: Callable[[str], tuple[torch.Tensor, ...]] | None = None  # a first call that compiles the graph


CASES = [
    Case("overlapping_slices", _mutate_first_read_second, _overlapping_slices, eager=True),
    # Stale values: compiled for distinct inputs, then called with overlapping ones (same sizes).
    Case("overlapping_slices_after_distinct", _mutate_first_read_second, _overlapping_slices, True, _distinct_slices),
    # AOTAutograd replays the offsets of the first call's aliasing: wrong values, or an error.
    Case(
        "slices_overlapping_further_after_overlapping",
        _mutate_first_read_second,
        _slices_overlapping_further,
        True,
        _overlapping_slices,
    ),
    Case("distinct_after_overlapping", _mutate_first_read_second, _distinct_slices, True, _overlapping_slices),
    # Dynamo passes one tensor given twice as one graph input: nothing to guard.
    Case("same_tensor_twice", _mutate_first_read_second, _same_tensor_twice, eager=False),
    Case("same_tensor_twice_after_distinct", _mutate_first_read_second, _same_tensor_twice, False, _distinct_slices),
    Case("view_and_its_base", _mutate_view_read_base, _base_and_view, eager=True),
    Case("as_strided_overlap", _mutate_first_read_second, _as_strided_overlap, eager=True),
    Case(
        "as_strided_overlap_after_distinct", _mutate_first_read_second, _as_strided_overlap, True, _distinct_as_strided
    ),
    # Wrong offset: views of an input that is a view of a mutated input.
    Case("views_of_view_of_mutated_input", _mutate_first_return_views_of_second, _base_and_offset_view, eager=True),
    # Two graphs: the first reads only and stays compiled, the second mutates and runs eagerly.
    Case("mutation_after_a_graph_break", _read_then_break_then_mutate, _overlapping_slices, True, _distinct_slices),
    # Sharing a storage without overlapping, or overlapping without a mutation, compiles.
    Case("disjoint_slices_of_one_storage", _mutate_first_read_second, _disjoint_slices_of_one_storage, eager=False),
    Case("overlap_without_mutation", _read_both, _overlapping_slices, eager=False),
    # Inside the graph: an in-place tensor-list op whose items alias updates them in turn, as eager
    # does (AOTAutograd computes every item from the values before the call).
    Case("foreach_items_that_alias", _foreach_update_items_that_alias, _matrix_and_vector, eager=False),
    Case("foreach_disjoint_rows", _foreach_update_disjoint_rows, _matrix_and_vector, eager=False),
]


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def _storage_position(tensor: torch.Tensor, inputs: tuple[torch.Tensor, ...]) -> int:
    storage = tensor.untyped_storage().data_ptr()
    return next(i for i, x in enumerate(inputs) if x.untyped_storage().data_ptr() == storage)


def _assert_like_cpu(
    got: Any, got_inputs: tuple[torch.Tensor, ...], expected: Any, cpu_inputs: tuple[torch.Tensor, ...]
):
    for result, reference in zip(_as_tuple(got), _as_tuple(expected), strict=True):
        torch.testing.assert_close(result.cpu(), reference)
        if reference._base is not None:  # eager returned a view of an input: so must the compiled call
            owner = _storage_position(reference, cpu_inputs)
            assert result.untyped_storage().data_ptr() == got_inputs[owner].untyped_storage().data_ptr()
            assert (result.storage_offset(), result.stride()) == (reference.storage_offset(), reference.stride())
    for tensor, reference in zip(got_inputs, cpu_inputs, strict=True):
        torch.testing.assert_close(tensor.cpu(), reference)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_compiled_call_with_aliased_inputs_matches_eager(case):
    cpu_inputs = case.make("cpu")
    expected = case.fn(*cpu_inputs)
    eager_inputs = case.make("neuron")
    _assert_like_cpu(case.fn(*eager_inputs), eager_inputs, expected, cpu_inputs)

    compiled = torch.compile(case.fn, backend="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if case.first is not None:
            compiled(*case.first("neuron"))
        inputs = case.make("neuron")
        got = compiled(*inputs)
    _assert_like_cpu(got, inputs, expected, cpu_inputs)
    ran_eagerly = [w for w in caught if "run eagerly, op by op" in str(w.message)]
    assert bool(ran_eagerly) == case.eager, [str(w.message) for w in caught]


def test_list_updates_are_split_only_where_items_overlap():
    rewritten = []

    def record(graph, example_inputs):
        rewritten.append(split_aliased_list_updates(graph))
        return graph

    def update(a):
        torch._foreach_mul_([a[0], a[1]], 0.5)  # disjoint rows of one input: one call
        torch._foreach_mul_([a, a[1]], 0.5)  # a row and its base: one call per item
        return a + 1

    torch.compile(update, backend=record)(torch.ones(2, 3))
    assert rewritten == [1]


def test_warning_names_the_function_and_the_inputs():
    compiled = torch.compile(_mutate_first_read_second, backend="neuron")
    compiled(*_distinct_slices("neuron"))
    with pytest.warns(UserWarning) as caught:
        compiled(*_overlapping_slices("neuron"))
    message = str(caught[0].message)
    assert "in _mutate_first_read_second" in message
    assert "mutates input L['a'] while input L['b'] overlaps it in memory" in message


def test_overlapping_pair_finds_only_pairs_with_a_mutated_input():
    base = torch.arange(12.0, device="neuron")
    grid = base.view(3, 4)
    yes, no = [True, False, False], [False, False, False]
    assert overlapping_pair((base[:4], base[4:]), [0, 1], yes) is None
    assert overlapping_pair((base[:5], base[4:]), [0, 1], [False, True]) == (1, 0)
    assert overlapping_pair((base[:5], base[4:], base[8:]), [0, 1, 2], no) is None
    assert overlapping_pair((base[:5], base[8:], base[4:]), [0, 1, 2], [False, True, False]) == (1, 2)
    assert overlapping_pair((grid[:, 0], grid[:, 1]), [0, 1], yes) == (0, 1)  # interleaved ranges count
    assert overlapping_pair((grid[:2].t(), grid[2]), [0, 1], yes) is None  # strided, then past its end
    assert overlapping_pair((base[:5], torch.empty(0, device="neuron"), base[2:]), [0, 1, 2], [False, True]) is None
    assert overlapping_pair((base, base[1:]), [0], yes) is None  # only the tensor positions count
    with pytest.raises(TypeError, match="argument 1 is not a tensor"):
        overlapping_pair((base, 3), [0, 1], yes)


class _WindowedState(torch.nn.Module):
    """A module whose buffer ``window`` is a view of its buffer ``state``, which forward mutates."""

    def __init__(self, device: str) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 4, device=device))
        self.register_buffer("state", torch.zeros(8, device=device))
        self.register_buffer("window", self.state[2:6])

    def forward(self, x):
        self.state.add_(x.mean())
        return (x * self.scale * self.window).sum()


def test_training_step_of_module_with_aliased_buffers_matches_cpu():
    cpu_model, neuron_model = _WindowedState("cpu"), _WindowedState("neuron")
    compiled = torch.compile(neuron_model, backend="neuron")
    for step in range(2):
        x = torch.randn(3, 4)
        cpu_model(x).backward()
        with pytest.warns(UserWarning, match="run eagerly") if step == 0 else warnings.catch_warnings():
            compiled(x.to("neuron")).backward()
        torch.testing.assert_close(neuron_model.scale.grad.cpu(), cpu_model.scale.grad)
        torch.testing.assert_close(neuron_model.state.cpu(), cpu_model.state)
        assert neuron_model.window.untyped_storage().data_ptr() == neuron_model.state.untyped_storage().data_ptr()


@pytest.mark.parametrize("foreach", [False, True], ids=["for_loop", "foreach"])
@pytest.mark.parametrize("overlap", [True, False], ids=["overlapping_params", "disjoint_params_one_storage"])
def test_compiled_optimizer_step_on_params_sharing_storage_matches_cpu(overlap, foreach):
    def make(device):
        flat = torch.linspace(-1.0, 1.0, 10, device=device)
        params = [torch.nn.Parameter(flat[0:6]), torch.nn.Parameter(flat[4:10] if overlap else flat[6:10])]
        for param in params:
            param.grad = torch.linspace(0.1, 0.6, param.numel(), device=device)
        return flat, params, torch.optim.SGD(params, lr=0.1, weight_decay=0.5, foreach=foreach)

    cpu_flat, _, cpu_opt = make("cpu")
    flat, params, opt = make("neuron")
    compiled_step = torch.compile(opt.step, backend="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            cpu_opt.step()
            compiled_step()
    torch.testing.assert_close(flat.cpu(), cpu_flat)
    assert all(p.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr() for p in params)
    assert any("run eagerly, op by op" in str(w.message) for w in caught) == overlap


def test_backward_of_a_call_run_eagerly_matches_cpu():
    def loss(weight, a, b):
        a.mul_(2)
        return (weight * b).sum()

    def run(device, compiled):
        weight = torch.linspace(-1.0, 1.0, 5, device=device, requires_grad=True)
        compiled(weight, *_distinct_slices(device))  # compiled for inputs that do not overlap
        weight.grad = None
        a, b = _overlapping_slices(device)
        compiled(weight, a, b).backward()
        return weight.grad, a._base

    expected_grad, expected_base = run("cpu", loss)
    with pytest.warns(UserWarning, match="run eagerly"):
        grad, base = run("neuron", torch.compile(loss, backend="neuron"))
    torch.testing.assert_close(grad.cpu(), expected_grad)
    torch.testing.assert_close(base.cpu(), expected_base)
