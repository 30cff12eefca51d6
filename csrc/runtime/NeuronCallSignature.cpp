#include "runtime/NeuronCallSignature.h"

#include "runtime/NeuronAllocator.h"
#include "runtime/NeuronDevice.h"

#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/Layout.h>
#include <torch/csrc/MemoryFormat.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <cstring>

namespace py = pybind11;

namespace c10::neuron {
namespace {

// Python type of a runtime scalar, part of the key (the executable is traced for that type).
char number_tag(PyObject* obj) {
  if (PyBool_Check(obj)) {
    return 'b';
  }
  if (PyLong_Check(obj)) {
    return 'i';
  }
  if (PyFloat_Check(obj)) {
    return 'f';
  }
  if (PyComplex_Check(obj)) {
    return 'c';
  }
  return 0;
}

const char* number_type_name(char tag) {
  switch (tag) {
    case 'b':
      return "bool";
    case 'i':
    case 'u':
      return "int";
    case 'f':
      return "float";
    default:
      return "complex";
  }
}

// A uint64 value above int64's range (c10::Scalar holds them, tag HAS_u) as numpy.uint64: JAX converts
// a Python int argument to int64 and raises OverflowError for it.
py::object uint64_number(uint64_t value) {
  return py::module_::import("numpy").attr("uint64")(py::int_(value));
}

// A Python int of `obj` that only uint64 holds ([2**63, 2**64)): PyTorch's argument parser lets no
// other int outside int64 through.
bool is_uint64_only(PyObject* obj) {
  int overflow = 0;
  PyLong_AsLongLongAndOverflow(obj, &overflow);
  return overflow > 0;
}

py::object scalar_to_python(const at::Scalar& value) {
  if (value.isBoolean()) {
    return py::bool_(value.toBool());
  }
  if (value.type() == at::ScalarType::UInt64) {
    return uint64_number(value.toUInt64());
  }
  if (value.isIntegral(/*includeBool=*/false)) {
    return py::int_(value.toLong());
  }
  if (value.isComplex()) {
    auto z = value.toComplexDouble();
    return py::reinterpret_steal<py::object>(PyComplex_FromDoubles(z.real(), z.imag()));
  }
  return py::float_(value.toDouble());
}

class Walker {
 public:
  Walker(const std::string& op_name, bool describe) : op_name_(op_name), describe_(describe) {
    key_.reserve(128);
  }

  template <typename T>
  void put(T value) {
    key_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }

  void put_tag(char tag) {
    key_.push_back(tag);
  }

