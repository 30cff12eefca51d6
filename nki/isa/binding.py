"""One ISA instruction, two calling conventions.

Current NKI passes the destination first (``nisa.tensor_tensor(dst, data1, data2, op)``, or
``dst=``); legacy NKI returns a new tile (``out = nisa.tensor_tensor(data1, data2, op)``). Both are
served by one implementation ``impl(dst, ...)``: a call is the destination form when ``dst`` binds
to a tensor and every other tensor parameter binds to a tensor too; otherwise it is the returning
form, with ``dst=None`` (the implementation allocates the result).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from nki._core import scope
from nki._core.compute import NkiTensor


def instruction(tensors: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wraps ``impl(dst, <params>)`` as an instruction taking either calling convention.

    Args:
        tensors: the parameters that must be tensors in the destination form (the data operands).
    """

    def wrap(impl: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(impl)
        returning = signature.replace(parameters=list(signature.parameters.values())[1:])

        @functools.wraps(impl)
        def call(*args: Any, **kwargs: Any) -> Any:
            scope.require(impl.__name__)
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                bound = None
            if bound is not None and isinstance(bound.arguments.get("dst"), NkiTensor):
                if all(isinstance(bound.arguments.get(name), NkiTensor) for name in tensors if name in bound.arguments):
                    return impl(*bound.args, **bound.kwargs)
            legacy = returning.bind(*args, **kwargs)
            return impl(None, *legacy.args, **legacy.kwargs)

        call.__signature__ = signature
        return call

    return wrap
