"""``NeuronConfig`` and ``ProfileMode``: what a torch.profiler session records on neuron.

``NeuronConfig`` is a ``torch.profiler`` experimental config (pass it as ``experimental_config=``);
its options reach the device's Kineto session in the config's ``custom_profiler_config`` string
(runtime/launch_records.py's ``RecordingOptions``).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Sequence

import torch

from torch_neuronx._compat.profiler_internals import ExperimentalConfig
from torch_neuronx.runtime.launch_records import RecordingOptions

__all__ = ["NeuronConfig", "ProfileMode"]

#: Device events kept per NeuronCore unless ``max_events_per_nc`` says otherwise (a device record
#: takes about 100 bytes while the session runs).
DEFAULT_MAX_EVENTS_PER_NC = 1_000_000


class ProfileMode(enum.Enum):
    """What a session records (the vendor's modes, by the same names).

    - ``DEVICE``: each launch (executable, copy, collective) as a device event on its NeuronCore's
      track, at the time the core ran it (docs/profiling.md states how that time is measured).
    - ``RUNTIME``: the runtime's host side: each dispatch, executable cache misses with their
      compile time, CPU fallbacks, host<->device transfers with their bytes, event records, stream
      waits and synchronisations (what the host waited for, and how long).
    - ``CPU_UTIL``, ``HOST_MEMORY``: host CPU utilisation and memory samples; not recorded on
      neuron yet (NeuronConfig raises for them).
    """

    DEVICE = "device"
    RUNTIME = "runtime"
    CPU_UTIL = "cpu_util"
    HOST_MEMORY = "host_memory"


_NOT_RECORDED = (ProfileMode.CPU_UTIL, ProfileMode.HOST_MEMORY)


def parse_cores(spec: str, count: int) -> tuple[int, ...]:
    """The cores of ``capture_enabled_for_nc``: indices and ranges, comma-separated (``"0,1,4-7"``).

    Raises:
        ValueError: a malformed part, an empty range, or a core this process does not see.
    """
    cores: list[int] = []
    for part in (piece.strip() for piece in spec.split(",")):
        try:
            low, _, high = part.partition("-")
            first, last = int(low), int(high) if high else int(low)
        except ValueError:
            raise ValueError(
                f"NeuronConfig: capture_enabled_for_nc={spec!r}: {part!r} is not a core index or a range "
                "like '2-5'; write e.g. capture_enabled_for_nc='0,1,2-5'"
            ) from None
        if first > last or first < 0:
            raise ValueError(f"NeuronConfig: capture_enabled_for_nc={spec!r}: {part!r} is an empty range")
        if last >= count:
            raise ValueError(
                f"NeuronConfig: capture_enabled_for_nc={spec!r} names core {last}, but this process sees "
                f"{count} NeuronCores (neuron:0 to neuron:{count - 1}; NEURON_RT_VISIBLE_CORES sets them)"
            )
        cores.extend(range(first, last + 1))
    return tuple(dict.fromkeys(cores))


class NeuronConfig(ExperimentalConfig):
    """Neuron options of a ``torch.profiler.profile`` session, passed as ``experimental_config``.

    Args:
        modes: the :class:`ProfileMode` values to record (default: DEVICE and RUNTIME).
        profile_output_dir: where :class:`~torch_neuronx.profiling.NeuronProfiler` writes the
            traces and Parquet tables (created if missing; default ``./profile_output``).
        capture_enabled_for_nc: the NeuronCores to record, indices and ranges comma-separated
            (``"0"``, ``"0,1,2-5"``); None: every core.
        correlate_device_time: link each device event to the op that launched it, so that
            ``key_averages()`` counts its time as that op's device time (and the trace draws a flow
            arrow from the dispatch to the device event).
        max_events_per_nc: device events kept per NeuronCore; later ones are dropped and counted
            (the trace's ``neuron_dropped_over_limit`` metadata, and a warning on export).
        **experimental: other ``torch.profiler._ExperimentalConfig`` options (``verbose``, ...).

    Raises:
        TypeError: a mode is not a ProfileMode, or ``custom_profiler_config`` is given (NeuronConfig
            writes it).
        ValueError: no mode, a malformed ``capture_enabled_for_nc``, or ``max_events_per_nc`` < 1.
        NotImplementedError: CPU_UTIL or HOST_MEMORY, which neuron does not record yet.
    """

    def __init__(
        self,
        modes: Sequence[ProfileMode] = (ProfileMode.DEVICE, ProfileMode.RUNTIME),
        profile_output_dir: str | os.PathLike[str] = "./profile_output",
        capture_enabled_for_nc: str | None = None,
        correlate_device_time: bool = True,
        max_events_per_nc: int = DEFAULT_MAX_EVENTS_PER_NC,
        **experimental: object,
    ) -> None:
        if "custom_profiler_config" in experimental:
            raise TypeError("NeuronConfig writes custom_profiler_config itself; pass the Neuron options instead")
        modes = tuple(modes)
        for mode in modes:
            if not isinstance(mode, ProfileMode):
                raise TypeError(f"NeuronConfig: modes must be ProfileMode values, got {mode!r}")
            if mode in _NOT_RECORDED:
                raise NotImplementedError(
                    f"NeuronConfig: {mode} is not recorded on neuron yet; use ProfileMode.DEVICE and "
                    "ProfileMode.RUNTIME"
                )
        if not modes:
            raise ValueError("NeuronConfig: modes is empty; pass ProfileMode.DEVICE and/or ProfileMode.RUNTIME")
        if int(max_events_per_nc) < 1:
            raise ValueError(f"NeuronConfig: max_events_per_nc must be at least 1, got {max_events_per_nc}")
        cores = (
            () if capture_enabled_for_nc is None else parse_cores(capture_enabled_for_nc, torch.neuron.device_count())
        )
        self.modes = modes
        self.profile_output_dir = os.fspath(profile_output_dir)
        self.capture_enabled_for_nc = capture_enabled_for_nc
        self.correlate_device_time = bool(correlate_device_time)
        self.max_events_per_nc = int(max_events_per_nc)
        self.recording = RecordingOptions(
            device=ProfileMode.DEVICE in modes,
            runtime=ProfileMode.RUNTIME in modes,
            cores=cores,
            max_events_per_core=self.max_events_per_nc,
            correlate=self.correlate_device_time,
        )
        super().__init__(custom_profiler_config=self.recording.to_config(), **experimental)

    def __repr__(self) -> str:
        modes = ", ".join(f"ProfileMode.{mode.name}" for mode in self.modes)
        return (
            f"NeuronConfig(modes=[{modes}], profile_output_dir={self.profile_output_dir!r}, "
            f"capture_enabled_for_nc={self.capture_enabled_for_nc!r}, "
            f"correlate_device_time={self.correlate_device_time}, max_events_per_nc={self.max_events_per_nc})"
        )
