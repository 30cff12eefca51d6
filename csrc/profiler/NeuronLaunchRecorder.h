#pragma once

// What the profiler records of the device's work while a profiling session runs: one device record
// per launch (an executable, a copy, a collective) and one runtime record per host-side runtime
// event (a compilation, a CPU fallback, a synchronisation, an event record or wait).
//
// The Python runtime writes the records (torch_neuronx.runtime.launch_records, through the bindings
// in NeuronProfilerBindings.cpp); the Kineto session (NeuronProfilerSession.h) turns them into
// trace activities when the session stops, and the Python profiling layer reads them for its
// Parquet tables.
//
// Device time. PJRT runs executables asynchronously, so the host sees a launch twice: when it
// dispatches it and when its output becomes ready. A core runs its launches in order (decision 10:
// one queue per core), which bounds when each one ran:
//   - it finished no later than the first moment the runtime saw its output, or the output of any
//     later launch on the core, ready, or a synchronisation of the core returned (end = the least
//     of those observations);
//   - it started no earlier than its dispatch and the end of the previous launch on the core
//     (start = the later of the two, and of the end of any compilation the dispatch did).
// A launch with no such observation when the session stops (work still in flight, never waited
// for) is dropped and counted.

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace c10::neuron::profiler {

// What a device record is; it decides the record's Kineto activity type (NeuronProfilerSession.cpp).
enum class DeviceWork : uint8_t {
  kExecutable = 0, // an eager op, a compiled graph, an NKI kernel, a copy's view program
  kCopy = 1, // a transfer between the host and a core, or between cores
  kCollective = 2, // a collective or point-to-point communication
};

struct DeviceRecord {
  int32_t name; // index into LaunchRecorder::names()
  DeviceWork work;
  int16_t device;
  int64_t stream;
  int64_t executable; // the executable's id, -1 for work that is not an executable
  uint64_t correlation; // correlation id of the innermost profiled op on the launching thread, 0: none
  int32_t thread; // system thread id of the launching thread
  int64_t dispatch_begin_ns;
  int64_t dispatch_end_ns;
  int64_t bytes; // payload of a copy or collective, 0 for an executable
  int64_t sequence; // launch number within the session, from 1 (the trace's flow id)
  int64_t observed_ns = 0; // first time its output was seen ready, 0: not yet
  int64_t start_ns = 0; // device interval, set when the session ends
  int64_t end_ns = 0;
};

struct RuntimeRecord {
  int32_t name; // index into LaunchRecorder::names()
  int16_t device; // -1: not a core's
  int64_t stream;
  uint64_t correlation;
  int32_t thread;
  int64_t start_ns;
  int64_t end_ns;
  int64_t bytes;
  std::string detail;
};

struct RecordingOptions {
  std::vector<int> cores; // cores whose work is recorded; empty: all
  int64_t max_events_per_core = 0; // device records kept per core; 0: no limit
};

class LaunchRecorder {
 public:
  static LaunchRecorder& instance();

  // Starts recording, dropping the records of the previous recording.
  void begin(const RecordingOptions& options);
  // Stops recording and computes each device record's interval; the records stay readable until
  // the next begin().
  void end();
  bool recording() const noexcept;

  // A launch dispatched from this thread on `device`, between `dispatch_begin_ns` and now; `ready`:
  // its output was already ready when the dispatch returned. Returns a token for observe_ready(),
  // or -1 when the launch is not recorded (not recording, a core not captured, the core's limit).
  int64_t record_device(DeviceWork work, const std::string& name, int device, int64_t executable,
                        int64_t dispatch_begin_ns, int64_t bytes, bool ready);
  // The output of the launch `token` was seen ready now (a watcher waited for it). Tokens of an
  // earlier recording are ignored.
  void observe_ready(int64_t token);
  // Every launch recorded so far on `device` had finished by now (a synchronisation returned).
  void bound(int device);
  void record_runtime(const std::string& name, int device, int64_t start_ns, int64_t end_ns, int64_t bytes,
                      const std::string& detail);

  // The innermost profiled op of this thread (Kineto's correlation ids, pushed as ops begin).
  static void push_correlation(uint64_t id);
  static void pop_correlation();

  // Read after end(), under no concurrent begin().
  const std::vector<std::string>& names() const noexcept {
    return names_;
  }
  const std::vector<DeviceRecord>& device_records() const noexcept {
    return device_;
  }
  const std::vector<RuntimeRecord>& runtime_records() const noexcept {
    return runtime_;
  }
  // Launches not recorded because a core reached its limit, and recorded launches dropped because
  // nothing showed when they finished.
  int64_t dropped_over_limit() const noexcept {
    return dropped_over_limit_;
  }
  int64_t dropped_unfinished() const noexcept {
    return dropped_unfinished_;
  }

  // Nanoseconds since the Unix epoch, the clock of PyTorch's profiler events (c10::getTime).
  static int64_t now_ns() noexcept;

 private:
  LaunchRecorder() = default;
  int32_t intern(const std::string& name);
  void compute_intervals();

  // A point in a core's launch order: a launch (record >= 0) or a bound (record < 0, at `time`).
  struct CoreEntry {
    int64_t record;
    int64_t time;
  };

  mutable std::mutex mutex_;
  bool recording_ = false;
  int64_t generation_ = 0;
  RecordingOptions options_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, int32_t> name_ids_;
  std::vector<DeviceRecord> device_;
  std::vector<RuntimeRecord> runtime_;
  std::unordered_map<int, std::vector<CoreEntry>> order_; // per core
  std::unordered_map<int, int64_t> kept_; // device records per core
  int64_t dropped_over_limit_ = 0;
  int64_t dropped_unfinished_ = 0;
};

} // namespace c10::neuron::profiler
