"""The lowering registry: ATen overload -> pure JAX function with PyTorch semantics (decision 5).

A lowering is defined and registered in one place, keyed by its exact overload::

    @lowering(aten.atan2.default, promotion=Promotion.INT_TO_FLOAT)
    def atan2(self, other):
        return jnp.arctan2(self, other)

Shared semantics are declared here per op and applied once, by the engine when it lowers a node
(lowering/engine.py; STYLE.md, principle 3):

- *Promotion*: with a ``promotion`` kind, the participating arguments (every Tensor and Scalar
  argument, or those named in ``promote``) are cast to the computation dtype PyTorch's
  ``elementwise_dtypes`` gives for them (lowering/promotion.py). Without one, arguments arrive as
  they are.
- *Result dtype*: every result is cast to the dtype PyTorch's meta kernel reports, and its shape must
  equal the meta kernel's (a mismatch is a lowering bug and raises).
- *Scalars*: a Python number in a Scalar/float position arrives as a 0-d traced array (it is a
  runtime input of the executable) unless the lowering lists it in ``static``.
- *Random ops* (``random=True``) receive ``rng_key=``, a JAX PRNG key derived from the generator's
  (seed, offset) for this op. ``random`` may instead be a predicate of the arguments (by name, as
  PyTorch sees them) for an op that draws only for some (CUDA's ``native_dropout`` returns without
  drawing in evaluation or for p == 1); when it is false the op draws nothing and gets
  ``rng_key=None``.
- ``uncast`` names arguments that take part in promotion but reach the lowering as they are (an
  exponent whose sign matters even when the computation dtype is unsigned).
- ``checked`` names Scalar arguments that PyTorch's kernels convert with c10's ``checked_convert``
  (fill values, clamp bounds): a number that does not fit the result's dtype raises c10's "value
  cannot be converted to type int8_t without overflow" (lowering/overflow.py), never wraps.
  ``negated_checked`` names those that the kernel converts negated (sub's and rsub's alpha: ATen's
  ``sub`` calls ``add`` with ``-alpha``, so int16 ``sub(x, y, alpha=-32768)`` overflows).
  ``checked_in_opmath=True`` checks them against the result's opmath dtype (float for 16-bit
  floats, ``c10::complex<float>`` for complex32), where CUDA's kernel converts them with
  ``Scalar::to<opmath_t>`` (lerp's weight, add's alpha: float16 ``add(x, y, alpha=7e4)`` computes).
- ``scalar_checks`` are ATen's host checks of the values of Scalar arguments that stay runtime inputs
  (:class:`ScalarCheck`: a sampler's ``lambd``, ``std`` or ``p``). An eager call makes them on the
  host before each launch; the engine makes them when it lowers a node whose value is a number, and
  on the device, raising at the launch, where the value is traced (a compiled graph's input).
- ``dtype_rule`` is a function of the arguments as PyTorch sees them (by name) that raises the ATen
  kernel's error for operand dtypes it refuses: checked when the call is traced, before any
  promotion. :func:`same_dtype` makes the common rule (no promotion at all). ``rule_first=True``
  says the rule is ATen's whole meta check, which eager calls make before PyTorch's meta kernel
  (:func:`check_rule_first`): that one checks less, words it otherwise, or fails.
- ``result_dtype=True`` passes ``result_dtype=``, the JAX dtype of the (first) result, to lowerings
  that must accumulate in it (integer sums accumulate in int64).
- ``metas=True`` passes ``metas=``, the arguments as PyTorch sees them (meta tensors with the
  inputs' strides), to lowerings whose PyTorch kernel depends on the layout (``_linalg_det``
  factors the transpose of a contiguous input, and its backward relies on that).
- ``call_warning`` is ATen's ``TORCH_WARN`` of a call: a function of the call's arguments by name
  (tensors and numbers as the call passes them) returning the warning's text or None, made at every
  call, as ATen warns at every call (var's "degrees of freedom is <= 0").
- ``returns_mutated=True`` is for an op that mutates arguments (a custom op with ``mutates_args``,
  such as an NKI kernel's op): its lowering returns the op's results and then the new values of its
  mutated arguments, in schema order. Such an op reaches a graph only inside AOTAutograd's
  ``auto_functionalized`` nodes, which the engine lowers through it.

The in-place and ``out=`` forms are derived from the functional lowering by the eager layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch

from torch_neuronx._compat.aten_checks import stream_text
from torch_neuronx._compat.torch_internals import OpOverload, schema_of
from torch_neuronx.lowering.promotion import Promotion
from torch_neuronx.runtime.dtypes import aten_name

__all__ = [
    "DECOMPOSED_DTYPE_RULES",
    "LOWERINGS",
    "Lowering",
    "Promotion",
    "ScalarCheck",
    "check_dim_in_range",
    "check_dtype_rule",
    "check_rule_first",
    "check_scalar_values",
    "lowering",
    "replace_lowering",
    "same_dtype",
]


@dataclasses.dataclass(frozen=True)
class Lowering:
    """One registered lowering; see the module docstring for the meaning of each field."""

    op: OpOverload
    fn: Callable[..., Any]
    promotion: Promotion | None
    promote: tuple[str, ...] | None
    static: frozenset[str]
    random: bool | Callable[[dict[str, Any]], bool]
    result_dtype: bool
    uncast: frozenset[str] = frozenset()
    metas: bool = False
    checked: frozenset[str] = frozenset()
    negated_checked: frozenset[str] = frozenset()
    checked_in_opmath: bool = False
    dtype_rule: Callable[[dict[str, Any]], None] | None = None
    returns_mutated: bool = False
    rule_first: bool = False
    scalar_checks: tuple[ScalarCheck, ...] = ()
    call_warning: Callable[[dict[str, Any]], str | None] | None = None


@dataclasses.dataclass(frozen=True)
class ScalarCheck:
    """ATen's host check of the value of the Scalar argument ``argument`` (``TORCH_CHECK`` on a
    ``double``, as DistributionTemplates.h makes it on CPU and CUDA alike).

    ``valid`` takes the value as a Python number or as a traced 0-d float64 array and is false where
    ATen refuses it, NaN included (write ``v > 0``, not ``not v <= 0``). ``message`` is ATen's, with
    ``{double}`` where it prints the value as a C++ stream prints a double (6 significant digits:
    "1e-50", "0.5", "-nan": :func:`~torch_neuronx._compat.aten_checks.stream_text`).
    """

    argument: str
    valid: Callable[[Any], Any]
    message: str

    def check_number(self, value: float) -> None:
        """Raises ``RuntimeError(message)`` when ``valid`` refuses the number ``value``.

        Raises:
            RuntimeError: ATen's message with ``value`` printed.
        """
        if not self.valid(value):
            raise RuntimeError(self.message.format(double=stream_text(value)))


LOWERINGS: dict[OpOverload, Lowering] = {}

#: ``dtype_rule``s of ops that run as PyTorch's decomposition (no lowering of their own): the eager
#: kernel checks them on the call's metas before tracing the decomposition, which would promote.
DECOMPOSED_DTYPE_RULES: dict[OpOverload, Callable[[dict[str, Any]], None]] = {}


def check_dtype_rule(op: OpOverload, metas: Sequence[Any]) -> None:
    """Applies the ``dtype_rule`` of ``op`` (its lowering's, or that of an op that runs as its
    decomposition), if any, to its arguments as PyTorch sees them (schema order). The eager kernel
    calls it before tracing, so that a refusal carries no JAX frames or notes."""
    entry = LOWERINGS.get(op)
    rule = entry.dtype_rule if entry is not None else DECOMPOSED_DTYPE_RULES.get(op)
    if rule is not None:
        rule(dict(zip([argument.name for argument in schema_of(op).arguments], metas, strict=True)))


def check_scalar_values(op: OpOverload, values: Sequence[Any]) -> None:
    """Makes the ``scalar_checks`` of ``op``'s lowering on those of ``values`` (its arguments as
    PyTorch sees them, schema order) that are numbers. The eager kernel calls it before PyTorch's
    meta kernel, as ATen checks the Scalar before it dispatches on the dtype (``exponential_`` of
    an int tensor with lambda=-1 names lambda).

    Raises:
        RuntimeError: ATen's message (:class:`ScalarCheck`).
    """
    entry = LOWERINGS.get(op)
    if entry is None or not entry.scalar_checks:
        return
    by_name = dict(zip((argument.name for argument in schema_of(op).arguments), values, strict=True))
    for check in entry.scalar_checks:
        value = by_name[check.argument]
        if isinstance(value, (bool, int, float)):
            check.check_number(value)


def check_rule_first(op: OpOverload, metas: Sequence[Any]) -> None:
    """Applies ``op``'s ``dtype_rule`` if its lowering declares ``rule_first``: the rule is ATen's
    meta check, which the eager kernel makes before PyTorch's meta kernel (that one checks less, in
    other words, or fails on what ATen refuses: searchsorted of a number raised AttributeError)."""
    entry = LOWERINGS.get(op)
    if entry is not None and entry.rule_first:
        check_dtype_rule(op, metas)


def lowering(
    *ops: OpOverload,
    promotion: Promotion | None = None,
    promote: Sequence[str] | None = None,
    static: Sequence[str] = (),
    random: bool | Callable[[dict[str, Any]], bool] = False,
    result_dtype: bool = False,
    uncast: Sequence[str] = (),
    metas: bool = False,
    checked: Sequence[str] = (),
    negated_checked: Sequence[str] = (),
    checked_in_opmath: bool = False,
    dtype_rule: Callable[[dict[str, Any]], None] | None = None,
    returns_mutated: bool = False,
    rule_first: bool = False,
    scalar_checks: Sequence[ScalarCheck] = (),
    call_warning: Callable[[dict[str, Any]], str | None] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers the decorated function as the lowering of each overload in ``ops``.

    Raises:
        RuntimeError: an overload already has a lowering (registering twice is a bug).
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            if not isinstance(op, OpOverload):
                raise TypeError(f"lowering() takes OpOverloads such as aten.add.Tensor, got {op!r}")
            if op in LOWERINGS:
                raise RuntimeError(f"{op} already has a lowering ({LOWERINGS[op].fn.__qualname__})")
            LOWERINGS[op] = Lowering(
                op,
                fn,
                promotion,
                tuple(promote) if promote else None,
                frozenset(static),
                random,
                result_dtype,
                frozenset(uncast),
                metas,
                frozenset(checked) | frozenset(negated_checked),
                frozenset(negated_checked),
                checked_in_opmath,
                dtype_rule,
                returns_mutated,
                rule_first,
                tuple(scalar_checks),
                call_warning,
            )
        return fn

    return register


def replace_lowering(op: OpOverload, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Replaces the function of ``op``'s lowering with ``fn``, which takes the same arguments (its
    declaration, static arguments and random key included, is kept); returns the function replaced,
    which ``fn`` may call for the calls it does not take. For opt-in routes chosen when the device
    starts (``TORCH_NEURONX_ENABLE_NKI_SDPA``): executables built before the replacement keep the
    old function.

    Raises:
        KeyError: ``op`` has no lowering to replace.
    """
    if op not in LOWERINGS:
        raise KeyError(f"{op} has no lowering to replace; register one with lowering()")
    replaced = LOWERINGS[op].fn
    LOWERINGS[op] = dataclasses.replace(LOWERINGS[op], fn=fn)
    return replaced


