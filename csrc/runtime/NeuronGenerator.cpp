#include "runtime/NeuronGenerator.h"

#include "runtime/NeuronDevice.h"

#include <ATen/Functions.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/util/CallOnce.h>

#include <cstring>
#include <vector>

namespace c10::neuron {
namespace {

constexpr int64_t kStateBytes = 2 * sizeof(uint64_t); // seed, offset: the layout CUDA uses

} // namespace

NeuronGenerator::NeuronGenerator(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(kNeuronDeviceType, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void NeuronGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t NeuronGenerator::current_seed() const {
  return seed_;
}

uint64_t NeuronGenerator::seed() {
  uint64_t random = c10::detail::getNonDeterministicRandom(true);
  set_current_seed(random);
  return random;
}

void NeuronGenerator::set_offset(uint64_t offset) {
  // CUDAGeneratorImpl::set_philox_offset_per_thread's check and words.
  TORCH_CHECK(offset % 4 == 0, "offset must be a multiple of 4");
  offset_ = offset;
}

uint64_t NeuronGenerator::get_offset() const {
  return offset_;
}

void NeuronGenerator::set_state(const c10::TensorImpl& state) {
  // CUDAGeneratorImpl::set_state: check_rng_state's checks and words (a CPU, strided, contiguous
  // uint8 tensor: a device tensor's bytes cannot be read here), then a seed and an offset, or a
  // seed alone (offset 0).
  TORCH_CHECK_TYPE(state.layout() == c10::kStrided && state.device().type() == c10::DeviceType::CPU &&
                       state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
                   "RNG state must be a torch.ByteTensor");
  TORCH_CHECK(state.is_contiguous(), "RNG state must be contiguous");
  constexpr int64_t kSeedBytes = sizeof(uint64_t);
  TORCH_CHECK(state.numel() == kStateBytes || state.numel() == kSeedBytes, "RNG state is wrong size");
  uint64_t values[2] = {0, 0};
  std::memcpy(values, state.data(), static_cast<size_t>(state.numel()));
  TORCH_CHECK(values[1] % 4 == 0, "offset must be a multiple of 4");
  seed_ = values[0];
  offset_ = values[1];
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGenerator::get_state() const {
  auto state = at::empty({kStateBytes}, at::TensorOptions().dtype(at::kByte));
  uint64_t values[2] = {seed_, offset_};
  std::memcpy(state.data_ptr(), values, kStateBytes);
  return state.getIntrusivePtr();
}

std::pair<uint64_t, uint64_t> NeuronGenerator::philox_inputs(uint64_t increment) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t offset = offset_;
  offset_ += (increment + 3) / 4 * 4;
  return {seed_, offset};
}

c10::DeviceType NeuronGenerator::device_type() {
  return kNeuronDeviceType;
}

NeuronGenerator* NeuronGenerator::clone_impl() const {
  auto* copy = new NeuronGenerator(device().index(), seed_);
  copy->offset_ = offset_;
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static c10::once_flag once;
  static std::vector<at::Generator> generators;
  c10::call_once(once, [] {
    for (c10::DeviceIndex index = 0; index < device_count(); ++index) {
      generators.push_back(at::make_generator<NeuronGenerator>(index));
    }
  });
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  return generators[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  return at::make_generator<NeuronGenerator>(device);
}

} // namespace c10::neuron
