"""Private parts of PyTorch's test suite the conformance runner relies on, each with its reason.

Kept apart from torch_internals.py so that the runtime never loads them: importing PyTorch's OpInfo
database takes a few seconds and needs the ``expecttest`` package, so it happens on the first call.
"""

from __future__ import annotations

from typing import Any

# The per-dtype tolerances torch.testing.assert_close uses, so a comparison here means the same.
from torch.testing._comparison import default_tolerances

# The dtype lists OpInfos and test_ops' test_dtypes are written with (a light module: torch only).
from torch.testing._internal.common_dtype import all_types_and_complex_and

__all__ = [
    "all_types_and_complex_and",
    "decorate_info_type",
    "default_tolerances",
    "opinfo_database",
    "sample_input_type",
]


def opinfo_database() -> list[Any]:
    """PyTorch's OpInfo database (``torch.testing._internal.common_methods_invocations.op_db``).

    Raises:
        ModuleNotFoundError: a package the database imports (``expecttest``) is missing.
    """
    from torch.testing._internal.common_methods_invocations import op_db

    return list(op_db)


def decorate_info_type() -> type:
    """OpInfo's ``DecorateInfo``: a skip or tolerance that applies to some tests, devices and dtypes."""
    from torch.testing._internal.opinfo.core import DecorateInfo

    return DecorateInfo


def sample_input_type() -> type:
    """OpInfo's ``SampleInput``: one call's input, arguments and gradient post-processing."""
    from torch.testing._internal.opinfo.core import SampleInput

    return SampleInput
