// The neuron device's profiler stubs (torch/csrc/profiler/stubs/base.h): what the autograd
// profiler's legacy mode, torch.autograd.profiler.profile(use_device="neuron") without Kineto
// (ProfilerState::KINETO_PRIVATEUSE1_FALLBACK), records around every op, as CUDA's stubs do for
// use_device="cuda": a timing event on the current stream at the op's start and end, whose elapsed
// time is the op's device time. Without them that mode printed c10 errors from every op's
// RecordFunction callback and reported no device time (helper-83).
//
// The events are the device guard's (torch.Event's), so their timing is the runtime's
// (torch_neuronx.runtime.events): on this emulated device, bounds of the core's work between them.

#include "runtime/NeuronDevice.h"
#include "runtime/NeuronGuard.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <memory>

namespace c10::neuron::profiler {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

struct NeuronProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    const NeuronGuardImpl guard;
    const c10::DeviceIndex index = current_device();
    if (device != nullptr) {
      *device = index;
    }
    void* raw = nullptr;
    // BACKEND_DEFAULT is a timing event, as torch.Event(enable_timing=True) makes.
    guard.record(&raw, guard.getStream(c10::Device(kNeuronDeviceType, index)), index,
                 c10::EventFlag::BACKEND_DEFAULT);
    *event = std::shared_ptr<void>(raw, [index](void* recorded) { NeuronGuardImpl().destroyEvent(recorded, index); });
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
  }

  // Microseconds, as CUDA's stub returns (the profiler's privateuse1_elapsed_us).
  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    const NeuronGuardImpl guard;
    guard.synchronizeEvent(start->get());
    guard.synchronizeEvent(end->get());
    return static_cast<float>(guard.elapsedTime(start->get(), end->get(), -1) * 1000.0);
  }

  // Markers and ranges go to a vendor tool (NVTX on CUDA); neuron has none to annotate.
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}

  void onEachDevice(std::function<void(int)> op) const override {
    c10::OptionalDeviceGuard device_guard;
    for (c10::DeviceIndex index = 0; index < device_count(); ++index) {
      device_guard.reset_device(c10::Device(kNeuronDeviceType, index));
      op(index);
    }
  }

  void synchronize() const override {
    NeuronGuardImpl().synchronizeDevice(current_device());
  }

  bool enabled() const override {
    return true;
  }
};

struct RegisterNeuronProfilerStubs {
  RegisterNeuronProfilerStubs() {
    static NeuronProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};
const RegisterNeuronProfilerStubs register_stubs;

} // namespace
} // namespace c10::neuron::profiler
