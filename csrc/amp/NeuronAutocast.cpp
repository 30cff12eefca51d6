// torch.autocast("neuron"): the same op lists and cast policies as CUDA, from ATen's own lists
// (ATen/autocast_mode.h), so mixed precision on neuron matches what users know from CUDA.
// Ops outside the lists fall through to the next dispatch key unchanged; PyTorch registers that
// fallthrough only for its in-tree backends, so a PrivateUse1 backend must do it itself.

#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace at::neuron {
namespace {

// CUDA's autocast refuses binary_cross_entropy (ATen's binary_cross_entropy_banned, which the
// header does not declare): its log of a 16-bit probability loses the precision BCE needs.
Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define NEURON_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NEURON_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
#define NEURON_DIFFERENT_SIGNATURE(REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE, REDISPATCH_SIGNATURE, POLICY) \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE,            \
                                                      REDISPATCH_SIGNATURE, POLICY)

  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER_PRECISION)
  AT_FORALL_FP32(NEURON_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(NEURON_DIFFERENT_SIGNATURE)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN((&binary_cross_entropy_banned)));

#undef NEURON_LOWER_PRECISION
#undef NEURON_FP32
#undef NEURON_FP32_SET_OPT_DTYPE
#undef NEURON_PROMOTE
#undef NEURON_DIFFERENT_SIGNATURE
}

} // namespace
} // namespace at::neuron
