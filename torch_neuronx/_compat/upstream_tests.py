"""What ``torch-neuronx upstream-tests`` installs into PyTorch's test base before a test file imports.

Five things, all applied by :mod:`torch_neuronx.testing.upstream_plugin` in the test file's process
and none editing a test file:

- :class:`NeuronTestBase`, PyTorch's ``PrivateUse1TestBase`` declaring the dtypes neuron does not
  hold (:data:`MISSING_DTYPES`: float64 and complex128, by the FP64 policy), so that
  PyTorch's test base does not instantiate a test variant for them, as it instantiates none for a
  dtype a device's ``@dtypesIf<device>`` or OpInfo ``dtypesIf[<device>]`` list leaves out (MPS's
  lists leave out float64). PyTorch 2.13 has no per-device dtype declaration that applies to every
  test (``dtypesIfPRIVATEUSE1`` is per test, OpInfo's ``dtypesIf`` per op), so the base filters the
  dtypes it is handed, at the two places its ``instantiate_test`` reads them; pytorch/xla's test
  base (``test/pytorch_test_base.py``, through PyTorch's ``TORCH_TEST_DEVICES`` hook) does the same
  for the dtypes XLA lacks. Every variant left out is counted (:attr:`NeuronTestBase.left_out`) and
  the report says how many, per file and dtype.
- :func:`install_compat`: the names that test files of an older PyTorch release import from
  ``torch.testing._internal`` (or call in numpy) and that the installed release renamed, moved or
  removed (:data:`RENAMED`), bound to their new homes where the new name does what the old one did.
- :func:`install_renamed_classes`: an older file's test class that the installed release renamed
  (:data:`RENAMED_CLASSES`) gets the skips and xfails the installed OpInfos declare for its new name.
- :func:`install_accelerator_classes`: a class that PyTorch instantiates for a list of accelerators
  naming CUDA (``only_for=("cuda", "hpu", "xpu")``, as test/dynamo's device classes are) is
  instantiated for neuron too, as the vendors of those devices run it (:data:`ACCELERATORS`).
- :func:`claim_cuda_dtypes`: an OpInfo's dtypes for neuron are its CUDA ones joined with its CPU
  ones, as neuron computes what either computes (issue 17's rule; XPU and HPU have their own
  ``dtypesIf`` lists for the same reason), where PyTorch hands a PrivateUse1 device the CPU's.
"""

from __future__ import annotations

import collections
import functools
import importlib
import importlib.abc
import importlib.machinery
import sys
from typing import Any, ClassVar

import torch
from torch.testing._internal import common_device_type

__all__ = [
    "ACCELERATORS",
    "MISSING_DTYPES",
    "RENAMED",
    "RENAMED_CLASSES",
    "NeuronTestBase",
    "claim_cuda_dtypes",
    "install_accelerator_classes",
    "install_compat",
    "install_device_base",
    "install_renamed_classes",
]

#: The dtypes neuron does not hold, with why: no test variant is instantiated for them.
MISSING_DTYPES: dict[torch.dtype, str] = {
    torch.float64: "FP64 policy: Trainium has no FP64 (DESIGN.md, 8)",
    torch.complex128: "FP64 policy: Trainium has no FP64 (DESIGN.md, 8)",
}


def _missing(dtypes: Any) -> torch.dtype | None:
    """The first of :data:`MISSING_DTYPES` in ``dtypes`` (a dtype, a tuple or list of them, or None)."""
    for dtype in dtypes if isinstance(dtypes, (tuple, list)) else (dtypes,):
        if dtype in MISSING_DTYPES:
            return dtype
    return None


