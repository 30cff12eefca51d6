"""``nki.typing`` (``nt``): annotations of kernel parameters and tiles.

``nt.mutable_tensor`` marks a parameter the kernel writes; ``nt.tensor[128, 512]`` annotates a
shape. Kernels may write any tensor argument here (the vendor's legacy rule that unannotated
parameters are immutable is not enforced), so the annotations document intent only.
"""

from __future__ import annotations

from typing import Any


class _Annotation:
    def __init__(self, name: str) -> None:
        self.name = name

    def __getitem__(self, shape: Any) -> _Annotation:
        return self

    def __repr__(self) -> str:
        return f"nki.typing.{self.name}"


tensor = _Annotation("tensor")
mutable_tensor = _Annotation("mutable_tensor")
tile = _Annotation("tile")
scalar = _Annotation("scalar")

__all__ = ["mutable_tensor", "scalar", "tensor", "tile"]
