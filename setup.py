"""Builds torch_neuronx._C, the C++ core, against the installed torch (see pyproject.toml)."""

from pathlib import Path

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = Path(__file__).parent
# Kineto's headers (the profiler's IActivityProfiler), which torch ships but does not put on the
# extension include path.
KINETO_INCLUDE = Path(torch.__file__).parent / "include" / "kineto"
SOURCES = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "csrc").rglob("*.cpp"))

setup(
    ext_modules=[
        CppExtension(
            name="torch_neuronx._C",
            sources=SOURCES,
            include_dirs=[str(ROOT / "csrc"), str(KINETO_INCLUDE)],
            extra_compile_args=["-O2", "-Wall", "-Wno-unused-parameter"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
