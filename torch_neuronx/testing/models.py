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
import inspect
import math
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

#: The fields that count a mixture of experts' routed experts.
_EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")

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
            "n_heads",
        ),
        4,
    ),
    **dict.fromkeys(_EXPERTS, 4),
    **dict.fromkeys(("num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k", "moe_k"), 2),
    # rotary and latent-attention (DeepSeek's MLA) widths, kept within the heads' width of 8
    **dict.fromkeys(("rotary_dim", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"), 8),
    **dict.fromkeys(("kv_lora_rank", "q_lora_rank"), 16),
    **dict.fromkeys(("vocab_size", "decoder_vocab_size"), 256),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "max_target_positions"), 64),
    **dict.fromkeys(("image_size",), 32),
}

#: An :data:`OVERRIDES` value that leaves a field out, so that the config derives it from the shrunk
#: sizes (a field its defaults derived from the full ones, which ``from_dict`` would set again).
DERIVED = object()

#: Per-family fixes where the generic shrinking breaks a model, each with its reason:
#: ``model_type -> {field: value}``, applied after shrinking; ``"text_config.field"`` names a
#: sub-config's field, and :data:`DERIVED` leaves the field out.
OVERRIDES: dict[str, dict[str, Any]] = {
    # their defaults have no attention layer (attn_layer_indices None): transformers' cache of Mamba
    # layers alone cannot tell its length: one attention layer of the two, as in the checkpoints
    "bamba": {"attn_layer_indices": [1]},
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},  # likewise
    # its last convolution's width is computed from 1280 and the width coefficient, not read
    "efficientnet": {"hidden_dim": 2560},
    # the text embeddings' width is 4 coordinate and 2 shape embeddings wide (4 x 128 + 2 x 128)
    "layoutlmv3": {"coordinate_size": 6, "shape_size": 4},
    # its layout embeddings are 6 of hidden_size // 6 each: a width that 6 divides
    "lilt": {"hidden_size": 48},
    # the classifier reads the last stage's width from hidden_sizes, the stages their own lists
    "hgnet_v2": {"hidden_sizes": [128, 512, 1024, 2048]},
    # the stem feeds the first stage, whose width the reduced hidden_sizes set
    "textnet": {"stem_out_channels": 32, "image_size": [32, 32]},
    # embeddings as wide as the layers, which its code requires
    "squeezebert": {"embedding_size": 32},
    # its rotary part is qk_rope_head_dim of head_dim (as 64 of 128): a head as wide as q's and k's
    "mistral4": {"head_dim": 16},
    # likewise: attention (and MoE) every 8th layer from the 5th; every 3rd block
    "jamba": {"attn_layer_offset": 1, "attn_layer_period": 2, "expert_layer_offset": 1, "expert_layer_period": 2},
    "recurrent_gemma": {"block_types": ["recurrent", "attention"]},
    # its defaults name no layer types (the checkpoints do): a short-convolution layer, then an
    # attention layer, the second one MoE
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    # Mamba-2's heads split the expanded width (2 x 32): num_heads (4) x head_dim must equal it;
    # its 8 groups of B and C would each serve half a head
    "mamba2": {"head_dim": 16, "n_groups": 1},
    # widths its config derives from the full hidden size (2560), which from_dict would set again,
    # and the hybrid layers' indices among the full model's layers
    "zamba2": dict.fromkeys(
        (
            "attention_hidden_size",
            "attention_head_dim",
            "mamba_headdim",
            "kv_channels",
            "num_query_groups",
            "hybrid_layer_ids",
        ),
        DERIVED,
    ),
    # its position embeddings are built for max_length frames of spectrogram (1024 by default)
    "audio-spectrogram-transformer": {"max_length": 32},
}


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


