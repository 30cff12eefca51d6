#pragma once

// The one door between the C++ core and the Python runtime (torch_neuronx.runtime).
//
// The device's memory contents live in PJRT buffers, which are Python objects (jax.Array). A
// storage holds a strong reference to its buffer in its DataPtr context (decision 4); releasing
// that reference, and the few runtime services C++ needs from Python (synchronize, storage resize),
// go through here with the GIL held and any pending Python exception preserved.

#include <torch/csrc/utils/pybind.h>

#include <c10/core/ScalarType.h>

namespace c10::neuron {

// A storage's contents: a flat 1-D jax.Array whose dtype is `dtype` (the dtype that last wrote the
// whole storage), or no array at all for a storage that was never written (reads as zeros).
struct StorageBuffer {
  PyObject* array = nullptr; // strong reference, or nullptr
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};

// Drops the reference from any thread. Safe while a Python exception is propagating, during
// interpreter shutdown and in a forked child (the reference is then leaked on purpose).
void release_buffer(StorageBuffer& buffer) noexcept;

// Replaces the buffer; `array` may be None. Caller holds the GIL.
void assign_buffer(StorageBuffer& buffer, pybind11::handle array, c10::ScalarType dtype);

// Registers the Python runtime object whose methods C++ calls (see call_runtime).
void set_python_runtime(pybind11::object runtime);
bool python_runtime_ready() noexcept;
void disable_python_runtime() noexcept;

// The runtime object (borrowed); raises if it is not registered or the interpreter is gone.
pybind11::handle python_runtime();

// Turns the pending Python exception into torch's python_error, so that it reaches the user
// unchanged (type, message, traceback) through torch's and pybind's error handling.
[[noreturn]] void rethrow_python_error(pybind11::error_already_set& error);

// Calls runtime.<method>(args...) with the GIL held for the whole call, arguments and result
// included. Result is void, a C++ type to cast to, or pybind11::object (then the caller must hold
// the GIL while it uses and drops it).
template <typename Result = void, typename... Args>
Result call_runtime(const char* method, Args&&... args) {
  pybind11::handle runtime = python_runtime();
  pybind11::gil_scoped_acquire gil;
  try {
    pybind11::object result = runtime.attr(method)(std::forward<Args>(args)...);
    if constexpr (!std::is_void_v<Result>) {
      return result.template cast<Result>();
    }
  } catch (pybind11::error_already_set& error) {
    rethrow_python_error(error);
  }
}

} // namespace c10::neuron
