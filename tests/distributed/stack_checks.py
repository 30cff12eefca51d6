"""The parallelism stack through PyTorch's own APIs, each checked against one process on the CPU.

Run as a worker by ``launcher.run_group`` (``python -m tests.distributed.stack_checks SUITE
DEVICE OUT_DIR`` under torchrun's environment). Every check trains or computes the same thing
twice: with the parallel API across the group on ``DEVICE`` (``neuron`` with the ``neuron``
c10d backend; ``cpu`` with gloo, to check the checks themselves), and in this one process on the
CPU without any parallelism, from the same seed and the same global batch. It then asserts the
losses and the final parameters match.

Tolerances: float32 results differ from the CPU only in summation order (the all-reduce sums the
ranks' gradients, the matmuls of XLA and of the CPU sum in different orders), so after a few
steps of SGD the defaults of ``torch.testing.assert_close`` for float32 (rtol 1.3e-6, atol 1e-5)
are widened to ``FLOAT32`` below; bf16 mixed precision rounds every parameter and activation to
8 bits of mantissa, so it is checked at bf16's own resolution (``BF16``).

Each check records ``None`` or its traceback under its name in ``OUT_DIR/rank{N}.json``; a check
that fails on one rank after its collectives lets the others go on, so one run reports them all.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)
from torch.nn.parallel import DistributedDataParallel

import torch_neuronx

#: float32 after a few optimizer steps: summation order only (see the module docstring).
FLOAT32 = {"rtol": 1e-5, "atol": 1e-5}
#: bf16 parameters and activations against a float32 reference: 2**-8 relative, a few ulps.
BF16 = {"rtol": 2e-2, "atol": 2e-2}

FEATURES, HIDDEN, OUTPUTS = 8, 16, 4
STEPS = 3
LR = 0.1


@dataclass
class Group:
    """This rank's place in the group and the device it computes on."""

    rank: int
    world_size: int
    device: torch.device
    out_dir: pathlib.Path

    @classmethod
    def joined(cls, out_dir: pathlib.Path | None = None) -> Group:
        """The group this process has joined, on the core its backend chose (``LOCAL_RANK``'s)."""
        device = torch.device("neuron", torch.neuron.current_device())
        return cls(dist.get_rank(), dist.get_world_size(), device, out_dir or pathlib.Path("."))

    def mesh(self, shape: tuple[int, ...], names: tuple[str, ...] | None = None) -> DeviceMesh:
        return init_device_mesh(self.device.type, shape, mesh_dim_names=names)


class MLP(nn.Module):
    """Two linear layers; ``unused`` adds a layer the forward never reaches (for find_unused_parameters)."""

    def __init__(self, unused: bool = False) -> None:
        super().__init__()
        self.w1 = nn.Linear(FEATURES, HIDDEN)
        self.w2 = nn.Linear(HIDDEN, OUTPUTS)
        self.unused = nn.Linear(HIDDEN, OUTPUTS) if unused else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(torch.relu(self.w1(x)))


class NormMLP(nn.Module):
    """LayerNorm then an MLP over (batch, sequence, features): the shape sequence parallelism shards."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(FEATURES)
        self.w1 = nn.Linear(FEATURES, HIDDEN)
        self.w2 = nn.Linear(HIDDEN, FEATURES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(torch.relu(self.w1(self.norm(x))))


def make_model(factory: Callable[[], nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return factory()


def batches(steps: int, batch: int, *shape: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``steps`` global (input, target) pairs on the CPU, the same on every rank."""
    generator = torch.Generator().manual_seed(1)
    features = shape[:-1] + (FEATURES,)
    return [
        (torch.randn(batch, *features, generator=generator), torch.randn(batch, *shape, generator=generator))
        for _ in range(steps)
    ]


def local_share(group: Group, value: torch.Tensor, parts: int | None = None, part: int | None = None) -> torch.Tensor:
    """This rank's share of a global batch (its slice of dim 0) on its device."""
    parts = group.world_size if parts is None else parts
    part = group.rank if part is None else part
    return value.chunk(parts)[part].to(group.device)