#: Size fields a model cannot do without, given a reduced size when the default config leaves them
#: ``None`` (DeepSeek-V2's and dots1's experts per token, dots1's shared experts, ESM's vocabulary,
#: Nemotron's key-value heads);
#: other ``None`` sizes mean a part left out (no query LoRA, no MoE) and stay ``None``.
_REQUIRED = {
    "num_experts_per_tok": 2,
    "n_routed_experts": 4,
    "n_shared_experts": 1,
    "vocab_size": 256,
    "num_key_value_heads": 4,  # None: as many as the query heads (Nemotron)
}


def _kept_layers(values: dict[str, Any], before: int, after: int) -> list[int]:
    """The ``after`` layers a reduced model keeps of ``before``: layer 0, then, one at a time, the
    layer with the most entries not yet kept in the per-layer lists and dicts (``layer_types``,
    ``mlp_layer_types``, ``per_layer_config``; the first such layer on a tie), or the last layers
    when no layer adds one. So a pattern keeps its kinds: Gemma's full attention every 6th layer,
    hybrid models' full attention among linear attention, DeepSeek's MoE after its dense layers."""
    per_layer = [
        value
        for name, value in values.items()
        if (isinstance(value, list) and len(value) == before) or (_is_per_layer(value) and name != "id2label")
    ]

    def kinds(layer: int) -> list[Any]:
        return [v[layer] if isinstance(v, list) else _layer_entry(v, layer) for v in per_layer]

    kept, seen = [0], [{repr(entry)} for entry in kinds(0)]
    while len(kept) < after:
        new = {
            layer: sum(repr(entry) not in known for entry, known in zip(kinds(layer), seen, strict=True))
            for layer in range(1, before)
            if layer not in kept
        }
        best = max(new, key=lambda layer: (new[layer], layer if not any(new.values()) else -layer))
        kept.append(best)
        for entry, known in zip(kinds(best), seen, strict=True):
            known.add(repr(entry))
    return sorted(kept)


def _layer_entry(per_layer: dict[Any, Any], layer: int) -> Any:
    return next((value for key, value in per_layer.items() if int(key) == layer), None)


def _is_per_layer(value: Any) -> bool:
    """A dict keyed by layer indices (``"05"``, ``11``), as Gemma 4's ``per_layer_config``."""
    return isinstance(value, dict) and bool(value) and all(str(key).isdigit() for key in value)


def _width(values: dict[str, Any]) -> int | None:
    return next(
        (values[k] for k in ("hidden_size", "d_model", "n_embd", "dim") if isinstance(values.get(k), int)), None
    )


def _heads(values: dict[str, Any]) -> int:
    keys = ("num_attention_heads", "n_head", "n_heads", "num_heads")
    return next((values[k] for k in keys if isinstance(values.get(k), int)), 4)


