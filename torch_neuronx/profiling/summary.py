"""``torch-neuronx profile summarize DIR``: where the time went, from a profile's Parquet tables.

Reads every profile in the directory (a schedule's cycles together) and reports the ops and the
executables that took the most device time, the compile time, the transfers and the CPU fallbacks;
:func:`plot` draws the same as a figure.
"""

from __future__ import annotations

from pathlib import Path

from torch_neuronx.profiling import tables

__all__ = ["plot", "summarize"]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:10.3f} ms"


def _grouped(rows: list[dict], key: str, value: str) -> list[tuple[str, float, int]]:
    """(key, total of ``value``, rows) per distinct ``key``, largest total first."""
    totals: dict[str, list[float]] = {}
    for row in rows:
        entry = totals.setdefault(row[key], [0.0, 0])
        entry[0] += row[value] or 0
        entry[1] += 1
    return sorted(((k, v[0], int(v[1])) for k, v in totals.items()), key=lambda item: -item[1])


def _merged_executables(rows: list[dict]) -> list[dict]:
    """The executables' rows with one row per executable: a schedule's cycles (profiles of one
    process, ``neuron_<pid>_...``) each list the executables they launched, which are one executable
    where the process and ``executable_id`` are the same; launches and device time add up."""
    merged: dict[tuple, dict] = {}
    for row in rows:
        process = row["profile_id"].split("_")[1] if row["profile_id"].count("_") >= 2 else row["profile_id"]
        key = (process, row["executable_id"], row["core"], row["name"])
        if key not in merged:
            merged[key] = dict(row)
        else:
            merged[key]["launches"] += row["launches"]
            merged[key]["device_time_ns"] += row["device_time_ns"]
    return list(merged.values())


def summarize(directory: str | Path, top: int = 10) -> str:
    """The report of the profiles in ``directory``, as text.

    Raises:
        FileNotFoundError: ``directory`` holds no profile tables.
    """
    directory = Path(directory)
    if not any(directory.glob("*.device_events.parquet")):
        raise FileNotFoundError(
            f"{directory} holds no neuron profile (no *.device_events.parquet); write one with "
            "torch.profiler.profile(..., on_trace_ready=NeuronProfiler(config).export_trace)"
        )
    device = tables.read_table(directory, "device_events").to_pylist()
    ops = tables.read_table(directory, "ops").to_pylist()
    executables = _merged_executables(tables.read_table(directory, "executables").to_pylist())
    transfers = tables.read_table(directory, "transfers").to_pylist()
    collectives = tables.read_table(directory, "collectives").to_pylist()
    runtime = tables.read_table(directory, "runtime_events").to_pylist()
    profiles = sorted({row["profile_id"] for row in device} | {row["profile_id"] for row in ops})
    lines = [f"{len(profiles)} profile(s) in {directory}: {', '.join(profiles)}", ""]

    busy = sum(row["duration_ns"] for row in device)
    lines.append(f"device time {_ms(busy).strip()} in {len(device)} device events")
    for core, total, count in _grouped(device, "core", "duration_ns"):
        lines.append(f"  neuron:{core}  {_ms(total)}  {count} events")

    lines += ["", f"top {top} ops by device time (self)"]
    by_op: dict[str, list[float]] = {}
    for row in ops:
        entry = by_op.setdefault(row["op"], [0.0, 0.0, 0])
        entry[0] += row["device_self_time_us"]
        entry[1] += row["host_self_time_us"]
        entry[2] += row["calls"]
    ranked = sorted(by_op.items(), key=lambda item: -item[1][0])
    lines.append(f"  {'op':<40}{'device':>14}{'host (self)':>14}{'calls':>8}")
    for name, (device_us, host_us, calls) in ranked[:top]:
        if device_us <= 0:
            break
        lines.append(f"  {name:<40}{_ms(device_us * 1e3)}{_ms(host_us * 1e3)}{calls:>8}")

    lines += ["", f"top {top} executables by device time"]
    lines.append(f"  {'executable':<44}{'kind':<7}{'device':>14}{'launches':>9}{'GFLOP':>9}")
    for row in sorted(executables, key=lambda r: -r["device_time_ns"])[:top]:
        flops = f"{row['flops'] / 1e9:9.3f}" if row["flops"] is not None else "        -"
        lines.append(f"  {row['name'][:43]:<44}{row['kind']:<7}{_ms(row['device_time_ns'])}{row['launches']:>9}{flops}")

    misses = [row for row in runtime if row["name"] == "neuronCacheMiss"]
    compile_ns = sum(row["duration_ns"] for row in misses)
    lines += ["", f"compilation: {len(misses)} executable cache misses, {_ms(compile_ns).strip()}"]
    for name, total, count in _grouped(misses, "detail", "duration_ns")[:top]:
        lines.append(f"  {name[:60]:<60}{_ms(total)}  x{count}")

    lines += ["", f"transfers: {len(transfers)}"]
    for direction, total, count in _grouped(transfers, "direction", "bytes"):
        time_ns = sum(row["duration_ns"] for row in transfers if row["direction"] == direction)
        lines.append(f"  {direction:<6}{count:>6} copies {total / 2**20:12.3f} MiB {_ms(time_ns)}")
    if collectives:
        lines += ["", f"collectives: {len(collectives)}"]
        for name, total, count in _grouped(collectives, "name", "duration_ns"):
            lines.append(f"  {name:<20}{count:>6} {_ms(total)}")

    fallbacks = [row for row in runtime if row["name"] == "neuronCpuFallback"]
    lines += ["", f"CPU fallbacks: {len(fallbacks)}" + ("" if fallbacks else " (every op ran on neuron)")]
    for name, total, count in _grouped(fallbacks, "detail", "duration_ns"):
        lines.append(f"  {name:<40}{_ms(total)}  x{count}")

    waits = [row for row in runtime if "Synchronize" in row["name"]]
    if waits:
        lines += ["", f"host waits: {len(waits)} synchronisations, {_ms(sum(r['duration_ns'] for r in waits)).strip()}"]
        for name, total, count in _grouped(waits, "name", "duration_ns"):
            lines.append(f"  {name:<40}{_ms(total)}  x{count}")
    return "\n".join(lines) + "\n"


