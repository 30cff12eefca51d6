"""Which ATen ops ran on the device and which fell back to the CPU (decision 7)."""

from __future__ import annotations

from collections import Counter

executed: Counter[str] = Counter()
fallback: Counter[str] = Counter()


def get_executed_ops() -> dict[str, int]:
    """ATen ops that ran on neuron since the last :func:`clear_op_tracking`, with call counts.

    Names are ``aten::<op>.<overload>`` (``aten::add.Tensor``).
    """
    return dict(executed)


def get_fallback_ops() -> dict[str, int]:
    """ATen ops that ran on the CPU through the fallback since the last :func:`clear_op_tracking`,
    with call counts. Each one warned once when it first fell back."""
    return dict(fallback)


def clear_op_tracking() -> None:
    """Resets both :func:`get_executed_ops` and :func:`get_fallback_ops`."""
    executed.clear()
    fallback.clear()
