// Kineto's activities format their metadata with fmt, whose compiled part libtorch does not
// export: this file compiles fmt from its headers.
#define FMT_HEADER_ONLY

#include "profiler/NeuronProfilerSession.h"

#include "profiler/NeuronLaunchRecorder.h"
#include "runtime/NeuronPython.h"

#include <GenericTraceActivity.h>
#include <ThreadUtil.h>
#include <libkineto.h> // CpuTraceBuffer

#include <fmt/format.h>

#include <limits>
#include <set>
#include <tuple>

namespace c10::neuron::profiler {
namespace {

// Activities point at their trace span for as long as the trace lives, which outlasts the session.
const libkineto::TraceSpan& neuron_span() {
  static const libkineto::TraceSpan span(0, 0, "neuron");
  return span;
}

libkineto::ActivityType device_activity_type(DeviceWork work) {
  return work == DeviceWork::kCopy ? libkineto::ActivityType::GPU_MEMCPY : libkineto::ActivityType::CONCURRENT_KERNEL;
}

const char* work_name(DeviceWork work) {
  switch (work) {
    case DeviceWork::kExecutable:
      return "executable";
    case DeviceWork::kCopy:
      return "copy";
    case DeviceWork::kCollective:
      return "collective";
  }
  return "unknown";
}

// The host-side half of a launch, named as CUDA's runtime calls are (cudaLaunchKernel, cudaMemcpyAsync).
const char* dispatch_name(DeviceWork work) {
  switch (work) {
    case DeviceWork::kExecutable:
      return "neuronLaunchExecutable";
    case DeviceWork::kCopy:
      return "neuronMemcpyAsync";
    case DeviceWork::kCollective:
      return "neuronCollective";
  }
  return "neuronLaunch";
}

// Kineto sorts device tracks after host processes (whose pids stay below this; output_base.h's
// kExceedMaxPid, a header this file cannot include on its own).
constexpr int64_t kDeviceSortBase = 5000000;

bool in_window(int64_t start, int64_t end, int64_t window_start, int64_t window_end) {
  return start >= window_start && end <= window_end;
}

} // namespace

NeuronProfilerSession::NeuronProfilerSession(std::string custom_config) : custom_config_(std::move(custom_config)) {}

void NeuronProfilerSession::start() {
  if (!python_runtime_ready()) {
    errors_.emplace_back("neuron: the Python runtime is not available; no device activity was recorded");
    return;
  }
  // (cores, max events per core, device activity, runtime activity, correlate), parsed from the
  // custom config by the Python runtime, which also switches its launch hooks on.
  auto [cores, max_events, device, runtime, correlate] =
      call_runtime<std::tuple<std::vector<int>, int64_t, bool, bool, bool>>("profiler_start", custom_config_);
  device_activity_ = device;
  runtime_activity_ = runtime;
  correlate_ = correlate;
  LaunchRecorder::instance().begin(RecordingOptions{cores, max_events});
  started_ = true;
  status_ = libkineto::TraceStatus::RECORDING;
}

void NeuronProfilerSession::stop() {
  if (!started_) {
    return;
  }
  if (python_runtime_ready()) {
    // Switches the launch hooks off and records what the watchers have seen finish.
    call_runtime("profiler_stop");
  }
  LaunchRecorder& recorder = LaunchRecorder::instance();
  recorder.end();
  if (python_runtime_ready()) {
    // Warns, as Python warnings, of launches left out of the trace.
    call_runtime("profiler_stopped", recorder.dropped_over_limit(), recorder.dropped_unfinished());
  }
  started_ = false;
  status_ = libkineto::TraceStatus::PROCESSING;
}

std::vector<std::string> NeuronProfilerSession::errors() {
  return errors_;
}

void NeuronProfilerSession::processTrace(libkineto::ActivityLogger& logger) {
  processTrace(
      logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; },
      std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
}

void NeuronProfilerSession::processTrace(libkineto::ActivityLogger& logger,
                                         libkineto::getLinkedActivityCallback linked_activity, int64_t start_time,
                                         int64_t end_time) {
  const LaunchRecorder& recorder = LaunchRecorder::instance();
  const auto& names = recorder.names();
  const int32_t pid = libkineto::processId();
  auto linked = [&](uint64_t correlation) -> const libkineto::ITraceActivity* {
    return correlate_ && correlation != 0 ? linked_activity(static_cast<int32_t>(correlation)) : nullptr;
  };
  out_of_window_ = 0;
  for (const DeviceRecord& record : recorder.device_records()) {
    if (record.end_ns == 0) {
      continue; // never seen to finish (counted by the recorder)
    }
    if (!in_window(record.start_ns, record.end_ns, start_time, end_time)) {
      ++out_of_window_;
      continue;
    }
    const std::string& name = names[record.name];
    const libkineto::ITraceActivity* op = linked(record.correlation);
    bool flow = device_activity_ && runtime_activity_ && op != nullptr;
    if (device_activity_) {
      libkineto::GenericTraceActivity activity(neuron_span(), device_activity_type(record.work), name);
      activity.startTime = record.start_ns;
      activity.endTime = record.end_ns;
      activity.id = static_cast<int32_t>(record.sequence);
      activity.device = record.device;
      activity.resource = static_cast<int32_t>(record.stream);
      activity.linked = op;
      activity.addMetadata("device", record.device);
      activity.addMetadata("stream", record.stream);
      activity.addMetadata("correlation", record.sequence);
      activity.addMetadataQuoted("kind", work_name(record.work));
      if (record.executable >= 0) {
        activity.addMetadata("executable id", record.executable);
      }
      if (record.bytes > 0) {
        activity.addMetadata("bytes", record.bytes);
      }
      if (flow) {
        activity.flow.id = static_cast<uint32_t>(record.sequence);
        activity.flow.type = libkineto::kLinkAsyncCpuGpu;
        activity.flow.start = 0;
      }
      activity.log(logger);
    }
    if (runtime_activity_ && in_window(record.dispatch_begin_ns, record.dispatch_end_ns, start_time, end_time)) {
      libkineto::GenericTraceActivity dispatch(neuron_span(), libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                                               dispatch_name(record.work));
      dispatch.startTime = record.dispatch_begin_ns;
      dispatch.endTime = record.dispatch_end_ns;
      // No id of its own: a host activity's id is read as a PyTorch correlation id.
      dispatch.device = pid;
      dispatch.resource = record.thread;
      dispatch.threadId = record.thread;
      dispatch.linked = op;
      dispatch.addMetadataQuoted("launched", name);
      dispatch.addMetadata("device", record.device);
      dispatch.addMetadata("stream", record.stream);
      dispatch.addMetadata("correlation", record.sequence);
      if (record.bytes > 0) {
        dispatch.addMetadata("bytes", record.bytes);
      }
      if (flow) {
        dispatch.flow.id = static_cast<uint32_t>(record.sequence);
        dispatch.flow.type = libkineto::kLinkAsyncCpuGpu;
        dispatch.flow.start = 1;
      }
      dispatch.log(logger);
    }
  }
  if (!runtime_activity_) {
    return;
  }
  for (const RuntimeRecord& record : recorder.runtime_records()) {
    if (!in_window(record.start_ns, record.end_ns, start_time, end_time)) {
      ++out_of_window_;
      continue;
    }
    libkineto::GenericTraceActivity activity(neuron_span(), libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                                             names[record.name]);
    activity.startTime = record.start_ns;
    activity.endTime = record.end_ns;
    activity.device = pid;
    activity.resource = record.thread;
    activity.threadId = record.thread;
    activity.linked = linked(record.correlation);
    if (record.device >= 0) {
      activity.addMetadata("device", record.device);
      activity.addMetadata("stream", record.stream);
    }
    if (record.bytes > 0) {
      activity.addMetadata("bytes", record.bytes);
    }
    if (!record.detail.empty()) {
      activity.addMetadataQuoted("detail", record.detail);
    }
    activity.log(logger);
  }
}

std::unique_ptr<libkineto::DeviceInfo> NeuronProfilerSession::getDeviceInfo() {
  // Kineto takes one device description per session: the first core that ran recorded work. The
  // other cores' tracks are named by their streams (getResourceInfos).
  const auto& records = LaunchRecorder::instance().device_records();
  if (!device_activity_ || records.empty()) {
    return nullptr;
  }
  int core = records.front().device;
  for (const DeviceRecord& record : records) {
    core = std::min<int>(core, record.device);
  }
  return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
      core, kDeviceSortBase + core, fmt::format("neuron:{}", core), fmt::format("NeuronCore {}", core)});
}

