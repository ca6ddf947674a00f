// torch_gpt_test.cpp — one forward/backward of zl::Gpt on a CpuDevice against GPT-2 written in
// torch (tests/fixtures/gpt_fwd_bwd.safetensors, made by make_gpt_fixture.py): same parameters
// under their Hugging Face names, same tokens and targets; compares the logits, the loss and every
// parameter gradient, the llm.c way (one OK / NOT OK line per tensor with the largest difference).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ckpt/answer_key.hpp"
#include "ckpt/safetensors.hpp"
#include "gpt_test_support.hpp"
#include "model/gpt.hpp"
#include "ops/cpu/cpu_device.hpp"

namespace zl {
namespace {

// Tolerance: both sides compute the same math in fp32 but round differently. torch sums its
// GEMMs in its own blocked order (perhaps with FMA) and evaluates LayerNorm, softmax and GELU in
// float; zerolab sums with Eigen and evaluates those in double, rounding once. Each of the ~25 ops
// between the input and a gradient adds a few ulps (2^-24 = 6e-8) of its values, which are O(1)
// here, so the two sides may differ by ~1e-6 of a tensor's scale (measured: logits within 8e-7 of
// their largest, every gradient within 2.3e-6 of its tensor's largest). So: relative 1e-5, plus an
// absolute floor of 1e-5 of the tensor's largest element for entries that nearly cancel. A wrong
// op moves whole tensors by more: the erf GELU instead of the tanh one, the subtlest slip, moves
// every tensor by 1.2e-4 to 1.3e-3 of its largest (measured in torch); a missing 1/sqrt(D) or a
// transposed weight by far more.
constexpr double kRelTol = 1e-5;

GptConfig config_of(const SafetensorsFile& file) {
  const auto& meta = file.metadata;
  return {.n_layer = std::stoi(meta.at("n_layer")),
          .n_head = std::stoi(meta.at("n_head")),
          .n_embd = std::stoll(meta.at("n_embd")),
          .block_size = std::stoll(meta.at("block_size")),
          .vocab = std::stoll(meta.at("vocab"))};
}

TEST(TorchAnswerKey, GptForwardBackwardMatchesPyTorch) {
  const auto file = read_safetensors_file(test::fixture_path("gpt_fwd_bwd.safetensors"));
  const auto& tensors = file.tensors;
  const GptConfig config = config_of(file);
  const std::int64_t rows = std::stoll(file.metadata.at("rows"));
  const std::int64_t seq_len = std::stoll(file.metadata.at("seq_len"));
  const Batch batch{.rows = rows,
                    .features = seq_len,
                    .x = {},
                    .y = to_int64s(find_tensor(tensors, "targets")),
                    .tokens = to_int64s(find_tensor(tensors, "tokens"))};
  CpuDevice device;
  Gpt model(device, config);
  const auto& units = model.units();

  // Each unit's flat parameters: its tensors back to back, as named in the file (in Hugging
  // Face's shapes), each followed by its padded rows (wte's past the vocabulary) as zeros.
  test::UnitFloats params(units.size());
  for (std::size_t u = 0; u < units.size(); ++u) {
    for (const auto& spec : units[u].params) {
      const auto& record = find_tensor(tensors, spec.name);
      ASSERT_EQ(record.shape, spec.real_shape()) << spec.name;
      const auto values = to_floats(record);
      params[u].insert(params[u].end(), values.begin(), values.end());
      params[u].resize(params[u].size() + static_cast<std::size_t>(numel(spec.shape) -
                                                                   numel(spec.real_shape())));
    }
  }
  auto grads = test::zeros_like(params);
  test::forward(model, batch, params);
  const std::vector<float> logits = model.logits();  // loss() reuses their buffer
  const float loss = test::backward(model, params, grads);

  bool all_ok = true;
  const auto expect_close = [&](const std::string& what, std::span<const float> actual,
                                const std::vector<float>& expected) {
    const auto result =
        test::compare(what, actual, expected, kRelTol, kRelTol * test::max_abs(expected));
    EXPECT_TRUE(result.ok) << result.report;
    all_ok = all_ok && result.ok;
    // The difference in units of the tensor's scale: near-zero entries make max_rel_diff
    // meaningless (c_attn's k-bias gradient is exactly 0 in exact arithmetic: softmax ignores a
    // score shift shared by a whole row).
    return result.max_abs_diff / std::max(test::max_abs(expected), 1e-30);
  };
  const auto expected_loss = to_floats(find_tensor(tensors, "loss"));
  expect_close("loss", {&loss, 1}, expected_loss);
  const double logits_scaled =
      expect_close("logits", logits, to_floats(find_tensor(tensors, "logits")));
  double worst_grad_scaled = 0;
  int grads_checked = 0;
  for (std::size_t u = 0; u < units.size(); ++u) {
    std::size_t offset = 0;
    for (const auto& spec : units[u].params) {
      const auto expected = to_floats(find_tensor(tensors, spec.name + ".grad"));
      const auto actual = std::span<const float>(grads[u]).subspan(offset, expected.size());
      worst_grad_scaled =
          std::max(worst_grad_scaled, expect_close(spec.name + ".grad", actual, expected));
      ++grads_checked;
      // The padded rows' gradient is exactly zero: their logits are not in the loss.
      const std::size_t end = offset + static_cast<std::size_t>(numel(spec.shape));
      for (std::size_t e = offset + expected.size(); e < end; ++e) {
        ASSERT_EQ(grads[u][e], 0.0f) << spec.name << " padded element " << e - offset;
      }
      offset = end;
    }
  }
  EXPECT_EQ(grads_checked, 2 + 12 * config.n_layer + 2);
  fmt::print(
      "{}: loss {:.9g} vs torch {:.9g}; logits differ by {:.3e} of their largest, gradients by "
      "at most {:.3e} of their tensor's largest\n",
      all_ok ? "OK" : "NOT OK", loss, expected_loss[0], logits_scaled, worst_grad_scaled);
}

}  // namespace
}  // namespace zl
