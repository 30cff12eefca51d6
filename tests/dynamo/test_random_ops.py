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
