"""One transformers architecture, reduced and with random weights, on neuron against the CPU.

:func:`architectures` lists every model type of transformers' auto mappings with the first task it
has among :data:`TASKS`; :func:`reduced_config` shrinks the type's default configuration (a few
layers, small widths); :func:`check_model` builds the model, runs it on the CPU and on neuron, and
yields one :class:`ModelOutcome` per stage:

- ``cpu``: the config, the model and a forward and backward on the CPU. A failure here means the
  architecture does not run on the CPU in this reduced form; it is left out of the pass rates.
- ``to_device``: the model and its inputs copied to neuron.
- ``eager_forward``: the outputs' floating-point tensors against the CPU's.
- ``eager_backward``: the loss's gradients of every parameter against the CPU's.
- ``compiled_forward``: ``torch.compile(backend="neuron")`` of the model, outputs against the CPU's.

Values are compared with :func:`~torch_neuronx.testing.compare.compare` at ``atol = rtol = 1e-4``
(:data:`ATOL`), rescued where the device is no less accurate than the CPU against a float64 run of
the same model. The ATen ops that fell back to the CPU in eager mode are kept on every row.
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import re
import time
import traceback
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from torch_neuronx._compat.torch_internals import pytree
from torch_neuronx.testing.compare import compare

__all__ = [
    "ATOL",
    "STAGES",
    "TASKS",
    "Architecture",
    "ModelOutcome",
    "architectures",
    "check_model",
    "reduced_config",
]

#: (task, auto mapping in ``transformers.models.auto.modeling_auto``), in the order a model type's
#: task is chosen: a type in several mappings is checked once, with the first.
TASKS = (
    ("causal-lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("masked-lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
    ("seq2seq-lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("sequence-classification", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
    ("image-classification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"),
    ("ctc", "MODEL_FOR_CTC_MAPPING_NAMES"),
    ("audio-classification", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"),
    ("speech-seq2seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"),
    ("image-text-to-text", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),
)

#: The stages of one model, in order; a stage runs only when the ones it needs passed.
STAGES = ("cpu", "to_device", "eager_forward", "eager_backward", "compiled_forward")

#: Absolute and relative tolerance of every comparison (float32). Reduced models are 2 layers of
#: width <= 64, so float32 rounding of a different summation order (XLA's against ATen's) reaches
#: ~1e-6 of values of order one; a wrong op is off by far more. Larger differences still pass when
#: the device is no less accurate than the CPU against a float64 run (compare.py's rule).
ATOL = RTOL = 1e-4

#: Batch and sequence length of the inputs.
_BATCH, _SEQUENCE = 2, 8

#: Audio samples of ``input_values`` (wav2vec2's feature encoder divides by 320: 5 frames).
_AUDIO_SAMPLES = 1600

#: Size fields shrunk wherever they appear in a config (sub-configs too), to at most this value.
_SHRINK = {
    **dict.fromkeys(
        (
            "num_hidden_layers",
            "num_layers",
            "n_layer",
            "n_layers",
            "encoder_layers",
            "decoder_layers",
            "num_encoder_layers",
            "num_decoder_layers",
            "num_text_layers",
            "num_vision_layers",
        ),
        2,
    ),
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "embed_dim", "dim", "hidden_dim", "word_embed_proj_dim"), 32),
    **dict.fromkeys(
        (
            "intermediate_size",
            "ffn_dim",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "n_inner",
            "d_ff",
            "intermediate_dim",
            "moe_intermediate_size",
            "shared_expert_intermediate_size",
            "projection_dim",
        ),
        64,
    ),
    **dict.fromkeys(
        (
            "num_attention_heads",
            "n_head",
            "num_heads",
            "encoder_attention_heads",
            "decoder_attention_heads",
            "num_key_value_heads",
            "mamba_n_heads",
        ),
        4,
    ),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), 4),
    **dict.fromkeys(("num_experts_per_tok", "moe_topk", "top_k"), 2),
    # rotary and latent-attention (DeepSeek's MLA) widths, kept within the heads' width of 8
    **dict.fromkeys(("rotary_dim", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"), 8),
    **dict.fromkeys(("kv_lora_rank", "q_lora_rank"), 16),
    **dict.fromkeys(("vocab_size",), 256),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "max_target_positions"), 64),
    **dict.fromkeys(("image_size",), 32),
}

#: Per-family fixes where the generic shrinking breaks a model, each with its reason:
#: ``model_type -> {field: value}``, applied after shrinking.
OVERRIDES: dict[str, dict[str, Any]] = {}


@dataclasses.dataclass(frozen=True)
class Architecture:
    """One model type of transformers with the task it is checked in and that task's model class."""

    model_type: str
    task: str
    model_class: str


