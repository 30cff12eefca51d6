"""The conformance report: every outcome as a Parquet table, and a markdown summary of them."""

from __future__ import annotations

import collections
import dataclasses
import platform
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from torch_neuronx.testing.conformance import OUTCOMES, SampleOutcome

__all__ = ["summary", "write_parquet", "write_report"]

#: Outcomes of samples that ran (``skipped`` ones did not).
_RAN = OUTCOMES[:4]

#: Characters of an error or mismatch detail shown in the summary (the Parquet table has it all).
_DETAIL_CHARS = 160


def write_parquet(rows: Sequence[SampleOutcome], path: str | Path) -> None:
    """Writes one row per outcome, with the columns of :class:`SampleOutcome`, to ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("op", pa.string()),
            ("variant", pa.string()),
            ("dtype", pa.string()),
            ("sample_index", pa.int32()),
            ("phase", pa.string()),
            ("outcome", pa.string()),
            ("detail", pa.string()),
            ("max_abs_error", pa.float64()),
            ("max_rel_error", pa.float64()),
            ("seconds", pa.float64()),
            ("fallback_ops", pa.list_(pa.string())),
            ("family", pa.string()),
        ]
    )
    table = pa.Table.from_pylist([dataclasses.asdict(row) for row in rows], schema=schema)
    pq.write_table(table, path)


def _rate(counts: collections.Counter[str]) -> str:
    ran = sum(counts[k] for k in _RAN)
    return f"{100 * counts['pass'] / ran:.1f}%" if ran else "-"


def _cell(text: str) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."


def _table(header: Sequence[str], lines: Iterable[Sequence[object]]) -> list[str]:
    out = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|",
    ]
    out += ["| " + " | ".join(str(value) for value in line) + " |" for line in lines]
    return out


def _counts_table(first: str, groups: dict[str, list[SampleOutcome]]) -> list[str]:
    lines = []
    for name, rows in sorted(groups.items()):
        counts = collections.Counter(row.outcome for row in rows if row.sample_index >= 0)
        ops = {row.name for row in rows}
        clean = {row.name for row in rows if row.sample_index >= 0} - {
            row.name for row in rows if row.outcome in _RAN[1:]
        }
        lines.append(
            [name, len(ops), len(clean), sum(counts[k] for k in _RAN), *(counts[k] for k in _RAN), _rate(counts)]
        )
    header = [first, "ops", "ops all pass", "samples run", *_RAN, "pass rate"]
    return _table(header, lines)


def _by_op(rows: Sequence[SampleOutcome], outcome: str) -> dict[str, list[SampleOutcome]]:
    found: dict[str, list[SampleOutcome]] = collections.defaultdict(list)
    for row in rows:
        if row.outcome == outcome and (row.sample_index >= 0 or outcome == "error"):
            found[row.name].append(row)
    return found


def _dtypes(rows: Sequence[SampleOutcome]) -> str:
    return ", ".join(sorted({f"{row.dtype} {row.phase}" if row.phase != "forward" else row.dtype for row in rows}))


def summary(rows: Sequence[SampleOutcome], *, command: str, seconds: float) -> str:
    """The markdown summary of a sweep: pass rates overall, by family and by dtype; every op that
    falls back, errors or gives wrong values, with why; and what did not run."""
    import jax

    ran = [row for row in rows if row.sample_index >= 0 and row.outcome in _RAN]
    counts = collections.Counter(row.outcome for row in ran)
    ops = sorted({row.name for row in rows})
    lines = [
        "# Operator coverage on neuron",
        "",
        "Every sample input of PyTorch's OpInfo database (`op_db`) in every dtype the device supports, run on "
        "neuron and on the CPU and compared (`assert_close` with the OpInfo's tolerance, else the dtype's "
        "default); gradients too, in float32, for differentiable ops, and the values the op's in-place variant "
        "leaves in its input (float32; an input that would have to broadcast must raise); and, as phase "
        "`cuda-dtype`, the dtypes CUDA computes an op in and the CPU does not, compared with the CPU in a wider "
        "dtype, and as phase `cuda-refused` the dtypes both refuse, which neuron must refuse with an exception of "
        "the CPU's type (`torch_neuronx/testing/cuda_dtypes.py`); and, as phase `argument-errors`, each op's "
        "first float32 sample with one argument made wrong at a time, which must raise as on the CPU, in its "
        "words, or compute its values (`torch_neuronx/testing/argument_errors.py`). Outcomes: pass (an "
        "exception CPU raises "
        "as well counts as a pass), mismatch (a wrong value), error, fallback (right values, but some ATen ops "
        "ran on the CPU). Regenerate this page with:",
        "",
        "```console",
        f"$ {command}",
        "```",
        "",
        f"torch {torch.__version__}, jax {jax.__version__}, Python {platform.python_version()}; "
        f"the sweep took {seconds / 60:.1f} minutes. The table of every outcome is `outcomes.parquet` "
        "next to the generated `summary.md`. Phases in this sweep (others were left out by its options): "
        + ", ".join(f"`{phase}`" for phase in sorted({row.phase for row in rows}))
        + ".",
        "",
        "## Overall",
        "",
        *_table(
            ["OpInfos", "samples run", *_RAN, "pass rate", "OpInfos falling back"],
            [[len(ops), len(ran), *(counts[k] for k in _RAN), _rate(counts), _share(_by_op(rows, "fallback"), ops)]],
        ),
        "",
        "## By op family",
        "",
        "The family is the lowering module that handles the op (`torch_neuronx/lowering/<family>.py`), else "
        "one from the OpInfo (name prefix or class). An op counts as all-pass when every sample that ran passed.",
        "",
    ]
    by_family: dict[str, list[SampleOutcome]] = collections.defaultdict(list)
    by_dtype: dict[str, list[SampleOutcome]] = collections.defaultdict(list)
    for row in rows:
        by_family[row.family].append(row)
        by_dtype[row.dtype if row.phase == "forward" else f"{row.dtype} ({row.phase})"].append(row)
    lines += _counts_table("family", by_family)
    lines += ["", "## By dtype", ""]
    lines += _counts_table("dtype", {k: v for k, v in by_dtype.items() if any(r.sample_index >= 0 for r in v)})

    fallbacks = _by_op(rows, "fallback")
    lines += ["", f"## Ops that fall back to the CPU ({len(fallbacks)})", ""]
    lines += _table(
        ["op", "samples", "dtypes", "ATen ops run on the CPU"],
        [
            [name, len(found), _dtypes(found), ", ".join(sorted({op for row in found for op in row.fallback_ops}))]
            for name, found in sorted(fallbacks.items())
        ],
    )
    errors = _by_op(rows, "error")
    lines += ["", f"## Ops with errors ({len(errors)})", "", "The most common error of each op."]
    lines += [""] + _table(
        ["op", "samples", "dtypes", "error"],
        [
            [name, len(found), _dtypes(found), _cell(collections.Counter(r.detail for r in found).most_common(1)[0][0])]
            for name, found in sorted(errors.items())
        ],
    )
    mismatches = _by_op(rows, "mismatch")
    lines += ["", f"## Ops with wrong values ({len(mismatches)})", "", "The first mismatch of each op."]
    lines += [""] + _table(
        ["op", "samples", "dtypes", "max abs error", "max rel error", "first mismatch"],
        [
            [
                name,
                len(found),
                _dtypes(found),
                _number(max((r.max_abs_error for r in found if r.max_abs_error is not None), default=None)),
                _number(max((r.max_rel_error for r in found if r.max_rel_error is not None), default=None)),
                _cell(f"sample {found[0].sample_index} {found[0].dtype}: {found[0].detail}"),
            ]
            for name, found in sorted(mismatches.items())
        ],
    )
    lines += _not_run(rows)
    return "\n".join(lines) + "\n"


def _share(selected: dict[str, list[SampleOutcome]], ops: Sequence[str]) -> str:
    return f"{len(selected)} ({100 * len(selected) / len(ops):.1f}%)" if ops else "-"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _not_run(rows: Sequence[SampleOutcome]) -> list[str]:
    skipped = [row for row in rows if row.outcome == "skipped"]
    reasons = collections.Counter(_reason(row.detail) for row in skipped)
    lines = ["", "## Not run", "", "Skipped samples and (op, dtype, phase) entries, by reason."]
    lines += [""] + _table(["reason", "entries"], [[_cell(reason), n] for reason, n in reasons.most_common()])
    unrun = sorted({row.name for row in rows} - {row.name for row in rows if row.outcome in _RAN})
    if unrun:
        lines += ["", f"OpInfos with no sample run ({len(unrun)}): " + ", ".join(f"`{name}`" for name in unrun) + "."]
    return lines


def _reason(detail: str) -> str:
    """A skip reason without its per-entry part (which sample the budget stopped at)."""
    return detail.split(" (samples ")[0]


def write_report(
    rows: Sequence[SampleOutcome], out_dir: str | Path, *, command: str, seconds: float
) -> tuple[Path, Path]:
    """Writes ``outcomes.parquet`` and ``summary.md`` into ``out_dir`` (created if missing) and
    returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table, text = out / "outcomes.parquet", out / "summary.md"
    write_parquet(rows, table)
    text.write_text(summary(rows, command=command, seconds=seconds))
    return table, text
