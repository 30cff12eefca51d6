"""torch.cond and while_loop under torch.compile(backend="neuron"): jax.lax.cond and while_loop."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._higher_order_ops import while_loop

import torch_neuronx


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


def test_cond_of_a_predicate_of_several_elements_raises_eagers_error():
    # It failed in JAX's reshape (helper-55).
    def branches(x):
        return torch.cond(x[:2] > 0, lambda x: x * 2, lambda x: x - 1, (x,))

    with pytest.raises(
        Exception, match=r"Expected pred to be bool or single-element tensor, but got a tensor of shape \[2\]"
    ):
        torch.compile(branches, backend="neuron")(torch.randn(4, device="neuron"))


def test_training_through_while_loop_breaks_the_graph_as_on_the_cpu():
    # Dynamo graph-breaks a while_loop that needs gradients; neuron's cat meta check guarded on its
    # data-dependent sizes first (GuardOnDataDependentSymNode; helper-55).
    def loss(x, w):
        start = torch.zeros((), dtype=torch.int64, device=x.device)
        _, y = while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * w), (start, x))
        return y.sum()

    x, w = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    on_neuron = [t.detach().to("neuron").requires_grad_() for t in (x, w)]
    loss(x, w).backward()
    torch.compile(loss, backend="neuron")(*on_neuron).backward()
    torch.testing.assert_close([t.grad.cpu() for t in on_neuron], [x.grad, w.grad])
