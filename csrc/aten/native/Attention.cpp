// scaled_dot_product_attention backend choice for neuron.
//
// PyTorch asks each device which fused SDPA implementation to use through a C++ dispatch stub;
// a device without an answer gets the composite math path (a dozen small ops, each with its own
// executable). Neuron answers "overrideable": F.scaled_dot_product_attention then runs as
// aten::_scaled_dot_product_fused_attention_overrideable and its backward, one executable each
// (torch_neuronx/lowering/attention.py). torch.nn.attention.sdpa_kernel can still select the
// math path.

#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>

namespace at::neuron {
namespace {

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& /*key*/, const at::Tensor& /*value*/,
                         const std::optional<at::Tensor>& /*attn_mask*/, double /*dropout_p*/, bool /*is_causal*/,
                         std::optional<double> /*scale*/, bool /*enable_gqa*/) {
  const auto& context = at::globalContext();
  // The fused kernel takes (batch, heads, length, embedding) inputs, as CUDA's fused kernels do.
  if (context.userEnabledOverrideableSDP() && query.dim() == 4) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  TORCH_CHECK(context.userEnabledMathSDP(),
              "scaled_dot_product_attention on neuron: no enabled backend; enable SDPBackend.OVERRIDEABLE or "
              "SDPBackend.MATH");
  return static_cast<int64_t>(at::SDPBackend::math);
}

} // namespace
} // namespace at::neuron

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &at::neuron::fused_sdp_choice)
} // namespace at::native
