"""Every check of ``checks.py`` (each collective, reduction operator and dtype, against gloo on the
CPU), in one two-process job of about a minute."""

from __future__ import annotations

import pytest

from tests.distributed import checks, harness

NAMES = list(checks.CHECKS)


@pytest.fixture(scope="module")
def outcomes() -> dict[int, dict[str, str | None]]:
    return harness.spawn(checks.worker, world_size=2, args=(NAMES,), timeout=400)


@pytest.mark.parametrize("name", NAMES)
def test_two_processes(outcomes, name):
    failures = {rank: result[name] for rank, result in outcomes.items() if result[name] is not None}
    assert not failures, "\n".join(f"rank {rank}:\n{error}" for rank, error in failures.items())
