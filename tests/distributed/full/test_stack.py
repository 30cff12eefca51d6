"""The parallelism stack on the ``neuron`` c10d backend: DDP, FSDP2, DTensor, tensor and pipeline
parallelism, distributed checkpoint and FSDP2 + TP on a 2-D mesh (its dimension groups made by
new_group, and by split_group when the default group is bound to a core), each against one CPU
process.

The checks live in ``stack_checks.py``; one group of processes runs a whole suite and each check is
reported here as its own test. Part of ``make test-distributed`` (``full/``); the default run has
one DDP step of them, in ``test_sample.py``'s job.
"""

from __future__ import annotations

import pytest

from tests.distributed.launcher import check_failures, run_group
from tests.distributed.stack_checks import check_names

#: Seconds a suite may take, start-up (about 3 s a process) and every op's first compile included.
SUITE_TIMEOUT_S = 900


def _run(tmp_path_factory: pytest.TempPathFactory, suite: str, world_size: int) -> list[dict]:
    # Each process drives one NeuronCore (LOCAL_RANK): a process must see world_size of them.
    env = {"NEURON_RT_NUM_CORES": str(max(2, world_size))}
    return run_group(
        "tests.distributed.stack_checks",
        [suite, "neuron"],
        world_size,
        tmp_path_factory.mktemp(suite),
        SUITE_TIMEOUT_S,
        env,
    )


@pytest.fixture(scope="module")
def stack_results(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return _run(tmp_path_factory, "stack", 2)


@pytest.fixture(scope="module")
def mesh2d_results(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return _run(tmp_path_factory, "mesh2d", 4)


@pytest.fixture(scope="module")
def mesh2d_bound_results(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return _run(tmp_path_factory, "mesh2d_bound", 4)


@pytest.mark.parametrize("check", check_names("stack"))
def test_stack_two_processes(stack_results: list[dict], check: str) -> None:
    assert not check_failures(stack_results, check), check_failures(stack_results, check)


@pytest.mark.parametrize("check", check_names("mesh2d"))
def test_stack_four_processes(mesh2d_results: list[dict], check: str) -> None:
    assert not check_failures(mesh2d_results, check), check_failures(mesh2d_results, check)


@pytest.mark.parametrize("check", check_names("mesh2d_bound"))
def test_stack_four_processes_bound_to_cores(mesh2d_bound_results: list[dict], check: str) -> None:
    # init_process_group(device_id=...): the mesh's dimension groups come from split_group.
    assert not check_failures(mesh2d_bound_results, check), check_failures(mesh2d_bound_results, check)
