"""Private names of PyTorch's profiler that the profiling layer needs, each with its reason."""

from __future__ import annotations

import torch

#: ``torch.profiler.profile(experimental_config=...)`` accepts only instances of this C++ class,
#: which torch 2.13 exposes as ``torch._C._profiler._ExperimentalConfig`` (re-exported, still
#: private, as ``torch.profiler._ExperimentalConfig``). ``NeuronConfig`` subclasses it so that it can
#: be passed there, carrying its options in ``custom_profiler_config``, the field Kineto hands to a
#: PrivateUse1 profiler.
ExperimentalConfig = torch._C._profiler._ExperimentalConfig

__all__ = ["ExperimentalConfig"]