  // One tensor argument (or list element); returns its description when describing.
  py::object tensor(PyObject* obj, const ArgSpec& spec) {
    if (obj == Py_None) {
      put_tag('n');
      return py::none();
    }
    if (!THPVariable_Check(obj)) {
      char tag = number_tag(obj);
      TORCH_CHECK_TYPE(tag != 0, op_name_, " on neuron: argument '", spec.name, "' expected a Tensor, got ",
                       Py_TYPE(obj)->tp_name);
      return runtime_scalar(obj, 'N', tag);
    }
    const at::Tensor& t = THPVariable_Unpack(obj);
    c10::Device where = t.device();
    if (where.type() != kNeuronDeviceType) {
      if (where.is_cpu() && t.dim() == 0) {
        // 0-dim CPU tensors mix with device tensors, as on CUDA; the value is a runtime input.
        bool wrapped = t.unsafeGetTensorImpl()->is_wrapped_number();
        put_tag('C');
        put(static_cast<int8_t>(t.scalar_type()));
        put(static_cast<int8_t>(wrapped));
        size_t index = scalars_.size();
        scalars_.append(scalar_to_python(t.item()));
        if (!describe_) {
          return py::none();
        }
        return py::cast(HostScalarArg{static_cast<int>(index), static_cast<int>(t.scalar_type()), wrapped});
      }
      if (where.is_cpu() && spec.allow_cpu) {
        convert_first_ = true;
        return py::none();
      }
      raise_device_mismatch(spec.name, where);
    }
    note_device(where.index(), spec.name);
    // NumPy's and JAX's limit, which neuron's values live in; the CPU's and CUDA's reductions raise
    // these words for the same tensors (TensorIterator's dim check).
    TORCH_CHECK(t.dim() <= 64, op_name_, " on neuron: only tensors with up to 64 dims are supported; argument '",
                spec.name, "' has ", t.dim());
    if (t.is_conj() || t.is_neg()) {
      // A lazy conjugate/negative view (which a compiled graph's inputs may be): its storage holds
      // other values. The caller resolves the bits and prepares again; the tag keeps such a call's
      // key apart from the resolved one's.
      convert_first_ = true;
      put_tag('M');
    }
    c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    ResolvedStorage resolved = resolve_storage(storage);
    size_t slot_bytes = resolved.allocation ? resolved.allocation->requested : storage->nbytes();
    int64_t itemsize = static_cast<int64_t>(t.element_size());
    TORCH_CHECK(resolved.byte_offset % itemsize == 0, op_name_, " on neuron: argument '", spec.name,
                "' starts at a byte offset that is not a multiple of its element size");
    int64_t offset = t.storage_offset() + static_cast<int64_t>(resolved.byte_offset) / itemsize;
    check_in_bounds(t, offset, slot_bytes, op_name_ + ": argument '" + spec.name + "'");
    // Slots are allocations, so that a storage aliasing another one's memory shares its slot.
    const void* identity = resolved.allocation ? static_cast<const void*>(resolved.allocation) : storage;
    int slot = -1;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i] == identity) {
        slot = static_cast<int>(i);
        break;
      }
    }
    int64_t byte_offset = offset * itemsize;
    if (slot < 0) {
      slot = static_cast<int>(slots_.size());
      slots_.push_back(identity);
      slot_first_bytes_.push_back(byte_offset);
      slot_tensors_.append(py::handle(obj));
      Allocation* allocation = resolved.allocation;
      bool has_buffer = allocation && allocation->buffer.array;
      int8_t buffer_dtype = has_buffer ? static_cast<int8_t>(allocation->buffer.dtype) : -1;
      put_tag('S');
      put(buffer_dtype);
      put(static_cast<int64_t>(slot_bytes));
      if (has_buffer) {
        buffers_.append(py::handle(allocation->buffer.array));
      }
      if (describe_) {
        slot_infos_.push_back(SlotInfo{has_buffer, static_cast<int>(buffer_dtype), static_cast<int64_t>(slot_bytes)});
      }
    }
    put_tag('T');
    put(static_cast<int16_t>(slot));
    put(static_cast<int8_t>(t.scalar_type()));
    auto sizes = t.sizes();
    auto strides = t.strides();
    put(static_cast<int8_t>(sizes.size()));
    key_.append(reinterpret_cast<const char*>(sizes.data()), sizes.size() * sizeof(int64_t));
    key_.append(reinterpret_cast<const char*>(strides.data()), strides.size() * sizeof(int64_t));
    int offset_scalar = -1;
    if (movable(t, slot_bytes)) {
      // The offset is a runtime input; the key keeps where the view sits relative to the slot's
      // first view (shifting every view of a storage alike keeps their overlaps).
      put_tag('o');
      put(static_cast<int64_t>(byte_offset - slot_first_bytes_[slot]));
      offset_scalar = static_cast<int>(py::len(scalars_));
      scalars_.append(py::int_(offset));
    } else {
      put_tag('s');
      put(offset);
    }
    if (!describe_) {
      return py::none();
    }
    return py::cast(
        TensorArg{slot, static_cast<int>(t.scalar_type()), sizes.vec(), strides.vec(), offset, offset_scalar});
  }

  py::object tensor_list(PyObject* obj, const ArgSpec& spec) {
    if (obj == Py_None) {
      put_tag('n');
      return py::none();
    }
    TORCH_CHECK_TYPE(PyList_Check(obj) || PyTuple_Check(obj), op_name_, " on neuron: argument '", spec.name,
                     "' expected a list of tensors, got ", Py_TYPE(obj)->tp_name);
    py::sequence items = py::reinterpret_borrow<py::sequence>(obj);
    put_tag('L');
    put(static_cast<int32_t>(items.size()));
    py::list descriptions;
    for (auto item : items) {
      py::object description = tensor(item.ptr(), spec);
      if (describe_) {
        descriptions.append(description);
      }
    }
    if (!describe_) {
      return py::none();
    }
    return py::cast(TensorListArg{descriptions});
  }

  py::object scalar(PyObject* obj, const ArgSpec& spec) {
    if (THPVariable_Check(obj)) {
      return tensor(obj, spec); // a Tensor passed where the schema says Scalar (e.g. 0-dim CPU)
    }
    char tag = number_tag(obj);
    if (tag == 0) {
      return static_value(obj, spec);
    }
    return runtime_scalar(obj, 'D', tag);
  }

  py::object scalar_list(PyObject* obj, const ArgSpec& spec) {
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
      return static_value(obj, spec);
    }
    py::sequence items = py::reinterpret_borrow<py::sequence>(obj);
    for (auto item : items) {
      if (number_tag(item.ptr()) == 0) {
        return static_value(obj, spec); // not all numbers: part of the key as it is
      }
    }
    put_tag('R');
    put(static_cast<int32_t>(items.size()));
    std::vector<int> indices;
    for (auto item : items) {
      indices.push_back(static_cast<int>(py::len(scalars_)));
      put_tag(append_number(item.ptr(), number_tag(item.ptr())));
    }
    if (!describe_) {
      return py::none();
    }
    return py::cast(NumberListArg{std::move(indices)});
  }

  py::object static_value(PyObject* obj, const ArgSpec& spec) {
    encode_static(obj, spec);
    if (!describe_) {
      return py::none();
    }
    return py::cast(StaticArg{py::reinterpret_borrow<py::object>(obj)});
  }

  py::object generator(PyObject* obj, const ArgSpec& spec) {
    put_tag('G');
    if (obj != Py_None) {
      TORCH_CHECK_TYPE(THPGenerator_Check(obj), op_name_, " on neuron: argument '", spec.name,
                       "' expected a torch.Generator, got ", Py_TYPE(obj)->tp_name);
      generator_ = py::reinterpret_borrow<py::object>(obj);
    }
    if (!describe_) {
      return py::none();
    }
    return py::cast(GeneratorArg{});
  }

  void finish_device(const pybind11::list& values) {
    if (device_ >= 0) {
      return;
    }
    // No device tensor among the arguments (factories): a `device=` argument, else the current core.
    for (auto value : values) {
      if (THPDevice_Check(value.ptr())) {
        const auto& d = reinterpret_cast<THPDevice*>(value.ptr())->device;
        if (d.type() == kNeuronDeviceType) {
          device_ = d.has_index() ? d.index() : current_device();
          return;
        }
      }
    }
    device_ = current_device();
  }

  py::tuple prepared(py::list values) {
    finish(values);
    py::list inputs = buffers_;
    for (auto scalar : scalars_) {
      inputs.append(scalar);
    }
    return py::make_tuple(py::bytes(key_), inputs, device_, slot_tensors_, generator_, values, convert_first_);
  }

  CallDescription described(py::list values) {
    finish(values);
    return CallDescription{argument_descriptions, slot_infos_, static_cast<int>(py::len(buffers_)),
                           static_cast<int>(py::len(scalars_)), device_, values};
  }

  py::list argument_descriptions;

 private:
  // Appends the runtime number `obj` (of number_tag `tag`) to the executable's inputs and returns
  // its tag in the key: 'u' for an int only uint64 holds, which is traced as a uint64 input.
  char append_number(PyObject* obj, char tag) {
    if (tag == 'i' && is_uint64_only(obj)) {
      scalars_.append(uint64_number(PyLong_AsUnsignedLongLong(obj)));
      return 'u';
    }
    scalars_.append(py::handle(obj));
    return tag;
  }

  py::object runtime_scalar(PyObject* obj, char kind, char tag) {
    put_tag(kind);
    size_t index = scalars_.size();
    tag = append_number(obj, tag);
    put_tag(tag);
    if (!describe_) {
      return py::none();
    }
    return py::cast(NumberArg{static_cast<int>(index), number_type_name(tag)});
  }

  void finish(const py::list& values) {
    finish_device(values);
    put_tag('@');
    put(static_cast<int16_t>(device_));
  }

  void note_device(c10::DeviceIndex index, const std::string& name) {
    if (device_ < 0) {
      device_ = index;
      first_tensor_ = name;
    } else if (device_ != index) {
      raise_device_mismatch(name, c10::Device(kNeuronDeviceType, index));
    }
  }

  [[noreturn]] void raise_device_mismatch(const std::string& name, c10::Device where) {
    std::string others = device_ >= 0 ? "neuron:" + std::to_string(device_) : std::string("neuron");
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but got ", name, " is on ", where,
                ", different from other tensors on ", others, " (when checking argument ", name, " in method ",
                op_name_, "). Move it first, e.g. ", name, ".to('", others, "').");
  }

  void encode_static(PyObject* obj, const ArgSpec& spec) {
    if (obj == Py_None) {
      put_tag('n');
    } else if (PyBool_Check(obj)) {
      put_tag('b');
      put(static_cast<int8_t>(obj == Py_True));
    } else if (PyLong_Check(obj)) {
      int overflow = 0;
      long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
      if (overflow > 0) {
        // A Scalar may hold a uint64 (c10::Scalar); the op's own checks judge it, as ATen's do.
        unsigned long long unsigned_value = PyLong_AsUnsignedLongLong(obj);
        if (unsigned_value == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
          PyErr_Clear();
          TORCH_CHECK_VALUE(false, op_name_, " on neuron: argument '", spec.name, "' does not fit in uint64");
        }
        put_tag('u');
        put(static_cast<uint64_t>(unsigned_value));
        return;
      }
      TORCH_CHECK_VALUE(!overflow, op_name_, " on neuron: argument '", spec.name, "' does not fit in int64");
      put_tag('i');
      put(static_cast<int64_t>(value));
    } else if (PyFloat_Check(obj)) {
      put_tag('f');
      put(PyFloat_AS_DOUBLE(obj));
    } else if (PyComplex_Check(obj)) {
      put_tag('c');
      put(PyComplex_RealAsDouble(obj));
      put(PyComplex_ImagAsDouble(obj));
    } else if (PyUnicode_Check(obj)) {
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(obj, &size);
      put_tag('s');
      put(static_cast<int32_t>(size));
      key_.append(text, static_cast<size_t>(size));
    } else if (PyList_Check(obj) || PyTuple_Check(obj)) {
      py::sequence items = py::reinterpret_borrow<py::sequence>(obj);
      put_tag('l');
      put(static_cast<int32_t>(items.size()));
      for (auto item : items) {
        encode_static(item.ptr(), spec);
      }
    } else if (THPDtype_Check(obj)) {
      put_tag('d');
      put(static_cast<int8_t>(reinterpret_cast<THPDtype*>(obj)->scalar_type));
    } else if (THPDevice_Check(obj)) {
      const auto& d = reinterpret_cast<THPDevice*>(obj)->device;
      put_tag('v');
      put(static_cast<int8_t>(d.type()));
      put(static_cast<int8_t>(d.index()));
    } else if (THPLayout_Check(obj)) {
      put_tag('y');
      put(static_cast<int8_t>(reinterpret_cast<THPLayout*>(obj)->layout));
    } else if (THPMemoryFormat_Check(obj)) {
      put_tag('m');
      put(static_cast<int8_t>(reinterpret_cast<THPMemoryFormat*>(obj)->memory_format));
    } else {
      TORCH_CHECK_TYPE(false, op_name_, " on neuron: argument '", spec.name, "' has unsupported type ",
                       Py_TYPE(obj)->tp_name);
    }
  }

  // Whether a non-empty view's elements span less than its storage, so that it could sit at
  // another offset of it (then its offset is a runtime input).
  static bool movable(const at::Tensor& t, size_t storage_bytes) {
    if (t.numel() == 0) {
      return false;
    }
    int64_t extent = 1;
    for (int64_t dim = 0; dim < t.dim(); ++dim) {
      extent += (t.size(dim) - 1) * t.stride(dim);
    }
    return extent * static_cast<int64_t>(t.element_size()) < static_cast<int64_t>(storage_bytes);
  }

  const std::string& op_name_;
  bool describe_;
  std::string key_;
  py::list buffers_;
  py::list scalars_;
  py::list slot_tensors_;
  std::vector<SlotInfo> slot_infos_;
  std::vector<const void*> slots_;
  std::vector<int64_t> slot_first_bytes_; // per slot: the byte offset of its first view
  py::object generator_ = py::none();
  int device_ = -1;
  std::string first_tensor_;
  bool convert_first_ = false;
};

} // namespace

