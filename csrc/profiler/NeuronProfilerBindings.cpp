// Python bindings of the launch recorder (NeuronLaunchRecorder.h), used by
// torch_neuronx.runtime.launch_records. Bindings only.

#include "profiler/NeuronProfilerBindings.h"

#include "profiler/NeuronLaunchRecorder.h"

#include <ATen/record_function.h>

namespace py = pybind11;

namespace c10::neuron::profiler {

void bind_profiler(py::module_& m) {
  m.def("_profiler_now", &LaunchRecorder::now_ns, "Nanoseconds since the Unix epoch (the profiler's clock).");
  m.def("_profiler_recording", [] { return LaunchRecorder::instance().recording(); });
  m.def(
      "_profiler_record_device",
      [](int work, const std::string& name, int device, int64_t executable, int64_t dispatch_begin_ns, int64_t bytes,
         bool ready) {
        TORCH_CHECK(work >= 0 && work <= static_cast<int>(DeviceWork::kCollective), "neuron profiler: invalid work kind ",
                    work);
        return LaunchRecorder::instance().record_device(static_cast<DeviceWork>(work), name, device, executable,
                                                        dispatch_begin_ns, bytes, ready);
      },
      py::arg("work"), py::arg("name"), py::arg("device"), py::arg("executable"), py::arg("dispatch_begin_ns"),
      py::arg("bytes"), py::arg("ready"));
  m.def(
      "_set_record_function_enabled",
      [](bool enabled) {
        // Thread-local: the profilers' op observers (RecordFunction callbacks) on this thread.
        const bool previous = at::isRecordFunctionEnabled();
        at::enableRecordFunction(enabled);
        return previous;
      },
      py::arg("enabled"), "Turns this thread's RecordFunction callbacks on or off; returns the previous state.");
  m.def("_profiler_observe_ready", [](int64_t token) { LaunchRecorder::instance().observe_ready(token); });
  m.def("_profiler_bound", [](int device) { LaunchRecorder::instance().bound(device); });
  m.def(
      "_profiler_record_runtime",
      [](const std::string& name, int device, int64_t start_ns, int64_t end_ns, int64_t bytes,
         const std::string& detail) {
        LaunchRecorder::instance().record_runtime(name, device, start_ns, end_ns, bytes, detail);
      },
      py::arg("name"), py::arg("device"), py::arg("start_ns"), py::arg("end_ns"), py::arg("bytes"), py::arg("detail"));
  m.def("_profiler_records", [] {
    // The last finished recording: {"names", "device": [tuples], "runtime": [tuples], dropped counts}.
    const LaunchRecorder& recorder = LaunchRecorder::instance();
    TORCH_CHECK(!recorder.recording(), "neuron profiler: the records are read once the session has stopped");
    py::list device;
    for (const DeviceRecord& r : recorder.device_records()) {
      device.append(py::make_tuple(r.name, static_cast<int>(r.work), r.device, r.stream, r.executable, r.correlation,
                                   r.thread, r.dispatch_begin_ns, r.dispatch_end_ns, r.start_ns, r.end_ns, r.bytes,
                                   r.sequence));
    }
    py::list runtime;
    for (const RuntimeRecord& r : recorder.runtime_records()) {
      runtime.append(py::make_tuple(r.name, r.device, r.stream, r.correlation, r.thread, r.start_ns, r.end_ns, r.bytes,
                                    r.detail));
    }
    py::dict result;
    result["names"] = recorder.names();
    result["device"] = device;
    result["runtime"] = runtime;
    result["dropped_over_limit"] = recorder.dropped_over_limit();
    result["dropped_unfinished"] = recorder.dropped_unfinished();
    return result;
  });
}

} // namespace c10::neuron::profiler
