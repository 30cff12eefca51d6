#include "profiler/NeuronLaunchRecorder.h"

#include "runtime/NeuronDevice.h"
#include "runtime/NeuronGuard.h"

#include <ThreadUtil.h>
#include <c10/util/ApproximateClock.h>

#include <algorithm>
#include <limits>

namespace c10::neuron::profiler {
namespace {

constexpr int kTokenShift = 40; // token = generation << 40 | record index

thread_local std::vector<uint64_t> tls_correlation;

uint64_t current_correlation() noexcept {
  return tls_correlation.empty() ? 0 : tls_correlation.back();
}

} // namespace

LaunchRecorder& LaunchRecorder::instance() {
  static LaunchRecorder recorder;
  return recorder;
}

int64_t LaunchRecorder::now_ns() noexcept {
  return static_cast<int64_t>(c10::getTime());
}

void LaunchRecorder::push_correlation(uint64_t id) {
  tls_correlation.push_back(id);
}

void LaunchRecorder::pop_correlation() {
  if (!tls_correlation.empty()) {
    tls_correlation.pop_back();
  }
}

void LaunchRecorder::begin(const RecordingOptions& options) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++generation_;
  options_ = options;
  names_.clear();
  name_ids_.clear();
  device_.clear();
  runtime_.clear();
  order_.clear();
  kept_.clear();
  dropped_over_limit_ = 0;
  dropped_unfinished_ = 0;
  recording_ = true;
}

void LaunchRecorder::end() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!recording_) {
    return;
  }
  recording_ = false;
  compute_intervals();
}

bool LaunchRecorder::recording() const noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return recording_;
}

int32_t LaunchRecorder::intern(const std::string& name) {
  auto [it, inserted] = name_ids_.try_emplace(name, static_cast<int32_t>(names_.size()));
  if (inserted) {
    names_.push_back(name);
  }
  return it->second;
}

int64_t LaunchRecorder::record_device(DeviceWork work, const std::string& name, int device, int64_t executable,
                                      int64_t dispatch_begin_ns, int64_t bytes, bool ready) {
  int64_t dispatch_end = now_ns();
  uint64_t correlation = current_correlation();
  int32_t thread = libkineto::systemThreadId();
  int64_t stream = current_stream_id(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(mutex_);
  if (!recording_) {
    return -1;
  }
  if (!options_.cores.empty() && std::find(options_.cores.begin(), options_.cores.end(), device) == options_.cores.end()) {
    return -1;
  }
  int64_t& kept = kept_[device];
  if (options_.max_events_per_core > 0 && kept >= options_.max_events_per_core) {
    ++dropped_over_limit_;
    return -1;
  }
  ++kept;
  int64_t index = static_cast<int64_t>(device_.size());
  DeviceRecord record{intern(name),
                      work,
                      static_cast<int16_t>(device),
                      stream,
                      executable,
                      correlation,
                      thread,
                      std::min(dispatch_begin_ns, dispatch_end),
                      dispatch_end,
                      bytes,
                      index + 1};
  record.observed_ns = ready ? dispatch_end : 0;
  device_.push_back(record);
  order_[device].push_back({index, 0});
  return (generation_ << kTokenShift) | index;
}

void LaunchRecorder::observe_ready(int64_t token) {
  int64_t now = now_ns();
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t index = token & ((int64_t(1) << kTokenShift) - 1);
  if (!recording_ || (token >> kTokenShift) != generation_ || index >= static_cast<int64_t>(device_.size())) {
    return;
  }
  DeviceRecord& record = device_[index];
  if (record.observed_ns == 0) {
    record.observed_ns = now;
  }
}

void LaunchRecorder::bound(int device) {
  int64_t now = now_ns();
  std::lock_guard<std::mutex> lock(mutex_);
  if (recording_) {
    order_[device].push_back({-1, now});
  }
}

void LaunchRecorder::record_runtime(const std::string& name, int device, int64_t start_ns, int64_t end_ns,
                                    int64_t bytes, const std::string& detail) {
  uint64_t correlation = current_correlation();
  int32_t thread = libkineto::systemThreadId();
  int64_t stream = device >= 0 ? current_stream_id(static_cast<c10::DeviceIndex>(device)) : 0;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!recording_) {
    return;
  }
  runtime_.push_back(RuntimeRecord{intern(name), static_cast<int16_t>(device), stream, correlation, thread, start_ns,
                                   std::max(start_ns, end_ns), bytes, detail});
}

void LaunchRecorder::compute_intervals() {
  constexpr int64_t kUnseen = std::numeric_limits<int64_t>::max();
  for (auto& [device, entries] : order_) {
    // Backwards: a launch finished no later than any observation made at or after its place in
    // the core's order (the core runs its launches in order).
    int64_t earliest = kUnseen;
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      if (it->record < 0) {
        earliest = std::min(earliest, it->time);
        continue;
      }
      DeviceRecord& record = device_[it->record];
      if (record.observed_ns != 0) {
        earliest = std::min(earliest, record.observed_ns);
      }
      record.end_ns = earliest;
    }
    // Forwards: it started no earlier than its dispatch and the previous launch's end.
    int64_t previous_end = std::numeric_limits<int64_t>::min();
    for (const CoreEntry& entry : entries) {
      if (entry.record < 0) {
        continue;
      }
      DeviceRecord& record = device_[entry.record];
      if (record.end_ns == kUnseen) {
        record.end_ns = 0;
        ++dropped_unfinished_;
        continue;
      }
      record.start_ns = std::max(record.dispatch_begin_ns, previous_end);
      // A launch whose completion was seen only together with its predecessor's would get no time
      // at all; it ran, so it takes at least the clock's resolution (1 ns).
      record.end_ns = std::max(record.end_ns, record.start_ns + 1);
      previous_end = record.end_ns;
    }
  }
}

} // namespace c10::neuron::profiler
