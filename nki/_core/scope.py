"""The guard of every NKI call: the active kernel trace, or NKI's err_nki_api_outside_of_nki_kernel."""

from __future__ import annotations

from nki import errors
from nki._core.context import TraceContext, current


def require(api: str) -> TraceContext:
    """The active trace of ``api``'s call; NKI's err_nki_api_outside_of_nki_kernel when there is none."""
    context = current()
    if context is None:
        errors.nki_api_outside_of_nki_kernel(api)
    return context
