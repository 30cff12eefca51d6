// The allocator's memory history as Python sees it: torch.cuda.memory._snapshot()'s dictionary
// (segments with their blocks, per-device traces of actions), with the Python stacks captured by
// PyTorch's CapturedTraceback and symbolized by its py_symbolize, as CUDA's snapshot does, so that
// pytorch.org/memory_viz and torch.cuda._memory_viz read it.

#include "runtime/NeuronMemoryHistoryBindings.h"

#include "runtime/NeuronAllocator.h"

#include <torch/csrc/profiler/combined_traceback.h>

#include <unordered_map>

namespace torch {
// torch/csrc/profiler/python/combined_traceback.h declares it, but that header includes
// nlohmann/json.hpp, which PyTorch's wheel does not ship.
TORCH_API std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
} // namespace torch

namespace py = pybind11;

namespace c10::neuron {
namespace {

constexpr uint64_t kSmallSegmentBytes = uint64_t(1) << 20; // CUDA's small pool: segments up to 1 MiB

std::shared_ptr<c10::GatheredContext> gather_python_stack() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
}

const char* action_name(HistoryAction action) {
  switch (action) {
    case HistoryAction::Alloc:
      return "alloc";
    case HistoryAction::FreeRequested:
      return "free_requested";
    case HistoryAction::FreeCompleted:
      return "free_completed";
    case HistoryAction::SegmentAlloc:
      return "segment_alloc";
    case HistoryAction::SegmentFree:
      return "segment_free";
    case HistoryAction::Oom:
      return "oom";
  }
  return "unknown";
}

// Symbolizes every stack of the snapshot at once (frames shared between stacks are read once).
class Stacks {
 public:
  void add(const std::shared_ptr<c10::GatheredContext>& context) {
    auto* traceback = dynamic_cast<torch::CapturedTraceback*>(context.get());
    if (traceback != nullptr && index_.emplace(traceback, tracebacks_.size()).second) {
      tracebacks_.push_back(traceback);
    }
  }

  void symbolize() {
    frames_ = torch::py_symbolize(tracebacks_);
  }

  py::object frames_of(const std::shared_ptr<c10::GatheredContext>& context) const {
    auto it = index_.find(dynamic_cast<torch::CapturedTraceback*>(context.get()));
    return it == index_.end() ? py::list() : frames_[it->second];
  }

 private:
  std::vector<torch::CapturedTraceback*> tracebacks_;
  std::unordered_map<torch::CapturedTraceback*, size_t> index_;
  std::vector<py::object> frames_;
};

py::dict snapshot_dict() {
  MemorySnapshot snapshot;
  {
    py::gil_scoped_release release; // the allocator's locks are taken without the GIL
    snapshot = memory_snapshot();
  }
  Stacks stacks;
  for (const auto& segment : snapshot.segments) {
    for (const auto& block : segment.blocks) {
      stacks.add(block.context);
    }
  }
  for (const auto& trace : snapshot.traces) {
    for (const auto& entry : trace) {
      stacks.add(entry.context);
    }
  }
  stacks.symbolize();

  py::list segments;
  for (const auto& segment : snapshot.segments) {
    py::list blocks;
    uint64_t allocated = 0;
    uint64_t requested = 0;
    for (const auto& block : segment.blocks) {
      py::dict entry;
      entry["address"] = block.address;
      entry["size"] = block.size;
      entry["requested_size"] = block.requested;
      entry["state"] = block.allocated ? "active_allocated" : "inactive";
      entry["frames"] = stacks.frames_of(block.context);
      blocks.append(entry);
      if (block.allocated) {
        allocated += block.size;
        requested += block.requested;
      }
    }
    py::dict entry;
    entry["device"] = static_cast<int>(segment.device);
    entry["address"] = segment.address;
    entry["total_size"] = segment.size;
    entry["allocated_size"] = allocated;
    entry["active_size"] = allocated; // no block waits on another stream: a free is immediate
    entry["requested_size"] = requested;
    entry["stream"] = 0;
    entry["segment_type"] = segment.size <= kSmallSegmentBytes ? "small" : "large";
    entry["segment_pool_id"] = py::make_tuple(0, 0);
    entry["is_expandable"] = false;
    entry["frames"] = py::list();
    entry["blocks"] = blocks;
    segments.append(entry);
  }
  py::list traces;
  for (const auto& trace : snapshot.traces) {
    py::list entries;
    for (const auto& item : trace) {
      py::dict entry;
      entry["action"] = action_name(item.action);
      if (item.action == HistoryAction::Oom) {
        entry["device_free"] = item.device_free;
      } else {
        entry["addr"] = item.address;
      }
      entry["size"] = item.size;
      entry["stream"] = 0;
      entry["time_us"] = item.time_us;
      entry["frames"] = stacks.frames_of(item.context);
      entries.append(entry);
    }
    traces.append(entries);
  }
  py::dict result;
  result["segments"] = segments;
  result["device_traces"] = traces;
  return result;
}

} // namespace

void bind_memory_history(py::module_& m) {
  m.def(
      "_record_memory_history",
      [](bool enabled, bool trace, bool state_stacks, bool alloc_stacks, bool free_stacks, size_t max_entries,
         bool clear) {
        HistorySettings settings{enabled,       enabled && trace, enabled && state_stacks, enabled && alloc_stacks,
                                 enabled && free_stacks, max_entries};
        py::gil_scoped_release release;
        record_memory_history(settings, &gather_python_stack, clear);
      },
      py::arg("enabled"), py::arg("trace"), py::arg("state_stacks"), py::arg("alloc_stacks"), py::arg("free_stacks"),
      py::arg("max_entries"), py::arg("clear"));
  m.def("_memory_snapshot", &snapshot_dict);
}

} // namespace c10::neuron
