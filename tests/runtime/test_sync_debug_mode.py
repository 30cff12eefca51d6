"""``torch.neuron.set_sync_debug_mode``: a warning or an error where the host waits for a NeuronCore,
on the operations where CUDA's sync debug mode reports one (PyTorch's test_cuda ``test_sync_warning``
lists them), and none where CUDA's does not."""

from __future__ import annotations

import warnings

import pytest
import torch

SIZE = 4


@pytest.fixture
def tensors():
    torch.manual_seed(0)
    x = torch.rand(SIZE, device="neuron")
    index = torch.randint(SIZE, (3,), device="neuron")
    return {
        "x": x,
        "y": torch.rand((), device="neuron"),
        "index": index,
        "repeats": torch.full((1,), 2, device="neuron"),
        "mask": torch.tensor([True, False, True, True], device="neuron"),
    }


def _put(x, index, value):
    x[index] = value


def _branch_on(y):
    return y if y else 2 * y


NO_SYNC = {
    "x[mask] = 1.0": lambda t: _put(t["x"], t["mask"], 1.0),
    "x[index] = y": lambda t: _put(t["x"], t["index"], t["y"]),
    "x[index]": lambda t: t["x"][t["index"]],
    "one_hot with num_classes": lambda t: torch.nn.functional.one_hot(t["index"], num_classes=SIZE),
    "randperm": lambda t: torch.randperm(200, device="neuron"),
    "repeat_interleave with output_size": lambda t: torch.repeat_interleave(t["x"], 2, output_size=2 * SIZE),
    "repeat_interleave of a tensor with output_size": lambda t: torch.repeat_interleave(
        t["x"], t["repeats"], output_size=2 * SIZE
    ),
    "any": lambda t: torch.any(t["y"]),
    "torch.neuron.synchronize": lambda t: torch.neuron.synchronize(),
    "Event.synchronize": lambda t: torch.neuron.Event().synchronize(),
    "non_blocking copy to the CPU": lambda t: t["x"].to("cpu", non_blocking=True),
}

SYNC = {
    "x[mask]": lambda t: t["x"][t["mask"]],
    "nonzero": lambda t: t["x"].nonzero(),
    "bool of a tensor": lambda t: _branch_on(t["y"]),
    "one_hot without num_classes": lambda t: torch.nn.functional.one_hot(t["index"]),
    "repeat_interleave of a tensor": lambda t: torch.repeat_interleave(t["x"], t["repeats"]),
    "item": lambda t: t["y"].item(),
    "tolist": lambda t: t["x"].tolist(),
    "copy to the CPU": lambda t: t["x"].cpu(),
    "Stream.synchronize": lambda t: torch.neuron.current_stream().synchronize(),
}


@pytest.fixture
def debug_mode():
    yield torch.neuron.set_sync_debug_mode
    torch.neuron.set_sync_debug_mode("default")


@pytest.mark.parametrize("mode", ["warn", "error"])
@pytest.mark.parametrize("op", NO_SYNC)
def test_operations_that_do_not_wait_neither_warn_nor_raise(op, mode, tensors, debug_mode):
    torch.neuron.synchronize()
    debug_mode(mode)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NO_SYNC[op](tensors)


@pytest.mark.parametrize("op", SYNC)
def test_operations_that_wait_warn_at_the_users_line(op, tensors, debug_mode):
    debug_mode("warn")
    with pytest.warns(UserWarning, match="^called a synchronizing neuron operation: ") as caught:
        SYNC[op](tensors)
    assert {record.filename for record in caught if "synchronizing" in str(record.message)} == {__file__}


@pytest.mark.parametrize("op", SYNC)
def test_operations_that_wait_raise_in_error_mode(op, tensors, debug_mode):
    debug_mode(2)
    with pytest.raises(RuntimeError, match="^called a synchronizing neuron operation: "):
        SYNC[op](tensors)


def test_the_mode_reads_back_and_takes_cudas_names_and_numbers(debug_mode):
    assert torch.neuron.get_sync_debug_mode() == 0
    for name, number in [("warn", 1), ("error", 2), ("default", 0), (1, 1)]:
        debug_mode(name)
        assert torch.neuron.get_sync_debug_mode() == number
    with pytest.raises(RuntimeError, match="^invalid value of debug_mode, expected one of `default`, `warn`, `error`$"):
        debug_mode("loud")
    with pytest.raises(RuntimeError, match="expected one of 0, 1, 2"):
        debug_mode(3)
    assert torch.neuron.get_sync_debug_mode() == 1


def test_default_mode_is_silent(tensors):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tensors["x"].cpu().shape == (SIZE,)


def test_a_collectives_staging_copy_does_not_count(tensors, debug_mode):
    """CUDA's mode does not cover torch.distributed; gloo's staging copy is this emulation's own."""
    from torch_neuronx.distributed import staging

    for tensor in (tensors["x"], tensors["x"].neg()._neg_view()):
        expected = tensor.cpu()
        debug_mode("error")
        torch.testing.assert_close(staging.to_host(tensor), expected.resolve_neg())
        debug_mode("default")
