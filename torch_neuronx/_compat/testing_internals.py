"""Private parts of PyTorch's test suite the conformance runner relies on, each with its reason.

Kept apart from torch_internals.py so that the runtime never loads them: importing PyTorch's OpInfo
database takes a few seconds and needs the ``expecttest`` package, so it happens on the first call.
"""

from __future__ import annotations

import sys
import unittest
from collections.abc import Callable
from typing import Any

# The per-dtype tolerances torch.testing.assert_close uses, so a comparison here means the same.
from torch.testing._comparison import default_tolerances

# The dtype lists OpInfos and test_ops' test_dtypes are written with (a light module: torch only).
from torch.testing._internal.common_dtype import all_types_and_complex_and

__all__ = [
    "all_types_and_complex_and",
    "decorate_info_type",
    "default_tolerances",
    "install_frame_walking_test_lookup",
    "opinfo_database",
    "sample_input_type",
]


def opinfo_database() -> list[Any]:
    """PyTorch's OpInfo database (``torch.testing._internal.common_methods_invocations.op_db``).

    Raises:
        ModuleNotFoundError: a package the database imports (``expecttest``) is missing.
    """
    from torch.testing._internal.common_methods_invocations import op_db

    install_frame_walking_test_lookup()
    return list(op_db)


def install_frame_walking_test_lookup() -> None:
    """Make ``common_utils.extract_test_fn`` walk frames instead of calling ``inspect.stack()``.

    Every ``OpInfo.sample_inputs`` / ``error_inputs`` / ``reference_inputs`` call looks up the
    running unittest method twice (``TrackedInputIter`` and the sample callback) with
    ``inspect.stack()``, which reads every frame's source line and, for each, scans ``sys.modules``
    (``inspect.getmodule``): 0.15 s a call under pytest with the OpInfo database loaded, 80% of the
    default run's OpInfo sample. The replacement visits the same frames in the same order with the
    same test and returns the same function (or None), reading no source. Idempotent; the OpInfo
    module imports the name from ``common_utils``, so it is rebound there only if already imported.
    """
    from torch.testing._internal import common_utils

    common_utils.extract_test_fn = _running_test_fn
    opinfo_core = sys.modules.get("torch.testing._internal.opinfo.core")
    if opinfo_core is not None:
        opinfo_core.extract_test_fn = _running_test_fn


def _running_test_fn() -> Callable[..., Any] | None:
    # The same rule as common_utils.extract_test_fn: the innermost frame whose ``self`` is a
    # TestCase whose id names its own class and a test method; None where any step raises.
    try:
        frame = sys._getframe(1)
        while frame is not None:
            self_val = frame.f_locals.get("self")
            if isinstance(self_val, unittest.TestCase):
                *_, cls_name, test_name = self_val.id().rsplit(".", 2)
                if cls_name == type(self_val).__name__ and test_name.startswith("test"):
                    return getattr(self_val, test_name).__func__
            frame = frame.f_back
    except Exception:
        pass
    return None


def decorate_info_type() -> type:
    """OpInfo's ``DecorateInfo``: a skip or tolerance that applies to some tests, devices and dtypes."""
    from torch.testing._internal.opinfo.core import DecorateInfo

    return DecorateInfo


def sample_input_type() -> type:
    """OpInfo's ``SampleInput``: one call's input, arguments and gradient post-processing."""
    from torch.testing._internal.opinfo.core import SampleInput

    return SampleInput
