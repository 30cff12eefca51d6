#include "runtime/NeuronAllocator.h"

#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace c10::neuron {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr uint64_t kRoundBytes = 512; // CUDA's kMinBlockSize
constexpr uint64_t kSmallBlockBytes = uint64_t(1) << 20; // CUDA's small-pool limit (1 MiB)
constexpr uint64_t kRangeBytes = uint64_t(1) << 44; // 16 TiB of addresses per core
constexpr uint64_t kDefaultCapacity = uint64_t(24) << 30; // Trainium2 HBM per core at LNC=2

// Bit 61 set: non-canonical on x86-64 and AArch64 (48-bit virtual addresses).
uint64_t range_base(c10::DeviceIndex device) {
  return (uint64_t(0x2000) << 48) + (uint64_t(device) << 44);
}

std::string format_bytes(uint64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2);
  if (bytes >= (uint64_t(1) << 30)) {
    out << double(bytes) / double(uint64_t(1) << 30) << " GiB";
  } else if (bytes >= (uint64_t(1) << 20)) {
    out << double(bytes) / double(uint64_t(1) << 20) << " MiB";
  } else if (bytes >= 1024) {
    out << double(bytes) / 1024.0 << " KiB";
  } else {
    out.str("");
    out << bytes << " bytes";
  }
  return out.str();
}

struct Block {
  uint64_t size;
  uint64_t segment; // address of the segment that contains the block
  Allocation* allocation; // nullptr while the block is cached (free)
};

size_t pool_of(uint64_t size) {
  return static_cast<size_t>(size <= kSmallBlockBytes ? StatType::SMALL_POOL : StatType::LARGE_POOL);
}

void increase(StatArray& stat, uint64_t size, uint64_t amount) {
  stat[static_cast<size_t>(StatType::AGGREGATE)].increase(amount);
  stat[pool_of(size)].increase(amount);
}

void decrease(StatArray& stat, uint64_t size, uint64_t amount) {
  stat[static_cast<size_t>(StatType::AGGREGATE)].decrease(amount);
  stat[pool_of(size)].decrease(amount);
}

template <typename Fn>
void for_each_stat(DeviceStats& stats, Fn fn) {
  for (StatArray* array : {&stats.allocation, &stats.segment, &stats.active, &stats.inactive_split,
                           &stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
                           &stats.inactive_split_bytes, &stats.requested_bytes}) {
    for (Stat& stat : *array) {
      fn(stat);
    }
  }
}

size_t default_capacity() {
  static const size_t capacity = [] {
    const char* text = std::getenv("TORCH_NEURONX_HBM_CAPACITY");
    return text ? parse_byte_size(text, "TORCH_NEURONX_HBM_CAPACITY") : kDefaultCapacity;
  }();
  return capacity;
}

// What _record_memory_history asked for; read without a lock at each allocation (a stale read
// records one action more or less around the switch).
HistorySettings history_settings;
std::atomic<bool> history_on{false};
std::atomic<StackGatherer> history_gatherer{nullptr};

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The calling stack when history is on and `wanted`, else nullptr. Takes the GIL: call it before
// taking a core's lock.
std::shared_ptr<c10::GatheredContext> gather_stack(bool wanted) {
  StackGatherer gather = history_gatherer.load();
  return history_on.load() && wanted && gather != nullptr ? gather() : nullptr;
}

// All state of one core. Every method expects `mutex` held.
struct CoreMemory {
  std::mutex mutex;
  std::vector<HistoryEntry> history; // a ring of at most history_settings.max_entries
  size_t history_next = 0; // where the next entry goes once the ring is full

  void record(HistoryAction action, uint64_t address, uint64_t size, std::shared_ptr<c10::GatheredContext> context,
              uint64_t device_free = 0) {
    if (!history_on.load() || !history_settings.trace || history_settings.max_entries == 0) {
      return;
    }
    HistoryEntry entry{action, address, size, now_us(), device_free, std::move(context)};
    if (history.size() < history_settings.max_entries) {
      history.push_back(std::move(entry));
    } else {
      history[history_next] = std::move(entry);
      history_next = (history_next + 1) % history_settings.max_entries;
    }
  }

