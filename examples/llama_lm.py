"""A Llama-architecture causal language model trained on Python source, on any device.

The text is a fixed slice of the Python standard library's own source (:data:`CORPUS_MODULES`,
read from ``sysconfig.get_paths()["stdlib"]``), so every machine has it offline. A byte-level BPE
tokenizer is trained on it with the ``tokenizers`` library and wrapped as a
``PreTrainedTokenizerFast``; the model is transformers' ``LlamaForCausalLM`` from a small
``LlamaConfig`` (:data:`SIZES`), trained with ``transformers.Trainer``, saved with
``save_pretrained`` and loaded back for ``generate()``.

    python -m examples.llama_lm --device neuron
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sysconfig
import tempfile
import time
from pathlib import Path

import torch

#: Standard-library modules whose source is the training text, in this order.
CORPUS_MODULES = (
    "textwrap",
    "string",
    "heapq",
    "bisect",
    "fnmatch",
    "colorsys",
    "shlex",
    "calendar",
    "functools",
    "fractions",
    "random",
    "statistics",
)

#: The prompt that generation continues.
PROMPT = "def __init__(self, "


@dataclasses.dataclass(frozen=True)
class Size:
    """One model and run size.

    Attributes:
        hidden: hidden size of the model (``LlamaConfig.hidden_size``).
        layers: number of decoder layers.
        heads: attention heads (key/value heads are half as many).
        vocab: BPE vocabulary size, special tokens included.
        seq_len: tokens per training sequence.
        batch: sequences per training step.
        steps: optimizer steps.
        new_tokens: tokens that ``generate()`` adds to the prompt.
        corpus_modules: how many of :data:`CORPUS_MODULES` make the text.
    """

    hidden: int
    layers: int
    heads: int
    vocab: int
    seq_len: int
    batch: int
    steps: int
    new_tokens: int
    corpus_modules: int


SIZES = {
    # 0.6 M parameters. A 512-token vocabulary leaves the unigram plateau (loss ~6) within the
    # first 100 steps, where 1024 tokens had not after 80; 150 steps reach a loss near 3.7.
    "main": Size(
        hidden=128, layers=2, heads=4, vocab=512, seq_len=64, batch=16, steps=150, new_tokens=32, corpus_modules=12
    ),
    "tiny": Size(hidden=32, layers=2, heads=4, vocab=300, seq_len=16, batch=2, steps=3, new_tokens=6, corpus_modules=2),
}


def corpus_text(modules: int = len(CORPUS_MODULES)) -> str:
    """The source of the first ``modules`` of :data:`CORPUS_MODULES`, joined by blank lines.

    Raises:
        FileNotFoundError: the interpreter has no standard-library sources (a stripped install).
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return "\n\n".join((stdlib / f"{name}.py").read_text(encoding="utf-8") for name in CORPUS_MODULES[:modules])


def train_tokenizer(text: str, vocab_size: int):
    """A byte-level BPE tokenizer trained on ``text``, as a ``PreTrainedTokenizerFast``.

    Its vocabulary has ``vocab_size`` entries including ``<|endoftext|>``, which serves as the
    BOS, EOS and padding token. Training is deterministic: the same text gives the same merges.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special = "<|endoftext|>"
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[special],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([text], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=special, eos_token=special, pad_token=special)


class TokenBlocks(torch.utils.data.Dataset):
    """Consecutive blocks of ``seq_len`` token ids, each a causal-LM example whose labels are its
    input ids (the model shifts them). Items are int64 tensors of shape (seq_len,), on the CPU."""

    def __init__(self, token_ids: list[int], seq_len: int):
        blocks = len(token_ids) // seq_len
        self.ids = torch.tensor(token_ids[: blocks * seq_len], dtype=torch.int64).view(blocks, seq_len)

    def __len__(self) -> int:
        return self.ids.shape[0]

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


def build_model(size: Size, tokenizer):
    """A freshly initialised float32 ``LlamaForCausalLM`` on the CPU, seeded, so every device
    starts from the same weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=size.hidden,
        intermediate_size=size.hidden * 8 // 3 // 16 * 16,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=max(1, size.heads // 2),
        max_position_embeddings=size.seq_len + size.new_tokens + 16,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


@dataclasses.dataclass
class TrainResult:
    """What :func:`train` measured.

    Attributes:
        model: the trained model (on the training device).
        losses: training loss of every step, in order.
        seconds: wall time of ``Trainer.train()``, compilation included.
        tokens_per_second: training tokens per second over the steps after the first (the first
            compiles), in tokens (batch x seq_len) per second of wall time.
        compiled_graphs: graphs that ``torch.compile(backend="neuron")`` compiled during training
            (forward and backward; 0 in eager).
    """

    model: torch.nn.Module
    losses: list[float]
    seconds: float
    tokens_per_second: float
    compiled_graphs: int


