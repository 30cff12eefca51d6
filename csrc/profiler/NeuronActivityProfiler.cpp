// The neuron device's Kineto activity profiler, registered through PyTorch's own PrivateUse1
// profiler registry (torch/csrc/profiler/standalone/privateuse1_profiler.h, torch 2.13): with
// ProfilerActivity.PrivateUse1, torch.profiler forwards it to Kineto, which configures one session
// per trace (NeuronProfilerSession.h). Not a profiler of our own: schedules, record_function ranges,
// on_trace_ready and export_chrome_trace are PyTorch's.

#ifndef USE_KINETO
// The registry is compiled only with Kineto, which PyTorch's own wheels are built with (the
// extension's build does not define it: torch.autograd.kineto_available() is what says so).
#define USE_KINETO
#endif

#include "profiler/NeuronProfilerSession.h"

#include <Config.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <set>
#include <string>

namespace c10::neuron::profiler {
namespace {

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override {
    static const std::string name = "neuron";
    return name;
  }

  const std::set<libkineto::ActivityType>& availableActivities() const override {
    static const std::set<libkineto::ActivityType> activities{
        libkineto::ActivityType::CONCURRENT_KERNEL, libkineto::ActivityType::GPU_MEMCPY,
        libkineto::ActivityType::PRIVATEUSE1_RUNTIME};
    return activities;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override {
    // Only a trace that asked for PrivateUse1 activity (whose Kineto types include the device
    // ones) gets a session: ProfilerActivity.CPU alone records host activity only, as on CUDA.
    if (!activity_types.count(libkineto::ActivityType::CONCURRENT_KERNEL) &&
        !activity_types.count(libkineto::ActivityType::GPU_MEMCPY)) {
      return nullptr;
    }
    return std::make_unique<NeuronProfilerSession>(config.getCustomConfig());
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t /*ts_ms*/, int64_t /*duration_ms*/,
                                                                 const std::set<libkineto::ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override {
    return configure(activity_types, config);
  }
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

} // namespace
} // namespace c10::neuron::profiler