  std::map<uint64_t, Block> blocks; // by address: the blocks of every segment
  std::set<std::pair<uint64_t, uint64_t>> cached; // (size, address) of free blocks
  std::map<uint64_t, uint64_t> segments; // address -> size
  std::map<uint64_t, uint64_t> unused_ranges; // released address ranges below `bump`
  uint64_t bump = 0; // offset of the first address never handed out
  DeviceStats stats;
  int64_t tensor_frees = 0;
  size_t capacity = 0; // 0: not read yet
  double fraction = 1.0; // set_per_process_memory_fraction: the share of the capacity this process may use

  size_t limit() {
    if (capacity == 0) {
      capacity = default_capacity();
    }
    return capacity;
  }

  // What this process may reserve: the capacity times the fraction, as CUDA's allocator's
  // allowed_memory_maximum (the capacity itself is still what the device reports).
  size_t allowed() {
    return static_cast<size_t>(static_cast<double>(limit()) * fraction);
  }

  bool is_split(uint64_t address, const Block& block) const {
    return block.size != segments.at(block.segment);
  }

  void cache_insert(uint64_t address, const Block& block) {
    cached.emplace(block.size, address);
    if (is_split(address, block)) {
      increase(stats.inactive_split, block.size, 1);
      increase(stats.inactive_split_bytes, block.size, block.size);
    }
  }

  void cache_erase(uint64_t address, const Block& block) {
    cached.erase({block.size, address});
    if (is_split(address, block)) {
      decrease(stats.inactive_split, block.size, 1);
      decrease(stats.inactive_split_bytes, block.size, block.size);
    }
  }

  uint64_t reserve_range(uint64_t size) {
    for (auto it = unused_ranges.begin(); it != unused_ranges.end(); ++it) {
      if (it->second >= size) {
        uint64_t offset = it->first;
        uint64_t rest = it->second - size;
        unused_ranges.erase(it);
        if (rest > 0) {
          unused_ranges.emplace(offset + size, rest);
        }
        return offset;
      }
    }
    TORCH_CHECK_WITH(OutOfMemoryError, bump + size <= kRangeBytes,
                     "neuron: the virtual address range of the NeuronCore is exhausted");
    uint64_t offset = bump;
    bump += size;
    return offset;
  }

  void release_range(uint64_t offset, uint64_t size) {
    auto it = unused_ranges.emplace(offset, size).first;
    if (it != unused_ranges.begin()) {
      auto previous = std::prev(it);
      if (previous->first + previous->second == it->first) {
        previous->second += it->second;
        unused_ranges.erase(it);
        it = previous;
      }
    }
    auto next = std::next(it);
    if (next != unused_ranges.end() && it->first + it->second == next->first) {
      it->second += next->second;
      unused_ranges.erase(next);
    }
    if (it->first + it->second == bump) {
      bump = it->first;
      unused_ranges.erase(it);
    }
  }

  // Releases every segment that is one whole cached block; returns the bytes released.
  uint64_t release_cached_segments(uint64_t base) {
    uint64_t released = 0;
    for (auto it = segments.begin(); it != segments.end();) {
      auto block = blocks.find(it->first);
      if (block->second.allocation == nullptr && block->second.size == it->second) {
        uint64_t size = it->second;
        cache_erase(block->first, block->second);
        blocks.erase(block);
        release_range(it->first - base, size);
        record(HistoryAction::SegmentFree, it->first, size, nullptr);
        decrease(stats.segment, size, 1);
        decrease(stats.reserved_bytes, size, size);
        stats.num_device_free += 1;
        released += size;
        it = segments.erase(it);
      } else {
        ++it;
      }
    }
    return released;
  }

  // Address of a free block of at least `size`, split down to `size`; 0 when none is cached.
  uint64_t take_cached(uint64_t size) {
    auto best = cached.lower_bound({size, 0});
    if (best == cached.end()) {
      return 0;
    }
    uint64_t address = best->second;
    Block& block = blocks.at(address);
    cache_erase(address, block);
    if (block.size - size >= kRoundBytes) {
      Block rest{block.size - size, block.segment, nullptr};
      block.size = size;
      blocks.emplace(address + size, rest);
      cache_insert(address + size, rest);
    }
    return address;
  }