class NeuronTestBase(common_device_type.PrivateUse1TestBase):
    """PyTorch's ``PrivateUse1TestBase`` (the ``neuron`` device) that instantiates no test variant
    of a dtype in :data:`MISSING_DTYPES`.

    A variant is left out when its ``dtype`` (or one of its ``dtypes``) is missing, whether the
    dtypes come from ``@dtypes``/``@dtypesIf*`` (through ``_get_dtypes``) or from ``@ops`` and
    ``@parametrize`` (through the test's ``parametrize_fn``). A test left with no variant is not
    instantiated at all. Tests that make a float64 tensor in their body, without a dtype variant,
    still run (the dtype policy's TypeError makes them skipped-ours, see the plugin).
    """

    #: Variants left out so far in this process, by the name of the missing dtype.
    left_out: ClassVar[collections.Counter[str]] = collections.Counter()

    # Older test files' fixtures call ``super(self.__class__, self).setUp()`` (test_linalg's
    # TestLinalg). PyTorch <= 2.4 built a device class from a copy of the generic class's members
    # (the generic class not among its bases), where that call reaches TestCase.setUp; 2.13 makes
    # the generic class a base (``type(name, (device base, generic class), {})``), so the call
    # starts over at the device class and recurses (RecursionError on the CPU too). A re-entered
    # fixture here carries on after the generic class, as the old layout did; fixtures that call
    # ``super().setUp()`` never re-enter.
    def setUp(self) -> None:
        self._fixture("setUp")

    def tearDown(self) -> None:
        self._fixture("tearDown")

    def _fixture(self, name: str) -> None:
        running = self.__dict__.setdefault("_running_fixtures", set())
        if name in running:  # re-entered from the generic class's super(self.__class__, self)
            generic = type(self).__bases__[-1]
            getattr(super(generic, self), name)()
            return
        running.add(name)
        try:
            getattr(super(), name)()
        finally:
            running.discard(name)

    @classmethod
    def _leave_out(cls, dtypes: Any) -> bool:
        missing = _missing(dtypes)
        if missing is None:
            return False
        cls.left_out[str(missing).removeprefix("torch.")] += 1
        return True

    @classmethod
    def _get_dtypes(cls, test: Any) -> Any:
        dtypes = super()._get_dtypes(test)
        return None if dtypes is None else [entry for entry in dtypes if not cls._leave_out(entry)]

    @classmethod
    def instantiate_test(cls, name: str, test: Any, *, generic_cls: Any = None) -> None:
        parametrize_fn = getattr(test, "parametrize_fn", None)
        if parametrize_fn is None:
            super().instantiate_test(name, test, generic_cls=generic_cls)
            return
        original = test

        # A copy of the test carrying a filtered parametrize_fn, so that the test function itself
        # (shared by every device's class) keeps its own.
        @functools.wraps(original)
        def held(*args: Any, **kwargs: Any) -> Any:
            return original(*args, **kwargs)

        def kept(test: Any, generic_cls: Any, device_cls: Any) -> Any:
            for variant in parametrize_fn(test, generic_cls, device_cls):
                kwargs = variant[2]
                if not cls._leave_out(kwargs.get("dtypes", kwargs.get("dtype"))):
                    yield variant

        held.parametrize_fn = kept
        super().instantiate_test(name, held, generic_cls=generic_cls)


def claim_cuda_dtypes() -> None:
    """Makes every OpInfo claim, for the neuron device, the dtypes of its CUDA list joined with its
    CPU list (forward and backward; once).

    ``OpInfo.supported_dtypes("privateuse1")`` is the op's ``dtypesIf["neuron"]``, else its CPU list,
    and test_ops instantiates and checks (``test_dtypes``) exactly those. Neuron computes what
    CUDA's kernels or the CPU's compute (eager/dispatched_dtypes.py joins the two), so against the
    CPU's list ``test_dtypes`` of ``histc`` failed for the integer dtypes neuron counts as CUDA
    does, and against CUDA's for the 16-bit floats the CPU computes. float64 and complex128 stay
    left out by :class:`NeuronTestBase`."""
    from torch.testing._internal.opinfo.core import OpInfo

    if getattr(OpInfo.supported_dtypes, "_neuron_claims_cuda", False):
        return
    for name in ("supported_dtypes", "supported_backward_dtypes"):
        original = getattr(OpInfo, name)

        @functools.wraps(original)
        def claimed(self: Any, device_type: Any, _original: Any = original) -> Any:
            if device_type == "privateuse1" or torch.device(device_type).type == "neuron":
                return set(_original(self, "cuda")) | set(_original(self, "cpu"))
            return _original(self, device_type)

        claimed._neuron_claims_cuda = True  # type: ignore[attr-defined]
        setattr(OpInfo, name, claimed)


