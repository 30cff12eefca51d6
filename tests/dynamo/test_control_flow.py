"""torch.cond and while_loop under torch.compile(backend="neuron"): jax.lax.cond and while_loop."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._higher_order_ops import while_loop

import torch_neuronx


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _branches(x, y):
    return torch.cond(x.sum() > 0, lambda x, y: x.sin() + y, lambda x, y: x.cos() * y, (x, y))


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["true", "false"])
def test_cond_takes_the_branch_of_its_predicate_on_the_device(sign):
    # It raised CompileError ("cond has no neuron lowering or decomposition"; helper-54).
    x, y = torch.randn(4).abs() * sign, torch.randn(4)
    compiled = torch.compile(_branches, backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(x.to("neuron"), y.to("neuron")).cpu(), _branches(x, y))
    assert torch_neuronx.get_fallback_ops() == {}


def test_while_loop_runs_its_body_until_its_condition_fails():
    def doubled(i, x):
        return while_loop(lambda i, x: i < 5, lambda i, x: (i + 1, x * 2), (i, x))

    i, x = torch.tensor(0), torch.randn(3)
    got = torch.compile(doubled, backend="neuron", fullgraph=True)(i.to("neuron"), x.to("neuron"))
    torch.testing.assert_close([t.cpu() for t in got], list(doubled(i, x)))


def test_cond_trains_through_the_branch_taken():
    def loss(x, w):
        return torch.cond(x.sum() > 0, lambda x, w: (x * w).sin(), lambda x, w: (x + w).cos(), (x, w)).sum()

    x, w = torch.randn(4).abs(), torch.randn(4, requires_grad=True)
    on_neuron = w.detach().to("neuron").requires_grad_()
    torch.compile(loss, backend="neuron")(x.to("neuron"), on_neuron).backward()
    loss(x, w).backward()
    torch.testing.assert_close(on_neuron.grad.cpu(), w.grad)


def test_a_random_op_inside_cond_is_refused_by_name():
    def noisy(x):
        return torch.cond(x.sum() > 0, lambda x: torch.rand_like(x) + x, lambda x: x * 2, (x,))

    with pytest.raises(Exception, match="rand_like.default is a random op inside torch.cond or while_loop"):
        torch.compile(noisy, backend="neuron")(torch.randn(3, device="neuron"))