def plot(directory: str | Path, path: str | Path, top: int = 10) -> Path:
    """Draws where the time went into ``path`` (PNG): device time per core by kind of work next to
    the host's compile, fallback and wait time, and the executables that took the most device time.

    Raises:
        FileNotFoundError: ``directory`` holds no profile tables.
        ImportError: matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError("--plot draws with matplotlib: pip install 'torchneuron[profiling]'") from error
    directory = Path(directory)
    if not any(directory.glob("*.device_events.parquet")):
        raise FileNotFoundError(f"{directory} holds no neuron profile (no *.device_events.parquet)")
    device = tables.read_table(directory, "device_events").to_pylist()
    executables = _merged_executables(tables.read_table(directory, "executables").to_pylist())
    runtime = tables.read_table(directory, "runtime_events").to_pylist()

    figure, (where, which) = plt.subplots(1, 2, figsize=(14, 5.5), gridspec_kw={"width_ratios": [1, 1.6]})
    rows: dict[str, dict[str, float]] = {}
    for row in device:
        rows.setdefault(f"neuron:{row['core']}", {}).setdefault(row["kind"], 0.0)
        rows[f"neuron:{row['core']}"][row["kind"]] += row["duration_ns"] / 1e6
    host = rows.setdefault("host", {})
    for label, name in (("compile", "neuronCacheMiss"), ("CPU fallback", "neuronCpuFallback")):
        host[label] = sum(r["duration_ns"] for r in runtime if r["name"] == name) / 1e6
    host["waiting"] = sum(r["duration_ns"] for r in runtime if "Synchronize" in r["name"]) / 1e6
    kinds = sorted({kind for parts in rows.values() for kind in parts})
    labels = list(rows)
    left = [0.0] * len(labels)
    for kind in kinds:
        values = [rows[label].get(kind, 0.0) for label in labels]
        where.barh(labels, values, left=left, label=kind)
        left = [a + b for a, b in zip(left, values, strict=True)]
    where.set_xlabel("milliseconds")
    where.set_title("where the time goes")
    where.legend(loc="lower right", fontsize=8)

    ranked = sorted(executables, key=lambda r: -r["device_time_ns"])[:top][::-1]
    which.barh(
        [f"{r['name'][:48]} (#{r['executable_id']})" for r in ranked], [r["device_time_ns"] / 1e6 for r in ranked]
    )
    which.set_xlabel("device milliseconds")
    which.set_title(f"top {len(ranked)} executables by device time")
    which.tick_params(axis="y", labelsize=7)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
