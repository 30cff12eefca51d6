"""The argument-errors phase of the conformance runner (torch_neuronx/testing/argument_errors.py):
each OpInfo's first float32 sample with one argument made wrong at a time raises on neuron as on the
CPU, in its words, or computes the CPU's values.

Every other OpInfo (in database order) runs here; all of them with ``TORCH_NEURONX_CONFORMANCE_FULL=1``
(``make test-conformance``) and in ``torch-neuronx conformance``. Known differences, each with its
reason, are in ``torch_neuronx.testing.tables.ARGUMENT_ERROR_DIFFERENCES``.
"""

from __future__ import annotations

import os

import pytest
import torch

from torch_neuronx.testing import argument_errors, conformance, tables
from torch_neuronx.testing.opinfo import full_name, op_db, sample_input

FULL = os.environ.get("TORCH_NEURONX_CONFORMANCE_FULL") == "1"


def _ops() -> list:
    ops = op_db() if FULL else op_db()[::2]
    return [pytest.param(op, id=full_name(op)) for op in ops]


@pytest.mark.parametrize("op", _ops())
def test_wrong_arguments_raise_or_compute_as_on_cpu(op):
    row = argument_errors.check_mutated_sample(op)
    assert row.outcome in ("pass", "fallback", "skipped"), row.detail


def test_mutations_make_one_argument_wrong_at_a_time():
    x, weight = torch.ones(2, 3), torch.ones(3)
    sample = sample_input(x, [1, [2, 3], 0.5], {"weight": weight, "flag": True}, lambda out: out)
    made = dict(argument_errors.mutations(sample))
    assert list(made) == [
        "arg0=-1",
        "arg0=0",
        "arg0=1000",
        "arg1[0]=-1",
        "arg1[0]=0",
        "arg1+extra",
        "arg2=-1.0",
        "arg2=0.0",
        "weight.unsqueeze(0)",
        "weight.lastdim+1",
        "input.unsqueeze(0)",
        "input.select(0, 0)",
    ]
    assert made["arg1+extra"].args == (1, [2, 3, 1], 0.5)
    assert made["weight.lastdim+1"].kwargs["weight"].shape == (4,)
    assert made["input.select(0, 0)"].input.shape == (3,) and made["input.select(0, 0)"].args == sample.args


def test_same_words_sets_aside_what_a_device_fault_adds():
    cpu = RuntimeError("index 5 is out of bounds for dimension 1 with size 5")
    fault = RuntimeError(
        "aten::gather.default on neuron:0: index 5 is out of bounds for dimension 1 with size 5\n"
        "This device fault was raised at a synchronization point after the op ran asynchronously; ..."
    )
    assert conformance.same_words(fault, cpu)
    assert not conformance.same_words(RuntimeError("index 5 is out of bounds"), cpu)
    typed = RuntimeError("expand(torch.FloatTensor{[2]}, size=[]): the number of sizes provided (0) ...")
    assert conformance.same_words(
        RuntimeError("expand(neuronFloatType{[2]}, size=[]): the number of sizes provided (0) ..."), typed
    )


def test_a_known_difference_that_agrees_now_fails_its_sample(monkeypatch):
    op = next(op for op in op_db() if full_name(op) == "neg")
    label = next(
        label for label, _ in argument_errors.mutations(conformance.samples(op, torch.float32, False, 1)[0][0])
    )
    monkeypatch.setitem(tables.ARGUMENT_ERROR_DIFFERENCES, ("neg", label), "a stale entry")
    row = argument_errors.check_mutated_sample(op)
    assert row.outcome == "error" and "remove it from ARGUMENT_ERROR_DIFFERENCES" in row.detail


@pytest.mark.parametrize("table", ["ARGUMENT_ERROR_DIFFERENCES", "ARGUMENT_ERROR_NOT_RUN"])
def test_every_table_entry_names_a_mutation_the_phase_makes(table):
    by_name = {full_name(op): op for op in op_db()}
    for name, label in getattr(tables, table):
        sample = conformance.samples(by_name[name], argument_errors.DTYPE, False, 1)[0][0]
        assert label in dict(argument_errors.mutations(sample)), (name, label)
