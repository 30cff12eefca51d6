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

from torch_neuronx._compat.torch_internals import TENSOR_DISPATCH_FILES

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_BINARY_OP = dis.opmap["BINARY_OP"]


def _passes_the_call_on(filename: str) -> bool:
    return filename.startswith(_PACKAGE) or os.path.abspath(filename) in TENSOR_DISPATCH_FILES


def _caller(frame: FrameType | None) -> FrameType | None:
    """The first frame that is neither this package's nor torch's dispatch to it (a mode's or a
    subclass's ``__torch_function__``, the reflected operators' wrapper): the code that called the op."""
    while frame is not None and _passes_the_call_on(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def type_errors_are_swallowed() -> bool:
    """Whether the running op was called by a Python binary operator (``a * b``, ``a -= b``, the
    reflected operators, under ``torch.set_default_device`` too), which would replace a ``TypeError``
    it raises with Python's ``unsupported operand type(s)``. An operator called as a function
    (``operator.mul``) is a call, not told apart from ``torch.mul``; a user's ``__torch_function__``
    in between hides the operator too."""
    frame = _caller(sys._getframe(1))
    return frame is not None and frame.f_lasti >= 0 and frame.f_code.co_code[frame.f_lasti] == _BINARY_OP
