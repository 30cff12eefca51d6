"""Dense linear algebra beyond products: factorizations (LU, QR, Cholesky, SVD, eigh), solvers,
inverses and determinants (``torch.linalg``)."""

from __future__ import annotations
