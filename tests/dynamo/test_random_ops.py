"""Random ops under torch.compile: the factories that draw stay in one executable, and activation
checkpointing's backward graph recomputes random ops with the elements the forward graph drew
(dynamo/random_states.py)."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close
from torch.utils.checkpoint import checkpoint

import torch_neuronx

DRAWING_FACTORIES = {
    "rand": lambda x: torch.rand(x.shape, device=x.device),
    "rand_like_half": lambda x: torch.rand_like(x, dtype=torch.float16),
    "randn": lambda x: torch.randn(x.shape, device=x.device),
    "randn_like": torch.randn_like,
    "randint": lambda x: torch.randint(7, x.shape, device=x.device),
    "randint_low_int8": lambda x: torch.randint(-3, 5, x.shape, device=x.device, dtype=torch.int8),
    "randint_like": lambda x: torch.randint_like(x, 2, 9),
}


@pytest.mark.parametrize("factory", DRAWING_FACTORIES, ids=str)
def test_drawing_factories_compile_into_the_graph_with_eagers_values(factory):
    def fn(x):
        return DRAWING_FACTORIES[factory](x) * 2, torch.rand_like(x)  # the draws after it line up too

    x = torch.zeros(5, 7, device="neuron")
    graphs_before = len(torch_neuronx.get_dynamo_metrics())
    torch.manual_seed(4)
    compiled = [t.cpu() for t in torch.compile(fn, backend="neuron")(x)]
    compiled_state = torch.neuron.get_rng_state()
    metrics = torch_neuronx.get_dynamo_metrics()[graphs_before:]
    torch.manual_seed(4)
    eager = [t.cpu() for t in fn(x)]
    assert_close(compiled, eager, rtol=0, atol=0)
    assert torch.equal(compiled_state, torch.neuron.get_rng_state())
    assert [(m["kind"], m["eager_fallback"]) for m in metrics] == [("inference", False)]  # not split


def test_compiled_rand_of_an_integer_dtype_raises_eagers_error():
    with pytest.raises(Exception, match="\"check_uniform_bounds\" not implemented for 'Long'"):
        torch.compile(lambda x: x + torch.rand(3, device=x.device, dtype=torch.int64), backend="neuron")(
            torch.zeros(3, dtype=torch.int64, device="neuron")
        )


RANDOM_BLOCKS = {
    "dropout": lambda x: torch.nn.functional.dropout(x * 1.5, 0.5) * 2,
    "rand_like": lambda x: x * torch.rand_like(x),
    "bernoulli": lambda x: x * torch.bernoulli(torch.full_like(x, 0.3)),
    "two_dropouts": lambda x: torch.nn.functional.dropout(torch.nn.functional.dropout(x, 0.2).sin(), 0.7),
}


def _losses_and_grads(fn, x, steps):
    """Per step: the loss and x's gradient, from seed 0; then the generator state."""
    torch.manual_seed(0)
    results = []
    for _ in range(steps):
        x.grad = None
        loss = fn(x)
        loss.backward()
        results.append((loss.detach().cpu(), x.grad.cpu()))
    return results, torch.neuron.get_rng_state()


@pytest.mark.parametrize("block", RANDOM_BLOCKS, ids=str)
def test_compiled_checkpoint_recomputes_the_forward_draws(block):
    def loss(x):
        return (checkpoint(RANDOM_BLOCKS[block], x, use_reentrant=False) ** 2).sum()

    x = torch.randn(16, 24, device="neuron", requires_grad=True)
    eager = _losses_and_grads(loss, x, steps=2)
    compiled = _losses_and_grads(torch.compile(loss, backend="neuron"), x, steps=2)
    # Eager checkpointing replays the saved state; compiled, the backward graph must draw the
    # forward graph's elements (a different mask would change the gradients entirely, not by an
    # ulp of the fused sum), and both advance the generator alike.
    assert_close(compiled[0], eager[0])
    assert torch.equal(compiled[1], eager[1])


def test_compiled_checkpoint_with_a_new_input_shape():
    def loss(x):
        return (checkpoint(RANDOM_BLOCKS["dropout"], x, use_reentrant=False) ** 2).sum()

    compiled = torch.compile(loss, backend="neuron")
    for rows in (8, 12):  # the second shape recompiles with symbolic sizes (automatic dynamic)
        x = torch.randn(rows, 32, device="neuron", requires_grad=True)
        assert_close(_losses_and_grads(compiled, x, steps=1), _losses_and_grads(loss, x, steps=1))


