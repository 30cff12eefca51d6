#include "runtime/NeuronGuard.h"

#include "runtime/NeuronDevice.h"
#include "runtime/NeuronPython.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace c10::neuron {
namespace {

struct NeuronEvent {
  int64_t id;
  bool timing;
  c10::DeviceIndex device = -1;
  bool recorded = false;
};

std::atomic<int64_t> g_next_event_id{1};
std::atomic<int64_t> g_next_stream_id[kMaxCores];

std::mutex& priority_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::unordered_map<int64_t, int>& priorities() {
  static std::unordered_map<int64_t, int> table; // key: device << 48 | stream id
  return table;
}

int64_t priority_key(c10::DeviceIndex device, c10::StreamId id) {
  return (int64_t(device) << 48) | int64_t(id);
}

thread_local c10::StreamId tls_current_stream[kMaxCores] = {};

c10::DeviceIndex resolve(c10::Device device) {
  return device.has_index() ? device.index() : current_device();
}

c10::Stream make_stream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuronDeviceType, device), id);
}

} // namespace

NeuronGuardImpl::NeuronGuardImpl(c10::DeviceType type) {
  TORCH_INTERNAL_ASSERT(type == kNeuronDeviceType);
}

c10::DeviceType NeuronGuardImpl::type() const {
  return kNeuronDeviceType;
}

c10::Device NeuronGuardImpl::exchangeDevice(c10::Device device) const {
  TORCH_INTERNAL_ASSERT(device.type() == kNeuronDeviceType);
  return c10::Device(kNeuronDeviceType, exchange_device(device.index()));
}

c10::Device NeuronGuardImpl::getDevice() const {
  return c10::Device(kNeuronDeviceType, current_device());
}

void NeuronGuardImpl::setDevice(c10::Device device) const {
  TORCH_INTERNAL_ASSERT(device.type() == kNeuronDeviceType);
  set_device(device.index());
}

void NeuronGuardImpl::uncheckedSetDevice(c10::Device device) const noexcept {
  if (device.index() >= 0 && device.index() < device_count()) {
    try {
      set_device(device.index());
    } catch (...) {
    }
  }
}

c10::DeviceIndex NeuronGuardImpl::deviceCount() const noexcept {
  return device_count();
}

c10::Stream NeuronGuardImpl::getStream(c10::Device device) const {
  auto index = resolve(device);
  check_device_index(index);
  return make_stream(index, tls_current_stream[index]);
}

c10::Stream NeuronGuardImpl::getDefaultStream(c10::Device device) const {
  auto index = resolve(device);
  check_device_index(index);
  return make_stream(index, 0);
}

c10::Stream NeuronGuardImpl::getNewStream(c10::Device device, int priority) const {
  // CUDA's check and words (getStreamFromPool): lower is higher priority, 0 is the default.
  TORCH_CHECK(priority <= 0, "Expected neuron stream priority to be less than or equal to 0, got ", priority);
  auto index = resolve(device);
  check_device_index(index);
  c10::StreamId id = ++g_next_stream_id[index];
  std::lock_guard<std::mutex> lock(priority_mutex());
  priorities()[priority_key(index, id)] = priority;
  return make_stream(index, id);
}

c10::Stream NeuronGuardImpl::getStreamFromGlobalPool(c10::Device device, bool is_high_priority) const {
  return getNewStream(device, is_high_priority ? -1 : 0);
}

c10::Stream NeuronGuardImpl::exchangeStream(c10::Stream stream) const noexcept {
  auto index = stream.device_index();
  auto previous = make_stream(index, tls_current_stream[index]);
  tls_current_stream[index] = stream.id();
  return previous;
}

c10::DeviceCapability NeuronGuardImpl::getDeviceCapability(c10::Device /*device*/) const {
  c10::DeviceCapability capability;
  capability.capability_data.capability_bits = 0;
  auto& types = capability.capability_data.supported_scalar_types;
  types.has_Bool = types.has_Byte = types.has_Char = types.has_Short = types.has_Int = types.has_Long = 1;
  types.has_UInt16 = types.has_UInt32 = types.has_UInt64 = 1;
  types.has_Half = types.has_BFloat16 = types.has_Float = types.has_Float8_e5m2 = types.has_Float8_e4m3fn = 1;
  types.has_ComplexHalf = types.has_ComplexFloat = 1;
  return capability;
}

bool NeuronGuardImpl::queryStream(const c10::Stream& stream) const {
  return call_runtime<bool>("stream_query", static_cast<int>(stream.device_index()), stream.id());
}