def mse(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.mse_loss(output, target)


def train_reference(model: nn.Module, data: list, accumulate: int = 1) -> list[torch.Tensor]:
    """Plain SGD on the CPU over the global batches; ``accumulate`` micro-batches per step."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for x, y in data:
        optimizer.zero_grad()
        total = 0.0
        for xs, ys in zip(x.chunk(accumulate), y.chunk(accumulate), strict=True):
            loss = mse(model(xs), ys)
            loss.backward()
            total += loss.detach()
        optimizer.step()
        losses.append(total)
    return losses


def full(value: torch.Tensor) -> torch.Tensor:
    """A (D)Tensor's whole value on the CPU."""
    if isinstance(value, DTensor):
        value = value.full_tensor()
    return value.detach().cpu()


def global_mean(group: Group, value: torch.Tensor) -> torch.Tensor:
    """The mean over ranks of a per-rank scalar (a data-parallel loss), on the CPU."""
    value = value.detach().clone()
    dist.all_reduce(value)
    return value.cpu() / group.world_size


def assert_same_training(
    losses: list[torch.Tensor], reference_losses: list[torch.Tensor], model: nn.Module, reference: nn.Module, tol: dict
) -> None:
    torch.testing.assert_close(torch.stack([loss.float() for loss in losses]), torch.stack(reference_losses), **tol)
    params = dict(reference.named_parameters())
    for name, param in model.named_parameters():
        name = name.removeprefix("module.").removeprefix("_orig_mod.")
        torch.testing.assert_close(full(param).float(), params[name].detach(), **tol, msg=lambda m, n=name: f"{n}: {m}")


# ---- DistributedDataParallel ----


class BatchNormMLP(nn.Module):
    """An MLP with a BatchNorm1d between its layers, for SyncBatchNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Linear(FEATURES, HIDDEN)
        self.norm = nn.BatchNorm1d(HIDDEN)
        self.w2 = nn.Linear(HIDDEN, OUTPUTS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(torch.relu(self.norm(self.w1(x))))


def train_ddp(group: Group, model: nn.Module, data: list) -> list[torch.Tensor]:
    """Plain SGD of a data-parallel ``model`` over the global batches, each rank on its share; the
    losses' means over ranks."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for x, y in data:
        optimizer.zero_grad()
        loss = mse(model(local_share(group, x)), local_share(group, y))
        loss.backward()
        optimizer.step()
        losses.append(global_mean(group, loss))
    return losses


def check_ddp_sync_batch_norm(group: Group) -> None:
    """DDP of a model whose BatchNorm is converted to SyncBatchNorm: each rank normalises its share
    with the statistics of the global batch, so losses, parameters and running statistics are those
    of plain BatchNorm over the global batch in one CPU process (``batch_norm_stats`` and the other
    four CUDA-only ops of ``eager/sync_batch_norm.py``)."""
    data = batches(STEPS, 4 * group.world_size, OUTPUTS)
    reference = make_model(BatchNormMLP)
    reference_losses = train_reference(reference, data)
    model = DistributedDataParallel(nn.SyncBatchNorm.convert_sync_batchnorm(make_model(BatchNormMLP)).to(group.device))
    assert_same_training(train_ddp(group, model, data), reference_losses, model, reference, FLOAT32)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(model.module.norm, name).cpu(), getattr(reference.norm, name), **FLOAT32)


def _ddp(group: Group, accumulate: int = 1, compiled: bool = False, unused: bool = False, **ddp_kwargs) -> None:
    data = batches(STEPS, 4 * group.world_size * accumulate, OUTPUTS)
    reference = make_model(lambda: MLP(unused))
    reference_losses = train_reference(reference, data, accumulate)

    model = DistributedDataParallel(make_model(lambda: MLP(unused)).to(group.device), **ddp_kwargs)
    step_model = torch.compile(model, backend=compile_backend(group)) if compiled else model
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for x, y in data:
        optimizer.zero_grad()
        micro = list(zip(local_share(group, x).chunk(accumulate), local_share(group, y).chunk(accumulate), strict=True))
        total = torch.zeros((), device=group.device)
        for index, (xs, ys) in enumerate(micro):
            if index < len(micro) - 1:
                with model.no_sync():
                    loss = mse(step_model(xs), ys)
                    loss.backward()
            else:
                loss = mse(step_model(xs), ys)
                loss.backward()
            total += loss.detach()
        optimizer.step()
        losses.append(global_mean(group, total))
    assert_same_training(losses, reference_losses, model, reference, FLOAT32)


