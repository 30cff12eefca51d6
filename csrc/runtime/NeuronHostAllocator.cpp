#include "runtime/NeuronHostAllocator.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <array>
#include <cstdlib>
#include <map>
#include <mutex>

namespace c10::neuron {
namespace {

constexpr size_t kHostAlignment = 64;

// The blocks handed out (their sizes, for the statistics) and the statistics, under one mutex.
struct PinnedBlocks {
  std::mutex mutex;
  std::map<const void*, size_t> sizes;
  at::HostStats stats;
};

PinnedBlocks& pinned() {
  static PinnedBlocks blocks;
  return blocks;
}

// The HostStats counters this allocator keeps (it has no cache: active and allocated agree).
std::array<decltype(at::HostStats::active_requests)*, 4> counters(at::HostStats& stats) {
  return {&stats.active_requests, &stats.active_bytes, &stats.allocations, &stats.allocated_bytes};
}

void free_pinned(void* data) {
  {
    PinnedBlocks& blocks = pinned();
    std::lock_guard<std::mutex> lock(blocks.mutex);
    auto found = blocks.sizes.find(data);
    if (found != blocks.sizes.end()) {
      blocks.stats.active_requests.decrease(1);
      blocks.stats.active_bytes.decrease(found->second);
      blocks.stats.allocations.decrease(1);
      blocks.stats.allocated_bytes.decrease(found->second);
      blocks.stats.num_host_free += 1;
      blocks.sizes.erase(found);
    }
  }
  std::free(data);
}

// PyTorch's host allocator interface for the PrivateUse1 device (at::getHostAllocator, which
// torch.accelerator.empty_host_cache and host_memory_stats call). No block is cached: a freed block
// goes back to the system at once, so empty_cache has nothing to release.
class PinnedHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) {
      return c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU));
    }
    size_t rounded = (nbytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    void* data = std::aligned_alloc(kHostAlignment, rounded);
    TORCH_CHECK_WITH(OutOfMemoryError, data != nullptr, "neuron: cannot allocate ", nbytes,
                     " bytes of pinned host memory");
    {
      PinnedBlocks& blocks = pinned();
      std::lock_guard<std::mutex> lock(blocks.mutex);
      blocks.sizes[data] = rounded;
      blocks.stats.active_requests.increase(1);
      blocks.stats.active_bytes.increase(rounded);
      blocks.stats.allocations.increase(1);
      blocks.stats.allocated_bytes.increase(rounded);
      blocks.stats.num_host_alloc += 1;
    }
    return c10::DataPtr(data, data, &free_pinned, c10::Device(c10::DeviceType::CPU));
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_pinned;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  // A block is freed when its last tensor goes; no stream can still be reading it (the emulated
  // core reads host memory at the copy itself). True where the pointer is one of ours.
  bool record_event(void* ptr, void* /*ctx*/, c10::Stream /*stream*/) override {
    return is_pinned_host_pointer(ptr);
  }

  void empty_cache() override {}

  at::HostStats get_stats() override {
    PinnedBlocks& blocks = pinned();
    std::lock_guard<std::mutex> lock(blocks.mutex);
    return blocks.stats;
  }

  void reset_accumulated_stats() override {
    PinnedBlocks& blocks = pinned();
    std::lock_guard<std::mutex> lock(blocks.mutex);
    for (auto* stat : counters(blocks.stats)) {
      stat->reset_accumulated();
    }
    blocks.stats.num_host_alloc = 0;
    blocks.stats.num_host_free = 0;
  }

  void reset_peak_stats() override {
    PinnedBlocks& blocks = pinned();
    std::lock_guard<std::mutex> lock(blocks.mutex);
    for (auto* stat : counters(blocks.stats)) {
      stat->reset_peak();
    }
  }
};

PinnedHostAllocator& instance() {
  static PinnedHostAllocator allocator;
  return allocator;
}

// Registered when the extension loads, as CUDA registers its caching host allocator.
[[maybe_unused]] const bool registered = [] {
  at::setHostAllocator(c10::DeviceType::PrivateUse1, &instance());
  return true;
}();

} // namespace

c10::Allocator* host_allocator() {
  return &instance();
}

bool is_pinned_host_pointer(const void* data) {
  // is_pinned() asks about a storage's base pointer, which is the start of the block.
  PinnedBlocks& blocks = pinned();
  std::lock_guard<std::mutex> lock(blocks.mutex);
  return blocks.sizes.count(data) > 0;
}

} // namespace c10::neuron
