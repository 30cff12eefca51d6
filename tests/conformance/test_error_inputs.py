"""PyTorch's OpInfo error inputs on neuron: every call the CPU refuses is refused on neuron too, with
the exception type and message PyTorch's own test (test_ops.py ``test_errors``) expects.

The message must be the CPU's word for word, except where CUDA words it otherwise
(``tables.CUDA_WORDED_ERRORS``, as neuron does). An error input whose expectation the CPU does not
meet (it is written for another device) is not checked; neither is one whose point is aliasing or
devices (out= overlapping an input, tensors on two devices), which the CPU copy of the call loses.
Known wording differences come from ``torch_neuronx.testing.tables.KNOWN_ERROR_WORDING``.
"""

from __future__ import annotations

import os
import re
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch.utils._pytree import tree_map

from torch_neuronx.testing import tables
from torch_neuronx.testing.opinfo import full_name, op_db

#: OpInfos whose error inputs are built in float64, which neuron refuses to hold (decision 8).
FLOAT64_ERROR_INPUTS = frozenset(
    {
        "aminmax",
        "amax",
        "cat",
        "complex",
        "amin",
        "gather",
        "scatter",
        "scatter_add",
        "multinomial",
        "nn.functional.conv1d",
        "nn.functional.conv2d",
        "nn.functional.conv3d",
    }
)


def _raised(op: Any, sample: Any, synchronize: bool) -> BaseException | None:
    try:
        result = op(sample.input, *sample.args, **sample.kwargs)
        if synchronize:
            torch.neuron.synchronize()  # device faults are raised at the next synchronisation point
        del result
    except Exception as error:  # noqa: BLE001 - the outcome under test
        return error
    return None


def _on_cpu(sample: Any) -> Any:
    """The same call with every neuron tensor copied to the CPU."""

    def to_cpu(value: Any) -> Any:
        return value.cpu() if isinstance(value, torch.Tensor) and value.device.type == "neuron" else value

    return SimpleNamespace(
        input=tree_map(to_cpu, sample.input), args=tree_map(to_cpu, sample.args), kwargs=tree_map(to_cpu, sample.kwargs)
    )


def _meets(error: BaseException | None, error_input: Any) -> bool:
    return isinstance(error, error_input.error_type) and re.search(error_input.error_regex, str(error)) is not None


def _ops() -> list[Any]:
    """Every other OpInfo with error inputs (in database order); all of them with
    ``TORCH_NEURONX_CONFORMANCE_FULL=1`` (``make test-conformance``)."""
    ops = [op for op in op_db() if op.error_inputs_func is not None]
    if os.environ.get("TORCH_NEURONX_CONFORMANCE_FULL") != "1":
        ops = ops[::2]
    return [
        pytest.param(op, id=full_name(op), marks=[pytest.mark.skip(reason="float64 error inputs: FP64 policy")])
        if full_name(op) in FLOAT64_ERROR_INPUTS
        else pytest.param(op, id=full_name(op))
        for op in ops
    ]


def _worded(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error)[:300]}"


@pytest.mark.parametrize("op", _ops())
def test_error_inputs_raise_as_on_cpu(op):
    name = full_name(op)
    problems = []
    for index, neuron_input in enumerate(op.error_inputs("neuron:0")):
        on_cpu = _raised(op, _on_cpu(neuron_input.sample_input), synchronize=False)
        if not _meets(on_cpu, neuron_input):
            continue  # the CPU does not raise it either: the expectation is another device's
        raised = _raised(op, neuron_input.sample_input, synchronize=True)
        if (name, index) in tables.KNOWN_ERROR_WORDING:
            if raised is None or _meets(raised, neuron_input):
                problems.append(f"#{index}: {'accepted' if raised is None else 'fixed'}; update KNOWN_ERROR_WORDING")
        elif not _meets(raised, neuron_input):
            expected = f"{neuron_input.error_type.__name__} matching {neuron_input.error_regex!r}"
            got = "no error" if raised is None else _worded(raised)
            problems.append(f"#{index}: expected {expected}, got {got}")
        elif (name, index) not in tables.CUDA_WORDED_ERRORS and "device" not in str(on_cpu):
            # The exact words too (the CPU copy of a call that mixes devices names other devices).
            if _worded(raised) != _worded(on_cpu):
                problems.append(f"#{index}: the CPU raises {_worded(on_cpu)!r}, neuron {_worded(raised)!r}")
    assert not problems, f"{name}:\n" + "\n".join(problems)