def check_ddp_powersgd_hook(group: Group) -> None:
    """DDP with PowerSGD's comm hook, whose then() callbacks start the all-reduces of P and Q: they
    raised "the ranks disagree" (3 of 3 runs) while callbacks ran when a collective's results
    landed, on gloo's thread, racing the next bucket's all-reduce. With one sample per rank the
    summed gradients have rank 2 at most, which rank 2 approximations reproduce: the run matches
    plain SGD in one CPU process (the first two steps are PowerSGD's uncompressed warm-up)."""
    data = batches(STEPS + 1, group.world_size, OUTPUTS)
    reference = make_model(MLP)
    reference_losses = train_reference(reference, data)
    model = DistributedDataParallel(make_model(MLP).to(group.device), bucket_cap_mb=300 / 2**20)
    state = powerSGD_hook.PowerSGDState(
        process_group=None, matrix_approximation_rank=2, start_powerSGD_iter=2, min_compression_rate=0
    )
    model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    assert_same_training(train_ddp(group, model, data), reference_losses, model, reference, FLOAT32)


def compile_backend(group: Group) -> str:
    return "neuron" if group.device.type == "neuron" else "aot_eager"


def check_ddp_buckets(group: Group) -> None:
    """Several small buckets (bucket_cap_mb of about 300 bytes) with gradients as bucket views."""
    _ddp(group, bucket_cap_mb=300 / 2**20, gradient_as_bucket_view=True)


def check_ddp_no_sync(group: Group) -> None:
    """Two micro-batches per step, the first under no_sync(): one all-reduce of the summed gradients."""
    _ddp(group, accumulate=2)


def check_ddp_find_unused_parameters(group: Group) -> None:
    _ddp(group, unused=True, find_unused_parameters=True)


def check_ddp_compiled(group: Group) -> None:
    """torch.compile of the DDP model: DDPOptimizer's graph, one bucket (its first bucket may not be the largest)."""
    _ddp(group, compiled=True)


# ---- FSDP2 ----


def _fsdp(
    group: Group,
    mesh: DeviceMesh,
    reshard_after_forward: bool,
    mp_policy: MixedPrecisionPolicy | None,
    compiled: bool = False,
) -> None:
    data = batches(STEPS, 4 * group.world_size, OUTPUTS)
    reference = make_model(MLP)
    reference_losses = train_reference(reference, data)

    model = make_model(MLP).to(group.device)
    kwargs = {"mesh": mesh, "reshard_after_forward": reshard_after_forward}
    if mp_policy is not None:
        kwargs["mp_policy"] = mp_policy
    for layer in (model.w1, model.w2):
        fully_shard(layer, **kwargs)
        if compiled:  # TorchTitan's way: each block compiled, FSDP2's hooks around it run eagerly
            layer.compile(backend=compile_backend(group))
    fully_shard(model, **kwargs)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for x, y in data:
        optimizer.zero_grad()
        output = model(local_share(group, x))
        expected_dtype = mp_policy.param_dtype if mp_policy is not None else torch.float32
        if output.dtype != expected_dtype:
            raise AssertionError(f"FSDP2 forward computed in {output.dtype}, expected {expected_dtype}")
        loss = mse(output.float(), local_share(group, y))
        loss.backward()
        optimizer.step()
        losses.append(global_mean(group, loss))
    if any(not isinstance(param, DTensor) or param.placements != (Shard(0),) for param in model.parameters()):
        raise AssertionError("FSDP2 parameters are not DTensors sharded on dim 0")
    assert_same_training(losses, reference_losses, model, reference, FLOAT32 if mp_policy is None else BF16)


def check_fsdp2_reshard_after_forward(group: Group) -> None:
    _fsdp(group, group.mesh((group.world_size,)), True, None)


def check_fsdp2_keep_unsharded(group: Group) -> None:
    _fsdp(group, group.mesh((group.world_size,)), False, None)


def check_fsdp2_compiled_blocks(group: Group) -> None:
    """FSDP2 with each sharded block compiled (block.compile()), as TorchTitan compiles."""
    _fsdp(group, group.mesh((group.world_size,)), True, None, compiled=True)


def check_fsdp2_bf16_mixed_precision(group: Group) -> None:
    """bf16 parameters and activations, float32 gradient reduction and master weights."""
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    _fsdp(group, group.mesh((group.world_size,)), True, policy)


# ---- DTensor ----


