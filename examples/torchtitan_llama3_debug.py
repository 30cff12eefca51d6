"""TorchTitan's Llama 3 debug model trained on `neuron` under torchrun, offline, and the same
training in one CPU process to compare its losses with.

    python -m examples.torchtitan_llama3_debug --out runs/cpu --reference-cpu
    torchrun --nproc-per-node 2 -m examples.torchtitan_llama3_debug --out runs/neuron \\
        --initial-weights runs/cpu/initial_weights
    NEURON_RT_NUM_CORES=4 torchrun --nproc-per-node 4 -m examples.torchtitan_llama3_debug \\
        --out runs/tp --initial-weights runs/cpu/initial_weights --parallelism.tensor_parallel_degree 2
    torchrun --nproc-per-node 2 -m examples.torchtitan_llama3_debug --out runs/compiled \\
        --initial-weights runs/cpu/initial_weights --activation-checkpoint selective \\
        --compile.enable --compile.backend neuron

The released ``torchtitan`` package runs unmodified. Its own device detection
(``torchtitan.tools.utils.device_type``, which asks ``torch._utils._get_available_device_type``)
finds ``neuron`` through PyTorch's PrivateUse1 device module, and its process group comes from
``Backend.default_device_backend_map["neuron"]`` (the ``neuron`` c10d backend). This file is a
TorchTitan config registry (``--module examples.torchtitan_llama3_debug --config
llama3_debugmodel_neuron``): TorchTitan's ``llama3_debugmodel`` config, sized for a CPU-emulated
device (sequence 64, batch 2 per rank, 6 steps, no activation checkpointing unless
``--activation-checkpoint selective`` or ``full`` asks for TorchTitan's, no validation or
checkpoint saves), float32 throughout (no bfloat16 parameters under FSDP), SDPA attention instead
of FlexAttention, and the data set and tokenizer TorchTitan's tests use replaced by ones this file
writes (``prepare_assets``): the repository's ``tests/assets`` are not in the package, and the job
needs no network.

TorchTitan's trainer supports no CPU device (its detection falls back to ``cuda`` and its memory
monitor needs ``get_device_name`` and CUDA-style statistics, which ``torch.cpu`` lacks), so
``--reference-cpu`` (``train_reference_cpu``) trains TorchTitan's model class with plain PyTorch
from the same config, data and initial weights; ``--initial-weights`` has the neuron job load those
weights through TorchTitan's ``checkpoint.initial_load_path`` (see docs/parallelism.md). Any other
argument is TorchTitan's (``--training.steps``, ``--parallelism.*``) and applies to the neuron job
only. ``read_losses`` reads the losses from TorchTitan's log.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import re
import sys

#: Where ``prepare_assets`` writes the tokenizer and the data set (``--out`` sets it for the job).
ASSETS_ENV = "TORCHNEURON_TITAN_ASSETS"
#: A model-only DCP checkpoint the job starts from (``--initial-weights`` sets it), or unset.
INITIAL_WEIGHTS_ENV = "TORCHNEURON_TITAN_INITIAL_WEIGHTS"
#: TorchTitan's activation checkpointing policy for the job (``--activation-checkpoint`` sets it):
#: ``none`` (the default), ``selective`` or ``full``.
ACTIVATION_CHECKPOINT_ENV = "TORCHNEURON_TITAN_ACTIVATION_CHECKPOINT"
#: Data-parallel degree of both documented jobs (FSDP on 2 processes; FSDP 2 x TP 2 on 4): the
#: CPU reference reads the batches of this many data-parallel ranks per step.
DATA_PARALLEL = 2
SEQ_LEN = 64
LOCAL_BATCH = 2
STEPS = 6
VOCAB = 2048
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"

_WORDS = (
    "the a neuron core tensor device compiles runs each step of training with data and gradients "
    "shards parameters across ranks while the model learns small words from a seeded grammar so "
    "every run sees the same text on every machine and loss goes down slowly over time"
).split()


def _sentences(count: int, seed: int) -> list[str]:
    """Pseudo-text from a fixed word list: the same on every machine (Python's seeded ``random``)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(20, 60))) + "." for _ in range(count)]


def prepare_assets(assets: pathlib.Path) -> None:
    """Writes ``assets/tokenizer`` (a byte-level BPE trained on the text, tokenizer.json and
    tokenizer_config.json as TorchTitan's HuggingFaceTokenizer reads them) and ``assets/data``
    (``data.json``: one ``{"text": ...}`` per line, the format of TorchTitan's ``c4_test``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    documents = _sentences(400, seed=0)
    (assets / "data").mkdir(parents=True, exist_ok=True)
    (assets / "data" / "data.json").write_text("".join(json.dumps({"text": text}) + "\n" for text in documents))
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=[BOS, EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(documents, trainer)
    (assets / "tokenizer").mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(assets / "tokenizer" / "tokenizer.json"))
    config = {"bos_token": BOS, "eos_token": EOS, "add_bos_token": True, "add_eos_token": True}
    (assets / "tokenizer" / "tokenizer_config.json").write_text(json.dumps(config))


def llama3_debugmodel_neuron():
    """TorchTitan's ``llama3_debugmodel`` config for an emulated device (the module docstring says what changes)."""
    from torchtitan.components.checkpoint import CheckpointManager
    from torchtitan.components.validate import Validator
    from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
    from torchtitan.models.common.attention import ScaledDotProductAttention
    from torchtitan.models.llama3.config_registry import llama3_debugmodel

    assets = pathlib.Path(os.environ[ASSETS_ENV])
    config = llama3_debugmodel()
    # PyTorch's FlexAttention accepts only cuda, cpu, xpu, hpu and mps tensors (and has no eager
    # backward on the CPU): the layers use TorchTitan's maskless SDPA attention (causal) instead.
    for layer in config.model_spec.model.layers:
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
    config.hf_assets_path = str(assets / "tokenizer")
    config.dataloader.dataset_path = str(assets / "data")
    config.training.seq_len = SEQ_LEN
    config.training.local_batch_size = LOCAL_BATCH
    config.training.steps = STEPS
    policies = {"none": None, "selective": SelectiveAC.Config(), "full": FullAC.Config()}
    config.activation_checkpoint = policies[os.environ.get(ACTIVATION_CHECKPOINT_ENV, "none")]
    config.validator = Validator.Config(enable=False)
    initial_weights = os.environ.get(INITIAL_WEIGHTS_ENV)
    if initial_weights:
        # TorchTitan's initial load: the model's weights from a model-only DCP checkpoint at step 0,
        # and no checkpoint saved (the job's own folder stays empty, so the initial load applies).
        config.checkpoint = CheckpointManager.Config(
            enable=True, initial_load_path=initial_weights, initial_load_model_only=True, load_only=True
        )
    else:
        config.checkpoint = CheckpointManager.Config(enable=False)
    # FSDP casts parameters to bfloat16 for the forward by default: float32 throughout, so a run
    # differs from the CPU reference by summation order only.
    config.training.mixed_precision_param = "float32"
    config.parallelism.pipeline_parallel_schedule = "1F1B"
    # DTensor on the model-parallel axes only, FSDP2 as torch 2.13 has it: the default
    # ("spmd_types") hands fully_shard SPMD annotations that torch 2.13's FSDP2 does not read.
    config.parallelism.spmd_backend = "partial_dtensor"
    config.debug.seed = 0  # the same initial weights in every run and parallelism of the same device
    config.dump_folder = str(assets.parent.parent / "dump")
    return config


def train_reference_cpu(out: pathlib.Path, steps: int = STEPS) -> dict[str, list[float]]:
    """Trains the job's model in one CPU process with plain PyTorch and returns each step's
    ``"loss"`` and ``"grad_norm"`` (the gradients' total 2-norm before clipping), ``steps`` floats
    each; writes the initial weights the neuron job loads (``--initial-weights``) to
    ``out/initial_weights`` (a model-only DCP checkpoint) and the returned lists to
    ``out/losses.json``.

    What TorchTitan decides comes from the job's own config (``llama3_debugmodel_neuron``): the
    model (TorchTitan's class, built and initialised as its trainer does, ``debug.seed`` on the CPU
    generator), the tokenizer and data loader (each step concatenates the batches of the
    ``DATA_PARALLEL`` data-parallel ranks, the job's global batch), AdamW's arguments and
    implementation, the learning-rate schedule (TorchTitan's ``LRSchedulersContainer`` over a
    ``torch.optim.AdamW``) and ``training.max_norm``. The loss is TorchTitan's: cross entropy summed
    over the tokens whose label is not ``IGNORE_INDEX``, divided by their count in the global batch.
    """
    import torch
    import torch.distributed.checkpoint as dcp
    import torch.nn.functional as F
    from torchtitan.components.loss import IGNORE_INDEX

    os.environ[ASSETS_ENV] = str(out / "assets" / "reference")
    prepare_assets(pathlib.Path(os.environ[ASSETS_ENV]))
    config = llama3_debugmodel_neuron()
    config.training.steps = steps
    model_config = config.model_spec.model
    model_config.update_from_config(config=config)
    with torch.device("meta"):
        model = model_config.build()
    model.to_empty(device="cpu")
    torch.manual_seed(config.debug.seed)
    with torch.no_grad():
        model.init_weights(buffer_device=None)
    model.train()
    dcp.save(model.state_dict(), checkpoint_id=str(out / "initial_weights"))

    (group,) = config.optimizer.param_groups
    fused = config.optimizer.implementation == "fused"
    optimizer = torch.optim.AdamW(
        model.parameters(),
        **group.optimizer_kwargs,
        fused=fused,
        foreach=config.optimizer.implementation == "foreach",
    )
    schedulers = config.lr_scheduler.build(optimizers=[optimizer], training_steps=steps)
    tokenizer = config.tokenizer.build(tokenizer_path=config.hf_assets_path)
    loaders = [
        iter(
            config.dataloader.build(
                dp_world_size=DATA_PARALLEL,
                dp_rank=rank,
                tokenizer=tokenizer,
                seq_len=config.training.seq_len,
                local_batch_size=config.training.local_batch_size,
            )
        )
        for rank in range(DATA_PARALLEL)
    ]
    history: dict[str, list[float]] = {"loss": [], "grad_norm": []}
    for _ in range(steps):
        batches = [next(loader) for loader in loaders]
        # The data set packs documents into rows and gives each token its position in its own
        # document ("positions", RoPE's input); TorchTitan passes every key besides "input" to
        # the model as a keyword.
        inputs = {key: torch.cat([input_dict[key] for input_dict, _ in batches]) for key in batches[0][0]}
        labels = torch.cat([labels for _, labels in batches])
        optimizer.zero_grad()
        logits = model(inputs.pop("input"), **inputs)
        valid_tokens = (labels != IGNORE_INDEX).sum()
        loss_sum = F.cross_entropy(
            logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
        )
        loss = loss_sum / valid_tokens
        loss.backward()
        # The gradients' norm accumulated in float64: the CPU's float32 2-norm kernel sums into one
        # float32 accumulator (pytorch/pytorch#169237) and is 1.3e-4 low on the 2048 x 256 output
        # layer's gradient here; neuron's float32 norm equals the float64 one to 1e-7.
        grad_norm = torch.nn.utils.get_total_norm([param.grad.double() for param in model.parameters()]).float()
        torch.nn.utils.clip_grads_with_norm_(model.parameters(), config.training.max_norm, grad_norm, foreach=True)
        optimizer.step()
        schedulers.step()
        history["loss"].append(loss.item())
        history["grad_norm"].append(grad_norm.item())
    (out / "losses.json").write_text(json.dumps(history))
    return history


def read_losses(log: str, metric: str = "loss") -> dict[int, float]:
    """Each step's ``metric`` (``"loss"``, ``"grad_norm"``) in TorchTitan's log (``step:  N  loss:  X
    grad_norm:  Y`` lines, colour codes aside)."""
    code = r"(?:\x1b\[[0-9;]*m)?"
    found = re.findall(rf"step:\s*(\d+)\s+{code}(?:loss:.*?{code})?{metric}:\s*([-0-9.naninf]+)", log)
    return {int(step): float(value) for step, value in found}


def _torch_2_13_compat() -> None:
    """TorchTitan 0.3.0 calls ``torch.distributed.set_timeout`` (newer than torch 2.13) once, after
    the first step, to shorten every group's timeout to ``comm.train_timeout_seconds``. On torch
    2.13 the groups keep their timeout from creation (``comm.init_timeout_seconds``)."""
    import torch.distributed as dist

    if not hasattr(dist, "set_timeout"):

        def keep_timeout(timeout, group=None) -> None:
            del timeout, group

        dist.set_timeout = keep_timeout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument(
        "--reference-cpu",
        action="store_true",
        help="train the same job in this one CPU process instead (no torchrun); writes OUT/initial_weights",
    )
    parser.add_argument(
        "--initial-weights",
        type=pathlib.Path,
        help="start from this model-only DCP checkpoint (the reference's OUT/initial_weights)",
    )
    parser.add_argument(
        "--activation-checkpoint",
        choices=("none", "selective", "full"),
        default="none",
        help="TorchTitan's activation checkpointing of each transformer block (values are unchanged)",
    )
    args, titan_args = parser.parse_known_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.reference_cpu:
        if titan_args:
            parser.error(
                f"--reference-cpu trains the job as configured here ({STEPS} steps, data-parallel degree "
                f"{DATA_PARALLEL}) and takes no TorchTitan arguments; got {' '.join(titan_args)}"
            )
        history = train_reference_cpu(args.out)
        for step, (loss, grad_norm) in enumerate(zip(history["loss"], history["grad_norm"], strict=True), start=1):
            print(f"step: {step:2}  loss: {loss:.7f}  grad_norm: {grad_norm:.7f}")
        return
    if args.initial_weights is not None:
        os.environ[INITIAL_WEIGHTS_ENV] = str(args.initial_weights.resolve())
    os.environ[ACTIVATION_CHECKPOINT_ENV] = args.activation_checkpoint
    # Each rank writes its own copy (the same bytes: a seeded text, a deterministic BPE training),
    # so no rank reads files another is still writing.
    assets = args.out / "assets" / f"rank{os.environ.get('RANK', '0')}"
    os.environ[ASSETS_ENV] = str(assets)
    prepare_assets(assets)
    _torch_2_13_compat()
    from torchtitan import train

    sys.argv = [
        sys.argv[0],
        "--module",
        "examples.torchtitan_llama3_debug",
        "--config",
        "llama3_debugmodel_neuron",
        *titan_args,
    ]
    train.main()


if __name__ == "__main__":
    main()
