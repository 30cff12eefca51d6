// scaled_dot_product_attention backend choice for neuron.
//
// PyTorch asks each device which fused SDPA implementation to use through a C++ dispatch stub;
// a device without an answer gets the composite math path (a dozen small ops, each with its own
// executable). Neuron answers "overrideable" for the inputs its fused kernel takes:
// F.scaled_dot_product_attention then runs as aten::_scaled_dot_product_fused_attention_overrideable
// and its backward, one executable each (torch_neuronx/lowering/attention.py). Other inputs take the
// math path, as CUDA's choice falls back to it when no fused kernel's constraints hold
// (sdp_utils.cpp); the math path then computes them or raises ATen's error (mismatched heads without
// enable_gqa, integer inputs). torch.nn.attention.sdpa_kernel can still select the math path.

#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>

namespace at::neuron {
namespace {

// What the overrideable kernel takes: dense (batch, heads, length, embedding) inputs of one
// floating dtype with equal batch sizes, query and key of one embedding size, key and value of one
// length; key and value heads equal to the query's, or dividing them with enable_gqa (the
// overrideable op is not told enable_gqa, so without it mismatched heads must not reach it).
bool fused_kernel_takes(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, bool enable_gqa) {
  if (query.dim() != 4 || key.dim() != 4 || value.dim() != 4) {
    return false;
  }
  if (query.is_nested() || key.is_nested() || value.is_nested()) {
    return false;
  }
  if (!at::isFloatingType(query.scalar_type()) || key.scalar_type() != query.scalar_type() ||
      value.scalar_type() != query.scalar_type()) {
    return false;
  }
  const auto batch = query.sym_size(0);
  if (key.sym_size(0) != batch || value.sym_size(0) != batch) {
    return false;
  }
  if (key.sym_size(3) != query.sym_size(3) || value.sym_size(2) != key.sym_size(2)) {
    return false;
  }
  const auto query_heads = query.sym_size(1);
  const auto key_heads = key.sym_size(1);
  if (value.sym_size(1) != key_heads) {
    return false;
  }
  if (key_heads == query_heads) {
    return true;
  }
  return enable_gqa && key_heads != 0 && query_heads % key_heads == 0;
}

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& /*attn_mask*/, double /*dropout_p*/, bool /*is_causal*/,
                         std::optional<double> /*scale*/, bool enable_gqa) {
  const auto& context = at::globalContext();
  if (context.userEnabledOverrideableSDP() && fused_kernel_takes(query, key, value, enable_gqa)) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  TORCH_CHECK(context.userEnabledMathSDP(),
              "scaled_dot_product_attention on neuron: no enabled backend takes these inputs; enable "
              "SDPBackend.MATH, or SDPBackend.OVERRIDEABLE for 4-D floating inputs");
  return static_cast<int64_t>(at::SDPBackend::math);
}

} // namespace
} // namespace at::neuron

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &at::neuron::fused_sdp_choice)
} // namespace at::native
