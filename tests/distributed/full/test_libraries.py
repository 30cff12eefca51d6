"""Libraries on top of the parallelism stack, under torchrun on neuron: Accelerate and the
Transformers Trainer (against the same jobs on CPU/gloo) and TorchTitan's Llama 3 debug model
(FSDP on 2 processes, FSDP + TP on 4), through the examples in ``examples/``."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

from examples.torchtitan_llama3_debug import STEPS, read_losses
from tests.distributed import harness

ROOT = pathlib.Path(__file__).resolve().parents[3]
TITAN_SCRIPT = ROOT / "examples" / "torchtitan_llama3_debug.py"
ENV = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_accelerate_and_trainer_match_cpu(tmp_path):
    script = str(ROOT / "examples" / "accelerate_trainer.py")
    for name, extra in (("neuron", ()), ("cpu", ("--cpu",))):
        harness.torchrun(script, nproc=2, args=("--out", str(tmp_path / name), *extra), timeout=400, env=ENV)
    neuron, cpu = (json.loads((tmp_path / name / "losses.json").read_text()) for name in ("neuron", "cpu"))
    assert len(neuron["accelerate"]) == 4 and len(neuron["trainer"]) == 4
    # float32 on both; the devices differ only in summation order (matmuls, the gradient all-reduce).
    for job in ("accelerate", "trainer"):
        torch.testing.assert_close(torch.tensor(neuron[job]), torch.tensor(cpu[job]), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def titan_reference(tmp_path_factory):
    """The CPU reference of the TorchTitan job: its directory (``initial_weights``, the DCP
    checkpoint both runs start from) and its per-step ``"loss"`` and ``"grad_norm"``."""
    pytest.importorskip("torchtitan", reason="requires torchtitan (the examples extra)")
    out = tmp_path_factory.mktemp("titan_cpu")
    command = [sys.executable, str(TITAN_SCRIPT), "--out", str(out), "--reference-cpu"]
    # No neuron in this process: the reference is plain PyTorch on the CPU.
    env = {**os.environ, **ENV, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out, json.loads((out / "losses.json").read_text())


@pytest.mark.parametrize(
    ("nproc", "titan_args"),
    [
        (2, ()),
        (4, ("--parallelism.tensor_parallel_degree", "2")),
        # TorchTitan's compiled blocks under selective activation checkpointing (its debug model's
        # default policy), the loss compiled too.
        (2, ("--activation-checkpoint", "selective", "--compile.enable", "--compile.backend", "neuron")),
    ],
    ids=["fsdp", "fsdp-tp", "fsdp-compiled-selective-ac"],
)
def test_torchtitan_llama3_debug_matches_cpu(tmp_path, titan_reference, nproc, titan_args):
    # TorchTitan's trainer has no CPU device: the reference trains TorchTitan's model class with
    # plain PyTorch from the job's config, the same global batches and the same initial weights.
    reference_dir, reference = titan_reference
    env = {**ENV, "NEURON_RT_NUM_CORES": str(max(2, nproc))}
    args = ("--out", str(tmp_path), "--initial-weights", str(reference_dir / "initial_weights"), *titan_args)
    run = harness.torchrun(str(TITAN_SCRIPT), nproc=nproc, args=args, timeout=500, env=env)
    losses, grad_norms = read_losses(run.stdout), read_losses(run.stdout, "grad_norm")
    assert sorted(losses) == sorted(grad_norms) == list(range(1, STEPS + 1)), run.stdout[-3000:]
    # float32 on both, so the runs differ by summation order: measured at most 4e-6 in the loss
    # and 5e-5 in the gradients' norm, within the log's rounding (5 and 4 decimals: 5e-6, 5e-5).
    # The norm sees the gradients' scale, which the loss sees only through clipping (AdamW's step
    # is scale-invariant up to eps).
    for logged, expected, atol in ((losses, reference["loss"], 1e-5), (grad_norms, reference["grad_norm"], 1e-4)):
        torch.testing.assert_close(
            torch.tensor([logged[step] for step in range(1, STEPS + 1)], dtype=torch.float64),
            torch.tensor(expected, dtype=torch.float64),
            rtol=0,
            atol=atol,
        )
    # The job learns (from ln(2048) = 7.6 a model that does not stays near 7.6-8.2).
    assert losses[STEPS] < losses[1] - 0.5, losses
