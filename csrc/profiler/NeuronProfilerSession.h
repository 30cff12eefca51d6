#pragma once

// One torch.profiler session's device and runtime activity, as Kineto sees it.
//
// Kineto creates a session when a trace that asks for PrivateUse1 activity is prepared
// (NeuronActivityProfiler::configure), starts and stops it with the trace, forwards the correlation
// id of every profiled op as the op begins and ends, and asks the session for its activities when
// the trace is processed. The session starts and stops the LaunchRecorder (through the Python
// runtime, which parses the session's options: torch_neuronx.runtime.launch_records) and turns
// its records into activities:
//   - each device record becomes a device activity on the track of its core (pid) and stream
//     (tid): CONCURRENT_KERNEL for executables and collectives, GPU_MEMCPY for copies, the types
//     PyTorch counts as PrivateUse1 device time (deviceTypeFromActivity, kineto_shim.cpp);
//   - its dispatch becomes a PRIVATEUSE1_RUNTIME activity on the launching host thread;
//   - each runtime record becomes a PRIVATEUSE1_RUNTIME activity on its host thread.
// Both halves of a launch are linked to the op that launched it (its correlation id: key_averages()
// adds the device time to that op) and to each other by an "ac2g" flow, as CUDA kernels are.

#include <IActivityProfiler.h>

#include <string>

namespace c10::neuron::profiler {

class NeuronProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  // `custom_config`: the trace's ExperimentalConfig.custom_profiler_config (NeuronConfig writes it).
  explicit NeuronProfilerSession(std::string custom_config);

  void start() override;
  void stop() override;
  std::vector<std::string> errors() override;
  void processTrace(libkineto::ActivityLogger& logger) override;
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_activity,
                    int64_t start_time, int64_t end_time) override;
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override;
  std::vector<libkineto::ResourceInfo> getResourceInfos() override;
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override;
  void pushCorrelationId(uint64_t id) override;
  void popCorrelationId() override;
  std::unordered_map<std::string, std::string> getMetadata() override;

 private:
  std::string custom_config_;
  bool device_activity_ = true; // ProfileMode.DEVICE
  bool runtime_activity_ = true; // ProfileMode.RUNTIME
  bool correlate_ = true; // link activities to the ops that launched them
  bool started_ = false;
  int64_t out_of_window_ = 0;
  std::vector<std::string> errors_;
};

} // namespace c10::neuron::profiler
