#include "runtime/NeuronPython.h"

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
  if (array == nullptr || !interpreter_alive()) {
    return;
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

py::object call_runtime(const char* method, const py::tuple& args) {
  TORCH_CHECK(python_runtime_ready(), "neuron: the Python runtime is not initialised (", method,
              " was called before torch_neuronx finished loading, or after interpreter shutdown)");
  py::gil_scoped_acquire gil;
  try {
    return py::handle(g_runtime).attr(method)(*args);
  } catch (py::error_already_set& err) {
    err.restore();
    python_error error;
    error.persist();
    throw error;
  }
}

} // namespace c10::neuron
