#pragma once

#include <torch/csrc/utils/pybind.h>

namespace c10::neuron {

// Adds _record_memory_history and _memory_snapshot (torch.neuron.memory's) to the module.
void bind_memory_history(pybind11::module_& m);

} // namespace c10::neuron
