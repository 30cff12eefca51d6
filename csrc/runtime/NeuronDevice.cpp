#include "runtime/NeuronDevice.h"

#include <c10/util/Exception.h>

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>

namespace c10::neuron {
namespace {

constexpr int kDefaultCores = 2;

struct CoreConfig {
  std::vector<int> physical_ids;
  std::string error;
};

bool parse_int(const std::string& text, int& value) {
  if (text.empty() || text.size() > 6) {
    return false;
  }
  for (char c : text) {
    if (c < '0' || c > '9') {
      return false;
    }
  }
  value = std::stoi(text);
  return true;
}

// "3", "0-3" or a comma-separated mix such as "0,2,4-5".
bool parse_visible_cores(const std::string& text, std::vector<int>& ids) {
  std::set<int> seen;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    auto dash = item.find('-');
    int first = 0;
    int last = 0;
    if (dash == std::string::npos) {
      if (!parse_int(item, first)) {
        return false;
      }
      last = first;
    } else if (!parse_int(item.substr(0, dash), first) ||
               !parse_int(item.substr(dash + 1), last) || last < first) {
      return false;
    }
    for (int id = first; id <= last; ++id) {
      if (!seen.insert(id).second) {
        return false;
      }
      ids.push_back(id);
    }
  }
  return !ids.empty();
}

CoreConfig read_core_config() {
  CoreConfig config;
  if (const char* visible = std::getenv("NEURON_RT_VISIBLE_CORES")) {
    if (!parse_visible_cores(visible, config.physical_ids)) {
      config.physical_ids.clear();
      config.error = std::string("NEURON_RT_VISIBLE_CORES='") + visible +
          "' is not a core index, a range such as 0-3, or a comma-separated list of them";
    }
  } else if (const char* count = std::getenv("NEURON_RT_NUM_CORES")) {
    int n = 0;
    if (!parse_int(count, n) || n < 1) {
      config.error = std::string("NEURON_RT_NUM_CORES='") + count +
          "' is not a positive integer";
    } else {
      for (int id = 0; id < n; ++id) {
        config.physical_ids.push_back(id);
      }
    }
  } else {
    for (int id = 0; id < kDefaultCores; ++id) {
      config.physical_ids.push_back(id);
    }
  }
  if (config.physical_ids.size() > static_cast<size_t>(kMaxCores)) {
    config.error = "at most " + std::to_string(kMaxCores) + " NeuronCores per process are supported, got " +
        std::to_string(config.physical_ids.size());
    config.physical_ids.clear();
  }
  return config;
}

const CoreConfig& core_config() noexcept {
  static const CoreConfig config = read_core_config();
  return config;
}

thread_local c10::DeviceIndex tls_current_device = 0;

std::atomic<bool> g_bad_fork{false};

void mark_child_of_fork() {
  g_bad_fork.store(true);
}

} // namespace

c10::DeviceIndex device_count() noexcept {
  return static_cast<c10::DeviceIndex>(core_config().physical_ids.size());
}

const std::vector<int>& physical_core_ids() noexcept {
  return core_config().physical_ids;
}

const std::string& core_config_error() noexcept {
  return core_config().error;
}

void check_device_index(c10::DeviceIndex index) {
  TORCH_CHECK_VALUE(core_config_error().empty(), "neuron: ", core_config_error());
  // RuntimeError, as CUDA raises for a device ordinal it does not have ("invalid device ordinal").
  TORCH_CHECK(
      index >= 0 && index < device_count(),
      "Invalid neuron device index ", static_cast<int>(index), ": this process sees ",
      static_cast<int>(device_count()), " NeuronCore(s), so valid indices are 0 to ",
      static_cast<int>(device_count()) - 1,
      ". Set NEURON_RT_VISIBLE_CORES or NEURON_RT_NUM_CORES before the first use of the device to "
      "change the count.");
}

c10::DeviceIndex current_device() noexcept {
  return tls_current_device;
}

void set_device(c10::DeviceIndex index) {
  check_device_index(index);
  tls_current_device = index;
}

c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  auto previous = tls_current_device;
  if (index != previous) {
    set_device(index);
  }
  return previous;
}

void note_runtime_started() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, &mark_child_of_fork); });
}

bool in_bad_fork() noexcept {
  return g_bad_fork.load();
}

void check_not_forked() {
  TORCH_CHECK(!in_bad_fork(),
              "Cannot re-initialize the neuron runtime in a forked subprocess: the parent process had already "
              "used the neuron device. To use neuron with multiprocessing, use the 'spawn' start method "
              "(multiprocessing.set_start_method('spawn') or torch.multiprocessing.spawn).");
}

} // namespace c10::neuron