  [[noreturn]] void raise_oom(c10::DeviceIndex device, size_t nbytes) {
    stats.num_ooms += 1;
    auto all = static_cast<size_t>(StatType::AGGREGATE);
    uint64_t reserved = stats.reserved_bytes[all].current;
    uint64_t allocated = stats.allocated_bytes[all].current;
    uint64_t capacity_bytes = limit();
    uint64_t free_bytes = capacity_bytes > reserved ? capacity_bytes - reserved : 0;
    record(HistoryAction::Oom, 0, nbytes, nullptr, free_bytes);
    TORCH_CHECK_WITH(
        OutOfMemoryError, false, "neuron:", static_cast<int>(device), " out of memory. Tried to allocate ",
        format_bytes(nbytes), ". NeuronCore ", physical_core_ids()[device], " (neuron:", static_cast<int>(device),
        ") has a total capacity of ", format_bytes(capacity_bytes), " of which ", format_bytes(free_bytes),
        " is free.", fraction < 1.0 ? " This process may use " + format_bytes(allowed()) + " of it (its memory fraction)." : "",
        " Of the allocated memory ", format_bytes(allocated), " is allocated by PyTorch, and ",
        format_bytes(reserved - allocated),
        " is reserved by PyTorch but unallocated. Free tensors you no longer need (del them), use a "
        "smaller batch, or raise the capacity with TORCH_NEURONX_HBM_CAPACITY or "
        "torch.neuron.set_per_process_memory_fraction().");
  }

  uint64_t new_segment(c10::DeviceIndex device, uint64_t size, size_t nbytes) {
    auto all = static_cast<size_t>(StatType::AGGREGATE);
    if (stats.reserved_bytes[all].current + size > allowed()) {
      stats.num_alloc_retries += 1;
      release_cached_segments(range_base(device));
      if (stats.reserved_bytes[all].current + size > allowed()) {
        raise_oom(device, nbytes);
      }
    }
    uint64_t address = range_base(device) + reserve_range(size);
    segments.emplace(address, size);
    blocks.emplace(address, Block{size, address, nullptr});
    record(HistoryAction::SegmentAlloc, address, size, nullptr);
    increase(stats.segment, size, 1);
    increase(stats.reserved_bytes, size, size);
    stats.num_device_alloc += 1;
    return address;
  }
};

std::array<CoreMemory, kMaxCores>& cores() {
  static std::array<CoreMemory, kMaxCores> memory;
  return memory;
}

CoreMemory& core(c10::DeviceIndex device) {
  check_device_index(device);
  return cores()[device];
}

// torch.profiler(profile_memory=True)'s memory events, as CUDA's caching allocator reports them:
// the block's (rounded) bytes, positive when allocated and negative when freed, with the core's
// allocated and reserved totals after the change. Called under the core's lock.
void report_to_profiler(const CoreMemory& memory, uint64_t address, int64_t bytes, c10::DeviceIndex device) {
  if (!c10::memoryProfilingEnabled()) {
    return;
  }
  constexpr auto all = static_cast<size_t>(StatType::AGGREGATE);
  c10::reportMemoryUsageToProfiler(reinterpret_cast<void*>(address), bytes, memory.stats.allocated_bytes[all].current,
                                   memory.stats.reserved_bytes[all].current, c10::Device(kNeuronDeviceType, device));
}

