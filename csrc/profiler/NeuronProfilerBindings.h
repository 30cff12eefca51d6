#pragma once

#include <torch/csrc/utils/pybind.h>

namespace c10::neuron::profiler {

// Adds the profiler's _C functions (_profiler_*) to the module.
void bind_profiler(pybind11::module_& m);

} // namespace c10::neuron::profiler