def install_device_base() -> None:
    """Puts :class:`NeuronTestBase` in place of ``PrivateUse1TestBase`` among the device test bases
    that ``instantiate_device_type_tests`` instantiates for (call before a test file imports)."""
    bases = common_device_type.device_type_test_bases
    for index, base in enumerate(bases):
        if base is common_device_type.PrivateUse1TestBase:
            bases[index] = NeuronTestBase


#: The device types whose presence in a class's ``only_for`` makes it a class for accelerators, that
#: neuron runs too (:func:`install_accelerator_classes`).
ACCELERATORS: tuple[str, ...] = ("cuda",)


def _names(devices: Any) -> list[str]:
    """``only_for``/``except_for`` as a list (PyTorch takes a string, a sequence or None)."""
    return [devices] if isinstance(devices, str) else list(devices or ())


def _with_neuron(only_for: Any, except_for: Any) -> Any:
    """``only_for`` with ``privateuse1`` added where it names one of :data:`ACCELERATORS` and neither
    list names neuron already; otherwise ``only_for`` as it is."""
    named = _names(only_for) + _names(except_for)
    ours = {"privateuse1", torch._C._get_privateuse1_backend_name()}
    if not set(_names(only_for)) & set(ACCELERATORS) or ours & set(named):
        return only_for
    return [*_names(only_for), "privateuse1"]


#: Device-generic test classes of an older release's files that the installed release renamed: old
#: name -> (new name, why). The installed release's OpInfos name the new class in their skips and
#: xfails (``DecorateInfo.cls_name``), which an old file's class must get as well.
RENAMED_CLASSES: dict[str, tuple[str, str]] = {
    "TestBinaryUfuncs": (
        "TestBinaryUfuncsDevice",
        "test_binary_ufuncs.py's device-generic class, renamed when PyTorch named device-generic classes "
        "...Device (torch 2.13's OpInfos name it in 169 skips and xfails, PyTorch's own reasons for "
        "failures on every device, such as pow's complex small values and heaviside of NaN)",
    ),
}


def install_renamed_classes() -> None:
    """Makes each OpInfo skip or xfail that names a class's new name (:data:`RENAMED_CLASSES`) apply
    to the old name too (call before a test file imports; idempotent), by wrapping
    ``DecorateInfo.is_active``, which ``instantiate_device_type_tests`` asks with the test class's
    name."""
    from torch.testing._internal.opinfo.core import DecorateInfo

    original = DecorateInfo.is_active
    if getattr(original, "neuron_renamed_classes", False):
        return
    renamed = {old: new for old, (new, _) in RENAMED_CLASSES.items()}

    @functools.wraps(original)
    def is_active(self: Any, cls_name: str, *args: Any, **kwargs: Any) -> bool:
        if original(self, cls_name, *args, **kwargs):
            return True
        return cls_name in renamed and original(self, renamed[cls_name], *args, **kwargs)

    is_active.neuron_renamed_classes = True  # type: ignore[attr-defined]
    DecorateInfo.is_active = is_active


