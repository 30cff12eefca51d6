"""nn.LSTM, nn.GRU and their cells on neuron against CPU: outputs, final states and the gradients of
inputs, initial states and parameters, through the fused cell ops PyTorch calls on non-CPU devices
(``aten::_thnn_fused_lstm_cell``, ``aten::_thnn_fused_gru_cell`` and their backward ops), with no CPU
fallback."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils import _pytree as pytree

import torch_neuronx
from tests.utils import to_neuron

aten = torch.ops.aten

#: CPU computes 16-bit cells step by step in bfloat16; neuron computes each cell in float32 and
#: rounds once, as CUDA does, so the two differ by a few bfloat16 ulps.
TOLERANCE = {torch.float32: {}, torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2}}

FUSED = {
    nn.LSTM: ("aten::_thnn_fused_lstm_cell.default", "aten::_thnn_fused_lstm_cell_backward_impl.default"),
    nn.LSTMCell: ("aten::_thnn_fused_lstm_cell.default", "aten::_thnn_fused_lstm_cell_backward_impl.default"),
    nn.GRU: ("aten::_thnn_fused_gru_cell.default", "aten::_thnn_fused_gru_cell_backward.default"),
    nn.GRUCell: ("aten::_thnn_fused_gru_cell.default", "aten::_thnn_fused_gru_cell_backward.default"),
}


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)


def _assert_module_matches_cpu(kind, module, inputs, dtype=torch.float32, used=None):
    """Runs ``module`` (built around a ``kind`` layer) on CPU and on neuron, back-propagates the same
    random cotangents through the outputs ``used`` picks (all by default) and compares outputs and the
    gradients of every input and parameter."""
    module = module.to(dtype)
    inputs = pytree.tree_map(lambda t: t.to(dtype).requires_grad_(), inputs)
    results = {}
    for device in ("cpu", "neuron"):
        torch_neuronx.clear_op_tracking()
        copied = copy.deepcopy(module).to(device)
        args = inputs if device == "cpu" else to_neuron(inputs)
        outputs = [t for t in pytree.tree_leaves(copied(*args)) if isinstance(t, torch.Tensor)]
        chosen = outputs if used is None else used(outputs)
        generator = torch.Generator().manual_seed(1)
        cotangents = [torch.randn(t.shape, generator=generator).to(dtype).to(device) for t in chosen]
        leaves = [t for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor) and t.requires_grad]
        grads = torch.autograd.grad(chosen, [*leaves, *copied.parameters()], cotangents)
        results[device] = (outputs, grads)
        if device == "neuron":
            assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
            executed = torch_neuronx.get_executed_ops()
            assert all(op in executed for op in FUSED[kind]), sorted(executed)
    for got, want in zip(pytree.tree_leaves(results["neuron"]), pytree.tree_leaves(results["cpu"]), strict=True):
        torch.testing.assert_close(got.cpu(), want, **TOLERANCE[dtype])


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=lambda k: k.__name__)
@pytest.mark.parametrize(
    "options",
    [{}, {"num_layers": 2, "bidirectional": True, "batch_first": True}, {"bias": False}],
    ids=["one_layer", "two_layers_bidirectional_batch_first", "no_bias"],
)
def test_rnn_matches_cpu(kind, options):
    module = kind(3, 4, **options)
    x = torch.randn(2, 5, 3)
    _assert_module_matches_cpu(kind, module, [x])


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=lambda k: k.__name__)
def test_rnn_with_initial_state_matches_cpu(kind):
    module = kind(3, 4, num_layers=2)
    x, h0, c0 = torch.randn(5, 2, 3), torch.randn(2, 2, 4), torch.randn(2, 2, 4)
    _assert_module_matches_cpu(kind, module, [x, (h0, c0) if kind is nn.LSTM else h0])


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN:UserWarning")
def test_lstm_with_projections_matches_cpu():
    _assert_module_matches_cpu(nn.LSTM, nn.LSTM(3, 4, proj_size=2), [torch.randn(5, 2, 3)])


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=lambda k: k.__name__)
def test_rnn_gradient_of_final_state_only_matches_cpu(kind):
    """Only the last state is used: the cells' other output gradients arrive undefined."""
    _assert_module_matches_cpu(kind, kind(3, 4), [torch.randn(4, 2, 3)], used=lambda outputs: outputs[-1:])


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=lambda k: k.__name__)
def test_rnn_on_packed_sequence_matches_cpu(kind):
    module = kind(3, 4, bidirectional=True)
    lengths = torch.tensor([2, 5, 3])

    class Packed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = module

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, object]:
            out, state = self.rnn(pack_padded_sequence(x, lengths, enforce_sorted=False))
            return pad_packed_sequence(out)[0], state

    _assert_module_matches_cpu(kind, Packed(), [torch.randn(5, 3, 3)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kind", [nn.LSTMCell, nn.GRUCell], ids=lambda k: k.__name__)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_cell_matches_cpu(kind, bias, dtype):
    module = kind(3, 4, bias=bias)
    x, h0, c0 = torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 4)
    _assert_module_matches_cpu(kind, module, [x, (h0, c0) if kind is nn.LSTMCell else h0], dtype)


@pytest.mark.parametrize("kind", [nn.LSTMCell, nn.GRUCell], ids=lambda k: k.__name__)
def test_cell_without_state_or_batch_matches_cpu(kind):
    _assert_module_matches_cpu(kind, kind(3, 4), [torch.randn(3)])


@pytest.mark.parametrize("kind", [nn.LSTMCell, nn.GRUCell], ids=lambda k: k.__name__)
def test_cell_double_backward_matches_cpu(kind):
    """create_graph=True: PyTorch differentiates the cells with its composite backward formulas."""
    cells = {"cpu": kind(3, 4)}
    cells["neuron"] = copy.deepcopy(cells["cpu"]).to("neuron")
    x = torch.randn(2, 3)
    results = {}
    for device, cell in cells.items():
        torch_neuronx.clear_op_tracking()
        inputs = x.to(device).requires_grad_()
        out = cell(inputs)
        hidden = out[0] if isinstance(out, tuple) else out
        (grad,) = torch.autograd.grad(hidden.pow(2).sum(), inputs, create_graph=True)
        grad.sum().backward()
        results[device] = [grad, *(p.grad for p in cell.parameters())]
    assert torch_neuronx.get_fallback_ops() == {}
    for got, want in zip(results["neuron"], results["cpu"], strict=True):
        torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize(
    "op, factor, workspace",
    [(aten._thnn_fused_lstm_cell, 4, 4), (aten._thnn_fused_gru_cell, 3, 5)],
    ids=["lstm", "gru"],
)
def test_fused_cell_shapes_and_size_errors(op, factor, workspace):
    gates = torch.randn(2, 4 * factor, device="neuron")
    state = torch.randn(2, 4, device="neuron")
    results = op(
        gates, gates, state, torch.randn(4 * factor, device="neuron"), torch.randn(4 * factor, device="neuron")
    )
    assert [tuple(r.shape) for r in results] == [(2, 4)] * (len(results) - 1) + [(2, 4 * workspace)]
    with pytest.raises(RuntimeError, match="previous state"):
        op(gates, gates, torch.randn(2, 5, device="neuron"))
    with pytest.raises(RuntimeError, match="both given or both None"):
        op(gates, gates, state, torch.randn(4 * factor, device="neuron"))
