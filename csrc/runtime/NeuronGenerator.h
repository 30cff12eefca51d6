#pragma once

// Per-core random number generator: a (seed, offset) pair, Philox-style as on CUDA (decision 11).
//
// A random op does not hold generator state of its own. It takes the current (seed, offset) as
// inputs of its executable and advances the offset by the number of 32-bit random words it
// consumes (rounded up to 4, one Philox counter), so results depend only on the seed and on the
// sequence of random ops, in eager, adaptive eager and compiled code alike.

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <mutex>
#include <utility>

namespace c10::neuron {

class NeuronGenerator final : public c10::GeneratorImpl {
 public:
  explicit NeuronGenerator(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // (seed, offset) for one random op, then the offset advances by `increment` rounded up to 4.
  std::pair<uint64_t, uint64_t> philox_inputs(uint64_t increment);

  static c10::DeviceType device_type();

 private:
  NeuronGenerator* clone_impl() const override;

  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

} // namespace c10::neuron