void check_in_bounds(const at::Tensor& t, int64_t offset, size_t storage_bytes, const std::string& what) {
  if (t.numel() == 0) {
    return;
  }
  int64_t last = offset;
  for (int64_t dim = 0; dim < t.dim(); ++dim) {
    last += (t.size(dim) - 1) * t.stride(dim);
  }
  int64_t needed = (last + 1) * static_cast<int64_t>(t.element_size());
  TORCH_CHECK(needed <= static_cast<int64_t>(storage_bytes), what, " on neuron: a tensor with sizes ", t.sizes(),
              ", strides ", t.strides(), ", storage offset ", t.storage_offset(), " and itemsize ", t.element_size(),
              " requires a storage of ", needed, " bytes, but its storage has ", storage_bytes,
              " bytes (was the storage resized under it?)");
}

std::optional<std::pair<int, int>> overlapping_pair(const py::sequence& args, const std::vector<int>& positions,
                                                    const std::vector<bool>& mutated) {
  struct Span {
    uintptr_t start;
    uintptr_t end;
    int position;
  };
  std::vector<Span> spans;
  spans.reserve(positions.size());
  for (int position : positions) {
    py::object item = args[position];
    TORCH_CHECK_TYPE(THPVariable_Check(item.ptr()), "overlapping_pair: argument ", position, " is not a tensor");
    const at::Tensor& t = THPVariable_Unpack(item.ptr());
    if (t.numel() == 0) {
      continue;
    }
    int64_t last = 0;
    for (int64_t dim = 0; dim < t.dim(); ++dim) {
      last += (t.size(dim) - 1) * t.stride(dim);
    }
    auto start = reinterpret_cast<uintptr_t>(t.const_data_ptr());
    spans.push_back(Span{start, start + static_cast<uintptr_t>((last + 1) * t.element_size()), position});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  auto is_mutated = [&](int position) {
    return position < static_cast<int>(mutated.size()) && mutated[position];
  };
  // A range overlaps an earlier one exactly when it starts before the furthest end reached so far:
  // keep that end over all ranges, and over the mutated ones.
  const Span* furthest = nullptr;
  const Span* furthest_mutated = nullptr;
  for (const Span& span : spans) {
    if (is_mutated(span.position)) {
      if (furthest && furthest->end > span.start) {
        return std::make_pair(span.position, furthest->position);
      }
      if (!furthest_mutated || span.end > furthest_mutated->end) {
        furthest_mutated = &span;
      }
    } else if (furthest_mutated && furthest_mutated->end > span.start) {
      return std::make_pair(furthest_mutated->position, span.position);
    }
    if (!furthest || span.end > furthest->end) {
      furthest = &span;
    }
  }
  return std::nullopt;
}

CallSignature::CallSignature(std::string op_name, std::vector<ArgSpec> args)
    : op_name_(std::move(op_name)), args_(std::move(args)) {}

py::tuple CallSignature::prepare(const py::tuple& args, const py::dict& kwargs) const {
  return walk<py::tuple>(args, kwargs, /*describe=*/false);
}

CallDescription CallSignature::describe(const py::tuple& args, const py::dict& kwargs) const {
  return walk<CallDescription>(args, kwargs, /*describe=*/true);
}

template <typename Result>
Result CallSignature::walk(const py::tuple& args, const py::dict& kwargs, bool describe) const {
  check_not_forked();
  TORCH_CHECK_TYPE(args.size() <= args_.size(), op_name_, " on neuron: expected at most ", args_.size(),
                   " arguments, got ", args.size());
  Walker walker(op_name_, describe);
  py::list values;
  size_t kwargs_used = 0;
  for (size_t i = 0; i < args_.size(); ++i) {
    const ArgSpec& spec = args_[i];
    PyObject* value = nullptr;
    if (i < args.size()) {
      value = PyTuple_GET_ITEM(args.ptr(), i);
    } else {
      value = kwargs.size() ? PyDict_GetItemString(kwargs.ptr(), spec.name.c_str()) : nullptr;
      if (value != nullptr) {
        ++kwargs_used;
      } else {
        TORCH_CHECK_TYPE(spec.has_default, op_name_, " on neuron: missing argument '", spec.name, "'");
        value = spec.default_value.ptr();
      }
    }
    values.append(py::handle(value));
    py::object description;
    switch (spec.kind) {
      case ArgKind::kTensor:
        description = walker.tensor(value, spec);
        break;
      case ArgKind::kTensorList:
        description = walker.tensor_list(value, spec);
        break;
      case ArgKind::kScalar:
        // A Scalar left at its default (alpha=1, the common case) is a constant of the executable:
        // one runtime input fewer on every call.
        description = value == spec.default_value.ptr() ? walker.static_value(value, spec) : walker.scalar(value, spec);
        break;
      case ArgKind::kScalarList:
        description = walker.scalar_list(value, spec);
        break;
      case ArgKind::kStatic:
        description = walker.static_value(value, spec);
        break;
      case ArgKind::kGenerator:
        description = walker.generator(value, spec);
        break;
    }
    if (describe) {
      walker.argument_descriptions.append(description);
    }
  }
  TORCH_CHECK_TYPE(kwargs_used == kwargs.size(), op_name_, " on neuron: unexpected keyword argument among ",
                   py::str(kwargs.attr("keys")()).cast<std::string>());
  if constexpr (std::is_same_v<Result, CallDescription>) {
    return walker.described(std::move(values));
  } else {
    return walker.prepared(std::move(values));
  }
}

void bind_call_signature(py::module_& m) {
  py::enum_<ArgKind>(m, "ArgKind")
      .value("TENSOR", ArgKind::kTensor)
      .value("TENSOR_LIST", ArgKind::kTensorList)
      .value("SCALAR", ArgKind::kScalar)
      .value("STATIC", ArgKind::kStatic)
      .value("SCALAR_LIST", ArgKind::kScalarList)
      .value("GENERATOR", ArgKind::kGenerator);

  py::class_<ArgSpec>(m, "ArgSpec")
      .def(py::init([](std::string name, ArgKind kind, bool kwarg_only, bool has_default, py::object default_value,
                       bool allow_cpu) {
             return ArgSpec{std::move(name), kind, kwarg_only, has_default, std::move(default_value), allow_cpu};
           }),
           py::arg("name"), py::arg("kind"), py::arg("kwarg_only"), py::arg("has_default"),
           py::arg("default_value"), py::arg("allow_cpu") = false)
      .def_readonly("name", &ArgSpec::name)
      .def_readonly("kind", &ArgSpec::kind)
      .def_readonly("kwarg_only", &ArgSpec::kwarg_only);

  py::class_<TensorArg>(m, "TensorArg", "A neuron tensor argument: a view of the storage in `slot`.")
      .def_readonly("slot", &TensorArg::slot)
      .def_readonly("dtype_code", &TensorArg::dtype_code)
      .def_property_readonly("sizes", [](const TensorArg& a) { return py::tuple(py::cast(a.sizes)); })
      .def_property_readonly("strides", [](const TensorArg& a) { return py::tuple(py::cast(a.strides)); })
      .def_readonly("offset", &TensorArg::offset)
      .def_readonly("offset_scalar", &TensorArg::offset_scalar)
      .def("__repr__", [](const TensorArg& a) {
        return "TensorArg(slot=" + std::to_string(a.slot) + ", dtype_code=" + std::to_string(a.dtype_code) +
            ", sizes=" + py::str(py::tuple(py::cast(a.sizes))).cast<std::string>() + ", strides=" +
            py::str(py::tuple(py::cast(a.strides))).cast<std::string>() + ", offset=" + std::to_string(a.offset) +
            ", offset_scalar=" + std::to_string(a.offset_scalar) + ")";
      });
  py::class_<TensorListArg>(m, "TensorListArg", "A tensor list argument, item by item.")
      .def_readonly("items", &TensorListArg::items)
      .def("__repr__", [](const TensorListArg& a) { return "TensorListArg(" + py::repr(a.items).cast<std::string>() + ")"; });
  py::class_<HostScalarArg>(m, "HostScalarArg", "A 0-dim CPU tensor argument: runtime scalar `index`.")
      .def_readonly("index", &HostScalarArg::index)
      .def_readonly("dtype_code", &HostScalarArg::dtype_code)
      .def_readonly("wrapped", &HostScalarArg::wrapped)
      .def("__repr__", [](const HostScalarArg& a) {
        return "HostScalarArg(index=" + std::to_string(a.index) + ", dtype_code=" + std::to_string(a.dtype_code) +
            ", wrapped=" + (a.wrapped ? "True" : "False") + ")";
      });
  py::class_<NumberArg>(m, "NumberArg", "A Python number argument: runtime scalar `index`.")
      .def_readonly("index", &NumberArg::index)
      .def_readonly("type_name", &NumberArg::type_name)
      .def("__repr__", [](const NumberArg& a) {
        return "NumberArg(index=" + std::to_string(a.index) + ", type_name='" + a.type_name + "')";
      });
  py::class_<NumberListArg>(m, "NumberListArg", "A list of Python numbers: the runtime scalars at `indices`.")
      .def_property_readonly("indices", [](const NumberListArg& a) { return py::tuple(py::cast(a.indices)); })
      .def("__repr__", [](const NumberListArg& a) {
        return "NumberListArg(indices=" + py::str(py::tuple(py::cast(a.indices))).cast<std::string>() + ")";
      });
  py::class_<GeneratorArg>(m, "GeneratorArg", "A Generator? argument.").def("__repr__", [](const GeneratorArg&) {
    return std::string("GeneratorArg()");
  });
  py::class_<StaticArg>(m, "StaticArg", "A constant of the executable.")
      .def_readonly("value", &StaticArg::value)
      .def("__repr__", [](const StaticArg& a) { return "StaticArg(" + py::repr(a.value).cast<std::string>() + ")"; });
  py::class_<SlotInfo>(m, "SlotInfo", "A storage slot of a call.")
      .def_readonly("has_buffer", &SlotInfo::has_buffer)
      .def_readonly("dtype_code", &SlotInfo::dtype_code)
      .def_readonly("nbytes", &SlotInfo::nbytes)
      .def("__repr__", [](const SlotInfo& a) {
        return std::string("SlotInfo(has_buffer=") + (a.has_buffer ? "True" : "False") +
            ", dtype_code=" + std::to_string(a.dtype_code) + ", nbytes=" + std::to_string(a.nbytes) + ")";
      });
  py::class_<CallDescription>(m, "CallDescription", "Where each argument of a call sits (CallSignature.describe).")
      .def_readonly("arguments", &CallDescription::arguments)
      .def_property_readonly("slots", [](const CallDescription& d) { return py::tuple(py::cast(d.slots)); })
      .def_readonly("buffer_count", &CallDescription::buffer_count)
      .def_readonly("scalar_count", &CallDescription::scalar_count)
      .def_readonly("device", &CallDescription::device)
      .def_readonly("values", &CallDescription::values);

  m.def("_overlapping_pair", &overlapping_pair, py::arg("args"), py::arg("positions"), py::arg("mutated"),
        "The positions (mutated, other) of two tensors among args[positions] whose memory ranges overlap, one "
        "of them mutated (mutated[position] is True); None when there are none.");

  py::class_<CallSignature>(m, "CallSignature")
      .def(py::init<std::string, std::vector<ArgSpec>>())
      .def_property_readonly("op_name", &CallSignature::op_name)
      .def("prepare", &CallSignature::prepare, py::arg("args"), py::arg("kwargs"))
      .def("describe", &CallSignature::describe, py::arg("args"), py::arg("kwargs"));
}

} // namespace c10::neuron
