"""A device-generic test file written the way PyTorch's own are, for tests/conformance/test_upstream.py.

Not collected by the default run (its name does not start with ``test_``): the test runs it through
``torch-neuronx upstream-tests``, which must record each outcome kind below as PyTorch's files
produce them (crashes and hangs are process_faults_sample.py's), and leave out the variants of
dtypes neuron does not hold, whether ``@dtypes`` or ``@parametrize`` makes them, and instantiate a
class PyTorch restricts to accelerators naming CUDA for neuron, not one it restricts to the CPU.
"""

import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests, onlyCUDA
from torch.testing._internal.common_utils import TestCase, parametrize, run_tests


class TestSample(TestCase):
    @dtypes(torch.float32, torch.float64)
    def test_add_matches_cpu(self, device, dtype):
        x = torch.arange(6, dtype=dtype).reshape(2, 3)
        self.assertEqual(torch.add(x.to(device), 1).cpu(), x + 1)

    @parametrize("dtype", [torch.bfloat16, torch.complex128])
    def test_neg_matches_cpu(self, device, dtype):
        x = torch.arange(6).to(dtype)
        self.assertEqual(torch.neg(x.to(device)).cpu(), -x)

    def test_wrong_value_fails(self, device):
        self.assertEqual(torch.ones(2, device=device).cpu(), torch.zeros(2))

    @onlyCUDA
    def test_only_cuda(self, device):
        self.assertEqual(torch.ones(1, device=device).cpu(), torch.ones(1))

    def test_makes_a_double_tensor(self, device):
        torch.zeros(2, dtype=torch.double, device=device)

    def test_rewraps_a_double_tensor_error(self, device):
        # test_ops re-raises a sample's error as Exception("... Caused by reference input ...").
        try:
            torch.zeros(2, dtype=torch.double, device=device)
        except TypeError as error:
            raise Exception("Caused by reference input at index 0") from error

    def test_makes_a_sparse_tensor(self, device):
        torch.eye(2).to_sparse().to(device)


class TestForAccelerators(TestCase):
    def test_runs_where_cuda_does(self, device):
        self.assertEqual(torch.device(device).type, "neuron")


class TestForTheCpu(TestCase):
    def test_not_for_neuron(self, device):
        raise AssertionError("a class PyTorch restricts to the CPU was instantiated for neuron")


instantiate_device_type_tests(TestSample, globals(), only_for="privateuse1")
# test/dynamo's way: classes for a list of accelerators (neuron runs them) or for the CPU alone.
instantiate_device_type_tests(TestForAccelerators, globals(), only_for=("cuda", "hpu", "xpu"))
instantiate_device_type_tests(TestForTheCpu, globals(), only_for="cpu")

if __name__ == "__main__":
    run_tests()