#: Ops whose ``dim`` indexes their result, one dimension more than ``self`` has.
_RESULT_DIM_OPS = frozenset({"unsqueeze", "unsqueeze_", "unsqueeze_copy"})


def check_dim_in_range(op: OpOverload, metas: Sequence[Any]) -> None:
    """ATen's ``maybe_wrap_dim`` of ``op``'s ``dim: int`` argument (``metas``: its arguments as
    PyTorch sees them, schema order) against its ``self`` (or ``input``), which some of PyTorch's
    meta kernels skip (softmax, sort, index_reduce) or make with an internal error (index_select):
    a lowering would wrap it silently onto another dimension. A 0-dim tensor takes dims -1 and 0,
    as ``wrap_scalar`` allows.

    Raises:
        IndexError: "Dimension out of range (expected to be in range of [-2, 1], but got 2)".
    """
    schema = schema_of(op)
    if schema.name.removeprefix("aten::") in _RESULT_DIM_OPS:
        return
    by_name = {argument.name: (argument, value) for argument, value in zip(schema.arguments, metas, strict=False)}
    tensor = next((by_name[n][1] for n in ("self", "input") if n in by_name), None)
    if not isinstance(tensor, torch.Tensor) or "dim" not in by_name:
        return
    argument, dim = by_name["dim"]
    declared = argument.type
    if isinstance(declared, torch.OptionalType):
        declared = declared.getElementType()
    if not isinstance(declared, torch.IntType) or not isinstance(dim, int):  # int[] dims: the metas check
        return
    rank = max(tensor.dim(), 1)
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})")


def same_dtype(names: Sequence[str], message: str) -> Callable[[dict[str, Any]], None]:
    """A ``dtype_rule``: the tensor arguments ``names`` (those given) share one dtype, else
    ``RuntimeError(message)`` formatted with their ATen dtype names in ``names``' order."""
    names = tuple(names)

    def rule(arguments: dict[str, Any]) -> None:
        dtypes = [arguments[name].dtype for name in names if isinstance(arguments.get(name), torch.Tensor)]
        if len(set(dtypes)) > 1:
            raise RuntimeError(message.format(*(aten_name(dtype) for dtype in dtypes)))

    return rule
