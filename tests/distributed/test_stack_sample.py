"""The default run's sample of the parallelism stack: one DDP step on 2 processes on the ``neuron``
c10d backend, its loss and parameters against the same step in one CPU process (seconds)."""

from __future__ import annotations

from tests.distributed.launcher import check_failures, run_group

#: Two processes' start-up (about 3 s each, on 2 CPU cores) and one step's compiles, with margin.
SAMPLE_TIMEOUT_S = 120


def test_ddp_step_two_processes_matches_one_cpu_process(tmp_path) -> None:
    results = run_group("tests.distributed.stack_checks", ["sample", "neuron"], 2, tmp_path, SAMPLE_TIMEOUT_S)
    failures = check_failures(results, "ddp_one_step")
    assert not failures, failures