void free_allocation(void* context) {
  auto* allocation = static_cast<Allocation*>(context);
  auto stack = gather_stack(history_settings.free_stacks);
  {
    CoreMemory& memory = cores()[allocation->device];
    std::lock_guard<std::mutex> lock(memory.mutex);
    uint64_t address = allocation->address;
    auto it = memory.blocks.find(address);
    TORCH_INTERNAL_ASSERT(it != memory.blocks.end() && it->second.allocation == allocation);
    Block& block = it->second;
    decrease(memory.stats.allocation, block.size, 1);
    decrease(memory.stats.allocated_bytes, block.size, block.size);
    decrease(memory.stats.active, block.size, 1);
    decrease(memory.stats.active_bytes, block.size, block.size);
    decrease(memory.stats.requested_bytes, block.size, allocation->requested);
    memory.tensor_frees += 1;
    report_to_profiler(memory, address, -static_cast<int64_t>(block.size), allocation->device);
    // The buffer is freed at once (PJRT keeps it alive for pending work), so both of CUDA's steps.
    memory.record(HistoryAction::FreeRequested, address, block.size, stack);
    memory.record(HistoryAction::FreeCompleted, address, block.size, stack);
    block.allocation = nullptr;
    // Coalesce with cached neighbours of the same segment.
    if (it != memory.blocks.begin()) {
      auto previous = std::prev(it);
      if (previous->second.allocation == nullptr && previous->second.segment == block.segment &&
          previous->first + previous->second.size == address) {
        memory.cache_erase(previous->first, previous->second);
        previous->second.size += block.size;
        memory.blocks.erase(it);
        it = previous;
      }
    }
    auto next = std::next(it);
    if (next != memory.blocks.end() && next->second.allocation == nullptr &&
        next->second.segment == it->second.segment && it->first + it->second.size == next->first) {
      memory.cache_erase(next->first, next->second);
      it->second.size += next->second.size;
      memory.blocks.erase(next);
    }
    memory.cache_insert(it->first, it->second);
  }
  // Outside the lock: dropping the buffer takes the GIL.
  release_buffer(allocation->buffer);
  delete allocation;
}

} // namespace

size_t parse_byte_size(const std::string& text, const char* what) {
  static const std::map<std::string, uint64_t> units = {
      {"", 1}, {"B", 1}, {"KiB", uint64_t(1) << 10}, {"MiB", uint64_t(1) << 20},
      {"GiB", uint64_t(1) << 30}, {"TiB", uint64_t(1) << 40}};
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  auto unit = units.find(text.substr(digits));
  TORCH_CHECK_VALUE(digits > 0 && unit != units.end(), what, "='", text,
                    "' is not a byte size; write it as bytes or with a unit, e.g. 24GiB, 512MiB");
  double value = std::stod(text.substr(0, digits));
  TORCH_CHECK_VALUE(value > 0, what, "='", text, "' must be positive");
  return static_cast<size_t>(std::llround(value * double(unit->second)));
}

c10::DataPtr NeuronAllocator::allocate(size_t nbytes) {
  return allocate_on(current_device(), nbytes);
}

c10::DataPtr NeuronAllocator::allocate_on(c10::DeviceIndex device, size_t nbytes) {
  CoreMemory& memory = core(device);
  c10::Device where(kNeuronDeviceType, device);
  if (nbytes == 0) {
    return c10::DataPtr(nullptr, where);
  }
  uint64_t size = (uint64_t(nbytes) + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
  auto stack = gather_stack(history_settings.state_stacks || history_settings.alloc_stacks);
  auto* allocation = new Allocation{device, 0, size, nbytes, {}, history_settings.state_stacks ? stack : nullptr};
  try {
    std::lock_guard<std::mutex> lock(memory.mutex);
    uint64_t address = memory.take_cached(size);
    if (address == 0) {
      address = memory.new_segment(device, size, nbytes);
    }
    memory.blocks.at(address).allocation = allocation;
    allocation->address = address;
    increase(memory.stats.allocation, size, 1);
    increase(memory.stats.allocated_bytes, size, size);
    increase(memory.stats.active, size, 1);
    increase(memory.stats.active_bytes, size, size);
    increase(memory.stats.requested_bytes, size, nbytes);
    report_to_profiler(memory, address, static_cast<int64_t>(size), device);
    memory.record(HistoryAction::Alloc, address, size, history_settings.alloc_stacks ? stack : nullptr);
  } catch (...) {
    delete allocation;
    throw;
  }
  return c10::DataPtr(reinterpret_cast<void*>(allocation->address), allocation, &free_allocation, where);
}

c10::DeleterFnPtr NeuronAllocator::raw_deleter() const {
  return nullptr; // addresses are not host memory: there is no raw allocation to hand out
}

void NeuronAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  // Storage-level copies (copy-on-write materialisation) share the immutable source buffer.
  int src_device = device_of_address(reinterpret_cast<uint64_t>(src));
  int dest_device = device_of_address(reinterpret_cast<uint64_t>(dest));
  TORCH_CHECK(src_device >= 0 && dest_device >= 0, "neuron: copy_data between non-neuron addresses");
  Allocation* from = nullptr;
  Allocation* to = nullptr;
  {
    CoreMemory& memory = cores()[src_device];
    std::lock_guard<std::mutex> lock(memory.mutex);
    auto it = memory.blocks.find(reinterpret_cast<uint64_t>(src));
    from = it == memory.blocks.end() ? nullptr : it->second.allocation;
  }
  {
    CoreMemory& memory = cores()[dest_device];
    std::lock_guard<std::mutex> lock(memory.mutex);
    auto it = memory.blocks.find(reinterpret_cast<uint64_t>(dest));
    to = it == memory.blocks.end() ? nullptr : it->second.allocation;
  }
  TORCH_CHECK(from && to && from->requested == count && to->requested == count,
              "neuron: copy_data supports whole-storage copies only");
  if (from->buffer.array == nullptr) {
    return; // never written: both read as zeros
  }
  pybind11::gil_scoped_acquire gil;
  // Buffers are immutable, so a same-core copy shares the array; another core gets a transfer.
  auto moved =
      call_runtime<pybind11::object>("transfer_buffer", pybind11::handle(from->buffer.array), dest_device);
  assign_buffer(to->buffer, moved, from->buffer.dtype);
}