def install_accelerator_classes() -> None:
    """Instantiates for neuron, too, each test class that PyTorch restricts to a list of accelerators
    naming CUDA (call before a test file imports).

    PyTorch's test/dynamo has no device-generic class for every device: its classes that take
    ``device`` are instantiated ``only_for=("cuda", "hpu", "xpu")`` (``MiscTestsDevice``),
    ``("cuda", "hpu")`` (``ReproDeviceRuntimeTests``) or ``["cpu", "cuda", ...]``, lists their
    vendors extended to run them (Intel added ``"xpu"``, Habana ``"hpu"``, each to the lists of the
    classes it runs). Running such a class on neuron is what those vendors do, and it is sound: the
    class is written for a device passed in (``device``), and the tests in it that need CUDA itself
    keep their own guards (``@requires_cuda``, ``skipIf(not TEST_CUDA)``, ``@onlyCUDA``), which skip
    them on neuron as on HPU (recorded as skipped-pytorch). A class restricted to the CPU, to one
    vendor's device (``only_for="xpu"``), or excepting PrivateUse1 is left as PyTorch has it. PyTorch's
    own switch for this, ``PYTORCH_TESTING_DEVICE_FOR_CUSTOM=privateuse1``, is not used: it adds the
    PrivateUse1 base to every class, CPU-only ones and those excepting it included.

    The policy wraps ``common_device_type.get_desired_device_type_test_bases``, which
    ``instantiate_device_type_tests`` calls with each class's ``except_for`` and ``only_for``;
    ``PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1`` then keeps the neuron class alone, as for every
    other file.
    """
    original = common_device_type.get_desired_device_type_test_bases
    if getattr(original, "neuron_accelerator_classes", False):
        return

    @functools.wraps(original)
    def desired(except_for: Any = None, only_for: Any = None, *args: Any, **kwargs: Any) -> Any:
        return original(except_for, _with_neuron(only_for, except_for), *args, **kwargs)

    desired.neuron_accelerator_classes = True  # type: ignore[attr-defined]
    common_device_type.get_desired_device_type_test_bases = desired


def _skip_ops(test_case_name: str, base_test_name: str, to_skip: Any) -> Any:
    """PyTorch <= 2.5's ``skipOps(test_case_name, base_test_name, to_skip)`` as 2.13's
    ``skipOps(to_skip)``, which reads the class and test names from the decorated function.

    Raises:
        AssertionError: the decorated function is not ``test_case_name.base_test_name`` (the two
            forms would then skip different tests).
    """
    decorate = common_device_type.skipOps(to_skip)

    def wrapped(fn: Any) -> Any:
        parts = fn.__qualname__.split(".")
        if parts[-2:] != [test_case_name, base_test_name]:
            raise AssertionError(f"skipOps({test_case_name!r}, {base_test_name!r}) decorates {fn.__qualname__}")
        return decorate(fn)

    return wrapped


def _reduced_f32(bf32_precision: float = 1e-5) -> Any:
    # The old bf32_on_and_off(bf32_precision): 2.13's reduced_f32_on_and_off, which runs the test
    # again with bf32 (and tf32) matmuls on the CPU only, as the old one ran bf32 there.
    from torch.testing._internal.common_mkldnn import reduced_f32_on_and_off

    return reduced_f32_on_and_off(bf32_precision=bf32_precision)


def _cuda_tf32_is_not_fp32() -> bool:
    # The old common_cuda.tf32_is_not_fp32: whether float32 matmuls may run as TF32, i.e. on a
    # CUDA (not ROCm) device of compute capability 8 or higher. 2.13 dropped it from common_cuda;
    # common_mkldnn's function of that name asks another question (the CPU's AMX).
    if not torch.cuda.is_available() or torch.version.cuda is None:
        return False
    return torch.cuda.get_device_properties(torch.cuda.current_device()).major >= 8


