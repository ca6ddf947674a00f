// gpt_grad_test.cpp — GPT-2's numbers: the loss against the double reference, sampled elements
// of every parameter tensor against double central differences (through the unit interface, with
// unit 0's two visits), exact loss scaling, gradients added into, determinism, and that the tiny
// preset learns the Markov-chain language with AdamW.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "gpt_reference.hpp"
#include "gpt_test_support.hpp"
#include "model/gpt.hpp"
#include "model/token_data.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "optim/adamw.hpp"

namespace zl {
namespace {

using test::UnitFloats;
using test::zeros_like;

// Small enough for a double reference evaluated hundreds of times; T = 5 < block 6 leaves wpe's
// last row unused (its gradient must be exactly 0); a repeated token exercises the row sums.
const GptConfig kConfig{.n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 6, .vocab = 11};

// Parameters away from GPT-2's init (weights ~0.3, LayerNorm weights ~1 +- 0.2, nonzero biases),
// so every path carries a gradient of order 1e-2 .. 1 rather than the init's tiny ones.
UnitFloats spread_params(const Gpt& model) {
  UnitFloats params;
  std::uint64_t stream = 100;
  for (const auto& unit : model.units()) {
    params.emplace_back();
    for (const auto& param : unit.params) {
      const bool layernorm_weight =
          param.name.find("ln_") != std::string::npos && param.name.ends_with(".weight");
      const float scale = param.name.ends_with(".bias") ? 0.1f : layernorm_weight ? 0.2f : 0.3f;
      const auto values =
          test::random_normals(stream++, numel(param.shape), scale, layernorm_weight ? 1.0f : 0.0f);
      params.back().insert(params.back().end(), values.begin(), values.end());
    }
  }
  return params;
}

Batch test_batch() {
  Batch batch = MarkovTokens(kConfig.vocab, 3).batch(0, 2, 5);
  batch.tokens[6] = batch.tokens[1];
  return batch;
}

std::vector<std::vector<double>> to_double(const UnitFloats& params) {
  std::vector<std::vector<double>> out;
  for (const auto& unit : params) out.push_back(test::to_double(unit));
  return out;
}

TEST(GptGrad, LossMatchesTheDoubleReferenceAndChanceAtInit) {
  CpuDevice device;
  Gpt model(device, kConfig);
  const Batch batch = test_batch();
  const auto params = spread_params(model);
  auto grads = zeros_like(params);
  test::forward(model, batch, params);
  const auto logits = test::ref_gpt_logits(kConfig, to_double(params), batch);
  const std::vector<float> model_logits = model.logits();
  ASSERT_EQ(model_logits.size(), logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(model_logits[i], logits[i], 2e-6);
  const float loss = test::backward(model, params, grads);
  EXPECT_NEAR(loss, test::ref_gpt_loss(kConfig, to_double(params), batch), 2e-6);
  EXPECT_EQ(model.loss(), loss);  // asking again returns the same loss
  // GPT-2's init gives near-uniform logits: the loss starts near ln(vocab).
  const auto init = test::init_params(model, 1);
  auto init_grads = zeros_like(init);
  EXPECT_NEAR(test::forward_backward(model, batch, init, init_grads), std::log(11.0), 0.05);
}

// Tolerance: the float model runs ~25 kernels deep; each rounds at 2^-24 relative (most sum in
// double and round once), so the analytic gradients carry errors of a few 1e-8 at the gradients'
// size here (~0.1; measured worst: 9e-8). Central differences (h = 1e-6) of the double reference
// are good to ~1e-9. The kernel tests' 1e-6 + 1e-5 |g| is still ten times the rounding, while a
// wrong term, sign or scale moves a gradient by its own size (>= 8e-4 for every sampled element
// that is not exactly 0).
constexpr double kAbsTol = 1e-6;
constexpr double kRelTol = 1e-5;

TEST(GptGrad, SampledElementsOfEveryTensorMatchFiniteDifferences) {
  CpuDevice device;
  Gpt model(device, kConfig);
  const Batch batch = test_batch();
  const auto params = spread_params(model);
  auto grads = zeros_like(params);
  test::forward_backward(model, batch, params, grads);
  const auto base = to_double(params);
  const std::int64_t C = kConfig.n_embd;
  int tensors_checked = 0;
  for (std::size_t u = 0; u < model.units().size(); ++u) {
    std::size_t offset = 0;
    for (const auto& param : model.units()[u].params) {
      const auto elems = static_cast<std::size_t>(numel(param.shape));
      // First, last and two inside; for wte a row the batch uses (the embedding's share), for wpe
      // an element of row 5, which no position reaches (gradient exactly 0).
      std::set<std::size_t> picks = {0, elems / 3, 2 * elems / 3 + 1, elems - 1};
      if (param.name == "wte.weight") picks.insert(batch.tokens[1] * C + 2);
      if (param.name == "wpe.weight") picks.insert(5 * C + 1);
      std::vector<std::size_t> at;
      std::vector<double> point;
      std::vector<float> analytic;
      for (const std::size_t pick : picks) {
        at.push_back(offset + pick);
        point.push_back(base[u][offset + pick]);
        analytic.push_back(grads[u][offset + pick]);
      }
      const auto numeric = test::central_differences(
          [&](std::span<const double> values) {
            auto moved = base;
            for (std::size_t k = 0; k < at.size(); ++k) moved[u][at[k]] = values[k];
            return test::ref_gpt_loss(kConfig, moved, batch);
          },
          point, 1e-6);
      test::expect_gradient_ok(param.name,
                               test::check_gradient(analytic, numeric, kAbsTol, kRelTol));
      if (param.name == "wpe.weight") {
        EXPECT_EQ(grads[u][offset + 5 * C + 1], 0.0f);
      }
      offset += elems;
      ++tensors_checked;
    }
  }
  EXPECT_EQ(tensors_checked, 2 + 12 * kConfig.n_layer + 2);
}

TEST(GptGrad, APowerOfTwoLossScaleScalesEveryGradientExactly) {
  CpuDevice device;
  Gpt model(device, kConfig);
  const Batch batch = test_batch();
  const auto params = spread_params(model);
  auto reference = zeros_like(params);
  const float loss = test::forward_backward(model, batch, params, reference);
  // Every backward op is linear in the incoming gradient, and multiplying by 2^k is exact in
  // floating point (far from overflow and subnormals), so each gradient is exactly 2^k times.
  for (const float scale : {1024.0f, 0.125f}) {
    auto scaled = zeros_like(params);
    EXPECT_EQ(test::forward_backward(model, batch, params, scaled, scale), loss);
    for (std::size_t u = 0; u < params.size(); ++u) {
      for (std::size_t i = 0; i < params[u].size(); ++i)
        ASSERT_EQ(scaled[u][i], scale * reference[u][i]) << "scale " << scale << " unit " << u;
    }
  }
}

TEST(GptGrad, BackwardAddsIntoGradientsIsDeterministicAndLeavesPaddingAlone) {
  CpuDevice device;
  Gpt model(device, kConfig);
  const Batch batch = test_batch();
  const auto params = spread_params(model);
  auto once = zeros_like(params);
  test::forward_backward(model, batch, params, once);
  auto again = zeros_like(params);
  test::forward_backward(model, batch, params, again);
  EXPECT_EQ(again, once);  // same bits every run
  test::forward_backward(model, batch, params, again);
  // g + g is exact, so a second micro-batch doubles each gradient exactly, except unit 0's: a
  // wte or wpe row gets one add per token (and wte also the head's part), so the second batch's
  // adds interleave with the first's, and ((a + b) + a) + b may round differently from 2 (a + b).
  // Each of those roundings is within half an ulp of a partial sum, whose size is that of the
  // terms, not of the result: where the head's part and the tokens' parts nearly cancel, the
  // result is far smaller than its terms. So the bound is a few ulps of the unit's largest
  // gradient, the size of its terms, rather than of each element.
  float largest = 0.0f;
  for (const float g : once[0]) largest = std::max(largest, std::fabs(g));
  const float bound = 16.0f * std::numeric_limits<float>::epsilon() * largest;
  for (std::size_t u = 0; u < once.size(); ++u) {
    for (std::size_t i = 0; i < once[u].size(); ++i) {
      if (u == 0) {
        EXPECT_NEAR(again[u][i], 2.0f * once[u][i], bound) << "unit 0 element " << i;
      } else {
        EXPECT_EQ(again[u][i], 2.0f * once[u][i]) << "unit " << u << " element " << i;
      }
    }
  }
  // Engines may pass a unit's padded span: elements past numel are neither read nor written.
  auto padded_params = params;
  auto padded_grads = zeros_like(params);
  for (auto& unit : padded_params) unit.resize(unit.size() + 3, NAN);
  for (auto& unit : padded_grads) unit.resize(unit.size() + 3, 7.0f);
  test::forward_backward(model, batch, padded_params, padded_grads);
  for (std::size_t u = 0; u < once.size(); ++u) {
    for (std::size_t i = 0; i < once[u].size(); ++i) EXPECT_EQ(padded_grads[u][i], once[u][i]);
    for (std::size_t i = once[u].size(); i < padded_grads[u].size(); ++i)
      EXPECT_EQ(padded_grads[u][i], 7.0f);
  }
}

// The demo's promise for GPT: the tiny preset learns the Markov-chain language. Chance is
// ln 64 = 4.16; a model that knows the chain pays only ln(2..4) per token (~1.1).
TEST(GptGrad, TinyPresetLearnsTheMarkovLanguage) {
  const auto started = std::chrono::steady_clock::now();
  CpuDevice device;
  const GptConfig config = gpt_preset("tiny");
  Gpt model(device, config);
  const MarkovTokens data(config.vocab, 9);
  auto params = test::init_params(model, 9);
  auto exp_avg = zeros_like(params), exp_avg_sq = zeros_like(params);
  const AdamWConfig adamw{.lr = 1e-2};
  const std::int64_t micro_batch = 8;
  const int steps = 300;
  float first_loss = 0.0f;
  double last_losses = 0.0;
  for (int step = 0; step < steps; ++step) {
    auto grads = zeros_like(params);
    const float loss = test::forward_backward(
        model, data.batch(step * micro_batch, micro_batch, config.block_size), params, grads);
    if (step == 0) first_loss = loss;
    if (step >= steps - 20) last_losses += loss / 20.0;
    const auto scalars = adamw_scalars(adamw, step + 1);
    for (std::size_t u = 0; u < params.size(); ++u)
      adamw_update(params[u], grads[u], exp_avg[u], exp_avg_sq[u], scalars);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << "  loss " << first_loss << " at step 1, " << last_losses << " over the last 20 of "
            << steps << " steps (chance ln 64 = " << std::log(64.0) << "), " << seconds << " s\n";
  EXPECT_NEAR(first_loss, std::log(64.0), 0.1) << "an untrained GPT should be near chance";
  EXPECT_LT(last_losses, 0.6 * first_loss);
}

}  // namespace
}  // namespace zl
