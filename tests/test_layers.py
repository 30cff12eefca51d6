"""The package's layout as docs/architecture.md draws it: layers that import downwards only, no
import circles, and private PyTorch internals only in ``_compat/``. The NKI packages (``nki``, and
``neuronxcc``, its legacy import path) are a layer of their own above ``lowering``.

These read the source (every import, at module level or inside a function), so they hold for code
paths no other test runs.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "torch_neuronx"
#: Every package of the repository: torch_neuronx and the kernel language.
PACKAGES = [PACKAGE, ROOT / "nki", ROOT / "neuronxcc"]

#: Each layer and the layers below it that it may import. The entry points (the package's
#: ``__init__``, ``_registration``, ``_startup``) and the tools (``testing``, ``cli``) sit above all.
ALLOWED = {
    "_C": set(),
    "_config": set(),
    "_compat": set(),
    "runtime": {"_C", "_config", "_compat"},
    "lowering": {"_C", "_config", "_compat", "runtime"},
    "eager": {"_C", "_config", "_compat", "runtime", "lowering"},
    "dynamo": {"_C", "_config", "_compat", "runtime", "lowering", "eager"},
    "device": {"_C", "_config", "_compat", "runtime"},
    # The kernel language: traced to JAX, launched through runtime/executable.py, lowered inside
    # compiled graphs through the lowering registry; never eager or dynamo.
    "nki": {"_C", "_config", "_compat", "runtime", "lowering", "nki"},
    "adaptive": {"_C", "_config", "_compat", "runtime"},
    # torch.profiler's neuron side: reads what the runtime recorded of the launches that eager,
    # dynamo (and NKI) make; nothing imports it but the entry points and the CLI.
    "profiling": {"_C", "_config", "_compat", "runtime", "lowering", "eager", "dynamo"},
    # The c10d backend: host staging through runtime/buffers, profiling records through
    # runtime/launch_records; nothing imports it but the entry points.
    "distributed": {"_C", "_config", "_compat", "runtime"},
}
#: Modules above every layer: the tools, which may import any of them.
TOOLS = {"testing", "cli"}
TOP = {"torch_neuronx", "torch_neuronx._registration", "torch_neuronx._startup"}

#: Private PyTorch names used outside ``_compat/`` on purpose, each with its reason.
ALLOWED_PRIVATE = {
    # Documented in PyTorch's API reference (torch.html, "Symbolic numbers") despite the underscore:
    # the check meta kernels and composites use, whose message PyTorch raises as RuntimeError.
    "torch._check",
}
#: Private attributes of PyTorch objects, reached through ``_compat`` accessors instead.
PRIVATE_ATTRIBUTES = {"_schema", "_overloadname", "_boxed_call", "_dynamo_dynamic_indices"}


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for package in PACKAGES:
        for path in package.rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The package module ``name`` refers to (``torch_neuronx._C`` is the extension)."""
    if name == "torch_neuronx._C":
        return name
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in MODULES else None


