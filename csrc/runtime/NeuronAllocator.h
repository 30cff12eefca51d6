#pragma once

// Device memory: virtual HBM addresses (decision 3 in DESIGN.md).
//
// The allocator hands out addresses, not bytes: each NeuronCore owns a 16 TiB range that is
// non-canonical on x86-64, so a stray host dereference faults at once. Every storage therefore has
// a real, unique, non-overlapping data pointer, which is what lets views, `_base`, `.data =`,
// serialization, overlap checks and DDP buckets behave as on CUDA. The bytes themselves live in a
// PJRT buffer held by the allocation (NeuronPython.h).
//
// It behaves like CUDA's caching allocator, so that torch.cuda-style memory statistics mean the
// same thing here: requests are rounded up to 512 bytes; a request that no cached block can serve
// reserves a new segment of exactly that size; freed blocks stay cached (reserved) and are split
// and coalesced; empty_cache() releases the segments that are entirely free. The capacity (24 GiB
// per core by default, Trainium2 at LNC=2) bounds reserved bytes; past it, cached segments are
// released and the request retried once, then torch.OutOfMemoryError is raised.

#include "runtime/NeuronDevice.h"
#include "runtime/NeuronPython.h"

#include <c10/core/CachingDeviceAllocator.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace c10::neuron {

// The DataPtr context of every neuron storage.
struct Allocation {
  c10::DeviceIndex device;
  uint64_t address;
  size_t size; // rounded, what the allocator accounts
  size_t requested; // what the caller asked for
  StorageBuffer buffer;
  std::shared_ptr<c10::GatheredContext> context = nullptr; // where it was allocated (memory history)
};

// Memory history, the record behind torch.neuron.memory._record_memory_history and _snapshot: the
// actions of CUDA's caching allocator (its TraceEntry kinds) and the Python stacks of live blocks.
enum class HistoryAction { Alloc, FreeRequested, FreeCompleted, SegmentAlloc, SegmentFree, Oom };

struct HistoryEntry {
  HistoryAction action;
  uint64_t address; // 0 for an OOM
  uint64_t size; // bytes (rounded; an OOM's: what was asked for)
  int64_t time_us; // microseconds since the epoch
  uint64_t device_free; // an OOM's unreserved bytes of the capacity
  std::shared_ptr<c10::GatheredContext> context; // the stack that caused it, or nullptr
};

// _record_memory_history's arguments: enabled ("state": stacks of live blocks; "all": every
// action too), context (which actions keep a stack) and max_entries.
struct HistorySettings {
  bool enabled = false;
  bool trace = false; // record every action (enabled="all")
  bool state_stacks = false; // a live block keeps its allocation's stack (context != None)
  bool alloc_stacks = false; // alloc actions keep it (context "alloc" or "all")
  bool free_stacks = false; // free actions keep theirs (context "all")
  size_t max_entries = SIZE_MAX; // per core; the oldest entries are overwritten
};

// Captures the calling thread's Python stack; set by the Python bindings (the allocator does not
// depend on Python). Called without any allocator lock held.
using StackGatherer = std::shared_ptr<c10::GatheredContext> (*)();
// Starts (or, with settings.enabled false, stops) recording; `clear` drops the actions recorded so
// far (stopping drops them too).
void record_memory_history(const HistorySettings& settings, StackGatherer gather, bool clear);

struct SnapshotBlock {
  uint64_t address;
  uint64_t size;
  uint64_t requested; // 0 for a cached (free) block
  bool allocated;
  std::shared_ptr<c10::GatheredContext> context;
};

struct SnapshotSegment {
  c10::DeviceIndex device;
  uint64_t address;
  uint64_t size;
  std::vector<SnapshotBlock> blocks;
};

struct MemorySnapshot {
  std::vector<SnapshotSegment> segments; // every core's, by address
  std::vector<std::vector<HistoryEntry>> traces; // per core, oldest first
};

MemorySnapshot memory_snapshot();

class NeuronAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes);
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override;
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  // Frees of storages (one per released allocation), not reported by DeviceStats.
  int64_t num_tensor_frees(c10::DeviceIndex device);
  size_t capacity(c10::DeviceIndex device);
  // The share of the capacity this process may reserve (torch.neuron.set_per_process_memory_fraction).
  double memory_fraction(c10::DeviceIndex device);
  void set_memory_fraction(c10::DeviceIndex device, double fraction);
  void empty_cache_on(c10::DeviceIndex device);
};

NeuronAllocator& allocator();

// The allocation behind a neuron DataPtr, or nullptr for an empty (0-byte) or foreign DataPtr.
Allocation* allocation_of(const c10::DataPtr& data_ptr);

// Where a storage's bytes live: an allocation and the byte offset of the storage inside it. A storage
// made by from_blob over neuron memory (legacy serialization, DLPack) aliases the allocation that
// holds its address. `allocation` is nullptr only for a 0-byte storage.
struct ResolvedStorage {
  Allocation* allocation;
  uint64_t byte_offset;
};

// Raises for a storage whose address is not inside any live neuron allocation.
ResolvedStorage resolve_storage(const c10::StorageImpl* storage);

// The live allocation that starts at `address`, or nullptr.
Allocation* allocation_at(uint64_t address);

// Device index encoded in a virtual address, or -1 when it is not a neuron address.
int device_of_address(uint64_t address) noexcept;

// Parses "24GiB", "512MiB", "1000000" (bytes). Raises ValueError naming `what` on bad input.
size_t parse_byte_size(const std::string& text, const char* what);

} // namespace c10::neuron
