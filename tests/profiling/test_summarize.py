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
