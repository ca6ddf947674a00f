// gpt_sixteen_bit_test.cpp — the GPT with 16-bit activations (bf16 and fp16, as autocast keeps
// them): the products' inputs and outputs, ln_f's output and the logits are booked in 16 bits and
// hold 16-bit values; the loss and every gradient follow the fp32 model within the
// rounding of 16 bits, over a micro-batch whose LM head runs in several chunks (the last one
// short), so a chunk that read or wrote the wrong rows would be far off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "gpt_test_support.hpp"
#include "model/gpt.hpp"
#include "model/token_data.hpp"
#include "ops/cpu/cpu_device.hpp"

namespace zl {
namespace {

using test::init_params;
using test::zeros_like;

// Two blocks over a context of 300 tokens: a micro-batch of 2 sequences is 600 token rows, the LM
// head's chunks 512 and 88.
constexpr GptConfig kConfig{.n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 300, .vocab = 50};
constexpr std::int64_t kRows = 2;

struct Pass {
  float loss = 0.0f;
  std::vector<float> logits;
  test::UnitFloats grads;
  std::int64_t mlp_hidden_bytes = 0;
  std::int64_t block_bytes = 0;
  std::int64_t logits_bytes = 0;
};

Pass run_pass(DType activations) {
  CpuDevice device;
  Gpt model(device, kConfig, {}, activations);
  const auto params = init_params(model, 7);
  Pass pass;
  pass.grads = zeros_like(params);
  const Batch batch = MarkovTokens(kConfig.vocab, 3).batch(0, kRows, kConfig.block_size);
  test::forward(model, batch, params);
  pass.logits = model.logits();
  pass.loss = test::backward(model, params, pass.grads);
  pass.mlp_hidden_bytes = device.ledger().activation_bytes_at_peak(ActivationKind::MlpHidden);
  pass.block_bytes = device.ledger().activation_bytes_at_peak(ActivationKind::Block);
  pass.logits_bytes = device.ledger().activation_bytes_at_peak(ActivationKind::Logits);
  return pass;
}

// The largest difference in units of the fp32 tensor's largest magnitude.
double scaled_difference(const std::vector<float>& actual, const std::vector<float>& expected) {
  double largest = 0.0, difference = 0.0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    largest = std::max(largest, std::abs(static_cast<double>(expected[i])));
    difference = std::max(difference, std::abs(static_cast<double>(actual[i]) - expected[i]));
  }
  return largest == 0.0 ? difference : difference / largest;
}

bool representable(float value, DType dtype) {
  const float rounded =
      dtype == DType::BF16 ? bf16_to_f32(f32_to_bf16(value)) : f16_to_f32(f32_to_f16(value));
  return rounded == value;
}

TEST(GptSixteenBit, FollowsFp32WithinTheRoundingOfSixteenBits) {
  const Pass fp32 = run_pass(DType::F32);
  // bf16 keeps 8 significant bits, fp16 11: each rounding is within 2^-9 and 2^-12 of a value.
  for (const auto& [dtype, tolerance] : {std::pair{DType::BF16, 3e-2}, std::pair{DType::F16, 4e-3}}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Pass half = run_pass(dtype);
    const std::int64_t N = kRows * kConfig.block_size, C = kConfig.n_embd, L = kConfig.n_layer;
    // fc and GELU(fc) in 16 bits; ln_1, qkv, attention's output and ln_2 too, the residual sums
    // and the LayerNorm statistics in fp32.
    EXPECT_EQ(2 * half.mlp_hidden_bytes, fp32.mlp_hidden_bytes);
    EXPECT_EQ(half.block_bytes, L * (2 * 6 * N * C + 4 * 2 * N * C + 4 * 4 * N));
    EXPECT_EQ(fp32.block_bytes, L * (4 * 8 * N * C + 4 * 4 * N));
    // ln_f's output and the logits (their gradient written over them) in 16 bits, ln_f's
    // statistics in fp32; no fp32 copy of them anywhere: the kernels read and write them as kept.
    EXPECT_EQ(half.logits_bytes, 2 * (N * C + N * padded_vocab(kConfig)) + 4 * 2 * N);
    EXPECT_EQ(fp32.logits_bytes, 4 * (N * C + N * padded_vocab(kConfig)) + 4 * 2 * N);
    EXPECT_NEAR(half.loss, fp32.loss, tolerance * fp32.loss);
    ASSERT_EQ(half.logits.size(), fp32.logits.size());
    EXPECT_TRUE(std::all_of(half.logits.begin(), half.logits.end(),
                            [&](float logit) { return representable(logit, dtype); }));
    EXPECT_LT(scaled_difference(half.logits, fp32.logits), tolerance);
    for (std::size_t u = 0; u < fp32.grads.size(); ++u) {
      EXPECT_LT(scaled_difference(half.grads[u], fp32.grads[u]), tolerance) << "unit " << u;
    }
  }
}

// add_loss seeds backward as loss() does and adds the loss that loss() reads into a float in the
// device's memory: the same gradients bit for bit, and the sum plus the loss; a micro-batch's loss
// is taken once.
TEST(GptSixteenBit, AddLossAddsTheReadLossOnTheDevice) {
  for (const DType activations : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(activations));
    CpuDevice device;
    Gpt model(device, kConfig, {}, activations);
    const auto params = init_params(model, 7);
    const Batch batch = MarkovTokens(kConfig.vocab, 3).batch(0, kRows, kConfig.block_size);
    auto read_grads = zeros_like(params), added_grads = zeros_like(params);
    test::forward(model, batch, params);
    const float loss = test::backward(model, params, read_grads, 8.0f);

    test::forward(model, batch, params);
    Buffer sum = device.alloc(MemCategory::CommBuffer, DType::F32, {1});
    sum.as<float>()[0] = 0.375f;
    model.add_loss(8.0f, sum.as<float>());
    EXPECT_THROW(model.loss(), Error);
    EXPECT_THROW(model.add_loss(8.0f, sum.as<float>()), Error);
    const auto order = model.forward_order();
    for (auto u = order.rbegin(); u != order.rend(); ++u) {
      model.backward_unit(*u, params[*u], added_grads[*u]);
    }
    EXPECT_EQ(sum.as<float>()[0], 0.375f + loss);
    EXPECT_EQ(added_grads, read_grads);
  }
}

TEST(GptSixteenBit, OtherDtypesAreRefusedInOneLine) {
  CpuDevice device;
  try {
    Gpt model(device, kConfig, {}, DType::I64);
    ADD_FAILURE() << "int64 activations were accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("keep them in fp32, bf16 or fp16"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace zl
