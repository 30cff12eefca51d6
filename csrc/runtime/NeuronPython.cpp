#include "runtime/NeuronPython.h"

#include "runtime/NeuronDevice.h"

#include <torch/csrc/Exceptions.h>

#include <atomic>

namespace py = pybind11;

namespace c10::neuron {
namespace {

// Leaked on purpose: it must outlive static destruction, which runs after the interpreter is gone.
PyObject* g_runtime = nullptr;
std::atomic<bool> g_runtime_enabled{false};

bool interpreter_alive() noexcept {
  return Py_IsInitialized() && !_Py_IsFinalizing();
}

} // namespace

void release_buffer(StorageBuffer& buffer) noexcept {
  PyObject* array = buffer.array;
  buffer.array = nullptr;
  buffer.dtype = c10::ScalarType::Undefined;
  if (array == nullptr || !interpreter_alive() || in_bad_fork()) {
    return; // after fork(), PJRT cannot free the parent's buffers: leave them to the OS
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  // A storage may be freed while an exception unwinds through Python frames; keep it pending.
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  Py_DECREF(array);
  PyErr_Restore(type, value, traceback);
  PyGILState_Release(gil);
}

void assign_buffer(StorageBuffer& buffer, py::handle array, c10::ScalarType dtype) {
  PyObject* previous = buffer.array;
  if (array.is_none()) {
    buffer.array = nullptr;
    buffer.dtype = c10::ScalarType::Undefined;
  } else {
    buffer.array = array.inc_ref().ptr();
    buffer.dtype = dtype;
  }
  Py_XDECREF(previous);
}

void set_python_runtime(py::object runtime) {
  PyObject* previous = g_runtime;
  g_runtime = runtime.release().ptr();
  Py_XDECREF(previous);
  g_runtime_enabled.store(true, std::memory_order_release);
}

bool python_runtime_ready() noexcept {
  return g_runtime_enabled.load(std::memory_order_acquire) && g_runtime != nullptr && interpreter_alive();
}

void disable_python_runtime() noexcept {
  g_runtime_enabled.store(false, std::memory_order_release);
}

py::handle python_runtime() {
  TORCH_CHECK(python_runtime_ready(),
              "neuron: the Python runtime is not available (torch_neuronx is not loaded, or the interpreter is "
              "shutting down)");
  return py::handle(g_runtime);
}

void rethrow_python_error(py::error_already_set& error) {
  error.restore();
  python_error pending;
  pending.persist();
  throw pending;
}

} // namespace c10::neuron