#: (module, old name) -> (what it is now, why the binding is sound). Old release's test files
#: import these names; the installed release has them under another name or module.
RENAMED: dict[tuple[str, str], tuple[Any, str]] = {
    ("torch.testing._internal.common_utils", "skipIfMps"): (
        lambda: importlib.import_module("torch.testing._internal.common_utils").skipIfMPS,
        "renamed skipIfMPS (same decorator: skips where the test runs on MPS)",
    ),
    ("torch.testing._internal.common_methods_invocations", "binary_ufuncs_and_refs"): (
        lambda: tuple(importlib.import_module("torch.testing._internal.common_methods_invocations").binary_ufuncs),
        "now binary_ufuncs: the BinaryUfuncInfos of op_db + python_ref_db, as before",
    ),
    ("torch.testing._internal.common_mkldnn", "bf32_on_and_off"): (
        lambda: _reduced_f32,
        "renamed reduced_f32_on_and_off (bf32_precision kept; it changes nothing off the CPU)",
    ),
    ("torch.testing._internal.common_methods_invocations", "skip"): (
        lambda: common_device_type.skip,
        "moved to common_device_type (the same 5-field skip entry)",
    ),
    ("torch.testing._internal.common_methods_invocations", "xfail"): (
        lambda: common_device_type.xfail,
        "moved to common_device_type (the same 5-field xfail entry)",
    ),
    ("torch.testing._internal.common_methods_invocations", "skipOps"): (
        lambda: _skip_ops,
        "moved to common_device_type, which reads the class and test names from the test; the old "
        "form's names are checked against them",
    ),
    ("torch.testing._internal.common_cuda", "tf32_is_not_fp32"): (
        lambda: _cuda_tf32_is_not_fp32,
        "dropped from common_cuda: the old test (a CUDA device of compute capability >= 8), restated",
    ),
    ("numpy", "msort"): (
        lambda: functools.partial(importlib.import_module("numpy").sort, axis=0),
        "numpy 2 removed it; numpy 1's msort(a) was sort(a, axis=0), as its deprecation said",
    ),
    ("torch.testing._internal.common_nn", "new_module_tests"): (
        lambda: importlib.import_module("torch.testing._internal.common_nn").get_new_module_tests(),
        "now built by get_new_module_tests() (the installed release's list)",
    ),
}


def _bind(module: Any, names: list[str]) -> list[str]:
    """Binds each of ``names`` (of :data:`RENAMED`) that ``module`` lacks; returns those bound."""
    bound = []
    for name in names:
        if not hasattr(module, name):
            setattr(module, name, RENAMED[(module.__name__, name)][0]())
            bound.append(f"{module.__name__}.{name}")
    return bound


class _BindOnImport(importlib.abc.MetaPathFinder):
    """Binds :data:`RENAMED`'s names into a module right after its first import: importing
    ``common_methods_invocations`` (its OpInfo database) costs about 2 s, which a test file that
    never imports it should not pay in each of its worker processes."""

    def __init__(self) -> None:
        self.pending: dict[str, list[str]] = collections.defaultdict(list)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.pending:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        names, exec_module = self.pending.pop(fullname), spec.loader.exec_module

        def exec_and_bind(module: Any) -> None:
            exec_module(module)
            _bind(module, names)

        spec.loader.exec_module = exec_and_bind
        return spec


_on_import = _BindOnImport()
_scheduled: set[tuple[str, str]] = set()


def install_compat() -> list[str]:
    """Binds each of :data:`RENAMED` that its module lacks: at once in a module already imported,
    else right after the module's first import. Returns the ``module.name`` bound or scheduled by
    this call (a second call returns none of them again)."""
    bound = []
    for module_name, name in RENAMED:
        if (module_name, name) in _scheduled:
            continue
        _scheduled.add((module_name, name))
        module = sys.modules.get(module_name)
        if module is not None:
            bound += _bind(module, [name])
        else:
            _on_import.pending[module_name].append(name)
            bound.append(f"{module_name}.{name}")
    if _on_import.pending and _on_import not in sys.meta_path:
        sys.meta_path.insert(0, _on_import)
    return bound
