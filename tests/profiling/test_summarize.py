"""``torch-neuronx profile summarize DIR [--plot FILE.png]`` (docs/profiling.md)."""

from __future__ import annotations

import pytest

from torch_neuronx import cli
from torch_neuronx.profiling import summary


def test_summarize_reports_where_the_time_went(exported, tmp_path, capsys):
    output, _, _ = exported
    plot = tmp_path / "where.png"
    assert cli.main(["profile", "summarize", str(output), "--top", "3", "--plot", str(plot)]) == 0
    report = capsys.readouterr().out
    assert "top 3 ops by device time" in report and "aten::" in report
    assert "transfers: 1" in report and "DtoH" in report and "CPU fallbacks: 0" in report
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summarize_of_a_directory_without_a_profile_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no neuron profile"):
        summary.summarize(tmp_path)
    assert cli.main(["profile", "summarize", str(tmp_path)]) == 2


def test_summarize_lists_an_executable_once_over_a_schedules_cycles(tmp_path):
    # Each cycle is a profile of its own; the executable it launched is the same (helper-60: the
    # "top executables" listed it once per cycle).
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode

    config = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir=str(tmp_path))
    x = torch.randn(8, 8, device="neuron")
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        schedule=schedule(wait=0, warmup=0, active=1, repeat=2),
        on_trace_ready=NeuronProfiler(config).export_trace,
    ) as prof:
        for _ in range(2):
            torch.mm(x, x)
            torch.neuron.synchronize()
            prof.step()
    report = summary.summarize(tmp_path)
    assert report.startswith("2 profile(s)")
    section = report.split("executables by device time")[1].split("compilation")[0]
    rows = [line.split() for line in section.splitlines() if "aten::mm" in line]
    assert len(rows) == 1 and rows[0][-2] == "2"  # launches, over both cycles