def test_compiled_training_step_of_a_checkpointed_mlp():
    def model():
        torch.manual_seed(1)
        return torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Dropout(0.1), torch.nn.Linear(64, 8)
        ).to("neuron")

    def train(net, forward):
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        torch.manual_seed(2)
        inputs = torch.randn(4, 16, 32, device="neuron")
        for batch in inputs:
            optimizer.zero_grad()
            forward(batch).pow(2).mean().backward()
            optimizer.step()
        return [p.detach().cpu() for p in net.parameters()]

    eager_net, compiled_net = model(), model()
    eager = train(eager_net, lambda b: checkpoint(eager_net, b, use_reentrant=False))
    compiled = train(
        compiled_net, torch.compile(lambda b: checkpoint(compiled_net, b, use_reentrant=False), backend="neuron")
    )
    assert_close(compiled, eager)


def test_a_checkpointed_random_op_without_a_lowering_is_refused_by_name():
    from torch_neuronx.dynamo.graph import CompileError
    from torch_neuronx.dynamo.random_states import device_random_states

    torch.zeros(1, device="neuron")  # the device and its lowerings start
    graph = torch.fx.Graph()
    saved = graph.call_function(torch.ops.higher_order.run_and_save_rng_state, (torch.ops.aten.randperm.default, 5))
    graph.output((saved,))
    with pytest.raises(CompileError, match="cannot recompute aten.randperm.default under activation checkpointing"):
        device_random_states(torch.fx.GraphModule({}, graph), [])


def test_compiled_factories_of_another_core_draw_there(two_cores):
    # A graph without tensor inputs runs on the core its factories name, from that core's generator.
    def factories():
        return torch.rand(3, device="neuron:1"), torch.zeros(2, device="neuron:1") + 1

    results = []
    for run in (factories, torch.compile(factories, backend="neuron")):
        torch.manual_seed(0)
        torch.rand(8, device="neuron:0")  # core 0's generator only
        drawn, filled = run()
        assert drawn.device == filled.device == torch.device("neuron:1")
        results.append((drawn.cpu(), torch.neuron.get_rng_state(0), torch.neuron.get_rng_state(1)))
    assert_close(results[1], results[0], rtol=0, atol=0)


@pytest.mark.parametrize(
    "block",
    [
        lambda t: t * torch.rand(t.shape, device=t.device),
        lambda t: t * torch.randint(0, 5, t.shape, device=t.device),
    ],
    ids=["rand", "randint"],
)
def test_a_checkpointed_factory_draws_the_same_in_the_backward(block):
    # The factory has no tensor argument: the state is its result's core's, and computing the
    # recomputed node's metadata drew nothing for real.
    def loss(x):
        return checkpoint(block, x, use_reentrant=False).sum()

    x = torch.ones(4, 5, device="neuron", requires_grad=True)
    assert_close(_losses_and_grads(torch.compile(loss, backend="neuron"), x, 2), _losses_and_grads(loss, x, 2))


def test_a_dropout_of_p_1_draws_nothing_compiled_as_eager():
    def fn(t):
        return torch.nn.functional.dropout(t, 1.0) + torch.rand_like(t)

    t = torch.randn(6, 7, device="neuron")
    t[0, 0] = float("nan")  # input * 0, as F.dropout computes it
    results = []
    for run in (fn, torch.compile(fn, backend="neuron")):
        torch.manual_seed(0)
        results.append((run(t).cpu(), torch.neuron.get_rng_state()))
    assert_close(results[1], results[0], rtol=0, atol=0, equal_nan=True)


_library = torch.library.Library("neuron_random_ops_test", "DEF")
_library.define("tripled_on_cpu(Tensor x) -> Tensor")
_library.impl("tripled_on_cpu", lambda x: x * 3, "CPU")
torch.library.register_fake("neuron_random_ops_test::tripled_on_cpu", lambda x: torch.empty_like(x), lib=_library)
torch.library.register_autograd("neuron_random_ops_test::tripled_on_cpu", lambda ctx, grad: grad * 3, lib=_library)


def test_a_checkpointed_region_run_eagerly_by_fallback_execution(monkeypatch):
    # The op without a lowering makes both graphs run eagerly: the backward's recomputed dropout
    # then sets and restores the core's generator (PyTorch's run_with_rng_state knows no neuron).
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")

    def loss(x):
        def block(t):
            tripled = torch.ops.neuron_random_ops_test.tripled_on_cpu(t.sin())
            return torch.nn.functional.dropout(tripled, 0.5) * torch.rand_like(t)

        return checkpoint(block, x, use_reentrant=False).sum()

    x = torch.ones(6, device="neuron", requires_grad=True)
    with pytest.warns(UserWarning, match="runs eagerly"):
        compiled = _losses_and_grads(torch.compile(loss, backend="neuron"), x, 1)
    assert_close(compiled, _losses_and_grads(loss, x, 1), rtol=0, atol=0)
