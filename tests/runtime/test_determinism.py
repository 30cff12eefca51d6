"""torch.use_deterministic_algorithms on neuron: ATen's device-independent alerts, as on the CPU."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing._internal.common_utils import DeterministicGuard

_CALLS = {
    "put_": lambda a, i, v, acc: a.put_(i, v, accumulate=acc),
    "put": lambda a, i, v, acc: torch.Tensor.put(a, i, v, accumulate=acc),
    "put.out": lambda a, i, v, acc: torch.ops.aten.put.out(a, i, v, acc, out=torch.empty_like(a)),
}
_ALERT = "put_ does not have a deterministic implementation, but you set 'torch.use_deterministic_algorithms(True"


def _run(call, device, accumulate, warn_only):
    """(how the call ended, its result or message) and the messages of the alerts it warned."""
    a = torch.arange(5.0, device=device)
    i = torch.tensor([0, 0], device=device)
    v = torch.tensor([7.0, 8.0], device=device)
    with DeterministicGuard(True, warn_only=warn_only), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = call(a, i, v, accumulate).cpu()
        except RuntimeError as error:
            return ("raised", str(error)), []
    return ("returned", result), [str(w.message) for w in caught if str(w.message).startswith(_ALERT)]


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("name", list(_CALLS))
def test_put_alerts_as_on_the_cpu(name, accumulate):
    # ATen's put_ alerts on every device unless it accumulates; put and put.out are clone and put_.
    expected = _run(_CALLS[name], "cpu", accumulate, warn_only=False)[0]
    actual = _run(_CALLS[name], "neuron", accumulate, warn_only=False)[0]
    assert actual[0] == expected[0] == ("returned" if accumulate else "raised")
    if accumulate:
        torch.testing.assert_close(actual[1], expected[1])
    else:
        assert actual[1] == expected[1] and actual[1].startswith(_ALERT)


@pytest.mark.parametrize("name", list(_CALLS))
def test_put_warns_its_alert_and_computes_under_warn_only(name):
    expected = torch.arange(5.0).put_(torch.tensor([0, 0]), torch.tensor([7.0, 8.0]))
    (how, result), alerts = _run(_CALLS[name], "neuron", False, warn_only=True)
    assert how == "returned" and len(alerts) == 1
    torch.testing.assert_close(result, expected)


_CUDA_KERNEL_ALERTS = {
    "histc": lambda x: torch.histc(x, bins=4, min=0, max=3),
    "median_dim": lambda x: torch.median(x, dim=0),
}


@pytest.mark.parametrize("name", list(_CUDA_KERNEL_ALERTS))
def test_cuda_kernel_alerts_of_pytorchs_meta_kernels_are_not_raised(name):
    # The meta kernels take a meta tensor for a CUDA one and raised CUDA's alerts for histc and
    # median on the first call of a shape only (a cached executable skipped the meta call).
    call = _CUDA_KERNEL_ALERTS[name]
    x = torch.tensor([0.5, 2.5, 2.5, 1.0, 3.0])
    with DeterministicGuard(True), warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a warning under warn_only
        expected = call(x)
        actual = call(x.to("neuron"))
    leaves = torch.utils._pytree.tree_leaves
    for got, want in zip(leaves(actual), leaves(expected), strict=True):
        torch.testing.assert_close(got.cpu(), want, atol=0, rtol=0)
