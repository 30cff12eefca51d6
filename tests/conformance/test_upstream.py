"""``torch-neuronx upstream-tests``: PyTorch's device-generic test base on neuron, through the command.

The samples in ``upstream_sample/`` are written the way PyTorch's test files are; PyTorch's own files
are not part of this repository (third_party/pytorch_tests/README.md), so a slice of one runs here
only where they are present.
"""

from __future__ import annotations

import importlib
import pathlib
import unittest

import pyarrow.parquet as pq
import pytest
import torch

from torch_neuronx import cli
from torch_neuronx._compat import upstream_tests
from torch_neuronx.testing import tables, upstream, upstream_plugin

SAMPLES = pathlib.Path(__file__).parent / "upstream_sample"


def _outcomes(out: pathlib.Path) -> dict[str, tuple[str, str]]:
    table = pq.read_table(out / "outcomes.parquet").to_pylist()
    return {row["test"]: (row["outcome"], row["reason"]) for row in table}


def test_device_generic_file_outcomes_through_the_command(tmp_path):
    # A file in a folder of the tests directory is named by its path there (dynamo/test_device.py).
    name = "upstream_sample/device_generic_sample.py"
    argv = ["upstream-tests", "--tests-dir", str(SAMPLES.parent), "--files", name]
    assert cli.main([*argv, "--no-progress", "--out", str(tmp_path)]) == 0
    found = _outcomes(tmp_path)
    # The float64 variant of @dtypes and the complex128 one of @parametrize are not instantiated;
    # the class for accelerators (only_for naming "cuda") is, the class for the CPU is not.
    assert {test: outcome for test, (outcome, _) in found.items()} == {
        "test_runs_where_cuda_does_neuron": "passed",
        "test_add_matches_cpu_neuron_float32": "passed",
        "test_neg_matches_cpu_bfloat16_neuron_bfloat16": "passed",
        "test_makes_a_double_tensor_neuron": "skipped-ours",
        "test_rewraps_a_double_tensor_error_neuron": "skipped-ours",
        "test_makes_a_sparse_tensor_neuron": "skipped-ours",
        "test_only_cuda_neuron": "skipped-pytorch",
        "test_wrong_value_fails_neuron": "failed",
    }
    assert "FP64 policy" in found["test_makes_a_double_tensor_neuron"][1]
    assert "FP64 policy" in found["test_rewraps_a_double_tensor_error_neuron"][1]
    assert "sparse and quantized tensors" in found["test_makes_a_sparse_tensor_neuron"][1]
    assert "Tensor-likes are not close" in found["test_wrong_value_fails_neuron"][1]
    summary = (tmp_path / "summary.md").read_text()
    assert f"| {name} | 8 | 8 | 3 | 1 | 1 | 3 | 0 | 0 | 75.0% | 37.5% |" in summary
    # float64, complex128; all; share of the 10 variants.
    assert f"| {name} | 1 | 1 | 2 | 20.0% |" in summary
    assert set(pq.read_table(tmp_path / "outcomes.parquet").column("file").to_pylist()) == {name}


@pytest.mark.parametrize(
    ("only_for", "except_for", "neuron_too"),
    [
        (("cuda", "hpu", "xpu"), None, True),
        (["cpu", "cuda"], None, True),
        ("cuda", None, True),
        ("cpu", None, False),
        ("xpu", None, False),
        (None, None, False),
        (("cuda", "privateuse1"), None, False),
        (("cuda",), "privateuse1", False),
    ],
)
def test_classes_for_accelerators_naming_cuda_are_instantiated_for_neuron(only_for, except_for, neuron_too):
    chosen = upstream_tests._with_neuron(only_for, except_for)
    assert (chosen != only_for) is neuron_too
    if neuron_too:
        assert list(chosen) == [*upstream_tests._names(only_for), "privateuse1"]


def test_a_crash_and_a_hang_are_recorded_and_the_file_carries_on(tmp_path):
    rows, stops = upstream.run_upstream(["process_faults_sample.py"], tests_dir=SAMPLES, timeout=3.0, progress=False)
    assert stops == {"process_faults_sample.py": "done"}
    assert {row.test: row.outcome for row in rows} == {
        "test_a_passes": "passed",
        "test_b_exits_the_interpreter": "crashed",
        "test_c_hangs": "timeout",
        "test_d_runs_after_both": "passed",
    }