@dataclasses.dataclass
class ModelOutcome:
    """What happened to one architecture in one stage (see :data:`STAGES`).

    ``outcome`` is ``pass``, ``mismatch`` (a wrong value), ``error`` (``exception`` is the exception's
    class name, ``detail`` its message) or ``skipped`` (an earlier stage failed). ``fallback_ops`` are
    the ATen ops that ran on the CPU during the eager stages."""

    model_type: str
    task: str
    model_class: str
    stage: str
    outcome: str
    detail: str = ""
    exception: str = ""
    max_abs_error: float | None = None
    seconds: float = 0.0
    fallback_ops: list[str] = dataclasses.field(default_factory=list)


def architectures(patterns: Sequence[str] | None = None) -> list[Architecture]:
    """Every model type of the auto mappings in :data:`TASKS` (those matching the glob ``patterns``
    when given), sorted by name, each with its first task.

    Raises:
        ValueError: a pattern matches no model type.
    """
    from transformers.models.auto import modeling_auto

    found: dict[str, Architecture] = {}
    for task, mapping in TASKS:
        for model_type, model_class in getattr(modeling_auto, mapping).items():
            if model_type not in found and isinstance(model_class, str):
                found[model_type] = Architecture(model_type, task, model_class)
    selected = sorted(found)
    if patterns:
        for pattern in patterns:
            if not fnmatch.filter(selected, pattern):
                raise ValueError(f"no transformers model type matches {pattern!r} (e.g. llama, bert, vit)")
        selected = [name for name in selected if any(fnmatch.fnmatchcase(name, p) for p in patterns)]
    return [found[name] for name in selected]