def train(device: str, size: Size, tokenizer, dataset: TokenBlocks, *, compile: bool = False) -> TrainResult:
    """Train a fresh model (:func:`build_model`) with ``transformers.Trainer`` on ``device``.

    Args:
        device: ``"cpu"`` or ``"neuron"``: Trainer picks the accelerator itself (``use_cpu`` is
            False for neuron); the result's model is checked to be there.
        size: the run's sizes (steps, batch).
        compile: train under ``torch.compile(backend="neuron")`` (Trainer's ``torch_compile``).

    Raises:
        RuntimeError: Trainer put the model on another device than ``device``.
    """
    from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    step_ends: list[float] = []

    class StepClock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            step_ends.append(time.perf_counter())

    from torch_neuronx import get_dynamo_metrics

    graphs_before = len(get_dynamo_metrics())
    model = build_model(size, tokenizer)
    with tempfile.TemporaryDirectory() as output_dir:
        arguments = TrainingArguments(
            output_dir=output_dir,
            max_steps=size.steps,
            per_device_train_batch_size=size.batch,
            learning_rate=3e-3,
            lr_scheduler_type="cosine",
            warmup_steps=max(1, size.steps // 10),
            weight_decay=0.01,
            # The multi-tensor AdamW, not Trainer's default fused one: fused AdamW on neuron computes
            # the bias corrections in float32 as CUDA's does (the CPU's in float64), which moved
            # the losses of 150 steps 1.4e-3 from the CPU's; foreach AdamW is the same math on both
            # (1e-4, near the 3.5e-5 that swapping the CPU's attention kernel causes).
            optim="adamw_torch",
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            dataloader_num_workers=0,
            # Every batch full: a short last batch of an epoch would compile the graphs again.
            dataloader_drop_last=True,
            dataloader_pin_memory=False,
            disable_tqdm=True,
            use_cpu=device == "cpu",
            seed=0,
            torch_compile=compile,
            torch_compile_backend="neuron" if compile else None,
        )
        trainer = Trainer(model=model, args=arguments, train_dataset=dataset, callbacks=[StepClock()])
        trainer.remove_callback(PrinterCallback)  # the per-step log lines; the losses are read below
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
    trained = trainer.model
    placed_on = next(trained.parameters()).device
    if placed_on.type != torch.device(device).type:
        raise RuntimeError(f"llama_lm.train: Trainer trained on {placed_on}, not on {device}")
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    steady = step_ends[-1] - step_ends[0]
    tokens_per_second = (len(step_ends) - 1) * size.batch * size.seq_len / steady if steady > 0 else float("nan")
    return TrainResult(
        model=trained,
        losses=losses,
        seconds=seconds,
        tokens_per_second=tokens_per_second,
        compiled_graphs=len(get_dynamo_metrics()) - graphs_before,
    )


@dataclasses.dataclass
class Generation:
    """Tokens that ``generate()`` added to the prompt (a list of ids), their text, and the rate.

    Attributes:
        tokens: the new token ids.
        text: the prompt and the new tokens, decoded.
        tokens_per_second: new tokens per second of wall time of the ``generate()`` call.
    """

    tokens: list[int]
    text: str
    tokens_per_second: float


@torch.no_grad()
def generate(
    model, tokenizer, new_tokens: int, *, sample: bool = False, seed: int = 0, compile_decoding: bool = True
) -> Generation:
    """Continue :data:`PROMPT` by ``new_tokens`` tokens, greedily or by top-k sampling, with a
    static KV cache (so transformers compiles the decoding step on neuron, as on CUDA).

    Sampling draws from the model's device's generator, seeded with ``torch.manual_seed(seed)``
    (neuron's is Philox-based like CUDA's, so its draws differ from the CPU's).
    ``compile_decoding=False`` keeps the decoding step eager (it saves the compile in short runs).

    Raises:
        RuntimeError: ``generate()`` stopped early or returned more tokens than asked for.
    """
    device = next(model.parameters()).device
    prompt = tokenizer(PROMPT, return_tensors="pt").to(device)
    torch.manual_seed(seed)
    options = {"do_sample": True, "top_k": 20, "temperature": 0.8} if sample else {"do_sample": False}
    # With a static cache, transformers compiles the decoding step (backend "neuron" on neuron).
    # A model split over several devices carries accelerate's per-module hooks, on which Dynamo
    # recompiles for every module type until its recompile limit: such a model decodes eagerly.
    split = len(set(getattr(model, "hf_device_map", {}).values())) > 1
    start = time.perf_counter()
    output = model.generate(
        **prompt,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        pad_token_id=tokenizer.pad_token_id,
        # A static KV cache keeps every decoding step's shapes the same, so each op compiles once
        # instead of once per sequence length.
        cache_implementation="static",
        disable_compile=split or not compile_decoding,
        **options,
    )
    tokens = output[0, prompt["input_ids"].shape[1] :].tolist()
    seconds = time.perf_counter() - start
    if len(tokens) != new_tokens:
        raise RuntimeError(f"llama_lm.generate: asked for {new_tokens} new tokens, got {len(tokens)}")
    return Generation(tokens=tokens, text=tokenizer.decode(output[0].tolist()), tokens_per_second=new_tokens / seconds)


def save(model, tokenizer, folder: Path) -> None:
    """``save_pretrained`` of the model (on any device) and the tokenizer into ``folder``."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def load(folder: Path, device_map: str):
    """The saved model and tokenizer, the model loaded with ``device_map`` (``"cpu"``,
    ``"neuron"``, ``"auto"``, ...) in eval mode."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, device_map=device_map, dtype=torch.float32).eval()
    return model, tokenizer


@dataclasses.dataclass
class Comparison:
    """Everything :func:`compare_with_cpu` ran, for the caller to check and print.

    Attributes:
        size: the sizes of the run.
        corpus_chars: characters of training text; ``corpus_tokens``: its length in tokens.
        parameters: the model's parameter count.
        training: ``"cpu"``, ``"neuron"`` (Trainer, eager) and ``"neuron compiled"`` (Trainer with
            ``torch_compile_backend="neuron"``) runs, from the same initial weights and batches.
        trained_greedy: greedy continuations of each trained model (same keys as ``training``).
        loaded_greedy: greedy continuations of the neuron-trained model saved and loaded back with
            ``device_map`` ``"cpu"``, ``"neuron"`` and ``"auto"``; ``"neuron again"`` is a second
            call, whose executables are compiled already.
        loaded_devices: the devices each loaded model's parameters are on (``device_map`` keys).
        sampled: seeded top-k samples from the loaded models (``"cpu"``, ``"neuron"``).
    """

    size: Size
    corpus_chars: int
    corpus_tokens: int
    parameters: int
    training: dict[str, TrainResult]
    trained_greedy: dict[str, Generation]
    loaded_greedy: dict[str, Generation]
    loaded_devices: dict[str, set[str]]
    sampled: dict[str, Generation]


def compare_with_cpu(size: Size) -> Comparison:
    """Train the model of ``size`` on the CPU, on neuron and on neuron under torch.compile, then
    save the neuron-trained model, load it back with several ``device_map`` values and generate.

    Nothing is checked here; the caller compares the results (examples/main_job.py,
    tests/workloads/test_llama_lm.py).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    text = corpus_text(size.corpus_modules)
    tokenizer = train_tokenizer(text, size.vocab)
    token_ids = tokenizer(text)["input_ids"]
    dataset = TokenBlocks(token_ids, size.seq_len)
    training = {
        "cpu": train("cpu", size, tokenizer, dataset),
        "neuron": train("neuron", size, tokenizer, dataset),
        "neuron compiled": train("neuron", size, tokenizer, dataset, compile=True),
    }
    trained_greedy = {name: generate(run.model.eval(), tokenizer, size.new_tokens) for name, run in training.items()}
    loaded_greedy, loaded_devices, sampled = {}, {}, {}
    with tempfile.TemporaryDirectory() as folder:
        save(training["neuron"].model, tokenizer, Path(folder))
        for device_map in ("cpu", "neuron", "auto"):
            model, loaded_tokenizer = load(Path(folder), device_map)
            loaded_devices[device_map] = {str(p.device) for p in model.parameters()}
            loaded_greedy[device_map] = generate(model, loaded_tokenizer, size.new_tokens)
            if device_map == "neuron":
                loaded_greedy["neuron again"] = generate(model, loaded_tokenizer, size.new_tokens)
            if device_map != "auto":
                sampled[device_map] = generate(model, loaded_tokenizer, size.new_tokens, sample=True)
    return Comparison(
        size=size,
        corpus_chars=len(text),
        corpus_tokens=len(token_ids),
        parameters=sum(p.numel() for p in training["cpu"].model.parameters()),
        training=training,
        trained_greedy=trained_greedy,
        loaded_greedy=loaded_greedy,
        loaded_devices=loaded_devices,
        sampled=sampled,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="neuron")
    parser.add_argument("--size", default="main", choices=sorted(SIZES))
    parser.add_argument("--compile", action="store_true", help="train under torch.compile(backend='neuron')")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    size = SIZES[args.size]
    text = corpus_text(size.corpus_modules)
    tokenizer = train_tokenizer(text, size.vocab)
    dataset = TokenBlocks(tokenizer(text)["input_ids"], size.seq_len)
    result = train(args.device, size, tokenizer, dataset, compile=args.compile)
    print(f"losses {result.losses[0]:.4f} .. {result.losses[-1]:.4f}, {result.tokens_per_second:.0f} tokens/s")
    print(generate(result.model.eval(), tokenizer, size.new_tokens).text)


if __name__ == "__main__":
    main()
