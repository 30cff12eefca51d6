"""Conjugate and negative views of neuron tensors (torch_neuronx/eager/math_bits.py and copy.py).

``x.conj()`` and ``x.conj().imag`` set a bit instead of computing. Copies, and the ops PyTorch hands
to a backend with the bit still set, must read such tensors as their values, never as their storage.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch.testing import make_tensor

from tests.utils import assert_matches_cpu


def _complex(*shape):
    return make_tensor(shape, dtype=torch.complex64, device="cpu", low=-3, high=3)


def test_resolving_a_conjugate_view_does_not_crash_the_process():
    """Regression: clone of a conjugate neuron view recursed through _copy_from until the stack overflowed
    (SIGSEGV in torch.fft.ifft/hfft of a real input, whose result is a conjugate view)."""
    script = (
        "import torch, torch_neuronx\n"
        "x = torch.arange(8, dtype=torch.float32)\n"
        "y = torch.fft.ifft(x.to('neuron'))\n"
        "assert y.is_conj()\n"
        "torch.testing.assert_close(y.cpu(), torch.fft.ifft(x))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def _copy_into_conjugate_view(x, y):
    y = y.clone()
    y.conj().copy_(x)
    return y


def _copy_into_negative_view(x, y):
    y = y.clone()
    y.conj().imag.copy_(x.real)
    return y


def _in_place_on_conjugate_view(x, y):
    y = y.clone()
    y.conj().add_(x)
    return y


def _addmm_into_conjugate_view(x, y):
    y = y.clone()
    y.conj().addmm_(x, x)
    return y


CASES = {
    "clone": lambda x, y: x.conj().clone(),
    "resolve_conj": lambda x, y: x.conj().resolve_conj(),
    "pointwise": lambda x, y: x.conj() * y,
    "negative_view": lambda x, y: x.conj().imag * 2,
    "negative_view_clone": lambda x, y: x.conj().imag.clone(),
    "neg_of_negative_view": lambda x, y: x.conj().imag.clone().neg_(),
    # PyTorch passes these through its Conjugate key with the bit set (CPU kernels read it).
    "addmm": lambda x, y: torch.addmm(y, x.conj(), x),
    "addmm_conjugate_self": lambda x, y: torch.addmm(y.conj(), x, x.conj()),
    "dot": lambda x, y: torch.dot(x[0].conj(), y[1]),
    "vdot": lambda x, y: torch.vdot(x[0], y[1].conj()),
    "conj_physical": lambda x, y: torch.conj_physical(x.conj()),
    "copy_into_conjugate_view": _copy_into_conjugate_view,
    "copy_into_negative_view": _copy_into_negative_view,
    "in_place_on_conjugate_view": _in_place_on_conjugate_view,
    "addmm_into_conjugate_view": _addmm_into_conjugate_view,
}


@pytest.mark.parametrize("case", list(CASES))
def test_conjugate_and_negative_views_match_cpu(case):
    assert_matches_cpu(CASES[case], _complex(4, 4), _complex(4, 4), atol=1e-5, rtol=1e-5, native=False)


def _view(tensor, conjugate):
    return tensor.conj() if conjugate else tensor


@pytest.mark.parametrize("source_bit", [False, True])
@pytest.mark.parametrize("destination_bit", [False, True])
@pytest.mark.parametrize("direction", ["host_to_device", "device_to_host", "device_to_device"])
def test_copies_apply_the_bits_of_both_sides(direction, source_bit, destination_bit):
    """copy_ between conjugate views and plain tensors, in every direction, stores the source's values."""
    x, y = _complex(5), _complex(5)
    expected = y.clone()
    _view(expected, destination_bit).copy_(_view(x, source_bit))
    source = x if direction == "host_to_device" else x.to("neuron")
    target = y if direction == "device_to_host" else y.to("neuron")
    _view(target, destination_bit).copy_(_view(source, source_bit))
    torch.testing.assert_close(target.cpu(), expected)