@pytest.mark.parametrize(
    ("count", "size", "chosen"),
    [(10, 3, [0, 3, 6]), (5, 2, [0, 2]), (4, 4, [0, 1, 2, 3]), (3, 8, [0, 1, 2])],
)
def test_sample_spreads_over_the_whole_file(count, size, chosen):
    # --sample N keeps N tests evenly spaced from the first, so a budget reaches a long file's end.
    assert upstream_plugin._sample(list(range(count)), size) == chosen


def test_renamed_names_are_bound_where_the_installed_release_lacks_them():
    # Each old name resolves to its new home, and install_compat binds only the absent ones.
    for (module_name, name), (target, why) in upstream_tests.RENAMED.items():
        assert callable(target) and why, (module_name, name)
    bound = upstream_tests.install_compat()
    for qualified in bound:
        module_name, _, name = qualified.rpartition(".")
        assert hasattr(importlib.import_module(module_name), name)
    from torch.testing._internal import common_methods_invocations, common_utils

    assert common_utils.skipIfMps is common_utils.skipIfMPS
    assert common_methods_invocations.skip("add") == ("add", "", None, None, False)
    assert upstream_tests.install_compat() == []


def test_opinfo_skips_naming_a_renamed_class_apply_to_its_old_name():
    # torch 2.13's OpInfos skip pow's complex small values on every device for
    # TestBinaryUfuncsDevice; v2.4.0's test_binary_ufuncs.py calls the class TestBinaryUfuncs, and
    # without the rename the test ran and failed as PyTorch expects it to.
    from torch.testing._internal.common_methods_invocations import op_db

    upstream_tests.install_renamed_classes()
    upstream_tests.install_renamed_classes()  # idempotent
    pow_op = next(op for op in op_db if op.name == "pow")
    args = ("test_reference_numerics_small_values", "privateuse1", torch.complex64, {})
    for old, (new, why) in upstream_tests.RENAMED_CLASSES.items():
        assert why and pow_op.get_decorators(old, *args) == pow_op.get_decorators(new, *args) != []
    assert pow_op.get_decorators("TestUnrelated", *args) == []


def test_fixtures_calling_super_of_their_own_class_run_once_each():
    # test_linalg's TestLinalg calls super(self.__class__, self).setUp(), which recursed once 2.13
    # made the generic class a base of the device class.
    from torch.testing._internal.common_utils import TestCase

    calls = []

    class TestOldStyle(TestCase):
        def setUp(self):
            super(self.__class__, self).setUp()
            calls.append("setUp")

        def tearDown(self):
            calls.append("tearDown")
            super(self.__class__, self).tearDown()

        def test_x(self):
            calls.append("test")

    device_class = type("TestOldStyleNEURON", (upstream_tests.NeuronTestBase, TestOldStyle), {})
    result = unittest.TestResult()
    device_class("test_x").run(result)
    assert (result.errors, result.failures, calls) == ([], [], ["setUp", "test", "tearDown"])


def test_old_skipops_form_checks_its_names_against_the_test():
    # The old skipOps(class, test, entries) names what 2.13's form reads from the test itself.
    class TestSomething:
        def test_x(self):
            pass

    with pytest.raises(AssertionError, match="decorates .*TestSomething.test_x"):
        upstream_tests._skip_ops("TestOther", "test_x", [])(TestSomething.test_x)
    decorated = upstream_tests._skip_ops("TestSomething", "test_x", [("add", "", None, None, False)])(
        TestSomething.test_x
    )
    assert list(decorated._op_overrides) == ["add"]


def test_missing_test_files_say_how_to_provide_them(tmp_path):
    with pytest.raises(FileNotFoundError, match="fetches nothing"):
        upstream.find_tests_dir(tmp_path / "absent")