def check_dtensor_redistribute(group: Group) -> None:
    """distribute_tensor, then every redistribution between Shard, Replicate and Partial."""
    mesh = group.mesh((group.world_size,))
    generator = torch.Generator().manual_seed(2)
    value = torch.randn(4 * group.world_size, 6, generator=generator)
    sharded = distribute_tensor(value.to(group.device), mesh, [Shard(0)])
    torch.testing.assert_close(sharded.to_local().cpu(), value.chunk(group.world_size)[group.rank])
    for placement in (Replicate(), Shard(1), Shard(0)):
        sharded = sharded.redistribute(mesh, [placement])
        torch.testing.assert_close(full(sharded), value)
    replicated = sharded.redistribute(mesh, [Replicate()])
    torch.testing.assert_close(replicated.to_local().cpu(), value)
    # A Partial tensor holds one summand per rank: rank r contributes (r + 1) * value.
    partial = DTensor.from_local(value.to(group.device) * (group.rank + 1), mesh, [Partial()])
    summed = sum(range(1, group.world_size + 1))
    torch.testing.assert_close(full(partial.redistribute(mesh, [Replicate()])), value * summed)
    scattered = partial.redistribute(mesh, [Shard(0)])
    torch.testing.assert_close(scattered.to_local().cpu(), (value * summed).chunk(group.world_size)[group.rank])


def check_dtensor_ops(group: Group) -> None:
    """Elementwise ops, a sharded matmul (a Partial result) and reductions on DTensors against the CPU."""
    mesh = group.mesh((group.world_size,))
    generator = torch.Generator().manual_seed(3)
    a = torch.randn(4 * group.world_size, 8 * group.world_size, generator=generator)
    b = torch.randn(8 * group.world_size, 6, generator=generator)
    da = distribute_tensor(a.to(group.device), mesh, [Shard(1)])
    db = distribute_tensor(b.to(group.device), mesh, [Shard(0)])
    product = da @ db
    if product.placements != (Partial(),):
        raise AssertionError(f"Shard(1) @ Shard(0) gave {product.placements}, expected (Partial(),)")
    torch.testing.assert_close(full(product), a @ b, **FLOAT32)
    rows = distribute_tensor(a.to(group.device), mesh, [Shard(0)])
    torch.testing.assert_close(full(torch.tanh(rows) * 2 + rows), torch.tanh(a) * 2 + a)
    torch.testing.assert_close(full(rows.sum(dim=0)), a.sum(dim=0), **FLOAT32)
    torch.testing.assert_close(full(rows.sum()), a.sum(), **FLOAT32)
    torch.testing.assert_close(full(torch.softmax(rows, dim=1)), torch.softmax(a, dim=1))


# ---- Tensor parallelism ----


def _tensor_parallel(
    group: Group,
    factory: Callable[[], nn.Module],
    plan: dict,
    shape: tuple[int, ...],
    sequence: bool,
    compiled: bool = False,
) -> None:
    data = batches(STEPS, 4, *shape)
    reference = make_model(factory)
    reference_losses = train_reference(reference, data)

    mesh = group.mesh((group.world_size,))
    model = parallelize_module(make_model(factory).to(group.device), mesh, plan)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    if compiled:  # DTensor parameters and the plan's input/output hooks traced into the graph
        model = torch.compile(model, backend=compile_backend(group))
    losses = []
    for x, y in data:
        optimizer.zero_grad()
        if sequence:
            # Sequence parallel: each rank holds its slice of the sequence (dim 1) and sums its share
            # of the global mean; the losses' sum over ranks is the global loss.
            output = model(x.chunk(group.world_size, dim=1)[group.rank].to(group.device))
            target = y.chunk(group.world_size, dim=1)[group.rank].to(group.device)
            loss = (output - target).pow(2).sum() / y.numel()
            loss.backward()
            losses.append(global_mean(group, loss) * group.world_size)
        else:
            loss = mse(model(x.to(group.device)), y.to(group.device))
            loss.backward()
            losses.append(loss.detach().cpu())
        optimizer.step()
    assert_same_training(losses, reference_losses, model, reference, FLOAT32)


def check_tp_colwise_rowwise(group: Group) -> None:
    plan = {"w1": ColwiseParallel(), "w2": RowwiseParallel()}
    _tensor_parallel(group, MLP, plan, (OUTPUTS,), sequence=False)


