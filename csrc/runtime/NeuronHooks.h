#pragma once

// PrivateUse1 hooks: what ATen asks of an accelerator (availability, cores, generators, pinned
// memory, pointer -> device, storage resize).

#include <ATen/detail/PrivateUse1HooksInterface.h>

namespace c10::neuron {

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override;
  bool isAvailable() const override;
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override;
  c10::DeviceIndex deviceCount() const override;
  void setCurrentDevice(c10::DeviceIndex device) const override;
  c10::DeviceIndex getCurrentDevice() const override;
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override;
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override;
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override;
  at::Generator getNewGenerator(c10::DeviceIndex device_index = -1) const override;
  at::Device getDeviceFromPtr(void* data) const override;
  bool isPinnedPtr(const void* data) const override;
  at::Allocator* getPinnedMemoryAllocator() const override;
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override;
};

// Grows or shrinks a neuron storage to `nbytes`, keeping its contents (zero-filled when grown).
void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes);

} // namespace c10::neuron