std::vector<libkineto::ResourceInfo> NeuronProfilerSession::getResourceInfos() {
  std::set<std::pair<int, int64_t>> tracks;
  if (device_activity_) {
    for (const DeviceRecord& record : LaunchRecorder::instance().device_records()) {
      tracks.emplace(record.device, record.stream);
    }
  }
  std::vector<libkineto::ResourceInfo> infos;
  for (const auto& [core, stream] : tracks) {
    infos.push_back(libkineto::ResourceInfo{stream, stream, core, fmt::format("neuron:{} stream {}", core, stream)});
  }
  return infos;
}

std::unique_ptr<libkineto::CpuTraceBuffer> NeuronProfilerSession::getTraceBuffer() {
  return nullptr; // every activity is logged by processTrace
}

void NeuronProfilerSession::pushCorrelationId(uint64_t id) {
  LaunchRecorder::push_correlation(id);
}

void NeuronProfilerSession::popCorrelationId() {
  LaunchRecorder::pop_correlation();
}

std::unordered_map<std::string, std::string> NeuronProfilerSession::getMetadata() {
  const LaunchRecorder& recorder = LaunchRecorder::instance();
  return {
      {"neuron_dropped_over_limit", std::to_string(recorder.dropped_over_limit())},
      {"neuron_dropped_unfinished", std::to_string(recorder.dropped_unfinished())},
  };
}

} // namespace c10::neuron::profiler
