#pragma once

// Pinned host memory for `pin_memory()` and `DataLoader(pin_memory=True)`.
//
// The emulated NeuronCore reads host memory directly, so pinning is bookkeeping: the allocator
// remembers which host blocks it handed out so that `Tensor.is_pinned()` is true exactly for them,
// and non_blocking copies from them may overlap, as CUDA's rules allow for pinned memory.

#include <c10/core/Allocator.h>

namespace c10::neuron {

c10::Allocator* host_allocator();
bool is_pinned_host_pointer(const void* data);

} // namespace c10::neuron