def _imports(name: str) -> set[str]:
    """The package modules ``name`` imports, anywhere in its source."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            candidates = [
                f"{base}.{alias.name}" if _resolve(f"{base}.{alias.name}") == f"{base}.{alias.name}" else base
                for alias in node.names
            ]
        else:
            continue
        for candidate in candidates:
            if candidate.split(".")[0] in ("torch_neuronx", "nki", "neuronxcc"):
                resolved = _resolve(candidate)
                if resolved is not None and resolved != name:
                    targets.add(resolved)
    return targets


GRAPH = {name: _imports(name) for name in MODULES}


def _layer(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] in ("nki", "neuronxcc"):
        return "nki"
    return parts[1] if len(parts) > 1 else None


def _layer_violations(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for name, targets in graph.items():
        layer = _layer(name)
        if name in TOP or layer in TOOLS:
            continue
        if layer not in ALLOWED:
            wrong.append(f"{name} is in no layer: give its package a place in ALLOWED")
            continue
        for target in targets:
            target_layer = _layer(target)
            if target in TOP or (target_layer != layer and target_layer not in ALLOWED[layer]):
                wrong.append(f"{name} imports {target}")
    return sorted(wrong)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    return circles


def test_layers_import_downwards_only():
    """runtime knows nothing of lowering, eager, dynamo or device; lowering nothing of eager; ..."""
    assert _layer_violations(GRAPH) == []


def test_no_import_circles():
    assert _circles(GRAPH) == []


def test_layer_and_circle_checks_find_what_they_must():
    """The two checks above can fail: the layout this package had before its layers were mended."""
    graph = {
        "torch_neuronx.runtime": {"torch_neuronx.eager.registration"},
        "torch_neuronx.eager.registration": {"torch_neuronx.eager.kernel"},
        "torch_neuronx.eager.kernel": {"torch_neuronx.eager.fallback", "torch_neuronx.runtime.queue"},
        "torch_neuronx.eager.fallback": {"torch_neuronx.runtime"},
        "torch_neuronx.runtime.queue": set(),
    }
    assert _layer_violations(graph) == ["torch_neuronx.runtime imports torch_neuronx.eager.registration"]
    assert _circles(graph) == [
        [
            "torch_neuronx.eager.fallback",
            "torch_neuronx.eager.kernel",
            "torch_neuronx.eager.registration",
            "torch_neuronx.runtime",
        ]
    ]


def _private_uses(path: pathlib.Path) -> list[str]:
    """Private names reached through ``torch`` (import paths, attribute chains) and private attributes
    of PyTorch objects, as ``line: name``. Op names (``torch.ops.aten._to_copy``) are not private."""
    found = []
    tree = ast.parse(path.read_text())
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}  # part of a longer chain
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "torch":
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if alias.name.split(".")[0] == "torch"]
        elif isinstance(node, ast.Attribute):
            if node.attr in PRIVATE_ATTRIBUTES:
                found.append(f"{node.lineno}: .{node.attr}")
            chain, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id == "torch" and id(node) not in inner:
                names = [".".join(["torch", *reversed(chain)])]
        for name in names:
            parts = name.split(".")
            private = [i for i, part in enumerate(parts) if part.startswith("_") and not part.startswith("__")]
            if private and parts[1:2] != ["ops"] and ".".join(parts[: private[0] + 1]) not in ALLOWED_PRIVATE:
                found.append(f"{node.lineno}: {name}")
    return found


def test_private_torch_names_only_in_compat():
    uses = {
        str(path.relative_to(ROOT)): found
        for package in PACKAGES
        for path in sorted(package.rglob("*.py"))
        if "_compat" not in path.parts and (found := _private_uses(path))
    }
    assert uses == {}


def test_the_kernel_language_sits_above_lowering_only():
    """nki may not reach eager or dynamo (the engine lowers its op; kernels launch through runtime)."""
    graph = {"nki.framework": {"torch_neuronx.eager.kernel"}, "torch_neuronx.eager.kernel": set()}
    assert _layer_violations(graph) == ["nki.framework imports torch_neuronx.eager.kernel"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import torch._dynamo.config", ["1: torch._dynamo.config"]),
        ("from torch.utils import _pytree", ["1: torch.utils._pytree"]),
        ("x = torch._C._infer_size(a, b)", ["1: torch._C._infer_size"]),
        ("n = op._schema.arguments", ["1: ._schema"]),
        ("torch._check(ok)", []),
        ("op = torch.ops.aten._to_copy.default", []),
        ("y = torch.nn.functional.relu(x)", []),
    ],
)
def test_private_name_check_finds_what_it_must(tmp_path, source, expected):
    """The check above can fail: it finds each kind of private use, and lets public names through."""
    path = tmp_path / "module.py"
    path.write_text(source + "\n")
    assert sorted(set(_private_uses(path))) == expected
