#pragma once

// Boxed dispatcher fallbacks whose body is a Python function.
//
// torch.library's Library.fallback cannot serve a device: while a TorchDispatchMode is on the mode
// stack, its PythonKernelHolder looks the kernel up among Python *impl* registrations, where no
// fallback is, and fails "func != nullptr INTERNAL ASSERT" (python_dispatch.cpp). The mode is on
// the stack with the Python key excluded whenever torch.tensor(data, device="neuron") runs under
// FakeTensorMode (Dynamo, AOTAutograd), since tensor_new.cpp copies the data to the device below
// the mode and lifts the result. This fallback calls its function directly, in every case.

#include <torch/csrc/utils/pybind.h>

#include <string>

namespace at::neuron {

// Registers `handler` as the boxed fallback of `dispatch_key` (a DispatchKey name such as
// "PrivateUse1"), for every op without a kernel for that key. The handler is called as
// handler(op, *args, **kwargs): op is the torch.ops OpOverload, args the positional arguments and
// kwargs the keyword-only ones, all of them (defaults included); it returns the op's results as
// the op's Python binding would. Registrations last for the process.
void register_python_fallback(const std::string& dispatch_key, pybind11::object handler);

} // namespace at::neuron
