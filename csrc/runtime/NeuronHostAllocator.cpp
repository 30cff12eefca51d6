#include "runtime/NeuronHostAllocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <mutex>
#include <set>

namespace c10::neuron {
namespace {

constexpr size_t kHostAlignment = 64;

std::mutex& pinned_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::set<const void*>& pinned_blocks() {
  static std::set<const void*> blocks;
  return blocks;
}

void free_pinned(void* data) {
  {
    std::lock_guard<std::mutex> lock(pinned_mutex());
    pinned_blocks().erase(data);
  }
  std::free(data);
}

class PinnedHostAllocator final : public c10::Allocator {
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
      std::lock_guard<std::mutex> lock(pinned_mutex());
      pinned_blocks().insert(data);
    }
    return c10::DataPtr(data, data, &free_pinned, c10::Device(c10::DeviceType::CPU));
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_pinned;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

} // namespace

c10::Allocator* host_allocator() {
  static PinnedHostAllocator instance;
  return &instance;
}

bool is_pinned_host_pointer(const void* data) {
  // is_pinned() asks about a storage's base pointer, which is the start of the block.
  std::lock_guard<std::mutex> lock(pinned_mutex());
  return pinned_blocks().count(data) > 0;
}

} // namespace c10::neuron
