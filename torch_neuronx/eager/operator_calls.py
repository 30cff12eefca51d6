"""Whether an op was reached through one of Python's binary operators (``a * b``).

``Tensor.__mul__`` and its kin turn any ``TypeError`` the op raises into ``NotImplemented``
(``TypeError_to_NotImplemented_`` in PyTorch's python_variable_methods.cpp, and
``_handle_torch_function_and_wrap_type_error_to_not_implemented`` in torch/_tensor.py), so that
Python can try the reflected operator; when both sides give up, Python raises its own
``unsupported operand type(s) for *: 'Tensor' and 'Tensor'`` and the op's message is lost. MPS has
this bug for its float64 refusal (pytorch/pytorch#100461). An op that would raise a ``TypeError``
there raises its message as a ``RuntimeError`` instead.
"""

from __future__ import annotations

import dis
import os
import sys
from types import FrameType

from torch_neuronx._compat.torch_internals import TENSOR_OPERATORS_FILE, TYPE_ERROR_TO_NOT_IMPLEMENTED

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_BINARY_OP = dis.opmap["BINARY_OP"]


def _caller(frame: FrameType | None) -> FrameType | None:
    """The first frame outside this package: the code that called the op."""
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    return frame


def type_errors_are_swallowed() -> bool:
    """Whether the running op was called by a Python binary operator (``a * b``, ``a -= b``, and
    the reflected operators torch/_tensor.py defines), which would replace a ``TypeError`` it raises
    with Python's ``unsupported operand type(s)``."""
    frame = _caller(sys._getframe(1))
    while frame is not None and os.path.abspath(frame.f_code.co_filename) == TENSOR_OPERATORS_FILE:
        if frame.f_code.co_qualname == TYPE_ERROR_TO_NOT_IMPLEMENTED:
            return True
        frame = frame.f_back
    if frame is None or frame.f_lasti < 0:
        return False
    return frame.f_code.co_code[frame.f_lasti] == _BINARY_OP
