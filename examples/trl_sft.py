"""Supervised fine-tuning with TRL's ``SFTTrainer`` on a small Llama model, on neuron and CPU.

The dataset is ``datasets.Dataset.from_dict`` over a few sentences, the tokenizer a character-level
``PreTrainedTokenizerFast`` built offline with the ``tokenizers`` library, the model transformers'
``LlamaForCausalLM`` from a small config with seeded random weights (no download). ``SFTTrainer``
with an ``SFTConfig`` trains it for a few steps; Trainer picks the NeuronCore by itself
(``use_cpu=True`` for the CPU run).

Two of TRL's defaults matter when comparing with the CPU:

- ``pad_to_multiple_of="auto"`` pads every batch to a multiple of 128 tokens on neuron (TRL does
  this for Trainium, to keep shapes static) and not on the CPU. The CPU run here pads the same way
  (``pad_to_multiple_of=128``), so that both compute on the same tensors.
- ``bf16=True`` trains under bfloat16 autocast. :func:`train` takes ``bf16`` so that a float32 run
  can be compared to float32 rounding.

    python -m examples.trl_sft              # neuron against the CPU, float32 and bfloat16
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time

import torch

#: The training texts, one example each.
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A NeuronCore runs the model's matrix multiplications.",
    "Supervised fine-tuning trains on the completions.",
    "Pack my box with five dozen liquor jugs.",
    "How vexingly quick daft zebras jump!",
    "Sphinx of black quartz, judge my vow.",
    "The five boxing wizards jump quickly.",
    "Bright vixens jump; dozy fowl quack.",
]

#: TRL's ``pad_to_multiple_of`` on neuron when left at ``"auto"``.
NEURON_PAD_MULTIPLE = 128


@dataclasses.dataclass(frozen=True)
class Size:
    """One model and run size.

    Attributes:
        hidden: hidden size; ``layers``: decoder layers.
        batch: examples per step (``per_device_train_batch_size``); ``steps``: ``max_steps``.
    """

    hidden: int
    layers: int
    batch: int
    steps: int


SIZES = {
    "main": Size(hidden=64, layers=2, batch=4, steps=8),
    "tiny": Size(hidden=32, layers=1, batch=2, steps=2),
}


def build_tokenizer():
    """A character-level tokenizer over printable ASCII, with ``<pad>`` (id 0) and ``<eos>`` (id 1)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1} | {chr(code): code - 30 for code in range(32, 127)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>")


def build_model(size: Size, vocab_size: int):
    """``LlamaForCausalLM`` from a small config, seeded random float32 weights, on the CPU."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=size.hidden,
        intermediate_size=2 * size.hidden,
        num_hidden_layers=size.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=NEURON_PAD_MULTIPLE,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=1,
    )
    return LlamaForCausalLM(config)


@dataclasses.dataclass
class SFTRun:
    """What one ``SFTTrainer.train()`` logged.

    Attributes:
        device: the device the model trained on.
        losses: the logged training loss of each step; ``grad_norms``: the gradient norm before clipping.
        seconds: wall time of ``train()``.
    """

    device: str
    losses: list[float]
    grad_norms: list[float]
    seconds: float


def train(device: str, size: Size, *, bf16: bool) -> SFTRun:
    """``SFTTrainer`` for ``size.steps`` steps on ``device`` (``"cpu"`` or ``"neuron"``).

    The multi-tensor AdamW (``optim="adamw_torch"``) keeps the update's math the same on both
    devices (docs/usage.md, Hugging Face Trainer); gradient checkpointing stays at TRL's default (on).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from datasets import Dataset
    from datasets.utils.logging import disable_progress_bar
    from trl import SFTConfig, SFTTrainer

    disable_progress_bar()
    tokenizer = build_tokenizer()
    model = build_model(size, len(tokenizer))
    with tempfile.TemporaryDirectory() as output_dir:
        config = SFTConfig(
            output_dir=output_dir,
            use_cpu=device == "cpu",
            pad_to_multiple_of=NEURON_PAD_MULTIPLE if device == "cpu" else "auto",
            bf16=bf16,
            max_steps=size.steps,
            per_device_train_batch_size=size.batch,
            learning_rate=3e-3,
            optim="adamw_torch",
            max_length=64,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            disable_tqdm=True,
            seed=0,
        )
        trainer = SFTTrainer(
            model=model, args=config, train_dataset=Dataset.from_dict({"text": TEXTS}), processing_class=tokenizer
        )
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
    trained_on = next(trainer.model.parameters()).device.type
    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    return SFTRun(trained_on, [e["loss"] for e in steps], [e["grad_norm"] for e in steps], seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="main", choices=sorted(SIZES))
    args = parser.parse_args()
    size = SIZES[args.size]
    runs = {(device, bf16): train(device, size, bf16=bf16) for bf16 in (False, True) for device in ("cpu", "neuron")}
    for (device, bf16), run in runs.items():
        precision = "bfloat16 autocast" if bf16 else "float32"
        print(f"{device:7} {precision:17} losses {run.losses[0]:.5f} .. {run.losses[-1]:.5f}, {run.seconds:.2f} s")
    reference = runs["cpu", False]
    for bf16 in (False, True):
        cpu, neuron = runs["cpu", bf16], runs["neuron", bf16]
        losses = max(abs(a - b) for a, b in zip(cpu.losses, neuron.losses, strict=True))
        norms = max(abs(a - b) / a for a, b in zip(cpu.grad_norms, neuron.grad_norms, strict=True))
        print(
            f"{'bfloat16' if bf16 else 'float32'}: max |loss difference| {losses:.2e}, "
            f"max relative gradient-norm difference {norms:.2e}"
        )
    for device in ("cpu", "neuron"):
        drift = max(abs(a - b) for a, b in zip(reference.losses, runs[device, True].losses, strict=True))
        print(f"{device} bfloat16 against CPU float32: max |loss difference| {drift:.2e}")


if __name__ == "__main__":
    main()
