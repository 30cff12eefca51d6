"""The model sweep (``torch-neuronx sweep-models``): reduced configs, a fast sample of architectures
through the real sweep code, the report files, resume, and the worker that crashes cannot take down."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import pyarrow.parquet as pq
import pytest
import torch

from torch_neuronx import cli
from torch_neuronx.testing import model_sweep, models
from torch_neuronx.testing.model_sweep import run_model_sweep, targets
from torch_neuronx.testing.worker import Worker


def test_reduced_config_shrinks_sizes_and_keeps_heads_dividing_the_width():
    config = models.reduced_config("mixtral")
    assert (config.num_hidden_layers, config.hidden_size, config.intermediate_size) == (2, 32, 64)
    assert (config.num_attention_heads, config.num_key_value_heads) == (4, 4)
    assert (config.num_local_experts, config.num_experts_per_tok, config.vocab_size) == (4, 2, 256)


def test_reduced_config_keeps_the_invariants_between_sizes():
    gemma = models.reduced_config("gemma4_text")  # full attention every 6th layer
    assert gemma.layer_types == ["sliding_attention", "full_attention"]
    # the layers kept are the first and the first of another kind; per-layer dicts renumbered
    values = {"num_hidden_layers": 6, "layer_types": list("aabaab"), "per_layer_config": {"02": {"num_heads": 64}}}
    assert models._shrunk(values) == {
        "num_hidden_layers": 2,
        "layer_types": ["a", "b"],
        "per_layer_config": {"01": {"num_heads": 4}},
    }
    bamba = models.reduced_config("bamba")
    assert bamba.mamba_d_head * bamba.mamba_n_heads == bamba.mamba_expand * bamba.hidden_size
    swin = models.reduced_config("swin")  # 4 stages of doubling width, heads dividing each
    widths = [swin.embed_dim * 2**stage for stage in range(len(swin.depths))]
    assert swin.num_layers == 4 and swin.hidden_size == widths[-1]
    assert all(width % heads == 0 for width, heads in zip(widths, swin.num_heads, strict=True))
    assert models.reduced_config("bit").num_groups == 4
    assert (models.reduced_config("esm").vocab_size, models.reduced_config("dots1").num_experts_per_tok) == (256, 2)


def test_speech_inputs_follow_the_encoder_config():
    config = models.reduced_config("canary")  # a conformer: frames x the encoder's 128 mel bins
    made = models.inputs(config, models.architectures(["canary"])[0], "input_features", accepts_mask=True)
    assert made["input_features"].shape == (2, 32, config.encoder_config.num_mel_bins)
    assert made["attention_mask"].shape == (2, 32)


class _OtherWhenCompiled(torch.nn.Module):
    """A model that computes another function under torch.compile, as PaliGemma's masks do."""

    def forward(self, x):
        return x * 2 if torch.compiler.is_compiling() else x


@pytest.mark.parametrize("device_factor, outcome", [(2.0, "pass"), (3.0, "mismatch")])
def test_compiled_mismatch_is_judged_again_against_the_cpu_compiled(device_factor, outcome):
    made = {"x": torch.randn(4)}
    row = models.ModelOutcome("m", "causal-lm", "M", "compiled_forward", "mismatch", "result 0: not close")
    expected = [made["x"]]  # the CPU's eager run
    models._judge_against_cpu_compiled(row, _OtherWhenCompiled(), made, [made["x"] * device_factor], expected)
    assert row.outcome == outcome
    assert ("the model computes another function when compiled" in row.detail) == (outcome == "pass")


def test_architectures_take_their_first_task_and_reject_unknown_patterns():
    found = {a.model_type: a for a in models.architectures(["llama", "vit", "wav2vec2"])}
    assert {name: a.task for name, a in found.items()} == {
        "llama": "causal-lm",
        "vit": "image-classification",
        "wav2vec2": "ctc",
    }
    with pytest.raises(ValueError, match="no transformers model type matches 'no-such-model'"):
        models.architectures(["no-such-model"])


