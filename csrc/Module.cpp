// Python bindings of the C++ core (torch_neuronx._C). Bindings only: behaviour lives in runtime/
// and aten/.

#include "aten/PythonFallback.h"
#include "aten/native/Metadata.h"
#include "profiler/NeuronProfilerBindings.h"
#include "runtime/NeuronAllocator.h"
#include "runtime/NeuronMemoryHistoryBindings.h"
#include "runtime/NeuronCallSignature.h"
#include "runtime/NeuronDevice.h"
#include "runtime/NeuronGenerator.h"
#include "runtime/NeuronGuard.h"
#include "runtime/NeuronPython.h"

#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Stream.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;
using namespace c10::neuron;

namespace {

c10::ScalarType scalar_type_of(int code) {
  TORCH_CHECK_VALUE(code >= 0 && code < static_cast<int>(c10::ScalarType::NumOptions), "neuron: invalid dtype code ",
                    code);
  return static_cast<c10::ScalarType>(code);
}

ResolvedStorage resolve_tensor_storage(const at::Tensor& tensor) {
  TORCH_CHECK(tensor.device().type() == kNeuronDeviceType, "expected a neuron tensor, got one on ", tensor.device());
  check_not_forked();
  return resolve_storage(tensor.storage().unsafeGetStorageImpl());
}

// Layout of the fast path's new outputs: tensors of fixed sizes, dense strides and dtypes (the
// strides PyTorch's meta kernel gives, so that e.g. an elementwise op on a transposed tensor keeps
// its layout, as on CPU and CUDA).
class OutputLayout {
 public:
  explicit OutputLayout(const std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, int>>& outputs) {
    for (const auto& [sizes, strides, dtype] : outputs) {
      sizes_.push_back(sizes);
      strides_.push_back(strides);
      dtypes_.push_back(scalar_type_of(dtype));
    }
  }

  size_t count() const {
    return sizes_.size();
  }