@pytest.mark.parametrize(
    ("name", "skipped"),
    [
        ("test_add_neuron_float64", True),
        ("test_copy_neuron_float32_complex128", True),
        ("test_add_neuron_float32", False),
        ("test_float64_flag_neuron", False),
        ("test_trivial_fancy_out_of_bounds_neuron", True),
        ("test_trivial_fancy_neuron", False),
        ("test_kaiser_window_neuron_bfloat16", True),
        ("test_kaiser_window_neuron_int64", False),
        ("test_signal_window_functions_window_hann_neuron_float32", True),
        ("test_pin_memory", True),
        ("test_pin_memory_from_constructor_neuron", False),
    ],
)
def test_skips_follow_the_name_and_the_dtype_suffix(name, skipped):
    assert (tables.upstream_skip_reason(name) is not None) is skipped


def test_slice_of_pytorchs_own_file_when_present(tmp_path):
    try:
        tests_dir = upstream.find_tests_dir(None)
    except FileNotFoundError:
        pytest.skip("PyTorch's test files are not in third_party/pytorch_tests (see its README.md)")
    rows, stops = upstream.run_upstream(
        ["test_shape_ops.py"], keyword="test_flip and float32", tests_dir=tests_dir, progress=False
    )
    assert stops == {"test_shape_ops.py": "done"}
    assert rows and all(row.outcome == "passed" for row in rows), [(r.test, r.reason) for r in rows]


def test_publish_replaces_only_its_own_section(tmp_path):
    doc = tmp_path / "coverage.md"
    doc.write_text("# Operator coverage\n\nold table\n")
    upstream.publish(doc, section="## Upstream\n\nfirst")
    upstream.publish(doc, section="## Upstream\n\nsecond")
    upstream.publish(doc, rest="# Operator coverage\n\nnew table\n")
    assert doc.read_text() == (
        f"# Operator coverage\n\nnew table\n\n{upstream.BEGIN}\n## Upstream\n\nsecond\n{upstream.END}\n"
    )


def test_publish_keeps_the_hand_written_parts_of_the_conformance_summary(tmp_path):
    doc = tmp_path / "coverage.md"
    notes = "<!-- hand-written: begin -->\n## Dynamo tests\n\nwritten by hand\n<!-- hand-written: end -->"
    doc.write_text(f"# Operator coverage\n\nold table\n\n{notes}\n")
    upstream.publish(doc, section="## Upstream\n\nfirst")
    upstream.publish(doc, rest="# Operator coverage\n\nnew table\n")
    assert doc.read_text() == (
        f"# Operator coverage\n\nnew table\n\n{notes}\n\n{upstream.BEGIN}\n## Upstream\n\nfirst\n{upstream.END}\n"
    )


@pytest.mark.parametrize(
    ("claims", "fp64_only"),
    [
        ("did not work in forward but are listed by the OpInfo: {torch.float64}", True),
        ("did not work in backward but are listed by the OpInfo: {torch.float64, torch.complex128}", True),
        ("did not work in forward but are listed by the OpInfo: {torch.float64, torch.float16}", False),
        ("worked in forward but are not listed by the OpInfo: {torch.complex64}", False),
        (
            "worked in forward but are not listed by the OpInfo: {torch.bool}.\nThe following dtypes did not "
            "work in forward but are listed by the OpInfo: {torch.float64}",
            False,
        ),
    ],
)
def test_dtype_claims_failing_by_fp64_alone_count_as_the_policy(claims, fp64_only):
    # test_ops' test_dtypes: the OpInfo's dtypes for a PrivateUse1 device are the CPU's, FP64 included.
    message = f"The supported dtypes for add on device type neuron are incorrect! The following dtypes {claims}."
    assert upstream_plugin._only_fp64_claims(message) is fp64_only


def test_a_python_reference_working_in_more_dtypes_than_it_claims_is_not_a_failure():
    # test_dtypes fails a reference only for claimed dtypes that did not work; its message lists the
    # unclaimed ones that worked too (_refs.cumprod of bool, the FP64 policy alone otherwise).
    message = (
        "The supported dtypes for _refs.cumprod on device type neuron are incorrect!\nThe following dtypes "
        "worked in forward but are not listed by the OpInfo: {torch.bool}.\nThe following dtypes did not work "
        "in forward but are listed by the OpInfo: {torch.complex128, torch.float64}."
    )
    assert upstream_plugin._only_fp64_claims(message)
    assert not upstream_plugin._only_fp64_claims(message.replace("torch.complex128, ", "torch.float16, "))


