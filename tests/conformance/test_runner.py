"""The conformance runner itself: outcomes, the report files, the command line and the worker process."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest
import torch

from torch_neuronx import cli
from torch_neuronx.testing import run_conformance, sweep, write_report


def test_in_process_sweep_records_one_outcome_per_sample_and_dtype_skips():
    rows = run_conformance(["abs"], [torch.float32, torch.int64], max_samples_per_op=2, isolate=False, progress=False)
    ran = [(row.dtype, row.phase, row.sample_index, row.outcome) for row in rows if row.sample_index >= 0]
    assert ran.count(("float32", "forward", 0, "pass")) == 1
    assert {(dtype, phase) for dtype, phase, _, _ in ran} == {
        ("float32", "forward"),
        ("float32", "backward"),
        ("float32", "inplace"),
        ("float32", "argument-errors"),
        ("int64", "forward"),
    }
    assert all(outcome == "pass" for *_, outcome in ran)
    skipped = [row for row in rows if row.outcome == "skipped"]
    assert skipped and all("FP64" in row.detail for row in skipped if row.dtype == "float64")


def test_sweep_runs_the_cuda_dtype_phase_for_dtypes_only_cuda_computes():
    rows = run_conformance(["histc"], [torch.int32], max_samples_per_op=2, isolate=False, progress=False)
    ran = [(row.dtype, row.phase, row.outcome) for row in rows if row.sample_index >= 0]
    assert ran == [("int32", "cuda-dtype", "pass")] * 2


def test_report_has_a_parquet_row_per_outcome_and_a_summary(tmp_path):
    rows = run_conformance(["neg"], [torch.float32], max_samples_per_op=1, isolate=False, progress=False)
    table, summary = write_report(rows, tmp_path, command="torch-neuronx conformance --ops neg", seconds=1.0)
    assert pq.read_table(table).num_rows == len(rows)
    text = summary.read_text()
    assert "$ torch-neuronx conformance --ops neg" in text and "## By op family" in text


@pytest.mark.skipif(
    os.environ.get("TORCH_NEURONX_CONFORMANCE_FULL") != "1",
    reason="four worker processes (20 s); make test-conformance (TORCH_NEURONX_CONFORMANCE_FULL=1) runs it",
)
def test_isolated_worker_is_replaced_when_it_grows_or_its_memory_mappings_near_the_limit(monkeypatch):
    """Each XLA executable maps memory of its own: past vm.max_map_count, LLVM cannot compile. A worker
    past its share of mappings is replaced after its sample, and the op resumes in the next one; a
    worker grown past its memory limit is replaced after its op. Both in one sweep (worker starts
    are the slow part): each op's sample fills the mappings and each op's end finds the worker grown,
    so every op takes two workers."""

    starts = []
    start = sweep._Isolated._start
    monkeypatch.setattr(sweep._Isolated, "_start", lambda self: (starts.append(1), start(self)))
    monkeypatch.setattr(sweep, "_WORKER_MAPPINGS_SHARE", 0)
    monkeypatch.setattr(sweep, "_WORKER_MEMORY_LIMIT", 0)
    rows = run_conformance(
        ["abs", "neg"],
        [torch.float32],
        max_samples_per_op=1,
        backward=False,
        in_place=False,
        wrong_arguments=False,
        progress=False,
    )
    assert [(row.op, row.outcome) for row in rows if row.sample_index >= 0] == [("abs", "pass"), ("neg", "pass")]
    # Without the mappings check: 2 starts (one per op); without the memory check: 3 (the second op
    # would reuse the worker that finished the first).
    assert len(starts) == 4


def test_command_line_rejects_unknown_ops_and_dtypes(tmp_path, caplog):
    assert cli.main(["conformance", "--ops", "no_such_op", "--out", str(tmp_path)]) == 2
    assert "matches no OpInfo" in caplog.text
    assert cli.main(["conformance", "--ops", "softshrink", "--out", str(tmp_path)]) == 2
    assert "did you mean 'nn.functional.softshrink'?" in caplog.text
    assert cli.main(["conformance", "--ops", "abs", "--dtypes", "float33", "--out", str(tmp_path)]) == 2
    assert "'float33' is not a torch dtype" in caplog.text
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--max-samples-per-op", "0"], "--max-samples-per-op must be positive"),
        (["--budget-minutes", "-1"], "--budget-minutes must be positive"),
        (["--timeout", "0"], "--timeout must be positive"),
        (["--dtypes", ""], "--dtypes needs at least one name"),
        (["--out", "/proc/no-such-dir"], "cannot be created as a directory"),
    ],
)
def test_command_line_rejects_arguments_that_would_run_nothing_or_fail_late(arguments, message, tmp_path, caplog):
    argv = ["conformance", "--ops", "abs", "--out", str(tmp_path / "report"), *arguments]
    assert cli.main(argv) == 2
    assert message in caplog.text


def test_the_running_test_lookup_finds_what_pytorchs_stack_reading_one_finds():
    # op_db() installs the frame-walking lookup; PyTorch's own reads every frame's source.
    import inspect
    import unittest

    from torch.testing._internal import common_utils

    from torch_neuronx.testing.opinfo import op_db

    neg = next(op for op in op_db() if op.name == "neg")
    assert common_utils.extract_test_fn.__module__ == "torch_neuronx._compat.testing_internals"

    def stack_reading_lookup():
        for frame_info in inspect.stack():
            self_val = frame_info.frame.f_locals.get("self")
            if isinstance(self_val, unittest.TestCase):
                *_, cls_name, test_name = self_val.id().rsplit(".", 2)
                if cls_name == type(self_val).__name__ and test_name.startswith("test"):
                    return getattr(self_val, test_name).__func__
        return None

    found = {}

    class Case(unittest.TestCase):
        def test_samples(self):
            found["lookup"], found["reference"] = common_utils.extract_test_fn(), stack_reading_lookup()
            sample = next(iter(neg.sample_inputs("cpu", torch.float32)))
            found["tracked"] = type(self).test_samples.tracked_input.val is sample

    Case.test_samples.tracked_input = None  # PyTorch's @ops sets this attribute to enable tracking
    with open(os.devnull, "w") as devnull:
        assert unittest.TextTestRunner(stream=devnull).run(Case("test_samples")).wasSuccessful()
    assert found == {"lookup": Case.test_samples, "reference": Case.test_samples, "tracked": True}
    assert common_utils.extract_test_fn() is None