def check_tp_compiled(group: Group) -> None:
    """torch.compile of a Colwise/Rowwise-parallel model (the backend once refused its Dynamo graph:
    plain fakes stood for the DTensor parameters in its eager-refusal run)."""
    plan = {"w1": ColwiseParallel(), "w2": RowwiseParallel()}
    _tensor_parallel(group, MLP, plan, (OUTPUTS,), sequence=False, compiled=True)


def check_tp_sequence_parallel(group: Group) -> None:
    """SequenceParallel LayerNorm on the sequence shards, then Colwise/Rowwise back to sequence shards."""
    plan = {
        "norm": SequenceParallel(),
        "w1": ColwiseParallel(input_layouts=Shard(1)),
        "w2": RowwiseParallel(output_layouts=Shard(1)),
    }
    _tensor_parallel(group, NormMLP, plan, (2 * group.world_size, FEATURES), sequence=True)


# ---- Pipeline parallelism ----


def _pipeline(group: Group, schedule_type: type) -> None:
    def factory() -> nn.Sequential:
        return nn.Sequential(
            nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUTPUTS)
        )

    microbatches = 4
    data = batches(STEPS, 2 * microbatches, OUTPUTS)
    reference = make_model(factory)
    reference_losses = train_reference(reference, data)

    # One stage per rank: stage r holds an equal share of the layers, named as in the whole model.
    whole = make_model(factory)
    bounds = [round(len(whole) * r / group.world_size) for r in range(group.world_size + 1)]
    kept = set(range(bounds[group.rank], bounds[group.rank + 1]))
    for index in range(len(whole)):
        if index not in kept:
            whole[index] = nn.Identity()
    submodule = whole.to(group.device)
    stage = PipelineStage(submodule, group.rank, group.world_size, group.device)
    schedule = schedule_type(stage, n_microbatches=microbatches, loss_fn=mse)
    optimizer = torch.optim.SGD(submodule.parameters(), lr=LR)
    losses = []
    last = group.rank == group.world_size - 1
    for x, y in data:
        optimizer.zero_grad()
        step_losses: list[torch.Tensor] = []
        if group.rank == 0:
            schedule.step(x.to(group.device))
        elif last:
            schedule.step(target=y.to(group.device), losses=step_losses)
        else:
            schedule.step()
        optimizer.step()
        # The last stage knows the loss: the mean over micro-batches is the global batch's loss.
        loss = torch.stack(step_losses).mean() if last else torch.zeros((), device=group.device)
        dist.broadcast(loss, src=group.world_size - 1)
        losses.append(loss.cpu())
    torch.testing.assert_close(torch.stack(losses), torch.stack(reference_losses), **FLOAT32)
    params = dict(reference.named_parameters())
    for name, param in submodule.named_parameters():
        torch.testing.assert_close(full(param), params[name].detach(), **FLOAT32, msg=lambda m, n=name: f"{n}: {m}")


def check_pp_gpipe(group: Group) -> None:
    _pipeline(group, ScheduleGPipe)


def check_pp_1f1b(group: Group) -> None:
    _pipeline(group, Schedule1F1B)


# ---- Distributed checkpoint ----


def check_dcp_sharded_save_load(group: Group) -> None:
    """dcp.save of an FSDP2-sharded model's state dict, dcp.load into a differently initialised one."""
    mesh = group.mesh((group.world_size,))
    saved = make_model(MLP).to(group.device)
    fully_shard(saved, mesh=mesh)
    path = group.out_dir / "checkpoint"
    dcp.save(get_model_state_dict(saved), checkpoint_id=str(path))
    torch.manual_seed(5)
    loaded = MLP().to(group.device)
    fully_shard(loaded, mesh=mesh)
    state = get_model_state_dict(loaded)
    dcp.load(state, checkpoint_id=str(path))
    set_model_state_dict(loaded, state)
    expected = make_model(MLP).state_dict()
    for name, value in loaded.state_dict().items():
        if value.to_local().device != group.device:
            raise AssertionError(f"{name} loaded onto {value.to_local().device}, expected {group.device}")
        torch.testing.assert_close(full(value), expected[name], msg=lambda m, n=name: f"{n}: {m}")


# ---- FSDP2 + TP on a 2-D mesh ----


