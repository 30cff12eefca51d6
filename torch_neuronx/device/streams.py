"""Streams and events of the neuron device: ``torch_neuronx.Stream`` / ``Event``, ``torch.neuron.stream``.

They are ``torch.Stream`` and ``torch.Event`` (one implementation behind both, reached through the
device guard, csrc/runtime/NeuronGuard.cpp) with neuron defaults and a stream ``priority``.
Semantics (DESIGN.md decision 10): work on one stream runs in order; ordering across streams is
made explicit with events (``record_event`` on the producer, ``wait_event`` on the consumer); every
stream of a core multiplexes onto the core's single queue, keeping ordering, priorities and event
semantics; an event's timing is when the device finished the work before it.
"""

from __future__ import annotations

import torch

from torch_neuronx import _C
from torch_neuronx.device.core import _index

__all__ = ["Event", "Stream", "current_stream", "default_stream", "set_stream", "stream"]


class Stream(torch.Stream):
    """A neuron stream: ``Stream(device=None, priority=0)``.

    Args:
        device: the core (``"neuron:1"``, an index, or None for the current core).
        priority: 0 or negative; lower is higher priority, as on CUDA.

    Raises:
        RuntimeError: ``priority`` is positive (CUDA's error), or ``device`` is not a core.
    """

    def __new__(cls, device: torch.device | int | str | None = None, priority: int = 0) -> Stream:
        if priority > 0:  # CUDA's error (getStreamFromPool): a RuntimeError
            raise RuntimeError(f"Expected neuron stream priority to be less than or equal to 0, got {priority}")
        return super().__new__(cls, device=torch.device("neuron", _index(device)), priority=priority)

    @classmethod
    def _of(cls, stream: torch.Stream) -> Stream:
        """``stream`` (a plain ``torch.Stream`` of neuron) as this class: the same stream, equal to
        it and of its hash, as ``torch.cuda.current_stream`` returns a ``torch.cuda.Stream``."""
        return torch.Stream.__new__(
            cls, stream_id=stream.stream_id, device_index=stream.device_index, device_type=stream.device_type
        )

    @property
    def priority(self) -> int:
        return _C._stream_priority(self.device_index, self.stream_id)

    def __repr__(self) -> str:
        where = f"device=neuron:{self.device_index} stream_id={self.stream_id}"
        return f"<torch_neuronx.Stream {where} priority={self.priority}>"


class _NeuronEventType(type):
    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, torch.Event) and instance.device.type == "neuron"


class Event(metaclass=_NeuronEventType):
    """A neuron event: ``Event(enable_timing=False)`` gives a ``torch.Event`` on neuron.

    It is a plain ``torch.Event`` (PyTorch's ``elapsed_time`` accepts no subclass), and
    ``isinstance(e, torch_neuronx.Event)`` holds for any neuron ``torch.Event``. ``elapsed_time(end)``
    (milliseconds) needs both events created with ``enable_timing=True`` and raises otherwise, as
    on CUDA.
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:
        if interprocess:
            raise NotImplementedError("neuron events cannot be shared between processes (interprocess=True)")
        return torch.Event(device="neuron", enable_timing=enable_timing, blocking=blocking)


def current_stream(device: torch.device | int | str | None = None) -> Stream:
    """This thread's current stream on a core, a :class:`Stream` (with its ``priority``)."""
    return Stream._of(torch.accelerator.current_stream(torch.device("neuron", _index(device))))


def default_stream(device: torch.device | int | str | None = None) -> Stream:
    """The default stream of a core (stream id 0), a :class:`Stream`."""
    return Stream._of(_C._stream(_index(device), 0))


def set_stream(stream: torch.Stream) -> None:
    """Makes ``stream`` this thread's current stream on its core."""
    torch.accelerator.set_stream(stream)


class stream:
    """``with torch.neuron.stream(s):`` runs the block with ``s`` as the current stream of its core
    (and its core as the current core), like ``torch.cuda.stream``. ``None`` is a no-op."""

    def __init__(self, stream: torch.Stream | None) -> None:
        self.stream = stream
        self.previous_stream: torch.Stream | None = None
        self.previous_device = -1

    def __enter__(self) -> torch.Stream | None:
        if self.stream is None:
            return None
        self.previous_device = _C._current_device()
        _C._set_device(self.stream.device_index)
        self.previous_stream = torch.accelerator.current_stream(self.stream.device)
        torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc_info: object) -> None:
        if self.stream is None:
            return
        torch.accelerator.set_stream(self.previous_stream)
        _C._set_device(self.previous_device)