bool NeuronAllocator::initialized() {
  return true;
}

void NeuronAllocator::emptyCache(c10::MempoolId_t /*mempool_id*/) {
  for (c10::DeviceIndex device = 0; device < device_count(); ++device) {
    empty_cache_on(device);
  }
}

void NeuronAllocator::empty_cache_on(c10::DeviceIndex device) {
  CoreMemory& memory = core(device);
  std::lock_guard<std::mutex> lock(memory.mutex);
  memory.release_cached_segments(range_base(device));
}

void NeuronAllocator::recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) {
  // A buffer stays alive while any pending execution uses it (PJRT reference counting), so a
  // block freed while another stream still reads it cannot be reused under that stream.
}

DeviceStats NeuronAllocator::getDeviceStats(c10::DeviceIndex device) {
  CoreMemory& memory = core(device);
  std::lock_guard<std::mutex> lock(memory.mutex);
  DeviceStats stats = memory.stats;
  stats.max_split_size = -1; // no limit on splitting, as CUDA reports by default
  return stats;
}

void NeuronAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  CoreMemory& memory = core(device);
  std::lock_guard<std::mutex> lock(memory.mutex);
  DeviceStats& stats = memory.stats;
  for_each_stat(stats, [](Stat& stat) { stat.reset_accumulated(); });
  stats.num_alloc_retries = 0;
  stats.num_ooms = 0;
  stats.num_sync_all_streams = 0;
  stats.num_device_alloc = 0;
  stats.num_device_free = 0;
  memory.tensor_frees = 0;
}

void NeuronAllocator::resetPeakStats(c10::DeviceIndex device) {
  CoreMemory& memory = core(device);
  std::lock_guard<std::mutex> lock(memory.mutex);
  for_each_stat(memory.stats, [](Stat& stat) { stat.reset_peak(); });
}

std::pair<size_t, size_t> NeuronAllocator::getMemoryInfo(c10::DeviceIndex device) {
  CoreMemory& memory = core(device);
  std::lock_guard<std::mutex> lock(memory.mutex);
  size_t total = memory.limit();
  size_t reserved = memory.stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
  return {total > reserved ? total - reserved : 0, total};
}

int64_t NeuronAllocator::num_tensor_frees(c10::DeviceIndex device) {
  CoreMemory& memory = core(device);
  std::lock_guard<std::mutex> lock(memory.mutex);
  return memory.tensor_frees;
}

size_t NeuronAllocator::capacity(c10::DeviceIndex device) {
  CoreMemory& memory = core(device);
  std::lock_guard<std::mutex> lock(memory.mutex);
  return memory.limit();
}

double NeuronAllocator::memory_fraction(c10::DeviceIndex device) {
  CoreMemory& memory = core(device);
  std::lock_guard<std::mutex> lock(memory.mutex);
  return memory.fraction;
}

void NeuronAllocator::set_memory_fraction(c10::DeviceIndex device, double fraction) {
  TORCH_CHECK_VALUE(fraction >= 0.0 && fraction <= 1.0, "Invalid fraction value: ", fraction, ". Allowed range: 0~1");
  CoreMemory& memory = core(device);
  std::lock_guard<std::mutex> lock(memory.mutex);
  memory.fraction = fraction;
}