def check_fsdp2_tp_2d(group: Group) -> None:
    """Data parallel (FSDP2) over mesh dim 'dp', tensor parallel over 'tp': 2 x 2 ranks."""
    dp_size = group.world_size // 2
    mesh = group.mesh((dp_size, 2), ("dp", "tp"))
    data = batches(STEPS, 4 * dp_size, OUTPUTS)
    reference = make_model(MLP)
    reference_losses = train_reference(reference, data)

    plan = {"w1": ColwiseParallel(), "w2": RowwiseParallel()}
    model = parallelize_module(make_model(MLP).to(group.device), mesh["tp"], plan)
    for layer in (model.w1, model.w2):
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    dp_rank = mesh["dp"].get_local_rank()
    losses = []
    for x, y in data:
        optimizer.zero_grad()
        loss = mse(model(local_share(group, x, dp_size, dp_rank)), local_share(group, y, dp_size, dp_rank))
        loss.backward()
        optimizer.step()
        # Every rank of a tp group holds its dp shard's loss: the mean over all ranks is the dp mean.
        losses.append(global_mean(group, loss))
    assert_same_training(losses, reference_losses, model, reference, FLOAT32)


def check_ddp_one_step(group: Group) -> None:
    """One DDP step (the default run's sample): loss and parameters against one CPU process."""
    data = batches(1, 4 * group.world_size, OUTPUTS)
    reference = make_model(MLP)
    reference_losses = train_reference(reference, data)
    model = DistributedDataParallel(make_model(MLP).to(group.device))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = data[0]
    loss = mse(model(local_share(group, x)), local_share(group, y))
    loss.backward()
    optimizer.step()
    assert_same_training([global_mean(group, loss)], reference_losses, model, reference, FLOAT32)


#: The checks of each suite, run in this order within one group of processes.
SUITES: dict[str, list[Callable[[Group], None]]] = {
    "sample": [check_ddp_one_step],
    "stack": [
        check_ddp_buckets,
        check_ddp_no_sync,
        check_ddp_find_unused_parameters,
        check_ddp_compiled,
        check_ddp_powersgd_hook,
        check_ddp_sync_batch_norm,
        check_fsdp2_reshard_after_forward,
        check_fsdp2_keep_unsharded,
        check_fsdp2_compiled_blocks,
        check_fsdp2_bf16_mixed_precision,
        check_dtensor_redistribute,
        check_dtensor_ops,
        check_tp_colwise_rowwise,
        check_tp_compiled,
        check_tp_sequence_parallel,
        check_pp_gpipe,
        check_pp_1f1b,
        check_dcp_sharded_save_load,
    ],
    "mesh2d": [check_fsdp2_tp_2d],
    # The same with the default group bound to its core (device_id), as NCCL jobs and TorchTitan
    # bind theirs: init_device_mesh then builds the mesh's dimension groups with split_group.
    "mesh2d_bound": [check_fsdp2_tp_2d],
}
#: Suites whose default group is created with ``device_id`` (the others' meshes use new_group).
BOUND_SUITES = {"mesh2d_bound"}


def check_names(suite: str) -> list[str]:
    return [check.__name__.removeprefix("check_") for check in SUITES[suite]]


def main(suite: str, device_type: str, out_dir: str) -> None:
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    backend = "neuron" if device_type == "neuron" else "gloo"
    if device_type == "neuron":
        torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))
        device = torch.device("neuron", torch.neuron.current_device())
    else:
        device = torch.device("cpu")
    bound = device if device_type == "neuron" and suite in BOUND_SUITES else None
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=120), device_id=bound)
    # init_device_mesh splits the default group when, and only when, it is bound to a core.
    assert dist.group.WORLD.bound_device_id == bound, (dist.group.WORLD.bound_device_id, bound)
    group = Group(rank, world_size, device, pathlib.Path(out_dir))
    results: dict[str, str | None] = {}
    for check in SUITES[suite]:
        name = check.__name__.removeprefix("check_")
        if device_type == "neuron":
            torch_neuronx.clear_op_tracking()
        try:
            check(group)
            results[name] = None
            # Every op ran on the device: none fell back to the CPU (which would hide a missing lowering).
            if device_type == "neuron" and torch_neuronx.get_fallback_ops():
                results[name] = f"ops fell back to the CPU: {torch_neuronx.get_fallback_ops()}"
        except Exception:
            results[name] = traceback.format_exc()
        (group.out_dir / f"rank{rank}.json").write_text(json.dumps(results))
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
