"""Builds torch_neuronx._C, the C++ core, against the installed torch (see pyproject.toml)."""

from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = Path(__file__).parent
SOURCES = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "csrc").rglob("*.cpp"))

setup(
    ext_modules=[
        CppExtension(
            name="torch_neuronx._C",
            sources=SOURCES,
            include_dirs=[str(ROOT / "csrc")],
            extra_compile_args=["-O2", "-Wall", "-Wno-unused-parameter"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
