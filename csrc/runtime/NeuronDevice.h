#pragma once

// NeuronCores visible to this process and the per-thread current core.
//
// Each logical NeuronCore is one device index (decision 2 in DESIGN.md). The count comes from
// NEURON_RT_VISIBLE_CORES ("3", "0-3", "0,2,4-5"), else NEURON_RT_NUM_CORES, else 2, the same
// variables the Neuron runtime reads (Neuron runtime configuration guide, "NeuronCore
// allocation").

#include <c10/core/Device.h>

#include <string>
#include <vector>

namespace c10::neuron {

constexpr c10::DeviceType kNeuronDeviceType = c10::DeviceType::PrivateUse1;
constexpr int kMaxCores = 64;

// Number of visible cores; 0 when the environment is malformed (see core_config_error()).
c10::DeviceIndex device_count() noexcept;

// Physical core id of each logical index, from NEURON_RT_VISIBLE_CORES (identity otherwise).
const std::vector<int>& physical_core_ids() noexcept;

// Empty when the core environment variables parsed; otherwise a message naming the variable.
const std::string& core_config_error() noexcept;

// Raises IndexError-style c10::IndexError naming the index and the valid range.
void check_device_index(c10::DeviceIndex index);

c10::DeviceIndex current_device() noexcept;
void set_device(c10::DeviceIndex index);
c10::DeviceIndex exchange_device(c10::DeviceIndex index);

// Fork safety. The runtime (PJRT's threads) does not survive fork(): once it has started in a
// process, a forked child must not use the device. As CUDA does, it raises instead of hanging.
void note_runtime_started();
bool in_bad_fork() noexcept;
void check_not_forked();

} // namespace c10::neuron
