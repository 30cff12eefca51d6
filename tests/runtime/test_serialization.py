"""torch.save / torch.load of neuron tensors and modules."""

from __future__ import annotations

import io

import pytest
import torch


def _round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def test_tensor_round_trip_keeps_device_and_values():
    x = torch.randn(3, 4)
    loaded = _round_trip(x.to("neuron"))
    assert loaded.device == torch.device("neuron", 0)
    torch.testing.assert_close(loaded.cpu(), x)


@pytest.mark.parametrize(
    ("location", "expected"),
    [("cpu", torch.device("cpu")), ("neuron", torch.device("neuron", 0)), ("neuron:1", torch.device("neuron", 1))],
)
def test_map_location(location, expected, two_cores):
    x = torch.randn(5)
    loaded = _round_trip(x.to("neuron"), map_location=location)
    assert loaded.device == expected
    torch.testing.assert_close(loaded.cpu(), x)


def test_views_keep_sharing_storage():
    base = torch.arange(10.0, device="neuron")
    views = {"a": base[2:5], "b": base[4:8]}
    loaded = _round_trip(views)
    loaded["a"][2] = -1.0
    assert loaded["b"][0].item() == -1.0


def test_state_dict_with_weights_only():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).to("neuron")
    state = _round_trip(model.state_dict(), weights_only=True)
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    fresh.load_state_dict(state)
    for name, value in model.state_dict().items():
        torch.testing.assert_close(fresh.state_dict()[name], value.cpu())


def test_loading_cpu_checkpoint_onto_neuron():
    x = torch.randn(6)
    loaded = _round_trip(x, map_location="neuron")
    assert loaded.device.type == "neuron"
    torch.testing.assert_close(loaded.cpu(), x)


def test_pickle_and_legacy_format_round_trip():
    import pickle

    x = torch.arange(10.0, device="neuron")
    torch.testing.assert_close(pickle.loads(pickle.dumps(x)).cpu(), torch.arange(10.0))
    torch.testing.assert_close(pickle.loads(pickle.dumps(x[3:7])).cpu(), torch.arange(3.0, 7.0))
    module = torch.nn.Linear(3, 2).to("neuron")
    torch.testing.assert_close(pickle.loads(pickle.dumps(module)).weight.cpu(), module.weight.cpu())
    buffer = io.BytesIO()
    torch.save(x, buffer, _use_new_zipfile_serialization=False)
    buffer.seek(0)
    torch.testing.assert_close(torch.load(buffer).cpu(), torch.arange(10.0))


def test_dlpack_round_trip_aliases_like_cuda():
    a = torch.tensor([1.0, 2.0, 3.0], device="neuron")
    b = torch.from_dlpack(torch.utils.dlpack.to_dlpack(a))
    assert b.data_ptr() == a.data_ptr()
    torch.testing.assert_close(b.cpu(), a.cpu())
    b.add_(10)
    torch.testing.assert_close(a.cpu(), torch.tensor([11.0, 12.0, 13.0]))