def _shrunk(values: dict[str, Any]) -> dict[str, Any]:
    """A config's dict with its size fields shrunk (sub-config dicts too) and the invariants between
    them kept: heads dividing the width and head widths (``head_dim``, ``d_head``, Mamba's
    ``mamba_d_head``) consistent with it, per-stage head counts dividing their stage's width, norm
    groups dividing the channels, per-layer lists and dicts cut to the layers kept
    (:func:`_kept_layers`), and stage-structured models (``depths``) keeping their number of stages."""
    out = dict(values)
    staged = isinstance(values.get("depths"), list)
    layers_before = {
        key: out[key]
        for key in out
        if _SHRINK.get(key) == 2 and isinstance(out[key], int) and not (staged and key == "num_layers")
    }
    for key, value in values.items():
        limit = _SHRINK.get(key)
        if _is_per_layer(value) or key in ("id2label", "label2id"):
            continue
        if isinstance(value, dict) and ("model_type" in value or key.endswith("_config")):
            out[key] = _shrunk(value)
        elif key in layers_before or (limit is not None and isinstance(value, int) and not isinstance(value, bool)):
            if value > limit and not (staged and key in ("num_layers", "hidden_size")):
                out[key] = limit
        elif value is None and key in _REQUIRED:
            out[key] = _REQUIRED[key]
        elif key in ("depths", "num_layers_per_stage") and isinstance(value, list):
            out[key] = [min(depth, 1) for depth in value]
        elif key in ("hidden_sizes", "embed_dims", "embeddings_size") and isinstance(value, list):
            out[key] = [min(width, 32) for width in value]
        elif key == "embeddings_size" and isinstance(value, int):
            out[key] = min(value, 32)
        elif key.endswith("heads") and isinstance(value, list) and all(isinstance(h, int) for h in value):
            # one count per stage, whose widths (32 and up, doubling) 8 divides
            out[key] = [math.gcd(heads, 8) for heads in value]
        elif key == "num_groups" and isinstance(value, int):
            out[key] = math.gcd(value, 4)  # group norm over reduced channels (8 in BiT's bottlenecks)
    if staged and isinstance(values.get("embed_dim"), int) and isinstance(values.get("hidden_size"), int):
        # Swin-like: the last stage's width, embed_dim doubled at every stage after the first
        ratio = values["hidden_size"] // values["embed_dim"]
        out["hidden_size"] = out["embed_dim"] * ratio
        if isinstance(values.get("window_size"), int) and isinstance(values.get("patch_size"), int):
            # windows of 2 patches, and an image whose last stage is still one window wide: a
            # stage narrower than its window shrinks the window but not its position-bias table
            out["window_size"] = 2
            out["image_size"] = values["patch_size"] * ratio * 2
    if all(isinstance(out.get(k), int) for k in ("qk_head_dim", "qk_nope_head_dim", "qk_rope_head_dim")):
        out["qk_head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]  # derived, as MLA's configs do
    experts = next((out[k] for k in _EXPERTS if isinstance(out.get(k), int)), None)
    for groups in ("n_group", "num_expert_group"):
        if experts and isinstance(out.get(groups), int) and out[groups] > max(experts // 2, 1):
            # group-limited routing (DeepSeek-V3) takes the top 2 experts of each group: groups of 2
            out[groups] = max(experts // 2, 1)
            if isinstance(out.get("topk_group"), int):
                out["topk_group"] = min(out["topk_group"], out[groups])
    width, heads = _width(out), _heads(out)
    if width and "head_dim" in out and out["head_dim"] is None:
        out["head_dim"] = width // heads  # None means derived, which some models' code does not do
    for key in ("head_dim", "d_head"):
        if isinstance(out.get(key), int):
            out[key] = max(width // heads, 4) if width else min(out[key], 8)
    if isinstance(out.get("mamba_d_head"), int) and width:
        inner = out.get("mamba_expand", 2) * width
        if isinstance(out.get("mamba_d_ssm"), int):
            out["mamba_d_ssm"] = inner
        out["mamba_d_head"] = inner // out.get("mamba_n_heads", 4)
    for key, before in layers_before.items():
        after = out[key]
        if after >= before:
            continue
        kept = _kept_layers(values, before, after)
        for name, value in values.items():
            if isinstance(value, list) and len(value) == before and name not in ("depths",):
                out[name] = [value[i] for i in kept]
            elif _is_per_layer(value) and name != "id2label":
                # renumbered, keys spelt as before ("05"), each layer's own sizes shrunk too
                digits = len(next(iter(value))) if isinstance(next(iter(value)), str) else 0
                out[name] = {
                    (str(new).zfill(digits) if digits else new): _shrunk(entry) if isinstance(entry, dict) else entry
                    for new, entry in ((new, _layer_entry(value, i)) for new, i in enumerate(kept))
                    if entry is not None
                }
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
    for path, value in OVERRIDES.get(model_type, {}).items():
        *parents, field = path.split(".")
        target = values
        for parent in parents:
            target = target[parent]
        if value is DERIVED:
            target.pop(field, None)
        else:
            target[field] = value
    config = type(defaults).from_dict(values)
    _fit_rope_sections(config)
    config.num_labels = 2
    if getattr(config, "pad_token_id", None) is None:
        config.pad_token_id = 0  # sequence classification of a batch needs a padding token
    if getattr(config, "is_encoder_decoder", False) and getattr(config, "decoder_start_token_id", None) is None:
        # transformers 5 keeps it in the generation config of a checkpoint; the decoder's inputs are
        # the labels shifted right past it, as for T5 and BART checkpoints
        config.decoder_start_token_id = config.pad_token_id
    return config


def _configs_in(config: Any) -> list[Any]:
    """``config`` and its sub-configs (``text_config``, ``vision_config``, ...), depth first."""
    from transformers import PretrainedConfig

    found = [config]
    for value in vars(config).values():
        if isinstance(value, PretrainedConfig):
            found += _configs_in(value)
    return found


def _fit_rope_sections(config: Any) -> None:
    """Gives M-RoPE configs that name no ``mrope_section`` (Qwen2-VL, GLM-4V: their code then takes
    ``[16, 24, 24]`` or ``[8, 12, 12]``, sections of the full rotary half-width) sections of the
    reduced one: its temporal, height and width parts, as even as they go. An M-RoPE config declares
    the key (``ignore_keys_at_rope_validation``), but PaddleOCR-VL's text config does not."""
    for sub in _configs_in(config):
        rope = getattr(sub, "rope_parameters", None)
        declared = "mrope_section" in getattr(type(sub), "ignore_keys_at_rope_validation", ())
        if not declared and sub.model_type != "paddleocr_vl_text":
            continue
        if not isinstance(rope, dict) or "mrope_section" in rope:
            continue
        head_dim = getattr(sub, "head_dim", None) or sub.hidden_size // sub.num_attention_heads
        factor = rope.get("partial_rotary_factor", getattr(sub, "partial_rotary_factor", None) or 1.0)
        half = int(head_dim * factor) // 2
        rope["mrope_section"] = [half // 3 + (1 if part < half % 3 else 0) for part in range(3)]


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


def _audio_config(config: Any) -> Any:
    """The config that describes the audio: the encoder's or audio tower's sub-config when it has one."""
    for name in ("encoder_config", "audio_config", "encoder"):
        sub = getattr(config, name, None)
        if sub is not None and _audio_features(sub) is not None:
            return sub
    return config


def _audio_features(config: Any) -> int | None:
    """Features per frame of a spectrogram input: mel bins, or (w2v-BERT) the stacked features the
    projection takes, or (Speech2Text) features per channel times channels; None for raw audio."""
    for name in ("num_mel_bins", "feature_projection_input_dim"):
        if isinstance(getattr(config, name, None), int):
            return getattr(config, name)
    if isinstance(getattr(config, "input_feat_per_channel", None), int):
        return config.input_feat_per_channel * getattr(config, "input_channels", 1)
    return None


def inputs(
    config: Any, architecture: Architecture, main_input: str, accepts_mask: bool = False
) -> dict[str, torch.Tensor]:
    """The model's inputs, built from its config (seeded): the main input (``input_ids``,
    ``pixel_values``, ``input_values`` or ``input_features``), an all-ones ``attention_mask`` for a
    spectrogram when the model takes one (``accepts_mask``), and labels for the task's loss."""
    generator = torch.Generator().manual_seed(0)
    made: dict[str, torch.Tensor] = {}
    audio = _audio_config(config)
    features = _audio_features(audio)
    if main_input == "pixel_values":
        vision = _image_config(config)
        size = getattr(vision, "image_size", 32)
        size = size if isinstance(size, int) else size[0]
        channels = getattr(vision, "num_channels", 3)
        made["pixel_values"] = torch.randn(_BATCH, channels, size, size, generator=generator)
    elif main_input == "input_values" and features is not None:
        # a spectrogram (the Audio Spectrogram Transformer): as many frames as its positions cover
        frames = getattr(config, "max_length", 4 * _SEQUENCE)
        made["input_values"] = torch.randn(_BATCH, frames, features, generator=generator)
    elif main_input in ("input_values", "inputs"):
        # raw audio; "inputs" is the speech encoder-decoder's name for its encoder's input
        made["input_values"] = torch.randn(_BATCH, _AUDIO_SAMPLES, generator=generator)
    elif main_input == "input_features":
        features = features or 80
        if hasattr(audio, "max_source_positions") and hasattr(audio, "num_mel_bins"):
            # Whisper's layout: mel bins x frames, twice as many frames as encoder positions
            made["input_features"] = torch.randn(_BATCH, features, 2 * audio.max_source_positions, generator=generator)
        else:
            # frames x features (Speech2Text, conformers: 32 frames, 4 after 8-fold subsampling)
            made["input_features"] = torch.randn(_BATCH, 4 * _SEQUENCE, features, generator=generator)
            if accepts_mask:
                # some CTC losses take the input lengths from the mask (Parakeet)
                made["attention_mask"] = torch.ones(_BATCH, 4 * _SEQUENCE, dtype=torch.long)
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
        config = _config_for(model_class, config)
        model = model_class(config).eval()  # eval: no dropout, so both devices compute the same function
        _break_constant_parameters(model)
        # copied before the CPU run: a model that keeps state between calls (RecurrentGemma's
        # convolution state, made from the activations) starts from the same state on both
        # devices, and copy.deepcopy refuses such state once it is part of an autograd graph
        untouched = copy.deepcopy(model)
        accepts_mask = "attention_mask" in inspect.signature(model.forward).parameters
        made = inputs(config, architecture, model.main_input_name, accepts_mask)
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
        neuron_model = untouched.to("neuron")
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
            if rows["compiled_forward"].outcome == "mismatch":
                _judge_against_cpu_compiled(rows["compiled_forward"], model, made, actual, expected)
    yield _skipped_if_failed(rows["compiled_forward"])


def _judge_against_cpu_compiled(
    row: ModelOutcome, model: torch.nn.Module, made: dict[str, torch.Tensor], actual: Any, expected: Any
) -> None:
    """A compiled mismatch judged again against the CPU's own ``torch.compile`` (``aot_eager``): some
    models compute another function when compiling (PaliGemma: under Dynamo transformers builds a
    causal mask its eager path leaves out, 0.05 apart on the CPU alone). The row passes, with a note
    saying so, only when the CPU's compiled run differs from its eager run and the device matches
    the CPU's compiled run; otherwise it stays a mismatch."""
    torch.compiler.reset()
    with torch.no_grad():
        cpu_compiled = [t.detach() for t in _float_outputs(torch.compile(model, backend="aot_eager")(**made))]
    if compare(cpu_compiled, expected, atol=ATOL, rtol=RTOL).problem is None:
        return  # the model computes the same function compiled: the device is wrong
    again = compare(actual, cpu_compiled, atol=ATOL, rtol=RTOL)
    if again.problem is None:
        row.outcome, row.max_abs_error = "pass", again.max_abs_error
        row.detail = (
            "compared with the CPU's torch.compile (aot_eager): the model computes another function when "
            "compiled, its CPU eager and compiled runs differ"
        )


def _config_for(model_class: Any, config: Any) -> Any:
    """The config ``model_class`` takes: the text sub-config when the model type's config is a
    composite one and the task's class is the text model's (Llama 4's and Qwen 3.5's causal LM)."""
    wanted = getattr(model_class, "config_class", None)
    text = getattr(config, "text_config", None)
    if wanted is not None and not isinstance(config, wanted) and isinstance(text, wanted):
        text.num_labels = config.num_labels
        if getattr(text, "pad_token_id", None) is None:
            text.pad_token_id = 0
        return text
    return config


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