  // New tensors on `device`, allocated before the executable that fills them is launched, so that
  // running out of device memory raises torch.OutOfMemoryError at the op, with nothing in flight.
  py::list allocate(int device) const {
    py::list tensors;
    for (size_t i = 0; i < sizes_.size(); ++i) {
      at::Tensor tensor = at::neuron::empty_dense(sizes_[i], strides_[i], dtypes_[i], static_cast<c10::DeviceIndex>(device));
      tensors.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(tensor))));
    }
    return tensors;
  }

  // Binds each flat array as the storage buffer of the matching tensor from allocate().
  void bind(const py::list& tensors, const py::sequence& arrays) const {
    TORCH_CHECK(py::len(arrays) >= sizes_.size(), "neuron: executable returned ", py::len(arrays), " arrays for ",
                sizes_.size(), " outputs");
    for (size_t i = 0; i < sizes_.size(); ++i) {
      const at::Tensor& tensor = THPVariable_Unpack(tensors[i].ptr());
      if (Allocation* allocation = resolve_storage(tensor.storage().unsafeGetStorageImpl()).allocation) {
        assign_buffer(allocation->buffer, arrays[i], dtypes_[i]);
      }
    }
  }

 private:
  std::vector<std::vector<int64_t>> sizes_;
  std::vector<std::vector<int64_t>> strides_;
  std::vector<c10::ScalarType> dtypes_;
};

} // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "C++ core of the neuron PyTorch backend";

  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) {
        std::rethrow_exception(error);
      }
    } catch (python_error& e) {
      e.restore();
    }
  });

  // Cores.
  m.def("_device_count", [] { return static_cast<int>(device_count()); });
  m.def("_core_config_error", [] { return core_config_error(); });
  m.def("_physical_core_ids", [] { return physical_core_ids(); });
  m.def("_current_device", [] { return static_cast<int>(current_device()); });
  m.def("_set_device", [](int index) { set_device(static_cast<c10::DeviceIndex>(index)); });
  m.def("_check_device_index", [](int index) { check_device_index(static_cast<c10::DeviceIndex>(index)); });
  m.def("_note_runtime_started", &note_runtime_started);
  m.def("_in_bad_fork", &in_bad_fork);

  // Memory.
  m.def("_memory_capacity", [](int device) { return allocator().capacity(static_cast<c10::DeviceIndex>(device)); });
  m.def("_memory_fraction",
        [](int device) { return allocator().memory_fraction(static_cast<c10::DeviceIndex>(device)); });
  m.def("_set_memory_fraction", [](int device, double fraction) {
    allocator().set_memory_fraction(static_cast<c10::DeviceIndex>(device), fraction);
  });
  m.def("_num_tensor_frees", [](int device) { return allocator().num_tensor_frees(static_cast<c10::DeviceIndex>(device)); });
  m.def("_empty_cache", [](int device) { allocator().empty_cache_on(static_cast<c10::DeviceIndex>(device)); });
  bind_memory_history(m);

  // Random numbers.
  m.def("_default_generator", [](int device) { return default_generator(static_cast<c10::DeviceIndex>(device)); });
  m.def(
      "_philox_inputs",
      [](py::object generator, int device, uint64_t increment) {
        at::Generator gen = generator.is_none() ? default_generator(static_cast<c10::DeviceIndex>(device))
                                                : generator.cast<at::Generator>();
        TORCH_CHECK(gen.device().type() == kNeuronDeviceType, "Expected a 'neuron' device type for generator but found '",
                    gen.device().type(), "'; create it with torch.Generator(device='neuron')");
        TORCH_CHECK(gen.device().index() == device, "A random op on neuron:", device,
                    " was given the generator of neuron:", static_cast<int>(gen.device().index()),
                    "; use a generator of the op's core, e.g. torch.Generator(device='neuron:", device, "')");
        auto* impl = gen.get<NeuronGenerator>();
        return impl->philox_inputs(increment);
      },
      py::arg("generator"), py::arg("device"), py::arg("increment"));

  // Storage buffers (decision 4).
  m.def("_storage_buffer", [](const at::Tensor& tensor) -> py::tuple {
    // (buffer or None, its dtype code, the tensor's element offset in it, the buffer's bytes)
    ResolvedStorage resolved = resolve_tensor_storage(tensor);
    int64_t offset = tensor.storage_offset() + static_cast<int64_t>(resolved.byte_offset) / tensor.element_size();
    Allocation* allocation = resolved.allocation;
    size_t nbytes = allocation ? allocation->requested : tensor.storage().nbytes();
    check_in_bounds(tensor, offset, nbytes, "reading or writing a tensor");
    if (allocation == nullptr || allocation->buffer.array == nullptr) {
      return py::make_tuple(py::none(), -1, offset, nbytes);
    }
    return py::make_tuple(py::handle(allocation->buffer.array), static_cast<int>(allocation->buffer.dtype), offset,
                          nbytes);
  });
  m.def("_bind_buffer", [](const at::Tensor& tensor, py::object array, int dtype) {
    if (Allocation* allocation = resolve_tensor_storage(tensor).allocation) {
      assign_buffer(allocation->buffer, array, scalar_type_of(dtype));
    }
  });
  m.def("_bind_stand_in", [](const at::Tensor& tensor, py::handle stand_in, int dtype) -> uint64_t {
    // Binds a stand-in buffer (runtime/recording.py) to a tensor's allocation and returns the
    // allocation's address (for _rebind_held), or 0 for a 0-byte storage, which holds no buffer.
    Allocation* allocation = resolve_tensor_storage(tensor).allocation;
    if (allocation == nullptr) {
      return 0;
    }
    assign_buffer(allocation->buffer, stand_in, scalar_type_of(dtype));
    return allocation->address;
  });
  m.def("_rebind_held", [](uint64_t address, py::handle held, py::handle array, int dtype) -> bool {
    // Binds `array` to the allocation at `address` if that allocation still holds `held` (a
    // stand-in buffer); false when it was freed or rebound since.
    Allocation* allocation = allocation_at(address);
    if (allocation == nullptr || allocation->buffer.array != held.ptr()) {
      return false;
    }
    assign_buffer(allocation->buffer, array, scalar_type_of(dtype));
    return true;
  });
  m.def("_rebind", [](const py::list& tensors, const py::sequence& arrays, const std::vector<int>& dtypes) {
    for (size_t i = 0; i < dtypes.size(); ++i) {
      const at::Tensor& tensor = THPVariable_Unpack(tensors[i].ptr());
      if (Allocation* allocation = resolve_storage(tensor.storage().unsafeGetStorageImpl()).allocation) {
        assign_buffer(allocation->buffer, arrays[i], scalar_type_of(dtypes[i]));
      }
    }
  });
  py::class_<OutputLayout>(m, "OutputLayout")
      .def(py::init<const std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, int>>&>())
      .def("allocate", &OutputLayout::allocate)
      .def("bind", &OutputLayout::bind)
      .def("count", &OutputLayout::count);
  m.def("_dtype_codes", [] {
    // torch.dtype -> c10::ScalarType code, the dtype numbering the C++ core and the key use.
    py::dict codes;
    for (int code = 0; code < static_cast<int>(c10::ScalarType::NumOptions); ++code) {
      auto type = static_cast<c10::ScalarType>(code);
      if (type == c10::ScalarType::Undefined) {
        continue;
      }
      codes[py::handle(reinterpret_cast<PyObject*>(torch::getTHPDtype(type)))] = code;
    }
    return codes;
  });
  m.def("_check_dtype_supported", [](int dtype, const std::string& op) {
    at::neuron::check_dtype_supported(scalar_type_of(dtype), op.c_str());
  });

  // Streams.
  m.def("_stream", [](int device, int64_t stream_id) {
    c10::Stream stream(c10::Stream::UNSAFE, c10::Device(kNeuronDeviceType, static_cast<c10::DeviceIndex>(device)),
                       stream_id);
    return py::reinterpret_steal<py::object>(THPStream_Wrap(stream));
  });
  m.def("_stream_priority", [](int device, int64_t stream_id) {
    return stream_priority(c10::Stream(c10::Stream::UNSAFE,
                                       c10::Device(kNeuronDeviceType, static_cast<c10::DeviceIndex>(device)), stream_id));
  });

  // Boxed fallbacks written in Python (see aten/PythonFallback.h).
  m.def("_register_python_fallback", &at::neuron::register_python_fallback);

  // The Python runtime that C++ calls back into.
  m.def("_set_python_runtime", &set_python_runtime);
  m.def("_disable_python_runtime", &disable_python_runtime);

  bind_call_signature(m);
  profiler::bind_profiler(m);
}