NeuronAllocator& allocator() {
  static NeuronAllocator instance;
  return instance;
}

Allocation* allocation_of(const c10::DataPtr& data_ptr) {
  if (data_ptr.get_deleter() != &free_allocation) {
    return nullptr;
  }
  return static_cast<Allocation*>(data_ptr.get_context());
}

ResolvedStorage resolve_storage(const c10::StorageImpl* storage) {
  const c10::DataPtr& data_ptr = storage->data_ptr();
  if (Allocation* allocation = allocation_of(data_ptr)) {
    return {allocation, 0};
  }
  auto address = reinterpret_cast<uint64_t>(data_ptr.get());
  if (address == 0) {
    return {nullptr, 0};
  }
  int device = device_of_address(address);
  if (device >= 0) {
    CoreMemory& memory = cores()[device];
    std::lock_guard<std::mutex> lock(memory.mutex);
    auto it = memory.blocks.upper_bound(address);
    if (it != memory.blocks.begin()) {
      --it;
      Allocation* allocation = it->second.allocation;
      if (allocation != nullptr && address + storage->nbytes() <= it->first + allocation->requested) {
        return {allocation, address - it->first};
      }
    }
  }
  TORCH_CHECK(false,
              "neuron: a tensor's memory was not allocated by the neuron runtime, or was freed (for example it was "
              "imported with DLPack or from_blob from memory that is gone); create the tensor on neuron, or copy it "
              "there with .to('neuron')");
}

Allocation* allocation_at(uint64_t address) {
  int device = device_of_address(address);
  if (device < 0) {
    return nullptr;
  }
  CoreMemory& memory = cores()[device];
  std::lock_guard<std::mutex> lock(memory.mutex);
  auto it = memory.blocks.find(address);
  return it == memory.blocks.end() ? nullptr : it->second.allocation;
}

int device_of_address(uint64_t address) noexcept {
  for (c10::DeviceIndex device = 0; device < device_count(); ++device) {
    if (address >= range_base(device) && address < range_base(device) + kRangeBytes) {
      return device;
    }
  }
  return -1;
}

void record_memory_history(const HistorySettings& settings, StackGatherer gather, bool clear) {
  history_on.store(false);
  for (c10::DeviceIndex device = 0; device < device_count(); ++device) {
    CoreMemory& memory = core(device);
    std::lock_guard<std::mutex> lock(memory.mutex);
    history_settings = settings; // each core's recording reads it under that core's lock
    if (clear || !settings.enabled || memory.history.size() > settings.max_entries) {
      memory.history.clear();
      memory.history_next = 0;
    }
  }
  history_gatherer.store(gather);
  history_on.store(settings.enabled);
}

MemorySnapshot memory_snapshot() {
  MemorySnapshot snapshot;
  for (c10::DeviceIndex device = 0; device < device_count(); ++device) {
    CoreMemory& memory = core(device);
    std::lock_guard<std::mutex> lock(memory.mutex);
    for (const auto& [address, size] : memory.segments) {
      SnapshotSegment segment{device, address, size, {}};
      for (auto it = memory.blocks.find(address); it != memory.blocks.end() && it->second.segment == address; ++it) {
        const Allocation* allocation = it->second.allocation;
        segment.blocks.push_back(SnapshotBlock{it->first, it->second.size, allocation ? allocation->requested : 0,
                                               allocation != nullptr, allocation ? allocation->context : nullptr});
      }
      snapshot.segments.push_back(std::move(segment));
    }
    // The ring's oldest entry is at history_next once it has wrapped.
    std::vector<HistoryEntry> trace(memory.history.begin() + static_cast<ptrdiff_t>(memory.history_next),
                                    memory.history.end());
    trace.insert(trace.end(), memory.history.begin(),
                 memory.history.begin() + static_cast<ptrdiff_t>(memory.history_next));
    snapshot.traces.push_back(std::move(trace));
  }
  return snapshot;
}

REGISTER_ALLOCATOR(kNeuronDeviceType, &allocator());

} // namespace c10::neuron
