"""NKI data types: numpy dtypes (bfloat16 and float8 from ml_dtypes), as public kernels compare them
(``x.dtype == nl.float32``, ``dtype=np.float32``), and the promotion rule of the language's
elementwise functions."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

bool_ = np.dtype(np.bool_)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
#: Stored as float32; the Tensor Engine rounds tfloat32 operands to 10 mantissa bits, which the
#: emulation does not (docs/nki.md, "How the emulation differs").
tfloat32 = np.dtype(np.float32)
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)

#: Every dtype an NKI tensor can hold (NKI's "Supported Data Types"; 64-bit types are not among them).
SUPPORTED: tuple[np.dtype, ...] = (
    bool_,
    int8,
    int16,
    int32,
    uint8,
    uint16,
    uint32,
    float16,
    float32,
    bfloat16,
    float8_e4m3,
    float8_e4m3fn,
    float8_e5m2,
)

_BY_NAME = {str(d): d for d in SUPPORTED} | {"bool": bool_, "tfloat32": tfloat32}


def as_dtype(value: Any, what: str = "dtype") -> np.dtype:
    """The NKI dtype of ``value``: an nl dtype, a numpy dtype or scalar type, or a name ("float32").

    Raises:
        TypeError: ``value`` names no dtype NKI supports (float64, int64, complex, ...).
    """
    try:
        dtype = (
            _BY_NAME[value]
            if isinstance(value, str)
            else np.dtype(getattr(value, "dtype", value) if isinstance(value, Limits) else value)
        )
    except (TypeError, KeyError):
        raise TypeError(f"{what} {value!r} is not an NKI dtype; use one of {names()}") from None
    if dtype not in SUPPORTED:
        raise TypeError(f"{what} {dtype} is not an NKI dtype; use one of {names()}")
    return dtype


def names() -> str:
    """The supported dtypes as a readable list, for error messages."""
    return ", ".join(str(d) for d in SUPPORTED)


def is_float(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f" or dtype in (bfloat16, float8_e4m3, float8_e4m3fn, float8_e5m2)


def is_int(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind in "iub"


_FLOAT_RANK = {float8_e5m2: 0, float8_e4m3: 0, float8_e4m3fn: 0, bfloat16: 1, float16: 1, float32: 3}


def promote(dtypes: list[np.dtype]) -> np.dtype:
    """The result dtype of an elementwise function over tiles of ``dtypes`` when none is given.

    NKI computes in float32 and casts the result to the output dtype; without an explicit ``dtype``
    the output keeps the inputs' dtype. Mixed inputs take the wider type: a float over an integer,
    float32 over 16-bit floats, 16-bit floats over float8, and bfloat16 with float16 (or two different
    float8 formats) widen to float32, as the compute engines' float32 arithmetic does. Integers mix by
    numpy's rules, within 32 bits.
    """
    unique = list(dict.fromkeys(np.dtype(d) for d in dtypes))
    if len(unique) == 1:
        return unique[0]
    floats = [d for d in unique if is_float(d)]
    if not floats:
        result = np.result_type(*unique)
        return result if result in SUPPORTED else int32
    if len(floats) == 1:
        return floats[0]
    top = max(_FLOAT_RANK[d] for d in floats)
    widest = [d for d in floats if _FLOAT_RANK[d] == top]
    return widest[0] if len(widest) == 1 else float32


def fill_value(dtype: np.dtype) -> Any:
    """What a new, uninitialised buffer of ``dtype`` holds in the emulation: NaN for floats, so that a
    read of memory nothing wrote shows in the result; the largest value for integers (True for bool)."""
    dtype = np.dtype(dtype)
    if is_float(dtype):
        return np.nan
    if dtype == bool_:
        return True
    return np.iinfo(dtype).max


class Limits:
    """``nl.fp32``-style handles of a dtype: usable as the dtype and for its limits
    (``nl.fp32.min``, ``nl.fp32.max``)."""

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = np.dtype(dtype)
        info = ml_dtypes.finfo(self.dtype)
        self.min, self.max, self.eps, self.tiny = float(info.min), float(info.max), float(info.eps), float(info.tiny)

    def __repr__(self) -> str:
        return f"nl limits of {self.dtype}"


fp32 = Limits(float32)
fp16 = Limits(float16)
bf16 = Limits(bfloat16)
