"""Elementwise functions of ``nki.language``: binary operators over tiles and numbers (broadcast by
NumPy's rules) and unary functions. Each computes in float32 on the engines and gives a new SBUF
tile in ``dtype`` (by default the operands' dtype); ``mask`` limits the elements computed. Each
function is also an operator for the ISA's ``op=`` arguments (``nisa.tensor_tensor(op=nl.add)``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nki._core import compute

_BINARY = {
    "add": "x + y",
    "subtract": "x - y",
    "multiply": "x * y",
    "divide": "x / y",
    "maximum": "the larger of x and y",
    "minimum": "the smaller of x and y",
    "power": "x ** y",
    "mod": "x modulo y, with the sign of y (numpy.mod)",
    "fmod": "the remainder of x / y, with the sign of x (numpy.fmod)",
    "abs_max": "the larger of |x| and |y|",
    "abs_min": "the smaller of |x| and |y|",
    "equal": "1 where x == y, else 0",
    "not_equal": "1 where x != y, else 0",
    "less": "1 where x < y, else 0",
    "less_equal": "1 where x <= y, else 0",
    "greater": "1 where x > y, else 0",
    "greater_equal": "1 where x >= y, else 0",
    "logical_and": "1 where x and y are nonzero, else 0",
    "logical_or": "1 where x or y is nonzero, else 0",
    "logical_xor": "1 where exactly one of x and y is nonzero, else 0",
    "bitwise_and": "x & y (integers)",
    "bitwise_or": "x | y (integers)",
    "bitwise_xor": "x ^ y (integers)",
    "left_shift": "x << y (integers)",
    "right_shift": "x >> y (integers)",
}

_UNARY = {
    "exp": "e ** x",
    "log": "the natural logarithm of x",
    "sqrt": "the square root of x",
    "rsqrt": "1 / sqrt(x)",
    "reciprocal": "1 / x",
    "tanh": "tanh(x)",
    "sigmoid": "1 / (1 + e ** -x)",
    "relu": "max(x, 0)",
    "gelu": "x * Phi(x) (the exact GELU)",
    "gelu_apprx_tanh": "the tanh approximation of GELU",
    "gelu_apprx_sigmoid": "x * sigmoid(1.702 x)",
    "gelu_dx": "the derivative of the exact GELU",
    "gelu_apprx_sigmoid_dx": "the derivative of x * sigmoid(1.702 x)",
    "silu": "x * sigmoid(x)",
    "silu_dx": "the derivative of silu",
    "softplus": "log(1 + e ** x)",
    "mish": "x * tanh(softplus(x))",
    "erf": "the error function",
    "erf_dx": "the derivative of the error function",
    "sin": "sin(x)",
    "cos": "cos(x)",
    "tan": "tan(x)",
    "arctan": "arctan(x)",
    "square": "x * x",
    "abs": "|x|",
    "negative": "-x",
    "sign": "the sign of x (-1, 0 or 1)",
    "ceil": "the smallest integer >= x",
    "floor": "the largest integer <= x",
    "trunc": "x rounded toward zero",
    "copy": "a copy of x (a new SBUF tile; PSUM -> SBUF)",
    "invert": "the bitwise complement of x (integers)",
    "logical_not": "1 where x is zero, else 0",
}


def _binary(name: str, meaning: str) -> Callable[..., Any]:
    def function(x: Any, y: Any, dtype: Any = None, mask: Any = None, **kwargs: Any) -> compute.NkiTensor:
        return compute.elementwise(name, name, [x, y], dtype, mask)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (
        f"nl.{name}(x, y, dtype=None, mask=None): {meaning}, elementwise. ``x`` and ``y`` are SBUF/PSUM "
        "tiles or numbers, broadcast by NumPy's rules. Returns a new SBUF tile of ``dtype`` (default: the "
        "operands' dtype). Raises NKI's err_unsupported_memory for an HBM operand."
    )
    function.nki_op = name
    return function


def _unary(name: str, meaning: str) -> Callable[..., Any]:
    def function(x: Any, dtype: Any = None, mask: Any = None, **kwargs: Any) -> compute.NkiTensor:
        return compute.unary(name, name, x, dtype, mask)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (
        f"nl.{name}(x, dtype=None, mask=None): {meaning}, elementwise over an SBUF/PSUM tile, computed in "
        "float32. Returns a new SBUF tile of ``dtype`` (default: x's dtype)."
    )
    function.nki_op = name
    return function


for _name, _meaning in _BINARY.items():
    globals()[_name] = _binary(_name, _meaning)
for _name, _meaning in _UNARY.items():
    globals()[_name] = _unary(_name, _meaning)
del _name, _meaning

__all__ = [*_BINARY, *_UNARY]
