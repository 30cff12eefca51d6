"""torch.neuron / torch.accelerator device management: cores, current device, guard, availability."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch


def test_autoload_registers_the_device_without_importing_jax():
    # kaiser_window is then the first op: its ATen composite calls a DispatchStub on the device
    # itself, which raised an INTERNAL ASSERT before the device had started (_startup.py).
    code = (
        "import sys, torch; "
        "assert torch.neuron.is_available(); "
        "assert torch._C._get_privateuse1_backend_name() == 'neuron'; "
        "x = torch.empty(3, device='neuron'); "
        "assert 'jax' not in sys.modules, 'import torch must not import JAX'; "
        "window = torch.kaiser_window(6, True, 3.0, device='neuron'); "
        "torch.testing.assert_close(window.cpu(), torch.kaiser_window(6, True, 3.0)); "
        "print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_first_op_under_fake_tensor_mode_starts_the_device():
    # torch.tensor(data, device=...) copies the data to the device below FakeTensorMode (Python key
    # excluded, mode still on the stack); with torch.library's Python fallback that copy failed
    # "func != nullptr INTERNAL ASSERT" when it was the process's first neuron op, so the first
    # compiled function that made a tensor from data did too (csrc/aten/PythonFallback.h).
    code = (
        "import torch\n"
        "from torch._subclasses.fake_tensor import FakeTensorMode\n"
        "with FakeTensorMode():\n"
        "    fake = torch.tensor([1.0, 2.0], device='neuron')\n"
        "assert fake.device.type == 'neuron' and fake.shape == (2,)\n"
        "doubled = torch.compile(lambda: torch.tensor([1.0, 2.0], device='neuron') * 2, backend='neuron')()\n"
        "torch.testing.assert_close(doubled.cpu(), torch.tensor([2.0, 4.0]))\n"
        "print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_device_starts_after_other_code_created_jaxs_cpu_client():
    # PyTorch's test files probe JAX at import, creating its CPU client with one device before the
    # neuron device is first used: both cores must still start and compute what the CPU does.
    code = (
        "import jax, torch\n"
        "assert len(jax.devices('cpu')) == 1\n"
        "x = torch.arange(6.0).reshape(2, 3)\n"
        "on_0, on_1 = x.to('neuron:0'), x.to('neuron:1')\n"
        "torch.testing.assert_close((on_0 @ on_1.to('neuron:0').T).cpu(), x @ x.T)\n"
        "torch.testing.assert_close((on_1 * 2).cpu(), x * 2)\n"
        "assert jax.numpy.ones(2).sum() == 2\n"
        "print('ok')"
    )
    env = {**os.environ, "NEURON_RT_NUM_CORES": "2"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_int64_and_exact_fma_survive_other_code_turning_jax_x64_off():
    # JAX's default is 32-bit types; the device turns 64-bit ones on at its start, and code sharing
    # the process may turn them off again: then .to("neuron") narrowed 2**40 to 0 (int32).
    import jax

    big = torch.tensor([2**40, 3])
    a, b = torch.randn(1000), torch.randn(1000)
    big.to("neuron")  # the device has started
    jax.config.update("jax_enable_x64", False)
    try:
        on_device = big.to("neuron")
        torch.testing.assert_close(on_device.cpu(), big)
        torch.testing.assert_close((on_device * 3 + 2**40).cpu(), big * 3 + 2**40)
        compiled = torch.compile(lambda t: t * 5 - 1, backend="neuron")
        torch.testing.assert_close(compiled(on_device).cpu(), big * 5 - 1)
        lerp = torch.lerp(a.to("neuron"), b.to("neuron"), 0.3).cpu()
        torch.testing.assert_close(lerp, torch.lerp(a, b, 0.3), rtol=0, atol=0)
    finally:
        jax.config.update("jax_enable_x64", True)


#: (code before the device starts, XLA_FLAGS given, XLA_FLAGS expected before the start, whether the
#: start warns that XLA contracts multiply-adds): runtime/xla_flags.py.
XLA_FLAG_CASES = {
    "import torch first": ("import torch", None, "--xla_cpu_max_isa=AVX", False),
    "the user's own ISA": ("import torch", "--xla_cpu_max_isa=AVX2", "--xla_cpu_max_isa=AVX2", False),
    "other flags kept": (
        "import torch",
        "--xla_cpu_enable_fast_min_max=false",
        "--xla_cpu_enable_fast_min_max=false --xla_cpu_max_isa=AVX",
        False,
    ),
    "JAX's client first": ("import jax; jax.devices(); import torch", None, "--xla_cpu_max_isa=AVX", True),
}


@pytest.mark.parametrize("case", XLA_FLAG_CASES)
def test_xla_is_asked_not_to_contract_multiply_adds(case):
    before, given, expected, warns = XLA_FLAG_CASES[case]
    code = (
        f"{before}\n"
        "import os, warnings\n"
        f"assert os.environ.get('XLA_FLAGS') == {expected!r}, os.environ.get('XLA_FLAGS')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    torch.ones(1, device='neuron')\n"
        "print(any('fused multiply-adds' in str(w.message) for w in caught))\n"
        "print(os.environ.get('XLA_FLAGS'))"
    )
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    if given is not None:
        env["XLA_FLAGS"] = given
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    # After the start XLA_FLAGS is the user's again: child processes inherit no change.
    assert result.stdout.split("\n")[:2] == [str(warns), str(given)]


def test_set_device_initializes_and_fake_tensors_follow_it(two_cores):
    # As torch.cuda.set_device: the device counts as initialized before any op started the runtime,
    # so FakeTensor (DTensor's sharding propagation) puts an index-less device on the current core.
    code = (
        "import sys, torch; "
        "from torch._subclasses.fake_tensor import FakeTensorMode; "
        "assert not torch.neuron.is_initialized(); "
        "torch.neuron.set_device(1); "
        "assert 'jax' not in sys.modules and torch.neuron.is_initialized()\n"
        "with FakeTensorMode():\n"
        "    fake = torch.empty(2, device='neuron')\n"
        "print(fake.device, torch.empty(2, device='neuron').device)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["neuron:1", "neuron:1"]


def test_default_core_count_is_two():
    assert torch.neuron.device_count() == int(os.environ.get("NEURON_RT_NUM_CORES", 2))
    assert torch.accelerator.device_count() == torch.neuron.device_count()


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"NEURON_RT_NUM_CORES": "3"}, 3),
        ({"NEURON_RT_VISIBLE_CORES": "0,2,5-6"}, 4),  # indices and ranges (a process each: seconds)
    ],
)
def test_core_count_from_environment(environment, expected):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_RT_")} | environment
    code = (
        "import torch; last = torch.neuron.device_count() - 1; "
        "print(torch.neuron.device_count(), torch.ones(2, device=f'neuron:{last}').sum().item())"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(expected), "2.0"]


def test_malformed_core_environment_raises_value_error_and_is_available_warns():
    # is_available never raises (as CUDA's) but warns: a script choosing "neuron" if available
    # else "cpu" must not run on the CPU silently because of a typo (helper-59).
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_RT_")} | {"NEURON_RT_VISIBLE_CORES": "3-1"}
    code = "import torch; print(torch.neuron.is_available()); torch.neuron.device_count()"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert result.returncode != 0 and result.stdout.split() == ["False"]
    assert "UserWarning: neuron: NEURON_RT_VISIBLE_CORES='3-1'" in result.stderr
    assert "ValueError: neuron: NEURON_RT_VISIBLE_CORES='3-1'" in result.stderr


def test_current_device_and_context_manager(two_cores):
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(1):
        assert torch.neuron.current_device() == 1
        assert torch.empty(2, device="neuron").device == torch.device("neuron", 1)
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device(1)
    try:
        assert torch.accelerator.current_device_index() == 1
    finally:
        torch.neuron.set_device(0)


def test_current_device_is_per_thread(two_cores):
    import threading

    seen = []
    torch.neuron.set_device(1)
    try:
        thread = threading.Thread(target=lambda: seen.append(torch.neuron.current_device()))
        thread.start()
        thread.join()
    finally:
        torch.neuron.set_device(0)
    assert seen == [0]


@pytest.mark.parametrize("index", [2, 17, -5])
def test_invalid_core_index_raises(index):
    with pytest.raises(RuntimeError, match="neuron"):
        torch.empty(2, device=torch.device("neuron", index) if index >= 0 else "neuron:-5")


@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.neuron.set_device(9),
        lambda: torch.accelerator.set_device_index(9),
        lambda: torch.neuron.memory_stats(9),
        lambda: torch.neuron.synchronize(9),
        lambda: torch.Stream(device="neuron:9"),
    ],
)
def test_invalid_core_index_raises_runtime_error_as_cuda(call):
    # CUDA raises RuntimeError ("invalid device ordinal") for a device it does not have.
    with pytest.raises(RuntimeError, match="Invalid neuron device index 9: this process sees"):
        call()


def test_accelerator_apis():
    accelerator = torch.accelerator.current_accelerator()
    assert accelerator == torch.device("neuron")
    x = torch.arange(10.0, device=accelerator)
    torch.accelerator.synchronize()
    assert torch.accelerator.current_stream().device.type == "neuron"
    torch.testing.assert_close(x.cpu(), torch.arange(10.0))


def test_tensor_and_module_methods():
    x = torch.ones(3)
    y = x.neuron()
    assert y.is_neuron and y.device == torch.device("neuron", 0)
    module = torch.nn.Linear(2, 2)
    assert module.neuron() is module
    assert module.weight.is_neuron


def test_device_properties():
    properties = torch.neuron.get_device_properties(0)
    assert properties.total_memory == 24 * 2**30
    assert "NeuronCore" in torch.neuron.get_device_name()
    # CUDA's names, read by device-generic code through torch.get_device_module(device).
    assert (properties.major, properties.minor, properties.multi_processor_count) == (2, 0, 1)
    assert properties.L2_cache_size == 24 * 2**20  # the SBUF
    assert not properties.is_integrated and not properties.is_multi_gpu_board
    assert properties.uuid == torch.get_device_module("neuron").get_device_properties(0).uuid
    assert properties.uuid != torch.neuron.get_device_properties(1).uuid


def test_negative_device_context_is_a_no_op():
    with torch.neuron.device(-1):
        assert torch.neuron.current_device() == 0


def test_negative_set_device_is_a_no_op_as_on_cuda(two_cores):
    # torch.cuda.set_device: "This function is a no-op if this argument is negative."
    torch.neuron.set_device(1)
    try:
        torch.neuron.set_device(-1)
        assert torch.neuron.current_device() == 1
    finally:
        torch.neuron.set_device(0)


@pytest.mark.parametrize("call", [torch.neuron.memory_stats, torch.neuron.set_device, torch.neuron.synchronize])
def test_another_device_type_raises_cudas_value_error(call):
    with pytest.raises(ValueError, match=r"^Expected a neuron device, but got: cpu$"):
        call(torch.device("cpu"))


def test_cuda_namesakes_of_the_device_module():
    # torch.cuda's names that libraries call (helper-62 found them missing).
    assert torch.neuron.OutOfMemoryError is torch.OutOfMemoryError
    assert torch.neuron.is_current_stream_capturing() is False
    torch.neuron.init()
    assert torch.neuron.is_initialized()
    with pytest.warns(FutureWarning, match="renamed to torch.neuron.memory_reserved"):
        assert torch.neuron.memory_cached() == torch.neuron.memory_reserved()
    with pytest.warns(FutureWarning, match="resets /all/ peak memory stats"):
        torch.neuron.reset_max_memory_allocated()
    stream = torch.neuron.Stream()
    with torch.neuron.StreamContext(stream):
        current = torch.neuron.current_stream()
    # torch.cuda.current_stream gives a torch.cuda.Stream, with its priority
    assert isinstance(current, torch.neuron.Stream) and current == stream and current.priority == 0
    assert isinstance(torch.neuron.default_stream(), torch.neuron.Stream)


@pytest.mark.parametrize("device", ["neuron", torch.device("neuron")])
def test_set_device_without_an_index_raises_as_cuda(device):
    with pytest.raises(
        ValueError, match="^Expected a torch.device with a specified index or an integer, but got:neuron$"
    ):
        torch.neuron.set_device(device)


def test_accelerator_device_capability_lists_the_dtypes_the_device_holds():
    # It raised "Backend doesn't support getting device capabilities." (helper-62).
    supported = torch.accelerator.get_device_capability()["supported_dtypes"]
    assert torch.float64 not in supported and torch.complex128 not in supported  # the FP64 policy
    for dtype in supported:
        assert torch.zeros(2, dtype=dtype, device="neuron").dtype == dtype
    assert {torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool, torch.complex32} <= supported
