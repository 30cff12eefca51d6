"""Special functions: Bessel, gamma-family, error-function and orthogonal-polynomial ops (``torch.special``)."""

from __future__ import annotations