def test_a_dtype_whose_samples_make_float64_tensors_counts_as_the_policy():
    # l1_loss's and block_diag's complex64 samples mix in float64 tensors (the --sample 450 run).
    policy = (
        "aten::empty.memory_format on neuron: float64 (double) tensors are not supported because Trainium has no "
        "FP64 arithmetic. Use torch.float32 instead."
    )
    message = (
        "The supported dtypes for nn.functional.l1_loss on device type neuron are incorrect! The following dtypes "
        "did not work in forward but are listed by the OpInfo: {torch.complex64, torch.float64}. Unexpected "
        f"failures raised the following errors: torch.complex64 - {policy} torch.float64 - {policy} Caused by "
        "sample input at index 5: SampleInput(...)"
    )
    assert upstream_plugin._only_fp64_claims(message)
    assert not upstream_plugin._only_fp64_claims(
        message.replace(f"torch.complex64 - {policy}", "torch.complex64 - RuntimeError: wrong")
    )


def test_each_finished_file_is_reported_while_the_run_goes_on(tmp_path, monkeypatch):
    # The driver wrote its report only at the end: a run cut short (a 60-minute timeout) left none.
    class FinishedFile:
        def __init__(self, path, keyword, timeout, work, sample, name):
            self.name, self.outcomes, self.collected, self.left_out = name, {}, (1, 1), {}

        def run(self, deadline):
            return "done"

        def rows(self):
            return [upstream.TestOutcome(self.name, "TestX", "test_a", "", "", "passed", "", 0.1)]

    monkeypatch.setattr(upstream, "_FileRun", FinishedFile)
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / name).write_text("")
    reports = []

    def after_file(rows, stops, not_run):
        reports.append(upstream.summary(rows, stops, command="c", seconds=1.0, source="s", not_run=not_run))

    rows, stops = upstream.run_upstream(
        ["test_a.py", "test_b.py"], tests_dir=tmp_path, progress=False, after_file=after_file
    )
    assert len(rows) == 2 and stops == {"test_a.py": "done", "test_b.py": "done"}
    assert "- `test_b.py`: not run yet: the run was still going" in reports[0]
    assert "| test_a.py |" in reports[0] and "| test_b.py |" not in reports[0]
    assert "not run yet" not in reports[1]


def test_a_sampled_run_estimates_the_whole_collection_file_by_file():
    # An equal-size sample per file weighs a file of 4 tests as much as one of 1,000.
    def outcome(file, test, kind):
        return upstream.TestOutcome(file, "TestX", test, "neuron", "", kind)

    rows = [outcome("small.py", "a", "skipped-ours"), outcome("small.py", "b", "skipped-ours")]
    rows += [outcome("large.py", "c", "passed"), outcome("large.py", "d", "failed")]
    collected = {"small.py": (4, 2), "large.py": (1000, 2)}
    text = upstream.summary(
        rows, {"small.py": "done", "large.py": "done"}, command="c", seconds=1.0, source="s", collected=collected
    )
    assert "| all | 1004 (4) | 4 | 1 | 1 | 0 | 2 | 0 | 0 | 50.0% | 50.0% |" in text
    estimate = "| all, estimated for the whole collection | 1004 | 1004 | 500 | 500 | 0 | 4 | 0 | 0 | 50.0% | 0.4% |"
    assert estimate in text


def test_opinfos_claim_for_neuron_what_cuda_or_the_cpu_computes(monkeypatch):
    # Neuron computes what CUDA's kernels or the CPU's do (eager/dispatched_dtypes.py): histc of int32
    # (CUDA counts integers, the CPU refuses them) and of float16 (the CPU's kernel takes it).
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.opinfo.core import OpInfo

    for name in ("supported_dtypes", "supported_backward_dtypes"):
        monkeypatch.setattr(OpInfo, name, getattr(OpInfo, name))  # restored after the test
    histc = next(op for op in op_db if op.name == "histc")
    cpu_claims = histc.supported_dtypes("cpu")
    upstream_tests.claim_cuda_dtypes()
    assert {torch.int32, torch.float16} <= histc.supported_dtypes("privateuse1")
    assert histc.supported_dtypes("neuron") == histc.supported_dtypes("cuda") | cpu_claims
    assert histc.supported_dtypes("cpu") == cpu_claims
