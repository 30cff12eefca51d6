#include "aten/native/Metadata.h"

#include "runtime/NeuronAllocator.h"
#include "runtime/NeuronDevice.h"
#include "runtime/NeuronHooks.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>

namespace at::neuron {
namespace {

using c10::neuron::kNeuronDeviceType;

constexpr c10::DispatchKeySet kNeuronKeys(c10::DispatchKey::PrivateUse1);

c10::DeviceIndex target_device(std::optional<c10::Device> device) {
  c10::DeviceIndex index =
      device.has_value() && device->has_index() ? device->index() : c10::neuron::current_device();
  c10::neuron::check_device_index(index);
  return index;
}

void check_strided(std::optional<c10::Layout> layout, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::layout_or_default(layout) == c10::Layout::Strided, op,
                              " on neuron: only the torch.strided layout is supported, got ",
                              c10::layout_or_default(layout));
}

// torch.use_deterministic_algorithms(True) with fill_uninitialized_memory (the default) fills new
// memory with NaN, or the dtype's largest value: a new empty tensor, and the elements resize_ adds
// to a storage, as CUDA's and the CPU's kernels do.
bool fills_uninitialized_memory() {
  return at::globalContext().deterministicAlgorithms() &&
         at::globalContext().deterministicFillUninitializedMemory();
}

at::Tensor fill_if_deterministic(at::Tensor tensor) {
  if (C10_UNLIKELY(fills_uninitialized_memory())) {
    at::native::fill_empty_deterministic_(tensor);
  }
  return tensor;
}

} // namespace

void check_dtype_supported(c10::ScalarType dtype, const char* op) {
  if (dtype == c10::ScalarType::Double || dtype == c10::ScalarType::ComplexDouble) {
    bool real = dtype == c10::ScalarType::Double;
    const char* name = real ? "float64 (double)" : "complex128";
    const char* fix = real ? "torch.float32" : "torch.complex64";
    TORCH_CHECK_TYPE(false, op, " on neuron: ", name,
                     " tensors are not supported because Trainium has no FP64 arithmetic. Use ", fix,
                     " instead: pass dtype=", fix, ", or convert data before moving it with tensor.to('neuron', ",
                     fix, ").");
  }
  switch (dtype) {
    case c10::ScalarType::Float:
    case c10::ScalarType::BFloat16:
    case c10::ScalarType::Half:
    case c10::ScalarType::Char:
    case c10::ScalarType::Short:
    case c10::ScalarType::Int:
    case c10::ScalarType::Long:
    case c10::ScalarType::Byte:
    case c10::ScalarType::UInt16:
    case c10::ScalarType::UInt32:
    case c10::ScalarType::UInt64:
    case c10::ScalarType::Bool:
    case c10::ScalarType::ComplexHalf:
    case c10::ScalarType::ComplexFloat:
    case c10::ScalarType::Float8_e4m3fn:
    case c10::ScalarType::Float8_e5m2:
      return;
    default:
      TORCH_CHECK_TYPE(false, op, " on neuron: dtype ", c10::toString(dtype),
                       " is not supported. Supported dtypes: float32, bfloat16, float16, float8_e4m3fn, "
                       "float8_e5m2, int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool, complex32, complex64.");
  }
}

// Pinning is for host memory: CUDA's empty_cuda refuses it for device tensors (torch.zeros(...,
// device="cuda", pin_memory=True)), in these words.
void check_not_pinned(std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_strided(layout, "aten::empty.memory_format");
  check_not_pinned(pin_memory);
  auto scalar_type = c10::dtype_or_default(dtype);
  check_dtype_supported(scalar_type, "aten::empty.memory_format");
  c10::DeviceGuard guard(c10::Device(kNeuronDeviceType, target_device(device)));
  return fill_if_deterministic(
      at::detail::empty_generic(size, &c10::neuron::allocator(), kNeuronKeys, scalar_type, memory_format));
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  check_strided(layout, "aten::empty_strided");
  check_not_pinned(pin_memory);
  auto scalar_type = c10::dtype_or_default(dtype);
  check_dtype_supported(scalar_type, "aten::empty_strided");
  c10::DeviceGuard guard(c10::Device(kNeuronDeviceType, target_device(device)));
  return fill_if_deterministic(
      at::detail::empty_strided_generic(size, stride, &c10::neuron::allocator(), kNeuronKeys, scalar_type));
}

at::Tensor empty_dense(c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype,
                       c10::DeviceIndex device) {
  c10::DeviceGuard guard(c10::Device(kNeuronDeviceType, device));
  return at::detail::empty_strided_generic(size, stride, &c10::neuron::allocator(), kNeuronKeys, dtype);
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

at::Tensor view_as_real(const at::Tensor& self) {
  return at::native::view_as_real(self);
}

at::Tensor view_as_complex(const at::Tensor& self) {
  // A float16 tensor's complex view is complex32, held as its float16 pairs; a float64 one is not held.
  at::Tensor result = at::native::view_as_complex(self);
  check_dtype_supported(result.scalar_type(), "aten::view_as_complex");
  return result;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t storage_offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  TORCH_CHECK(source.device_type() == kNeuronDeviceType, "aten::set_ on neuron: expected a neuron storage, got a ",
              source.device_type(), " storage");
  check_dtype_supported(self.scalar_type(), "aten::set_");
  auto* impl = self.unsafeGetTensorImpl();
  if (!impl->storage().is_alias_of(source)) {
    impl->set_storage_keep_dtype(std::move(source));
  }
  c10::DimVector contiguous;
  if (stride.empty()) {
    contiguous = c10::contiguous_strides(size);
    stride = contiguous;
  }
  at::native::checkInBoundsForStorage(size, stride, storage_offset, self.dtype(), impl->storage());
  impl->set_sizes_and_strides(size, stride, storage_offset);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) {
    return self;
  }
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, &c10::neuron::allocator(), /*resizable=*/true);
  return set_storage(self, std::move(empty), 0, {0}, {});
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  // As the CPU's and CUDA's resize_: a tensor that has the size already keeps its strides (an out=
  // argument that is a strided view stays one); only a new size makes it contiguous.
  if (impl->sizes() != size) {
    impl->set_sizes_contiguous(size);
  }
  int64_t needed = impl->numel() == 0 ? 0 : (impl->storage_offset() + impl->numel()) * impl->itemsize();
  auto* storage = impl->storage().unsafeGetStorageImpl();
  auto old_nbytes = static_cast<int64_t>(storage->nbytes());
  if (needed > old_nbytes) {
    c10::neuron::resize_storage_bytes(storage, static_cast<size_t>(needed));
  }
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  if (C10_UNLIKELY(fills_uninitialized_memory())) {
    at::native::fill_resize_deterministic_(self, old_nbytes);
  }
  return self;
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  // `param.data = t` across cpu and neuron keeps the Parameter object, as it does for CUDA: both
  // are dense strided tensors backed by a plain TensorImpl.
  auto dense = [](const at::Tensor& t) {
    return t.layout() == c10::Layout::Strided && !t.is_quantized() && !t.is_nested() &&
        (t.device().type() == kNeuronDeviceType || t.device().type() == c10::DeviceType::CPU);
  };
  return dense(self) && dense(from);
}

void record_stream(at::Tensor& /*self*/, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kNeuronDeviceType, "record_stream on a neuron tensor expects a neuron stream, got ",
              stream);
  // PJRT keeps a buffer alive while any execution uses it, so there is no reuse to defer.
}

} // namespace at::neuron