def _shrunk(values: dict[str, Any]) -> dict[str, Any]:
    """A config's dict with its size fields shrunk (sub-config dicts too), heads kept dividing the
    width, and per-layer lists cut to the new number of layers."""
    out = dict(values)
    layers_before = {key: out[key] for key in out if _SHRINK.get(key) == 2 and isinstance(out[key], int)}
    for key, value in values.items():
        limit = _SHRINK.get(key)
        if isinstance(value, dict) and ("model_type" in value or key.endswith("_config")):
            out[key] = _shrunk(value)
        elif limit is not None and isinstance(value, int) and not isinstance(value, bool) and value > limit:
            out[key] = limit
        elif key in ("depths", "num_layers_per_stage") and isinstance(value, list):
            out[key] = [min(depth, 1) for depth in value]
        elif key in ("hidden_sizes", "embed_dims", "embeddings_size") and isinstance(value, list):
            out[key] = [min(width, 32) for width in value]
        elif key == "embeddings_size" and isinstance(value, int):
            out[key] = min(value, 32)
    if isinstance(out.get("head_dim"), int):
        width = next((out[k] for k in ("hidden_size", "d_model", "n_embd") if isinstance(out.get(k), int)), None)
        heads = next((out[k] for k in ("num_attention_heads", "n_head", "num_heads") if isinstance(out.get(k), int)), 4)
        out["head_dim"] = max(width // heads, 4) if width else min(out["head_dim"], 8)
    for key, before in layers_before.items():
        after = out[key]
        for name, value in values.items():
            if isinstance(value, list) and len(value) == before and after < before and name not in ("depths",):
                out[name] = value[:after]
    if layers_before and "stage_names" in out:
        # a backbone's stages follow its layers: its default outputs (the last stage) are recomputed
        for name in ("stage_names", "out_features", "out_indices"):
            out.pop(name, None)
    vocab = out.get("vocab_size")
    if isinstance(vocab, int):
        for name, value in values.items():
            if name.endswith("_token_id") and isinstance(value, int) and value >= vocab:
                out[name] = vocab - 1 - len([k for k in values if k.endswith("_token_id")]) + _token_rank(values, name)
    return out


def _token_rank(values: dict[str, Any], name: str) -> int:
    """The position of token field ``name`` among the config's token fields (keeps clamped ids distinct)."""
    return sorted(k for k in values if k.endswith("_token_id")).index(name)


def reduced_config(model_type: str) -> Any:
    """The default config of ``model_type`` with its sizes shrunk (:data:`_SHRINK`, then
    :data:`OVERRIDES`), eager attention, and 2 labels."""
    from transformers import AutoConfig

    defaults = AutoConfig.for_model(model_type)
    values = _shrunk(defaults.to_dict())
    values.update(OVERRIDES.get(model_type, {}))
    config = type(defaults).from_dict(values)
    config.num_labels = 2
    if getattr(config, "pad_token_id", None) is None:
        config.pad_token_id = 0  # sequence classification of a batch needs a padding token
    if getattr(config, "is_encoder_decoder", False) and getattr(config, "decoder_start_token_id", None) is None:
        # transformers 5 keeps it in the generation config of a checkpoint; the decoder's inputs are
        # the labels shifted right past it, as for T5 and BART checkpoints
        config.decoder_start_token_id = config.pad_token_id
    return config


def _special_ids(values: Any) -> set[int]:
    """Every id in a ``*token_id*`` or ``*token_index*`` field of a config (sub-configs too)."""
    if not isinstance(values, dict):
        values = values.to_dict()
    found: set[int] = set()
    for key, value in values.items():
        if isinstance(value, dict):
            found |= _special_ids(value)
        elif isinstance(key, str) and ("token_id" in key or "token_index" in key):
            ids = value if isinstance(value, list) else [value]
            found |= {i for i in ids if isinstance(i, int) and not isinstance(i, bool)}
    return found


def _vocab(config: Any) -> int:
    text = getattr(config, "text_config", None)
    for source in (config, text):
        vocab = getattr(source, "vocab_size", None) if source is not None else None
        if isinstance(vocab, int):
            return vocab
    return 256


def _token_ids(config: Any, generator: torch.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    """Random ids below the vocabulary size, none of them a special token (padding, image tokens)."""
    vocab = _vocab(config)
    allowed = torch.tensor([i for i in range(vocab) if i not in _special_ids(config)] or [0])
    return allowed[torch.randint(0, len(allowed), shape, generator=generator)]


def _image_config(config: Any) -> Any:
    return getattr(config, "vision_config", None) or config


def inputs(config: Any, architecture: Architecture, main_input: str) -> dict[str, torch.Tensor]:
    """The model's inputs, built from its config (seeded): the main input (``input_ids``,
    ``pixel_values``, ``input_values`` or ``input_features``), and labels for the task's loss."""
    generator = torch.Generator().manual_seed(0)
    made: dict[str, torch.Tensor] = {}
    if main_input == "pixel_values":
        vision = _image_config(config)
        size = getattr(vision, "image_size", 32)
        size = size if isinstance(size, int) else size[0]
        channels = getattr(vision, "num_channels", 3)
        made["pixel_values"] = torch.randn(_BATCH, channels, size, size, generator=generator)
    elif main_input == "input_values":
        made["input_values"] = torch.randn(_BATCH, _AUDIO_SAMPLES, generator=generator)
    elif main_input == "input_features":
        if hasattr(config, "num_mel_bins"):
            frames = 2 * getattr(config, "max_source_positions", 1500)
            made["input_features"] = torch.randn(_BATCH, config.num_mel_bins, frames, generator=generator)
        else:
            features = getattr(config, "input_feat_per_channel", 80) * getattr(config, "input_channels", 1)
            made["input_features"] = torch.randn(_BATCH, 4 * _SEQUENCE, features, generator=generator)
    else:
        made["input_ids"] = _token_ids(config, generator, (_BATCH, _SEQUENCE))
    task = architecture.task
    if task in ("causal-lm", "masked-lm", "image-text-to-text") and "input_ids" in made:
        made["labels"] = made["input_ids"].clone()
    elif task in ("seq2seq-lm", "speech-seq2seq"):
        made["labels"] = _token_ids(config, generator, (_BATCH, _SEQUENCE))
    elif task in ("sequence-classification", "image-classification", "audio-classification"):
        made["labels"] = torch.randint(0, config.num_labels, (_BATCH,), generator=generator)
    elif task == "ctc":
        made["labels"] = _token_ids(config, generator, (_BATCH, 2))
    return made


def _loss(output: Any) -> torch.Tensor:
    """The model's own loss, else the mean of every floating-point output."""
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    return sum(t.float().mean() for t in _float_outputs(output))


def _float_outputs(output: Any) -> list[torch.Tensor]:
    """The floating-point tensors of a model's output (caches and other objects left out)."""
    values = output.to_tuple() if hasattr(output, "to_tuple") else output
    leaves = pytree.tree_leaves(values)
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _describe(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    message = "; ".join(lines[:4])[:600]
    frame = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    where = f" [{frame.filename.rsplit('/', 2)[-2:][-1]}:{frame.lineno}]" if frame else ""
    return message + where


def _error_kind(error: BaseException) -> str:
    """The exception's class, or for a Dynamo backend failure the class of the error inside it."""
    inner = getattr(error, "inner_exception", None)
    return type(inner).__name__ if inner is not None else type(error).__name__


def _cpu_grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.detach().cpu() for name, p in model.named_parameters() if p.grad is not None}


class _Stage:
    """Records one stage's outcome: ``with stage:`` turns an exception into an ``error`` row."""

    def __init__(self, row: ModelOutcome) -> None:
        self.row = row

    def __enter__(self) -> _Stage:
        self.start = time.perf_counter()
        return self

    def __exit__(self, kind: Any, error: Any, tb: Any) -> bool:
        self.row.seconds = time.perf_counter() - self.start
        if error is not None and isinstance(error, Exception):
            self.row.outcome, self.row.exception, self.row.detail = "error", _error_kind(error), _describe(error)
            return True
        return False


def _judge(row: ModelOutcome, actual: Any, expected: Any, reference: Any) -> None:
    result = compare(actual, expected, atol=ATOL, rtol=RTOL, reference=reference)
    row.max_abs_error = result.max_abs_error
    if result.problem is not None:
        row.outcome, row.detail = "mismatch", result.problem
    else:
        row.detail = "; ".join(result.notes)


def _to_device(value: Any) -> Any:
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to("neuron"), value)


def _widened_run(model: torch.nn.Module, made: dict[str, torch.Tensor], backward: bool) -> Any:
    """The float64 run of ``model`` (a copy): its float outputs, or its gradients with ``backward``."""
    wide = copy.deepcopy(model).double()
    wide.zero_grad(set_to_none=True)
    wide_inputs = {k: v.double() if v.is_floating_point() else v for k, v in made.items()}
    output = wide(**wide_inputs)
    if not backward:
        return [t.detach() for t in _float_outputs(output)]
    _loss(output).backward()
    return _cpu_grads(wide)


def check_model(architecture: Architecture, compiled: bool = True) -> Iterator[ModelOutcome]:
    """Runs ``architecture`` through :data:`STAGES`, yielding each stage's row as it ends (a stage
    after a failed one is yielded as ``skipped``). Never raises for a failing model.

    Args:
        compiled: also run the ``compiled_forward`` stage.
    """
    import transformers

    import torch_neuronx

    def row(stage: str) -> ModelOutcome:
        return ModelOutcome(architecture.model_type, architecture.task, architecture.model_class, stage, "pass")

    rows = {stage: row(stage) for stage in STAGES}
    if not compiled:
        rows["compiled_forward"] = dataclasses.replace(rows["compiled_forward"], outcome="skipped", detail="not asked")
    warnings.simplefilter("ignore")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    with _Stage(rows["cpu"]):
        config = reduced_config(architecture.model_type)
        model_class = getattr(transformers, architecture.model_class)
        model = model_class(config).eval()  # eval: no dropout, so both devices compute the same function
        _break_constant_parameters(model)
        made = inputs(config, architecture, model.main_input_name)
        expected_output = model(**made)
        expected = [t.detach() for t in _float_outputs(expected_output)]
        _loss(expected_output).backward()
        expected_grads = _cpu_grads(model)
        if not expected:
            raise ValueError(f"{architecture.model_class} returns no floating-point output")
    yield rows["cpu"]
    with _Stage(rows["to_device"]):
        if rows["cpu"].outcome != "pass":
            raise _Skipped("the model does not run on the CPU")
        neuron_model = copy.deepcopy(model).to("neuron")
        neuron_model.zero_grad(set_to_none=True)
        neuron_inputs = _to_device(made)
    yield _skipped_if_failed(rows["to_device"])
    torch_neuronx.clear_op_tracking()
    with _Stage(rows["eager_forward"]):
        _needs(rows["to_device"])
        output = neuron_model(**neuron_inputs)
        actual = [t.detach().cpu() for t in _float_outputs(output)]
        _judge(rows["eager_forward"], actual, expected, lambda: _widened_run(model, made, backward=False))
    fallback_forward = sorted(torch_neuronx.get_fallback_ops())
    with _Stage(rows["eager_backward"]):
        _needs(rows["eager_forward"], allow_mismatch=True)
        _loss(output).backward()
        _judge(rows["eager_backward"], _grads(neuron_model), expected_grads, lambda: _widened_run(model, made, True))
    fallback = sorted(set(fallback_forward) | set(torch_neuronx.get_fallback_ops()))
    for stage in ("eager_forward", "eager_backward"):
        rows[stage].fallback_ops = fallback
    yield _skipped_if_failed(rows["eager_forward"])
    yield _skipped_if_failed(rows["eager_backward"])
    if compiled:
        with _Stage(rows["compiled_forward"]):
            _needs(rows["to_device"])
            torch.compiler.reset()
            with torch.no_grad():
                output = torch.compile(neuron_model, backend="neuron")(**neuron_inputs)
            actual = [t.detach().cpu() for t in _float_outputs(output)]
            _judge(rows["compiled_forward"], actual, expected, lambda: _widened_run(model, made, backward=False))
    yield _skipped_if_failed(rows["compiled_forward"])


def _break_constant_parameters(model: torch.nn.Module) -> None:
    """Adds seeded noise (std 0.02, transformers' usual init) to every floating parameter whose
    elements are all equal (zero-initialised routers and biases, norm weights of ones). A zero router
    scores every expert the same, and top-k then picks among ties, whose order the CPU leaves
    unspecified: a different, valid choice on the device would read as a wrong value. Constant
    weights also hide faults that swap or broadcast elements."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.is_floating_point() and parameter.numel() > 1:
                if bool((parameter == parameter.reshape(-1)[0]).all()):
                    noise = torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype)
                    parameter.add_(0.02 * noise)


class _Skipped(Exception):
    """A stage not run because one it needs failed."""


def _needs(stage_row: ModelOutcome, allow_mismatch: bool = False) -> None:
    if stage_row.outcome == "pass" or (allow_mismatch and stage_row.outcome == "mismatch"):
        return
    raise _Skipped(f"stage {stage_row.stage} did not pass")


def _skipped_if_failed(row: ModelOutcome) -> ModelOutcome:
    """A row whose stage did not run because an earlier one failed is ``skipped``, not an error."""
    if row.outcome == "error" and row.exception == "_Skipped":
        row.outcome, row.exception = "skipped", ""
        row.detail = re.sub(r" \[models\.py:\d+\]$", "", row.detail)
    return row