def test_reduced_config_keeps_routing_rope_sections_and_derived_widths_consistent():
    deepseek = models.reduced_config("deepseek_v3")  # 8 expert groups of 256 experts: 2 of 4
    assert (deepseek.n_routed_experts, deepseek.n_group, deepseek.topk_group) == (4, 2, 2)
    assert models.reduced_config("longcat_flash").qk_head_dim == 16  # qk_nope_head_dim + qk_rope_head_dim
    text = models.reduced_config("qwen2_vl").text_config  # head width 8: rotary half-width 4
    assert text.rope_parameters["mrope_section"] == [2, 1, 1]
    glm = models.reduced_config("glm4v_moe").text_config  # half the head width rotates: 2
    assert sum(glm.rope_parameters["mrope_section"]) == 2
    zamba = models.reduced_config("zamba2")  # widths derived from the reduced hidden size
    assert (zamba.attention_hidden_size, zamba.mamba_headdim) == (2 * zamba.hidden_size, 2 * 32 // zamba.n_mamba_heads)


def test_sample_of_architectures_passes_every_stage_in_process(tmp_path):
    """A decoder LM with a KV cache (a constant tensor in its compiled graph) and a vision encoder."""
    rows = run_model_sweep(["llama", "vit"], tmp_path, isolate=False, progress=False)
    outcomes = {(row.model_type, row.stage): row.outcome for row in rows}
    assert outcomes == {(name, stage): "pass" for name in ("llama", "vit") for stage in models.STAGES}
    assert all(not row.fallback_ops for row in rows)
    goal = targets(rows)
    assert (goal["architectures_on_cpu"], goal["eager_pass"], goal["compiled_pass"]) == (2, 2, 2)


def _journal_rows(model_type: str, outcome: str) -> list[models.ModelOutcome]:
    return [
        models.ModelOutcome(model_type, "causal-lm", "X", stage, outcome, "from an earlier run")
        for stage in models.STAGES
    ]


def test_command_line_writes_the_report_and_keeps_one_result_per_architecture(tmp_path, caplog):
    out, journal = str(tmp_path / "report"), tmp_path / "kept" / "outcomes.jsonl"
    # an earlier session's journal: llama (not selected below, kept) and a stale vit (run again)
    model_sweep._write_journal(journal, _journal_rows("llama", "pass") + _journal_rows("vit", "error"))
    # in process: the worker is tested below, and spawning one costs seconds of imports
    arguments = ["sweep-models", "--models", "vit", "--no-compile", "--in-process", "--no-progress", "--out", out]
    assert cli.main([*arguments, "--journal", str(journal)]) == 0
    table = pq.read_table(os.path.join(out, "outcomes.parquet")).to_pylist()
    assert [(row["model_type"], row["stage"], row["outcome"]) for row in table] == [
        *(("llama", stage, "pass") for stage in models.STAGES),
        ("vit", "cpu", "pass"),
        ("vit", "to_device", "pass"),
        ("vit", "eager_forward", "pass"),
        ("vit", "eager_backward", "pass"),
        ("vit", "compiled_forward", "skipped"),
    ]
    kept = [models.ModelOutcome(**{**row, "seconds": round(row["seconds"], 2)}) for row in table]
    assert model_sweep._read_journal(journal) == kept  # seconds to 10 ms in the journal
    summary = open(os.path.join(out, "summary.md")).read()
    assert (
        "$ torch-neuronx sweep-models --models vit --no-compile --in-process" in summary
        and "## Failure kinds" in summary
    )
    assert open(os.path.join(out, "models_pass_rates.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    caplog.clear()
    # resumed, vit is kept from the journal: nothing runs, the report is the same
    assert cli.main([*arguments, "--journal", str(journal), "--resume"]) == 0
    assert pq.read_table(os.path.join(out, "outcomes.parquet")).to_pylist() == [dataclasses.asdict(r) for r in kept]
    assert cli.main(["sweep-models", "--models", "no-such-model", "--out", out]) == 2
    assert "no transformers model type matches" in caplog.text


def crash_on_second_event(task: int) -> Iterator[int]:
    """A worker function (imported by name in the worker) that aborts its process after one event."""
    yield task
    os.abort()


def test_worker_reports_a_crash_and_starts_afresh():
    events: list[int] = []
    worker = Worker(f"{__name__}.crash_on_second_event", timeout=60)
    try:
        assert worker.run(7, events.append) == "the process crashed (SIGABRT)"
        assert worker.run(8, events.append) == "the process crashed (SIGABRT)"
    finally:
        worker.close()
    assert events == [7, 8]
