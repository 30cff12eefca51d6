#pragma once

// The fast path's one C++ step (decision 6): from the arguments of a call (an ATen op's, or a
// compiled graph's) to the key of its cached executable and the executable's inputs, without FX
// work or per-argument Python calls.
//
// An executable reads storages, not tensors: each distinct storage among the arguments is one
// "slot", passed as its flat PJRT buffer (or absent, for a storage never written, which reads as
// zeros), and each tensor is (slot, dtype, sizes, strides, storage offset), materialised inside the
// executable. A view's storage offset is a runtime input too where the view could sit elsewhere
// in its storage; the key keeps its byte distance from the first view of the same storage, so the
// aliasing between a call's views is part of it. Python numbers in Scalar/float positions (unless left at their default) and 0-dim CPU
// tensors are runtime inputs, so a new learning rate does not compile a new executable; every other
// argument is part of the key.

#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <string>
#include <utility>
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

// Where each argument of a call sits, built on a cache miss only (CallSignature::describe). The
// executable is traced from these descriptions, never from the call's tensors, which it must not hold.

// A neuron tensor: a view (dtype, sizes, strides, element offset) of the storage in slot `slot`.
// A view that could sit at another offset of its storage (its extent is shorter than the storage)
// takes its offset at launch, as runtime scalar `offset_scalar`, so that one executable serves
// every offset (rows of a matrix, a KV cache's growing position); `offset` is then the describing
// call's value, for meta kernels only. `offset_scalar` is -1 for a view whose offset is part of the
// key (empty views, and views spanning their whole storage, whose only offset is 0).
struct TensorArg {
  int slot;
  int dtype_code;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset;
  int offset_scalar;
};

// A tensor list: each item a TensorArg, a NumberArg, a HostScalarArg or None.
struct TensorListArg {
  pybind11::list items;
};

// A 0-dim CPU tensor beside device tensors (as CUDA accepts them): runtime scalar `index`.
// `wrapped` is true for a Python number PyTorch wrapped, which promotes as a number.
struct HostScalarArg {
  int index;
  int dtype_code;
  bool wrapped;
};

// A Python number (bool, int, float or complex: `type_name`): runtime scalar `index`.
struct NumberArg {
  int index;
  std::string type_name;
};

// A list of Python numbers (Scalar[]): the runtime scalars at `indices`.
struct NumberListArg {
  std::vector<int> indices;
};

// A Generator? argument: the executable takes the generator's (seed, offset) as inputs.
struct GeneratorArg {};

// Anything else: a constant of the executable (its value is part of the key).
struct StaticArg {
  pybind11::object value;
};

// One storage slot: whether it has a buffer (a never-written storage has none and reads as
// zeros), the buffer's dtype code (-1 without one) and the storage's bytes.
struct SlotInfo {
  bool has_buffer;
  int dtype_code;
  int64_t nbytes;
};

// A whole call: per-argument descriptions in schema order, the slots, the executable's input
// counts (the slots' buffers, then the runtime scalars), its core, and every argument's value.
struct CallDescription {
  pybind11::list arguments;
  std::vector<SlotInfo> slots;
  int buffer_count;
  int scalar_count;
  int device;
  pybind11::list values;
};

class CallSignature {
 public:
  CallSignature(std::string op_name, std::vector<ArgSpec> args);

  // Fast path. Returns the tuple
  //   (key: bytes, inputs: list, device: int, slot_tensors: list, generator, values: list,
  //    convert_first: bool)
  // where inputs are the buffers of the slots that have one followed by the runtime scalars,
  // slot_tensors holds one tensor per slot, values every argument with defaults filled in, and
  // convert_first says an argument must be converted before the call: a CPU tensor where the kernel
  // moves it to the device first, or a neuron tensor with its conjugate or negative bit set.
  // Raises PyTorch's "Expected all tensors to be on the same device" error for mixed devices.
  pybind11::tuple prepare(const pybind11::tuple& args, const pybind11::dict& kwargs) const;

  // The cache-miss path: the same walk, described argument by argument.
  CallDescription describe(const pybind11::tuple& args, const pybind11::dict& kwargs) const;

  const std::string& op_name() const {
    return op_name_;
  }

 private:
  template <typename Result>
  Result walk(const pybind11::tuple& args, const pybind11::dict& kwargs, bool describe) const;

  std::string op_name_;
  std::vector<ArgSpec> args_;
};

// Raises unless a tensor whose first element is `offset` elements into its storage's memory of
// `storage_bytes` bytes lies inside it: a storage shrunk under a tensor must not read as zeros.
void check_in_bounds(const at::Tensor& t, int64_t offset, size_t storage_bytes, const std::string& what);

// The positions (mutated, other) of two tensors among `args[positions]` whose memory ranges (first
// to last element) overlap, one of them in `mutated`; nullopt when there are none. Empty tensors
// overlap nothing. The compile path's input-overlap guard (torch_neuronx/dynamo/aliasing.py).
std::optional<std::pair<int, int>> overlapping_pair(const pybind11::sequence& args, const std::vector<int>& positions,
                                                    const std::vector<bool>& mutated);

// Registers the pybind classes.
void bind_call_signature(pybind11::module_& m);

} // namespace c10::neuron
