"""A two-process sample of the distributed suite, for the default run: one job (about 20 s on two
cores) runs the checks below, each against gloo on the CPU (``checks.py``); ``full/`` runs them all.
"""

from __future__ import annotations

import pytest

from tests.distributed import checks, harness

SAMPLE = [
    "current_device_follows_local_rank",
    "all_reduce_SUM_float32",
    "all_reduce_AVG_bfloat16",
    "all_reduce_MAX_int32",
    "all_reduce_SUM_complex32",
    "all_reduce_async_orders_later_work",
    "callbacks_run_in_program_order",
    "all_reduce_at_and_past_the_inline_size",
    "a_callback_running_a_compiled_update_waits_for_no_later_collective",
    "all_reduce_async_then_sync_on_one_tensor",
    "async_collective_returns_before_the_peers_call_it",
    "async_disagreement_raises_at_wait_on_every_rank",
    "destroying_a_group_finishes_its_async_collectives",
    "destroyed_groups_are_freed_off_gloo_threads",
    "broadcast_int64",
    "all_gather_into_tensor",
    "reduce_scatter_tensor_SUM_float32",
    "all_gather_uneven",
    "reduce_scatter_uneven",
    "all_to_all_single_uneven",
    "all_to_all_single_mismatched_splits_raise",
    "send_recv",
    "send_recv_mismatched_size_raises",
    "shapes_of_one_element_count_compute",
    "all_gather_object",
    "split_group",
    "cpu_tensor_on_neuron_group_raises",
    "dtypes_nccl_lacks_raise",
    "arguments_refused_on_one_rank_raise_on_every_rank",
    "profiled_all_reduce_is_a_device_event",
    "ddp_step_matches_one_cpu_process",
    "sync_batch_norm_matches_batch_norm_in_one_cpu_process",
]


@pytest.fixture(scope="module")
def outcomes() -> dict[int, dict[str, str | None]]:
    return harness.spawn(checks.worker, world_size=2, args=(SAMPLE,), timeout=150)


@pytest.mark.parametrize("name", SAMPLE)
def test_two_processes(outcomes, name):
    failures = {rank: result[name] for rank, result in outcomes.items() if result[name] is not None}
    assert not failures, "\n".join(f"rank {rank}:\n{error}" for rank, error in failures.items())
