#pragma once

// The eager fast path's one C++ step (decision 6): from the arguments of an ATen call to the key of
// its cached executable and the executable's inputs, without FX work or per-argument Python calls.
//
// An executable reads storages, not tensors: each distinct storage among the arguments is one
// "slot", passed as its flat PJRT buffer (or absent, for a storage never written, which reads as
// zeros), and each tensor is (slot, dtype, sizes, strides, storage offset), materialised inside the
// executable. Python numbers in Scalar/float positions (unless left at their default) and 0-dim CPU
// tensors are runtime inputs, so a new learning rate does not compile a new executable; every other
// argument is part of the key.

#include <torch/csrc/utils/pybind.h>

#include <string>
#include <vector>

namespace c10::neuron {

enum class ArgKind : uint8_t {
  kTensor, // Tensor, Tensor?, Tensor(a!)
  kTensorList, // Tensor[], Tensor?[]
  kScalar, // Scalar, Scalar?, float, float?: a number becomes a runtime input
  kScalarList, // Scalar[]: each number becomes a runtime input (optimizers' per-step lists)
  kStatic, // everything else: part of the key
  kGenerator, // Generator?
};

struct ArgSpec {
  std::string name;
  ArgKind kind;
  bool kwarg_only;
  bool has_default;
  pybind11::object default_value;
  bool allow_cpu; // CPU tensors are accepted (moved to the device by the kernel)
};


class CallSignature {
 public:
  CallSignature(std::string op_name, std::vector<ArgSpec> args);

  // Fast path. Returns the tuple
  //   (key: bytes, inputs: list, device: int, slot_tensors: list, generator, values: list,
  //    description, needs_transfer: bool)
  // where inputs are the buffers of the slots that have one followed by the runtime scalars,
  // slot_tensors holds one tensor per slot, values every argument with defaults filled in, and
  // description (only when `describe`, on a cache miss) says where each argument sits:
  //   (per-argument descriptions, per-slot (has_buffer, buffer dtype, nbytes), #buffers, #scalars).
  // Raises PyTorch's "Expected all tensors to be on the same device" error for mixed devices.
  pybind11::tuple prepare(const pybind11::tuple& args, const pybind11::dict& kwargs, bool describe) const;

  const std::string& op_name() const {
    return op_name_;
  }

 private:
  std::string op_name_;
  std::vector<ArgSpec> args_;
};

// Raises unless a tensor whose first element is `offset` elements into its storage's memory of
// `storage_bytes` bytes lies inside it: a storage shrunk under a tensor must not read as zeros.
void check_in_bounds(const at::Tensor& t, int64_t offset, size_t storage_bytes, const std::string& what);

// Registers the pybind classes.
void bind_call_signature(pybind11::module_& m);

} // namespace c10::neuron