void NeuronGuardImpl::synchronizeStream(const c10::Stream& stream) const {
  call_runtime("stream_synchronize", static_cast<int>(stream.device_index()), stream.id());
}

void NeuronGuardImpl::synchronizeDevice(c10::DeviceIndex device_index) const {
  call_runtime("device_synchronize", static_cast<int>(device_index < 0 ? current_device() : device_index));
}

void NeuronGuardImpl::recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const c10::Stream& /*stream*/) const {
  // Buffers are reference counted by PJRT while executions use them: nothing to defer.
}

void NeuronGuardImpl::record(void** event, const c10::Stream& stream, c10::DeviceIndex device_index,
                             c10::EventFlag flag) const {
  TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ",
              static_cast<int>(device_index), " does not match recording stream's device index ",
              static_cast<int>(stream.device_index()), ".");
  auto* neuron_event = static_cast<NeuronEvent*>(*event);
  if (neuron_event == nullptr) {
    // EventFlag::BACKEND_DEFAULT is what torch.Event(enable_timing=True) asks for, as on CUDA.
    neuron_event = new NeuronEvent{g_next_event_id++, flag == c10::EventFlag::BACKEND_DEFAULT};
    *event = neuron_event;
  }
  TORCH_CHECK(neuron_event->device == -1 || neuron_event->device == stream.device_index(), "Event was recorded on neuron:",
              static_cast<int>(neuron_event->device), " and cannot be recorded on neuron:",
              static_cast<int>(stream.device_index()), ".");
  neuron_event->device = stream.device_index();
  neuron_event->recorded = true;
  call_runtime("event_record", neuron_event->id, static_cast<int>(stream.device_index()), stream.id(),
               neuron_event->timing);
}

void NeuronGuardImpl::block(void* event, const c10::Stream& stream) const {
  if (event == nullptr) {
    return; // an event never recorded is complete, as on CUDA
  }
  auto* neuron_event = static_cast<NeuronEvent*>(event);
  call_runtime("event_block", neuron_event->id, static_cast<int>(stream.device_index()), stream.id());
}

bool NeuronGuardImpl::queryEvent(void* event) const {
  if (event == nullptr) {
    return true;
  }
  return call_runtime<bool>("event_query", static_cast<NeuronEvent*>(event)->id);
}

void NeuronGuardImpl::synchronizeEvent(void* event) const {
  if (event == nullptr) {
    return;
  }
  call_runtime("event_synchronize", static_cast<NeuronEvent*>(event)->id);
}

double NeuronGuardImpl::elapsedTime(void* start_event, void* end_event, c10::DeviceIndex /*device_index*/) const {
  TORCH_CHECK(start_event && end_event,
              "Both events must be recorded before calculating elapsed time.");
  auto* start = static_cast<NeuronEvent*>(start_event);
  auto* end = static_cast<NeuronEvent*>(end_event);
  TORCH_CHECK(start->timing && end->timing,
              "Both events must be created with argument 'enable_timing=True'.");
  // CUDA refuses events of two devices too (cudaEventElapsedTime: invalid resource handle, a
  // RuntimeError): the cores' clocks are not one timeline.
  TORCH_CHECK(start->device == end->device, "elapsed_time needs both events recorded on one NeuronCore; got neuron:",
              static_cast<int>(start->device), " and neuron:", static_cast<int>(end->device));
  return call_runtime<double>("event_elapsed_ms", start->id, end->id);
}

void NeuronGuardImpl::destroyEvent(void* event, c10::DeviceIndex /*device_index*/) const noexcept {
  if (event == nullptr) {
    return;
  }
  auto* neuron_event = static_cast<NeuronEvent*>(event);
  if (neuron_event->recorded && python_runtime_ready()) {
    try {
      call_runtime("event_destroy", neuron_event->id);
    } catch (...) {
      // Destruction cannot report; the runtime only drops its record of the event.
    }
  }
  delete neuron_event;
}

int stream_priority(const c10::Stream& stream) {
  if (stream.id() == 0) {
    return 0;
  }
  std::lock_guard<std::mutex> lock(priority_mutex());
  auto it = priorities().find(priority_key(stream.device_index(), stream.id()));
  return it == priorities().end() ? 0 : it->second;
}

c10::StreamId current_stream_id(c10::DeviceIndex device) noexcept {
  return device >= 0 && device < kMaxCores ? tls_current_stream[device] : 0;
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

} // namespace c10::neuron
