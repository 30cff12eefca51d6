#include "runtime/NeuronHooks.h"

#include "runtime/NeuronAllocator.h"
#include "runtime/NeuronDevice.h"
#include "runtime/NeuronGenerator.h"
#include "runtime/NeuronHostAllocator.h"
#include "runtime/NeuronPython.h"

namespace py = pybind11;

namespace c10::neuron {

bool NeuronHooks::isBuilt() const {
  return true;
}

bool NeuronHooks::isAvailable() const {
  return device_count() > 0;
}

bool NeuronHooks::hasPrimaryContext(c10::DeviceIndex device_index) const {
  return device_index >= 0 && device_index < device_count();
}

c10::DeviceIndex NeuronHooks::deviceCount() const {
  return device_count();
}

void NeuronHooks::setCurrentDevice(c10::DeviceIndex device) const {
  set_device(device);
}

c10::DeviceIndex NeuronHooks::getCurrentDevice() const {
  return current_device();
}

c10::DeviceIndex NeuronHooks::exchangeDevice(c10::DeviceIndex device) const {
  return exchange_device(device);
}

c10::DeviceIndex NeuronHooks::maybeExchangeDevice(c10::DeviceIndex device) const {
  if (device < 0 || device >= device_count()) {
    return current_device();
  }
  return exchange_device(device);
}

const at::Generator& NeuronHooks::getDefaultGenerator(c10::DeviceIndex device_index) const {
  return default_generator(device_index);
}

at::Generator NeuronHooks::getNewGenerator(c10::DeviceIndex device_index) const {
  return new_generator(device_index);
}

at::Device NeuronHooks::getDeviceFromPtr(void* data) const {
  int device = device_of_address(reinterpret_cast<uint64_t>(data));
  TORCH_CHECK(device >= 0, "neuron: ", data, " is not a neuron device address");
  return at::Device(kNeuronDeviceType, static_cast<c10::DeviceIndex>(device));
}

bool NeuronHooks::isPinnedPtr(const void* data) const {
  return is_pinned_host_pointer(data);
}

at::Allocator* NeuronHooks::getPinnedMemoryAllocator() const {
  return host_allocator();
}

void NeuronHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  resize_storage_bytes(storage.unsafeGetStorageImpl(), newsize);
}

void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes) {
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  c10::DeviceIndex device = storage->device().index();
  c10::DataPtr fresh = allocator().allocate_on(device, nbytes);
  Allocation* old_allocation = allocation_of(storage->data_ptr());
  Allocation* new_allocation = allocation_of(fresh);
  if (old_allocation && new_allocation && old_allocation->buffer.array) {
    py::gil_scoped_acquire gil;
    auto resized = call_runtime<py::object>("resize_buffer", py::handle(old_allocation->buffer.array),
                                            static_cast<int>(old_allocation->buffer.dtype), nbytes);
    assign_buffer(new_allocation->buffer, resized, old_allocation->buffer.dtype);
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(nbytes);
}

namespace {
// Registered at load time, before any neuron tensor can exist.
const bool g_hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();
} // namespace

} // namespace c10::neuron
