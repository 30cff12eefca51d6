#pragma once

// c10 device guard for neuron: per-thread current core and current stream, streams and events.
//
// Streams and events are bookkeeping here (ids, priorities, timing flags); their ordering and
// synchronisation semantics live in the Python runtime (torch_neuronx.runtime.streams), which
// every method below reaches through NeuronPython.h, so that torch.Stream, torch.Event,
// torch.accelerator and torch_neuronx.Stream/Event share one implementation (decision 10).

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace c10::neuron {

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  NeuronGuardImpl() = default;
  explicit NeuronGuardImpl(c10::DeviceType type);

  c10::DeviceType type() const override;
  c10::Device exchangeDevice(c10::Device device) const override;
  c10::Device getDevice() const override;
  void setDevice(c10::Device device) const override;
  void uncheckedSetDevice(c10::Device device) const noexcept override;
  c10::DeviceIndex deviceCount() const noexcept override;
  // The dtypes neuron tensors hold (torch.accelerator.get_device_capability): no float64 or
  // complex128 (the FP64 policy), no quantized or bit types.
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override;

  c10::Stream getStream(c10::Device device) const override;
  c10::Stream getDefaultStream(c10::Device device) const override;
  c10::Stream getNewStream(c10::Device device, int priority = 0) const override;
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool is_high_priority = false) const override;
  c10::Stream exchangeStream(c10::Stream stream) const noexcept override;
  bool queryStream(const c10::Stream& stream) const override;
  void synchronizeStream(const c10::Stream& stream) const override;
  void synchronizeDevice(c10::DeviceIndex device_index) const override;
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override;

  void record(void** event, const c10::Stream& stream, c10::DeviceIndex device_index,
              c10::EventFlag flag) const override;
  void block(void* event, const c10::Stream& stream) const override;
  bool queryEvent(void* event) const override;
  void synchronizeEvent(void* event) const override;
  double elapsedTime(void* start_event, void* end_event, c10::DeviceIndex device_index) const override;
  void destroyEvent(void* event, c10::DeviceIndex device_index) const noexcept override;
};

// Priority a stream was created with (0 for the default stream).
int stream_priority(const c10::Stream& stream);

// Id of this thread's current stream on `device` (0, the default stream, unless a stream guard or
// torch.neuron.set_stream changed it); the profiler records it with each launch.
c10::StreamId current_stream_id(c10::DeviceIndex device) noexcept;

} // namespace c10::neuron
